"""Split a pool of newly collected real logs into an in-sample part and a held-out part.

Run once, before any pattern is written from the new logs::

    python -m tests.kb.split_corpus POOL --seed N

POOL holds ``<family>/<name>.txt`` fixtures (error logs, the directory is the cause family) and
``healthy/<name>.txt`` (logs of runs that did not fail). Per family, in sorted name order, a
``random.Random(f"{seed}:{family}")`` shuffle sends ``n // 2`` logs to the held-out part (a
family of one goes there on a coin flip), the rest to the in-sample part. In-sample error logs
join ``tests/data/tracebacks/<family>/``, in-sample healthy logs ``tests/data/healthy/``;
held-out logs go to ``tests/data/heldout/<family>/`` and are only ever read by
``tests/kb/test_heldout.py``, which reports counts, never their text. ``SPLIT.json`` records
the seed and every file's part, so the split can be checked (``assign`` reproduces it).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections.abc import Iterable
from pathlib import Path

DATA = Path(__file__).parents[1] / "data"
HELDOUT = DATA / "heldout"
MANIFEST = HELDOUT / "SPLIT.json"
HEALTHY = "healthy"


def assign(seed: int, family: str, names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(in-sample, held-out) names of one family: a seeded shuffle, half of it held out."""
    ordered = sorted(names)
    rng = random.Random(f"{seed}:{family}")  # noqa: S311 (a reproducible split, not a secret)
    rng.shuffle(ordered)
    # a family of one goes to either part on a coin flip, larger ones are halved
    held = (1 if rng.random() < 0.5 else 0) if len(ordered) == 1 else len(ordered) // 2
    return sorted(ordered[held:]), sorted(ordered[:held])


def in_sample_dir(family: str) -> Path:
    return DATA / HEALTHY if family == HEALTHY else DATA / "tracebacks" / family


def split(pool: Path, seed: int) -> dict[str, object]:
    """Move the pool's logs into place and return the manifest entries."""
    parts: dict[str, list[str]] = {"in_sample": [], "held_out": []}
    for family_dir in sorted(p for p in pool.iterdir() if p.is_dir()):
        family = family_dir.name
        names = [p.name for p in family_dir.glob("*.txt")]
        keep, held = assign(seed, family, names)
        for name, target in [(n, in_sample_dir(family)) for n in keep] + [
            (n, HELDOUT / family) for n in held
        ]:
            destination = target / name
            if destination.exists():
                raise SystemExit(f"refusing to overwrite {destination}")
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(family_dir / name, destination)
            part = "held_out" if target.is_relative_to(HELDOUT) else "in_sample"
            parts[part].append(f"{family}/{name}")
    return {"seed": seed, **{k: sorted(v) for k, v in parts.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pool", type=Path)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args(argv)
    if MANIFEST.exists():
        raise SystemExit(f"{MANIFEST} exists: a split is drawn once (draw a fresh pool to redo)")
    manifest = split(args.pool, args.seed)
    HELDOUT.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    held = manifest["held_out"]
    kept = manifest["in_sample"]
    assert isinstance(held, list) and isinstance(kept, list)
    print(f"in-sample {len(kept)}, held-out {len(held)} (seed {args.seed})")  # noqa: T201


if __name__ == "__main__":
    main()
