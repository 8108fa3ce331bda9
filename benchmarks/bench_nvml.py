"""Time `envdoctor probe` on 8 GPUs against the same probe on 1 GPU, through the real NVML path.

NVML is the native stand-in of the test suite (tests/native/nvml_standin.c, built here with the
system C compiler), loaded by the real nvidia-ml-py in envdoctor's NVML child process, every
query taking DELAY_MS (1 ms by default: real NVML is slower); everything else is the real probe.
Three commands run interleaved, round by round:

- `python -c pass` (the interpreter alone, the floor under any probe);
- 1 GPU;
- 8 GPUs.

For each: min / median / max of the process's wall time, and of the probe's own duration
(``duration_s`` of ``--json``: from the start of ``run`` to the verdict). Goals: 8 GPUs <= 1.3x
1 GPU (medians of the wall time), and the probe within a quarter of Kubernetes' 1 s probe.

Usage: python benchmarks/bench_nvml.py [--runs N] [--gpus 8] [--delay-ms 1] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.native's builder

from tests.native.conftest import NO_COMPILER, build_standin  # noqa: E402 (after the path)

GOAL = 1.3
PROBE_GOAL = 0.25


def timed(argv: list[str], env: dict[str, str] | None) -> tuple[float, float]:
    """(wall time, the probe's own duration, 0 without one) of one run."""
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=120)
    wall = time.perf_counter() - start
    return wall, float(json.loads(result.stdout)["duration_s"]) if env is not None else 0.0


def machine(lib: Path, work: Path, gpus: int, delay_ms: float) -> dict[str, str]:
    """The environment of a probe that sees ``gpus`` stand-in GPUs."""
    scenario = work / f"gpus-{gpus}.txt"
    scenario.write_text(f"gpus={gpus}\nsleep.*={delay_ms / 1000:g}\n", encoding="utf-8")
    return {
        **os.environ,
        "LD_LIBRARY_PATH": f"{lib}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}",
        "NVML_STANDIN_SCENARIO": str(scenario),
        "PYTHONPATH": str(ROOT),
    }


def check_gpus(argv: list[str], env: dict[str, str], count: int) -> None:
    """The stand-in's GPUs are really read (a probe that failed early would time nothing)."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=120)
    gpus = json.loads(result.stdout)["facts"]["nvml"]["found"]["gpus"]
    if len(gpus) != count or any("found" not in g["temperature"] for g in gpus):
        raise SystemExit(f"the probe did not read {count} stand-in GPUs: {result.stdout[:500]}")


def compile_envdoctor(python: str) -> None:
    """Write the bytecode caches first, as a wheel install does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [python, "-m", "compileall", "-q", str(ROOT / "envdoctor")],
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
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lib = build_standin(work)
        if lib is None:
            raise SystemExit(NO_COMPILER)
        probe = [args.python, "-m", "envdoctor", "probe", "--timeout", "10", "--json"]
        many = f"{args.gpus} GPUs"
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "python -c pass": ([args.python, "-c", "pass"], None),
            "1 GPU": (probe, machine(lib, work, 1, args.delay_ms)),
            many: (probe, machine(lib, work, args.gpus, args.delay_ms)),
        }
        check_gpus(probe, machine(lib, work, args.gpus, args.delay_ms), args.gpus)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        owns: dict[str, list[float]] = {name: [] for name in commands}
        for argv, env in commands.values():
            timed(argv, env)  # warm the page cache
        for _ in range(args.runs):
            for name, (argv, env) in commands.items():
                wall, own = timed(argv, env)
                walls[name].append(wall)
                owns[name].append(own)
    print(f"{args.runs} interleaved rounds, {args.delay_ms:g} ms per stand-in NVML call")
    for name, (_, env) in commands.items():
        print(f"{name:<16} wall  {spread(walls[name])}")
        if env is not None:
            print(f"{'':<16} probe {spread(owns[name])}")
    ratio = statistics.median(walls[many]) / statistics.median(walls["1 GPU"])
    own_ratio = statistics.median(owns[many]) / statistics.median(owns["1 GPU"])
    worst = statistics.median(walls[many])
    print(f"{many} / 1 GPU (wall, medians): {ratio:.2f}x  (goal <= {GOAL:g}x)")
    print(f"{many} / 1 GPU (probe's own duration, medians): {own_ratio:.2f}x")
    print(f"{many}: {worst:.3f} s median wall  (goal <= {PROBE_GOAL:g} s)")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
