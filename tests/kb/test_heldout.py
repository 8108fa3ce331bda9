"""Out-of-sample accuracy: real logs kept out of pattern writing (tests/data/heldout/).

The logs were collected with the in-sample ones, then split at random before any pattern was
written from them (tests/kb/split_corpus.py, seed and split in SPLIT.json). This file is the only
reader of their text; it prints counts, never a log or a file name, so a failure here cannot
turn into tuning on them. docs/explain.md states the measured figures; the test checks that the
statement is the truth (change the signatures, re-measure, update the doc, or say why not).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kb.helpers import HEADER_END, run
from tests.kb.split_corpus import HEALTHY, HELDOUT, MANIFEST, assign

DOCS = Path(__file__).parents[2] / "docs" / "explain.md"
RESULT = re.compile(
    r"Out-of-sample result: (?P<right>\d+) of (?P<total>\d+) held-out error logs named first "
    r"\([\d.]+%\); (?P<wrong>\d+) named a wrong cause with high confidence; (?P<silent>\d+) "
    r"silent or with only a possible cause; (?P<quiet>\d+) of (?P<healthy>\d+) held-out healthy "
    r"logs silent\."
)


@dataclass(frozen=True)
class Measure:
    total: int
    right: int
    wrong: int  # a confident root cause other than the family the thread established
    silent: int  # no confident cause at all
    healthy: int
    quiet: int  # healthy logs with no cause at all


def _held_out() -> list[tuple[str, bytes]]:
    cases = []
    for path in sorted(HELDOUT.glob("*/*.txt")):
        log = path.read_bytes().partition(HEADER_END)[2]
        cases.append((path.parent.name, log))
    return cases


def measure() -> Measure:
    right = wrong = silent = healthy = quiet = total = 0
    for family, log in _held_out():
        explanation = run(log)
        if family == HEALTHY:
            healthy += 1
            quiet += explanation.causes == ()
            continue
        total += 1
        top = explanation.top
        if explanation.status != "explained" or top is None:
            silent += 1
        elif top.id == family:
            right += 1
        else:
            wrong += 1
    return Measure(total, right, wrong, silent, healthy, quiet)


def test_the_split_is_the_recorded_one() -> None:
    """Every held-out file is where SPLIT.json says, and the seed reproduces the split."""
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    on_disk = sorted(f"{p.parent.name}/{p.name}" for p in HELDOUT.glob("*/*.txt"))
    assert on_disk == manifest["held_out"]
    tracebacks = HELDOUT.parent / "tracebacks"
    for entry in manifest["held_out"]:
        assert not (tracebacks / entry).exists(), entry
    families: dict[str, list[str]] = defaultdict(list)
    for entry in manifest["held_out"] + manifest["in_sample"]:
        family, name = entry.split("/")
        families[family].append(name)
    for family, names in families.items():
        keep, held = assign(manifest["seed"], family, names)
        assert [f"{family}/{n}" for n in held] == [
            e for e in manifest["held_out"] if e.startswith(f"{family}/")
        ]
        assert len(keep) + len(held) == len(names)


def test_held_out_accuracy_is_the_documented_one(capsys: pytest.CaptureFixture[str]) -> None:
    m = measure()
    with capsys.disabled():
        print(  # noqa: T201
            f"\nexplain out-of-sample: {m.right}/{m.total} named first, {m.wrong} wrong with "
            f"high confidence, {m.silent} silent; {m.quiet}/{m.healthy} healthy logs silent"
        )
    stated = RESULT.search(DOCS.read_text(encoding="utf-8"))
    assert stated is not None, "docs/explain.md must state the out-of-sample result"
    documented = Measure(
        total=int(stated["total"]),
        right=int(stated["right"]),
        wrong=int(stated["wrong"]),
        silent=int(stated["silent"]),
        healthy=int(stated["healthy"]),
        quiet=int(stated["quiet"]),
    )
    assert m == documented
