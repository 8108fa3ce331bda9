"""Split a pool of newly collected real logs into an in-sample part and a held-out part.

Run once per pool, before any pattern is written from the new logs::

    python -m tests.kb.split_corpus POOL --seed N [--all]

POOL holds ``<family>/<name>.txt`` fixtures (error logs, the directory is the cause family) and
``healthy/<name>.txt`` (logs of runs that did not fail). Per family, in sorted name order, a
``random.Random(f"{seed}:{family}")`` shuffle sends ``n // 2`` logs to the held-out part (a
family of one goes there on a coin flip; with ``--all`` every log is held out), the rest to the
in-sample part. In-sample error logs join ``tests/data/tracebacks/<family>/``, in-sample healthy
logs ``tests/data/healthy/``; held-out logs go to ``tests/data/heldout/<family>/`` and are only
ever read by ``tests/kb/test_heldout.py``, which reports counts, never their text.

``SPLIT.json`` records every round: its seed, how much was held out, every file's part, and,
once the round's held-out logs have been measured and then read to improve the signatures, the
result it measured and ``retired: true``::

    python -m tests.kb.split_corpus --retire "77/84 named first, ..."

moves a measured round's held-out logs into the in-sample corpus (they are spent: a new
out-of-sample figure needs a fresh pool). ``assign`` reproduces each round's split.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, TypedDict, cast

DATA = Path(__file__).parents[1] / "data"
HELDOUT = DATA / "heldout"
MANIFEST = HELDOUT / "SPLIT.json"
HEALTHY = "healthy"

Hold = Literal["half", "all"]


class _Drawn(TypedDict):
    seed: int
    hold: Hold
    in_sample: list[str]
    held_out: list[str]


class Round(_Drawn, total=False):
    """One round of SPLIT.json; ``retired`` and ``result`` once it was measured and spent."""

    retired: bool
    result: str  # what the round measured, as docs/explain.md states it


def assign(
    seed: int, family: str, names: Iterable[str], hold: Hold = "half"
) -> tuple[list[str], list[str]]:
    """(in-sample, held-out) names of one family: a seeded shuffle, half (or all) held out."""
    ordered = sorted(names)
    if hold == "all":
        return [], ordered
    rng = random.Random(f"{seed}:{family}")  # noqa: S311 (a reproducible split, not a secret)
    rng.shuffle(ordered)
    # a family of one goes to either part on a coin flip, larger ones are halved
    held = (1 if rng.random() < 0.5 else 0) if len(ordered) == 1 else len(ordered) // 2
    return sorted(ordered[held:]), sorted(ordered[:held])


def in_sample_dir(family: str) -> Path:
    return DATA / HEALTHY if family == HEALTHY else DATA / "tracebacks" / family


def _place(source: Path, destination: Path) -> None:
    if destination.exists():
        raise SystemExit(f"refusing to overwrite {destination}")
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def split(pool: Path, seed: int, hold: Hold) -> Round:
    """Copy the pool's logs into place and return the round's manifest entry."""
    parts: dict[str, list[str]] = {"in_sample": [], "held_out": []}
    for family_dir in sorted(p for p in pool.iterdir() if p.is_dir()):
        family = family_dir.name
        keep, held = assign(seed, family, [p.name for p in family_dir.glob("*.txt")], hold)
        for name in keep:
            _place(family_dir / name, in_sample_dir(family) / name)
            parts["in_sample"].append(f"{family}/{name}")
        for name in held:
            _place(family_dir / name, HELDOUT / family / name)
            parts["held_out"].append(f"{family}/{name}")
    return Round(
        seed=seed,
        hold=hold,
        in_sample=sorted(parts["in_sample"]),
        held_out=sorted(parts["held_out"]),
    )


def rounds() -> list[Round]:
    if not MANIFEST.exists():
        return []
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return cast("list[Round]", manifest["rounds"])  # written by _save, read by tests only


def _save(all_rounds: list[Round]) -> None:
    HELDOUT.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"rounds": all_rounds}, indent=1) + "\n"
    MANIFEST.write_text(text, encoding="utf-8")


def retire(result: str) -> None:
    """Move the current round's held-out logs into the in-sample corpus, recording its result."""
    all_rounds = rounds()
    if not all_rounds or all_rounds[-1].get("retired"):
        raise SystemExit("no current held-out round to retire")
    current = all_rounds[-1]
    for entry in current["held_out"]:
        family, name = entry.split("/")
        _place(HELDOUT / entry, in_sample_dir(family) / name)
        (HELDOUT / entry).unlink()
    for family_dir in [p for p in HELDOUT.iterdir() if p.is_dir()]:
        family_dir.rmdir()
    current["retired"] = True
    current["result"] = result
    _save(all_rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pool", type=Path, nargs="?")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--all", action="store_true", help="hold out every log of the pool")
    parser.add_argument("--retire", metavar="RESULT", help="retire the measured current round")
    args = parser.parse_args(argv)
    if args.retire is not None:
        retire(args.retire)
        return
    if args.pool is None or args.seed is None:
        parser.error("POOL and --seed are needed to draw a round")
    all_rounds = rounds()
    if all_rounds and not all_rounds[-1].get("retired"):
        raise SystemExit("the current held-out round is not retired: a split is drawn once")
    entry = split(args.pool, args.seed, "all" if args.all else "half")
    _save([*all_rounds, entry])
    kept, held = len(entry["in_sample"]), len(entry["held_out"])
    print(f"in-sample {kept}, held-out {held} (seed {args.seed})")  # noqa: T201


if __name__ == "__main__":
    main()
