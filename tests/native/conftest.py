"""The native stand-in for libnvidia-ml (``nvml_standin.c``), built once per test session with
the system C compiler and loaded by the real nvidia-ml-py through ctypes, in envdoctor's own
child processes (``python -m envdoctor …``), as on a GPU machine.

``NativeMachine`` writes a scenario (``key=value`` lines, see the C file's header), runs an
envdoctor command against it with ``LD_LIBRARY_PATH`` pointing at the built
``libnvidia-ml.so.1``, and reads back the stand-in's call log: which C entry points were
reached, on which GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).with_name("nvml_standin.c")
ROOT = Path(__file__).resolve().parents[2]


NO_COMPILER = "no C compiler (cc) to build the native NVML stand-in: tests/native skipped"


def build_standin(out: Path) -> Path | None:
    """Build the stand-in into ``out`` as ``libnvidia-ml.so.1`` (None: no C compiler here)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    result = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o",
         str(out / "libnvidia-ml.so.1"), str(SOURCE)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"the NVML stand-in does not build:\n{result.stderr}"
    return out


@pytest.fixture(scope="session")
def standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-in as ``libnvidia-ml.so.1``, the soname pynvml loads."""
    built = build_standin(tmp_path_factory.mktemp("nvml-standin"))
    if built is None:
        pytest.skip(NO_COMPILER)
    return built


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    calls: list[tuple[str, int]]
    """(C function, GPU index or -1) in the order the stand-in was entered."""

    def json(self) -> Any:
        return json.loads(self.stdout)

    def functions(self) -> set[str]:
        return {fn for fn, _ in self.calls}


class NativeMachine:
    def __init__(self, lib: Path, tmp: Path) -> None:
        self.lib = lib
        self.tmp = tmp
        self.runs = 0

    def run(self, scenario: str, *args: str, timeout: float = 60) -> Run:
        self.runs += 1
        case = self.tmp / f"run{self.runs}"
        case.mkdir()
        (case / "scenario.txt").write_text(scenario + "\n", encoding="utf-8")
        log = case / "calls.log"
        env = {
            **os.environ,
            "LD_LIBRARY_PATH": f"{self.lib}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}",
            "NVML_STANDIN_SCENARIO": str(case / "scenario.txt"),
            "NVML_STANDIN_LOG": str(log),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "envdoctor", *args],
            capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=case,
        )  # fmt: skip
        seconds = time.monotonic() - started
        calls = []
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                fn, _, gpu = line.partition(" ")
                calls.append((fn, int(gpu)))
        return Run(result.returncode, result.stdout, result.stderr, seconds, calls)

    def facts(self, scenario: str, *args: str) -> tuple[Any, Run]:
        """``collect``'s NVML facts (the snapshot's ``facts.nvml``) and the run."""
        run = self.run(scenario, "collect", "--no-redact", "-o", "snapshot.json", *args)
        assert run.returncode == 0, run.stderr
        snapshot = self.tmp / f"run{self.runs}" / "snapshot.json"
        return json.loads(snapshot.read_text(encoding="utf-8"))["facts"]["nvml"], run


@pytest.fixture
def native(standin_dir: Path, tmp_path: Path) -> Iterator[NativeMachine]:
    yield NativeMachine(standin_dir, tmp_path)
