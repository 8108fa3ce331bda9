"""Out-of-sample accuracy: real logs kept out of pattern writing (tests/data/heldout/).

The logs of a round were collected from threads not used before, then split at random before
any pattern was written from them (tests/kb/split_corpus.py; seeds and splits in SPLIT.json). This file is the only
reader of their text; it prints counts, never a log or a file name, so a failure here cannot
turn into tuning on them. docs/explain.md states the measured figures; the test checks that the
statement is the truth (change the signatures, re-measure, update the doc, or say why not).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kb import split_corpus
from tests.kb.helpers import HEADER_END, run
from tests.kb.split_corpus import HEALTHY, HELDOUT, assign

DOCS = Path(__file__).parents[2] / "docs" / "explain.md"
RESULT = re.compile(
    r"Out-of-sample result, round (?P<round>\d+): (?P<text>(?P<right>\d+) of (?P<total>\d+) "
    r"held-out error logs named first \([\d.]+%\); (?P<wrong>\d+) named a wrong cause with high "
    r"confidence; (?P<silent>\d+) silent or with only a possible cause; (?P<quiet>\d+) of "
    r"(?P<healthy>\d+) held-out healthy logs silent)\."
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


def _documented() -> dict[int, re.Match[str]]:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    return {int(m["round"]): m for m in RESULT.finditer(text)}


def test_the_split_is_the_recorded_one() -> None:
    """Each round's seed reproduces its split; the current round's held-out logs are on disk
    where SPLIT.json says, a retired round's are in the in-sample corpus, its result in the docs."""
    rounds = split_corpus.rounds()
    assert rounds, "SPLIT.json records the rounds"
    documented = _documented()
    on_disk = sorted(f"{p.parent.name}/{p.name}" for p in HELDOUT.glob("*/*.txt"))
    for number, entry in enumerate(rounds, start=1):
        held, kept = entry["held_out"], entry["in_sample"]
        families: dict[str, list[str]] = defaultdict(list)
        for name in held + kept:
            family, file = name.split("/")
            families[family].append(file)
        for family, names in families.items():
            keep, out = assign(entry["seed"], family, names, entry["hold"])
            assert [f"{family}/{n}" for n in out] == [e for e in held if e.startswith(family + "/")]
            assert [f"{family}/{n}" for n in keep] == [
                e for e in kept if e.startswith(family + "/")
            ]
        for name in kept:
            family, file = name.split("/")
            assert (split_corpus.in_sample_dir(family) / file).is_file(), name
        if entry.get("retired"):
            assert number in documented and documented[number]["text"] == entry["result"]
            for name in held:
                family, file = name.split("/")
                assert (split_corpus.in_sample_dir(family) / file).is_file(), name
        else:
            assert number == len(rounds), "only the last round may be current"
            assert on_disk == held
    if rounds[-1].get("retired"):
        assert on_disk == []


def test_held_out_accuracy_is_the_documented_one(capsys: pytest.CaptureFixture[str]) -> None:
    rounds = split_corpus.rounds()
    if rounds[-1].get("retired"):
        pytest.skip("no current held-out round: the last one was measured and retired")
    m = measure()
    with capsys.disabled():
        print(  # noqa: T201
            f"\nexplain out-of-sample: {m.right}/{m.total} named first, {m.wrong} wrong with "
            f"high confidence, {m.silent} silent; {m.quiet}/{m.healthy} healthy logs silent"
        )
    stated = _documented().get(len(rounds))
    assert stated is not None, "docs/explain.md must state the current round's result"
    documented = Measure(**{f.name: int(stated[f.name]) for f in dataclasses.fields(Measure)})
    assert m == documented
