"""How much `envdoctor smoke` costs over the bare minimum, measured in the same run.

The minimum is a child of the same interpreter that only imports torch and creates a CUDA context
(`torch.empty(1, device="cuda")` + synchronize) — what any GPU job pays before its first kernel.
Smoke is the full per-GPU run (context, buffer round trip, three GEMMs, conv2d forward and
backward, each checked against a CPU reference) on every GPU in parallel. Goal: smoke ≤ 1.5 x
the minimum, whatever the number of GPUs.

    python benchmarks/bench_smoke.py                 # real GPUs when NVML sees some
    python benchmarks/bench_smoke.py --mode cpu      # the same steps on the CPU (no GPU here)
    python benchmarks/bench_smoke.py --mode fake     # the fake torch: protocol/runner overhead

Runs are interleaved (minimum, smoke, minimum, smoke …) after one warm-up of each, and the
median is reported, so page-cache warm-up does not favour either side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envdoctor.model.facts import Facts  # noqa: E402
from envdoctor.model.probed import Found  # noqa: E402
from envdoctor.smoke import SmokeOptions, run_smoke  # noqa: E402
from envdoctor.smoke.model import SmokeRun  # noqa: E402

MINIMUM_GPU = "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()"
MINIMUM_CPU = "import torch; torch.empty(1)"
FAKE_TORCH = str(ROOT / "tests" / "fake_torch")


def live_facts(python: str) -> Facts:
    from envdoctor.platform.host import Deadline
    from envdoctor.platform.system import SystemHost
    from envdoctor.probes import collect_facts

    return collect_facts(SystemHost(), python=python, deadline=Deadline(60), include_torch=True)


def gpu_count(facts: Facts) -> int:
    return len(facts.nvml.value.gpus) if isinstance(facts.nvml, Found) else 0


def time_minimum(python: str, code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", code], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def time_smoke(facts: Facts, options: SmokeOptions) -> tuple[float, SmokeRun]:
    start = time.perf_counter()
    run = run_smoke(facts, options)
    elapsed = time.perf_counter() - start
    for child in run.runs:
        if not child.ok:
            failed = ", ".join(f"{s.step}: {s.first_line}" for s in child.failed)
            raise SystemExit(f"smoke failed on {child.target.label}: {failed}")
    return elapsed, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("auto", "gpu", "cpu", "fake"), default="auto")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    env = dict(os.environ)
    facts = live_facts(args.python)
    mode = args.mode
    if mode == "auto":
        mode = "gpu" if gpu_count(facts) else "cpu"
    if mode == "gpu" and not gpu_count(facts):
        raise SystemExit("no GPU seen by NVML: use --mode cpu or --mode fake")
    if mode == "fake":
        from tests.smoke.conftest import gpu_facts

        facts = gpu_facts(1)
        env["PYTHONPATH"] = FAKE_TORCH
    options = SmokeOptions(
        python=args.python,
        device="cpu" if mode == "cpu" else "cuda",
        env={"PYTHONPATH": FAKE_TORCH} if mode == "fake" else {},
        timeout=300,
        step_timeout=300,
    )
    minimum_code = MINIMUM_GPU if mode == "gpu" else MINIMUM_CPU

    print(
        f"mode: {mode}"
        + {
            "gpu": f" ({gpu_count(facts)} GPU(s), in parallel)",
            "cpu": " (no GPU used: the same steps run on the CPU with the real torch; the minimum"
            " is `import torch` — this measures envdoctor's overhead, not CUDA's)",
            "fake": " (the fake torch: runner and protocol overhead only)",
        }[mode]
    )
    print(f"python: {args.python}")
    time_minimum(args.python, minimum_code, env)  # warm-up, discarded
    time_smoke(facts, options)
    minimum: list[float] = []
    smoke: list[float] = []
    last: SmokeRun | None = None
    for _ in range(args.repeat):
        minimum.append(time_minimum(args.python, minimum_code, env))
        elapsed, last = time_smoke(facts, options)
        smoke.append(elapsed)
    base, full = statistics.median(minimum), statistics.median(smoke)
    print(
        f"minimum (import torch + context): median {base:.3f} s  ({', '.join(f'{t:.2f}' for t in minimum)})"
    )
    print(
        f"envdoctor smoke:                  median {full:.3f} s  ({', '.join(f'{t:.2f}' for t in smoke)})"
    )
    if last is not None:
        for child in last.runs:
            steps = ", ".join(
                f"{s.step} {s.seconds:.2f}" for s in child.steps if s.status != "skipped"
            )
            print(f"  {child.target.label}: {child.seconds:.2f} s — {steps}")
    ratio = full / base
    verdict = "meets" if ratio <= 1.5 else "misses"
    print(f"ratio smoke / minimum: {ratio:.2f}x ({verdict} the 1.5x goal)")


if __name__ == "__main__":
    main()
