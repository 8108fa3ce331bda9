"""Shared helpers for the knowledge-base tests: the fixture corpus and small explain calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envdoctor.kb import Explanation, explain, load_default_kb, scan_bytes

CORPUS = Path(__file__).parents[1] / "data" / "tracebacks"
HEADER_END = b"# ---\n"


@dataclass(frozen=True)
class Case:
    """One fixture: the expected signature (its directory), its source, the cause, the log."""

    expected: str
    path: Path
    source: str
    cause: str
    log: bytes


def corpus() -> list[Case]:
    cases = []
    for path in sorted(CORPUS.glob("*/*.txt")):
        raw = path.read_bytes()
        header, _, log = raw.partition(HEADER_END)
        fields = dict(
            line[2:].split(": ", 1)
            for line in header.decode("utf-8").splitlines()
            if line.startswith("# ") and ": " in line
        )
        cases.append(
            Case(path.parent.name, path, fields.get("source", ""), fields.get("cause", ""), log)
        )
    return cases


def run(text: str | bytes) -> Explanation:
    kb = load_default_kb()
    data = text.encode("utf-8") if isinstance(text, str) else text
    return explain(scan_bytes(data, kb), kb)


def ids(explanation: Explanation) -> list[str]:
    return [c.id for c in explanation.causes]
