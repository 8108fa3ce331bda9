"""Shared helpers for the smoke tests: facts with N GPUs, the fake torch's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envdoctor.model.facts import Facts, GpuProcess, MemoryInfo
from envdoctor.model.probed import Found
from envdoctor.smoke.runner import child_source, parse_line
from tests import factories

FAKE_TORCH = str(Path(__file__).resolve().parents[1] / "fake_torch")
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cuda_errors.json"
PYTHON = sys.executable
MiB = 1 << 20
GiB = 1 << 30


def errors() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(FIXTURES.read_text())["errors"]
    return data


def uuid(index: int) -> str:
    return f"GPU-00000000-0000-0000-0000-00000000000{index}"


def gpu_facts(
    count: int = 1,
    *,
    free_mib: int | None = None,
    processes: tuple[tuple[int, str, int], ...] = (),
    torch_over: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    **gpu_over: Any,
) -> Facts:
    """Facts for ``count`` H100s; GPU 0 gets ``free_mib`` free and ``processes`` (pid, name,
    MiB) when given."""
    gpus = []
    for index in range(count):
        gpu = factories.gpu(index, **gpu_over)
        if index == 0 and free_mib is not None:
            total = 80 * GiB
            free = free_mib * MiB
            gpu = replace(gpu, memory=Found(MemoryInfo(total, total - free, free)))
        if index == 0 and processes:
            procs = tuple(
                GpuProcess(pid, Found(name), Found(mib * MiB)) for pid, name, mib in processes
            )
            gpu = replace(gpu, processes=Found(procs))
        gpus.append(gpu)
    build = factories.torch_build(**(torch_over or {}))
    return factories.facts(
        nvml=factories.nvml(tuple(gpus)),
        torch=factories.torch(Found(build)),
        env=factories.env(env or {}),
    )


@pytest.fixture
def fake_env(tmp_path: Path) -> Callable[..., dict[str, str | None]]:
    """The children's environment: the fake torch first on PYTHONPATH, its state dir, and
    ``op=behaviour`` rules (keyword ``rules``) plus any ENVDOCTOR_FAKE_* keyword."""

    def make(rules: str = "", **extra: str) -> dict[str, str | None]:
        env: dict[str, str | None] = {
            "PYTHONPATH": FAKE_TORCH,
            "ENVDOCTOR_FAKE_STATE": str(tmp_path),
            "ENVDOCTOR_FAKE_TORCH": rules,
            "PYTORCH_NO_CUDA_MEMORY_CACHING": None,
        }
        env.update({f"ENVDOCTOR_FAKE_{k.upper()}": v for k, v in extra.items()})
        return env

    return make


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (not yet reaped by its parent) counts as dead
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_dead(pid: int, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def fake_pids(state: Path) -> list[int]:
    return [int(p.name.split("-", 1)[1]) for p in state.glob("pid-*")]


def fake_sleeps(state: Path) -> list[tuple[float, float]]:
    """(start, end) of every ``sleep`` behaviour, on the system's monotonic clock."""
    return [(float(a), float(b)) for a, b in (p.read_text().split() for p in state.glob("slept-*"))]


def child_events(config: dict[str, Any], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run the smoke child by hand (not through the runner) and return its protocol events;
    its stdout must carry nothing else (library output goes to stderr)."""
    out = subprocess.run(
        [PYTHON, "-c", child_source(), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=True,
    ).stdout
    events = [parse_line(line) for line in out.splitlines()]
    assert None not in events, f"stdout carries more than the protocol: {out[:500]!r}"
    return [e for e in events if e is not None]
