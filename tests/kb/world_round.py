"""Score explain on a round of logs sampled from the world, labelled by root cause (issue 38).

A round (``tests/data/world/roundN.yaml``) was collected by someone who saw neither the
signatures nor the catalogs: public threads sampled by failure family, kept only where the thread
settled the root cause, each log labelled with that cause in one of a fixed list of categories
(``cause_category``), and marked ``text_reveals_cause: false`` where the log's text alone cannot
reveal it. ``tests/data/world/causes.yaml`` maps each signature to the categories it names; it
is written from the signatures alone (their titles and summaries), never from a round's logs.

A log is *named first* when explain's first cause is confident and its signature's category is
the log's; *wrong* when the first cause is confident and of another category; *silent* when no
cause is confident. Healthy logs must stay silent. Run as a script to print the figures:

    python -m tests.kb.world_round tests/data/world/round4.yaml
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.kb.helpers import run

WORLD = Path(__file__).parents[1] / "data" / "world"
CAUSES = WORLD / "causes.yaml"
RETIRED = {
    "round4",
    "round5",
    "round6",
    "round7",
    "round8",
    "round9",
    "round10",
    "round11",
    "round12",
    "round13",
    "round14",
    "round15",
    "round16",
    "round17",
    "round18",
    "round19",
    "round20",
    "round21",
    "round22",
    "round23",
    "round24",
    "round26",
    "round27",
    "round28",
    "round29",
    "round30",
    "round31",
    "round32",
    "round33",
    "round34",
    "round35",
    "round36",
    "round37",
    "round38",
    "round39",
    "round40",
    "round41",
    "round42",
    "round43",
    "round44",
    "round45",
}
"""Rounds measured once and then read to improve the signatures: their figure is in-sample."""


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    kind: str  # error | healthy
    category: str
    reveals: bool
    log: str


@dataclass
class Score:
    """Counts for one round; ``reveals`` splits the error logs by whether their text can tell."""

    right: int = 0
    wrong: int = 0
    silent: int = 0
    errors: int = 0
    healthy: int = 0
    quiet: int = 0
    hidden_errors: int = 0  # error logs whose text cannot reveal the cause (counted apart)
    hidden_right: int = 0
    by_family: Counter[str] = field(default_factory=Counter)
    family_right: Counter[str] = field(default_factory=Counter)
    wrong_ids: list[str] = field(default_factory=list)  # case ids, for reading after retiring

    def line(self) -> str:
        share = 100 * self.right / self.errors if self.errors else 0.0
        return (
            f"{self.right} of {self.errors} error logs named first ({share:.1f}%); {self.wrong} "
            f"named a wrong cause with high confidence; {self.silent} silent or with only a "
            f"possible cause; {self.quiet} of {self.healthy} healthy logs silent; apart: "
            f"{self.hidden_right} of {self.hidden_errors} logs whose text cannot reveal the cause"
        )


def load_round(path: Path) -> list[Case]:
    items: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Case(
            id=str(item["id"]),
            family=str(item.get("family", "")),
            kind=str(item["kind"]),
            category=str(item.get("cause_category", "")),
            reveals=item.get("text_reveals_cause", True) is not False,
            log=str(item["log"]),
        )
        for item in items
    ]


def load_causes() -> dict[str, tuple[str, ...]]:
    data: dict[str, list[str]] = yaml.safe_load(CAUSES.read_text(encoding="utf-8"))["causes"]
    return {signature: tuple(categories) for signature, categories in data.items()}


def score(cases: list[Case], causes: dict[str, tuple[str, ...]]) -> Score:
    result = Score()
    for case in cases:
        explanation = run(case.log)
        if case.kind == "healthy":
            result.healthy += 1
            result.quiet += explanation.causes == ()
            continue
        top = explanation.top
        confident = explanation.status == "explained" and top is not None
        named = confident and top is not None and case.category in causes.get(top.id, ())
        if not case.reveals:
            result.hidden_errors += 1
            result.hidden_right += named
            continue
        result.errors += 1
        result.by_family[case.family] += 1
        if named:
            result.right += 1
            result.family_right[case.family] += 1
        elif confident:
            result.wrong += 1
            result.wrong_ids.append(case.id)
        else:
            result.silent += 1
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("round", type=Path)
    args = parser.parse_args(argv)
    result = score(load_round(args.round), load_causes())
    print(result.line())  # noqa: T201
    for family, total in sorted(result.by_family.items()):
        print(f"  {family}: {result.family_right[family]} of {total}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
