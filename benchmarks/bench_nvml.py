"""Time `envdoctor probe` on 8 simulated GPUs against the same probe on 1 GPU (issue #15).

NVML is simulated (benchmarks/nvml_sim_probe.py: the pynvml module replaced by
tests/fakes/pynvml_sim.py, every call taking DELAY_MS, 1 ms by default: real NVML is slower);
the rest is the real probe process. Three commands run interleaved, round by round:

- 1 GPU;
- 8 GPUs, read side by side (what envdoctor does);
- 8 GPUs, one after another on one NVML worker (what it did before), for comparison.

For each: min / median / max of the process's wall time, and of the probe's own duration
(``duration_s`` of ``--json``: from the start of ``run`` to the verdict, without the
interpreter's start). Goal: 8 GPUs <= 1.3x 1 GPU (medians of the wall time).

Usage: python benchmarks/bench_nvml.py [--runs N] [--gpus 8] [--delay-ms 1] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = str(ROOT / "benchmarks" / "nvml_sim_probe.py")
GOAL = 1.3


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall time, the probe's own duration) of one run."""
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    wall = time.perf_counter() - start
    data = json.loads(result.stdout)
    return wall, float(data["duration_s"])


def check_gpus(argv: list[str], count: int) -> None:
    """The simulated GPUs are really read (a probe that failed early would time nothing)."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    gpus = json.loads(result.stdout)["facts"]["nvml"]["found"]["gpus"]
    if len(gpus) != count or any("found" not in g["temperature"] for g in gpus):
        raise SystemExit(f"the probe did not read {count} simulated GPUs: {result.stdout[:500]}")


def compile_envdoctor(python: str) -> None:
    """Write the bytecode caches first, as a wheel install does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for package in ("envdoctor", "tests"):
        subprocess.run(
            [python, "-m", "compileall", "-q", str(ROOT / package)],
            env=env,
            check=True,
            timeout=300,
        )


def spread(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"min {min(ms):6.1f}  median {statistics.median(ms):6.1f}  max {max(ms):6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    compile_envdoctor(args.python)
    probe = ["--timeout", "10", "--json"]
    delay = str(args.delay_ms)
    many = f"{args.gpus} GPUs"
    commands = {
        "1 GPU": [args.python, WRAPPER, "1", delay, *probe],
        many: [args.python, WRAPPER, str(args.gpus), delay, *probe],
        f"{many}, one by one": [
            args.python,
            WRAPPER,
            str(args.gpus),
            delay,
            "--one-by-one",
            *probe,
        ],
    }
    check_gpus(commands[many], args.gpus)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    owns: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        timed(argv)  # warm the page cache
    for _ in range(args.runs):
        for name, argv in commands.items():
            wall, own = timed(argv)
            walls[name].append(wall)
            owns[name].append(own)
    print(f"{args.runs} interleaved rounds, {args.delay_ms:g} ms per simulated NVML call")
    for name in commands:
        print(f"{name:<22} wall  {spread(walls[name])}")
        print(f"{'':<22} probe {spread(owns[name])}")
    ratio = statistics.median(walls[many]) / statistics.median(walls["1 GPU"])
    own_ratio = statistics.median(owns[many]) / statistics.median(owns["1 GPU"])
    before = statistics.median(walls[f"{many}, one by one"]) / statistics.median(walls["1 GPU"])
    print(f"{many} / 1 GPU (wall, medians): {ratio:.2f}x  (goal <= {GOAL:g}x)")
    print(f"{many} / 1 GPU (probe's own duration, medians): {own_ratio:.2f}x")
    print(f"{many} one by one / 1 GPU (wall, medians): {before:.2f}x  (before)")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
