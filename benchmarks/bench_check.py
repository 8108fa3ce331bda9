"""Time `envdoctor check` against `import torch` and `python -m torch.utils.collect_env`, in one run.

Two cases, because they are two different programs:

- **torch not imported**: the interpreter's torch is a CPU-only build, which envdoctor reads from
  ``torch/version.py`` without importing it (a CPU build cannot use a GPU whatever its import
  does). This is the fast case, and not what a GPU user sees. Timed with the cache an earlier
  run left (the checked compatibility tables, ``compat/store.py``) and with an empty one.
- **torch imported**: every CUDA build must be imported (``torch.cuda.is_available()``, the
  cuDNN and NCCL versions, the arch list). Measured with ``--cuda-python PATH`` (an interpreter
  with a CUDA build of torch) or, by default, with a wrapper interpreter that makes the torch
  child import the CPU build all the same (``--import``). Each is timed on its **first run**
  (an empty cache: ``XDG_CACHE_HOME`` is a fresh directory every time) and on **repeated runs**
  (the cache written by an earlier run; the import's facts are reused, and whether CUDA is
  usable is read again through the CUDA driver API in a small child).

Every command runs once to warm the page cache, then the commands are **alternated** round by
round so that they share the machine's state; min / median / max of the wall time are reported,
with the median CPU time (user + system of the command and its children), which a busy machine
disturbs less than the wall time. check's own time is split into its start-up (``check --help``:
the interpreter and the option parser), loading the rules and tables, judging and rendering
(``check --snapshot`` of the same machine, minus the start-up) and probing (the rest; the torch
child runs while the other probes read the machine); the torch child alone (run as envdoctor
runs it) shows its own cost over a bare ``import torch``.

Goals (issue 36, what a user feels): check with a CPU torch and a warm cache >= 10x faster than
``python -m torch.utils.collect_env`` of the same interpreter (medians); with an imported torch,
the first run <= the bare ``import torch`` + 0.15 s. Repeated runs with an imported torch are
reported against collect_env too (no goal).

Usage: python benchmarks/bench_check.py [--runs N] [--python PATH] [--cuda-python PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envdoctor.probes.torch_build import child_source  # noqa: E402

GOAL_CPU_CHECK_VS_COLLECT_ENV = 10.0
GOAL_FIRST_OVER_IMPORT_S = 0.15

# The wrapper interpreter: the torch child (``python [-P] -c SRC [flags]``) gets ``--import``,
# so the CPU build is imported as a CUDA build would be; everything else runs unchanged.
WRAPPER = """#!/bin/sh
for arg in "$@"; do
    if [ "$arg" = "-c" ]; then exec "{python}" "$@" --import; fi
done
exec "{python}" "$@"
"""


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    fresh_cache: bool = False  # a new, empty XDG_CACHE_HOME for every run (a first run)
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: Command, scratch: Path) -> tuple[float, float]:
    env = {**os.environ, **command.env}
    fresh = None
    if command.fresh_cache:
        fresh = Path(tempfile.mkdtemp(prefix="cache-", dir=scratch))
        env["XDG_CACHE_HOME"] = str(fresh)
    cpu = children_cpu()
    start = time.perf_counter()
    subprocess.run(command.argv, env=env, capture_output=True, check=False, timeout=900)
    wall = time.perf_counter() - start
    cpu = children_cpu() - cpu
    if fresh is not None:
        shutil.rmtree(fresh, ignore_errors=True)
    return wall, cpu


def compile_envdoctor(python: str) -> None:
    """Write envdoctor's ``__pycache__`` for ``python`` (what a wheel install leaves behind)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [python, "-m", "compileall", "-q", str(ROOT / "envdoctor")], env=env, timeout=300
    )


def build_commands(args: argparse.Namespace, scratch: Path) -> dict[str, Command]:
    py = args.python
    envdoctor = [py, "-m", "envdoctor"]
    warm_cache = {"XDG_CACHE_HOME": str(scratch / "warm-cache")}
    snapshot = scratch / "snapshot.json"
    subprocess.run([*envdoctor, "collect", "-o", str(snapshot)], capture_output=True, timeout=300)
    child = [py, "-c", child_source()]
    commands = {
        "python -c pass": Command([py, "-c", "pass"]),
        "torch child alone (version file)": Command(child),
        "start-up: check --help": Command([*envdoctor, "check", "--help"]),
        "check --snapshot (no probing)": Command(
            [*envdoctor, "check", "--json", "--snapshot", str(snapshot)], warm_cache
        ),
        "check, CPU torch not imported": Command([*envdoctor, "check", "--json"], warm_cache),
        "check, CPU torch, empty cache": Command([*envdoctor, "check", "--json"], fresh_cache=True),
    }
    wrapper = scratch / "python-import"
    wrapper.write_text(WRAPPER.format(python=py))
    wrapper.chmod(0o755)
    targets = {"CPU torch, import forced": str(wrapper)}
    if args.cuda_python:
        targets["CUDA torch"] = args.cuda_python
    for label, target in targets.items():
        real = args.cuda_python if target == args.cuda_python else py
        check = [*envdoctor, "check", "--json", "--python", target]
        commands[f"[{label}] bare import torch"] = Command([real, "-c", "import torch"])
        commands[f"[{label}] torch child alone"] = Command([real, *child[1:], "--import"])
        commands[f"[{label}] check, first run"] = Command(check, fresh_cache=True)
        commands[f"[{label}] check, repeated"] = Command(check, warm_cache)
        commands[f"[{label}] collect_env"] = Command([real, "-m", "torch.utils.collect_env"])
    return commands


def report(commands: dict[str, Command], args: argparse.Namespace) -> bool:
    width = max(len(name) for name in commands) + 2
    print(f"{'command':<{width}} {'min':>7} {'median':>7} {'max':>7}   {'cpu median':>10}")
    for name, c in commands.items():
        print(
            f"{name:<{width}} {min(c.wall):7.3f} {statistics.median(c.wall):7.3f} "
            f"{max(c.wall):7.3f}   {statistics.median(c.cpu):10.3f}"
        )

    def med(name: str, cpu: bool = False) -> float:
        return statistics.median(commands[name].cpu if cpu else commands[name].wall)

    check_cpu = med("check, CPU torch not imported")
    startup = med("start-up: check --help")
    judging = med("check --snapshot (no probing)") - startup
    cpu_ratio_env = med("[CPU torch, import forced] collect_env") / check_cpu
    cpu_ok = cpu_ratio_env >= GOAL_CPU_CHECK_VS_COLLECT_ENV
    ok = cpu_ok
    print(
        f"\ncheck (CPU torch, not imported, warm cache): {check_cpu:.3f} s median, "
        f"{cpu_ratio_env:.1f}x faster than collect_env "
        f"(goal >= {GOAL_CPU_CHECK_VS_COLLECT_ENV:g}x: {'met' if cpu_ok else 'NOT met'}); "
        f"with an empty cache (the tables read and checked): "
        f"{med('check, CPU torch, empty cache'):.3f} s"
        f"\n  start-up {startup:.3f} s, loading rules and tables + judging + rendering "
        f"{judging:.3f} s, probing {check_cpu - startup - judging:.3f} s  (wall medians)"
    )
    labels = sorted({n[1 : n.index("]")] for n in commands if n.startswith("[")})
    for label in labels:
        bare = med(f"[{label}] bare import torch")
        first = med(f"[{label}] check, first run")
        repeated = med(f"[{label}] check, repeated")
        collect = med(f"[{label}] collect_env")
        over = first - bare
        ratio = collect / repeated
        cpu_ratio = med(f"[{label}] collect_env", True) / med(f"[{label}] check, repeated", True)
        cpu_over = med(f"[{label}] check, first run", True) - med(
            f"[{label}] bare import torch", True
        )
        child_over = med(f"[{label}] torch child alone") - bare
        first_ok = over <= GOAL_FIRST_OVER_IMPORT_S
        ok = ok and first_ok
        print(
            f"\n[{label}]"
            f"\n  first run - bare import torch: {over:+.3f} s wall, {cpu_over:+.3f} s CPU  "
            f"(goal <= +{GOAL_FIRST_OVER_IMPORT_S:g} s: {'met' if first_ok else 'NOT met'})"
            f"\n    of which the torch child over a bare import: {child_over:+.3f} s wall"
            f"\n  collect_env / repeated run: {ratio:.1f}x wall, {cpu_ratio:.1f}x CPU"
            f"\n  collect_env / first run: {collect / first:.2f}x"
        )
    print(
        f"\n{args.runs} alternating rounds after one warm-up run of each; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end."
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="envdoctor's interpreter")
    parser.add_argument("--cuda-python", help="an interpreter with a CUDA build of torch")
    args = parser.parse_args()
    compile_envdoctor(args.python)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        scratch = Path(tmp)
        commands = build_commands(args, scratch)
        for command in commands.values():
            timed(command, scratch)  # page cache, bytecode, and the repeated runs' cache
        for _ in range(args.runs):
            for command in commands.values():
                wall, cpu = timed(command, scratch)
                command.wall.append(wall)
                command.cpu.append(cpu)
        ok = report(commands, args)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
