"""Time the test suite (the pytest part of ./scripts/test, install test included) against the
suite of another commit, alternating, in one sitting.

    python benchmarks/bench_suite.py --against 2c6fcca            # 3 rounds
    python benchmarks/bench_suite.py --against HEAD~3 --rounds 5

The other commit is checked out as a temporary git worktree that uses this checkout's .venv;
each run imports envdoctor from its own tree (PYTHONPATH), with the workers that tree's
scripts/test would start (``$(nproc) + K``) and its temporary files where that tree's
scripts/test puts them (``scripts/test-tmpdir``; /tmp for a tree without it). One run of each,
not counted, warms both trees (bytecode, shellcheck's verdicts, pipx's cache: the goal is a warm
run). Each round runs both, in the other order every second round, so a busier or quieter host
weighs on both alike. Reported: min/median/max wall time and CPU time (the runs' own and their
children's, from getrusage), and the ratio of medians. The host's load is printed with every
run: compare only rows of one sitting.
The runs start with SIGINT and SIGQUIT at their defaults (the suite's signal tests need them,
and a background job of a shell without job control has them ignored).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def workers(tree: Path) -> str:
    """The pytest-xdist workers that tree's scripts/test starts."""
    text = (tree / "scripts" / "test").read_text()
    found = re.search(r"\$\(nproc\)\s*\+\s*(\d+)", text)
    return str((os.cpu_count() or 1) + (int(found.group(1)) if found else 1))


def run_suite(tree: Path, python: str) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    chooser = tree / "scripts" / "test-tmpdir"  # where that tree's scripts/test puts temporaries
    if chooser.exists():
        tmp = subprocess.run(
            [str(chooser)], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        if tmp.stdout.strip():
            env["TMPDIR"] = tmp.stdout.strip()
    argv = [python, "-m", "pytest", "-q", "-n", workers(tree), "--dist", "loadscope"]
    argv += ["-m", "install or not install"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    return wall, cpu, f"exit {done.returncode}: {last}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = parser.parse_args()
    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)
    python = str(ROOT / ".venv" / "bin" / "python")
    if not Path(python).exists():
        print("run ./scripts/test once first: it makes .venv", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as scratch:
        other = Path(scratch) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), args.against],
            check=True,
        )
        try:
            (other / ".venv").symlink_to(ROOT / ".venv")
            return compare({"this checkout": ROOT, args.against: other}, python, args.rounds)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False
            )


def compare(trees: dict[str, Path], python: str, rounds: int) -> int:
    print(
        f"conditions: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{rounds} alternating rounds; workers: "
        + ", ".join(f"{name} {workers(tree)}" for name, tree in trees.items())
    )
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    names = list(trees)
    for name in names:  # a new worktree has no bytecode, shellcheck verdicts or pipx cache yet
        wall, _, result = run_suite(trees[name], python)
        print(f"warm-up {name:>14}: {wall:6.1f} s, {result} (not counted)", flush=True)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            wall, cpu, result = run_suite(trees[name], python)
            times[name].append((wall, cpu))
            load = os.getloadavg()[0]
            print(
                f"round {index + 1} {name:>14}: {wall:6.1f} s, CPU {cpu:6.1f} s, {result}, "
                f"load {load:.2f}",
                flush=True,
            )
    print(f"\n{'':>14}  {'wall min':>8} {'median':>7} {'max':>6}  {'CPU median':>10}")
    medians = {}
    for name, runs in times.items():
        walls = sorted(w for w, _ in runs)
        medians[name] = statistics.median(walls)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:>14}  {walls[0]:8.1f} {medians[name]:7.1f} {walls[-1]:6.1f}  {cpu:10.1f}")
    first, second = names
    print(f"\n{first} / {second} (median wall): {medians[first] / medians[second]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
