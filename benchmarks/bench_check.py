"""Time `envdoctor check` against `python -m torch.utils.collect_env` on this machine, in one run.

Goal (issue #2): envdoctor check at least 2x faster than collect_env while reporting more.
Usage: python benchmarks/bench_check.py [--runs N] [--python PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def best_of(argv: list[str], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False, timeout=600)
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    ours = [args.python, "-m", "envdoctor", "check", "--json"]
    ref = [args.python, "-m", "torch.utils.collect_env"]
    subprocess.run(
        ref, capture_output=True, check=False, timeout=600
    )  # warm the page cache for both
    subprocess.run(ours, capture_output=True, check=False, timeout=600)
    ours_best, ours_med = best_of(ours, args.runs)
    ref_best, ref_med = best_of(ref, args.runs)
    print(f"envdoctor check --json       best {ours_best:.3f} s  median {ours_med:.3f} s")
    print(f"python -m torch.utils.collect_env  best {ref_best:.3f} s  median {ref_med:.3f} s")
    ratio = ref_med / ours_med
    print(f"ratio (collect_env / envdoctor, medians): {ratio:.2f}x  (goal >= 2.0x)")
    return 0 if ratio >= 2.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
