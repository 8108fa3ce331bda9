"""envdoctor on the machine running the tests: real SystemHost, real torch child, subprocess CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from envdoctor.model.facts import TorchBuild
from envdoctor.model.probed import Absent, Found
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes.torch_probe import probe_torch

NO_DRIVER = not Path("/proc/driver/nvidia/version").exists() and not any(
    Path(d, "libnvidia-ml.so.1").exists()
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64")
)


def _envdoctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """envdoctor as a user runs it inside the test venv, activated (the torch it judges is the
    active venv's: issue 37)."""
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**(os.environ if env is None else env), "VIRTUAL_ENV": sys.prefix},
    )


@pytest.mark.parametrize("force_import", [False, True], ids=["version-file", "import"])
def test_real_torch_child_reads_the_installed_build(force_import: bool, tmp_path: Path) -> None:
    """The import is cached: a second run reuses it (and says so) with the same facts. The
    imported torch is also asked about ``PYTORCH_CUDA_ALLOC_CONF`` (rules/alloc_conf.py): one real
    import (~1.5 s of CPU) answers both."""
    cache = CacheDir(str(tmp_path / "envdoctor"))
    environ = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"}
    runs = [
        probe_torch(
            SystemHost(environ=environ),
            python=sys.executable,
            deadline=Deadline(60),
            force_import=force_import,
            cache=cache,
        ).torch
        for _ in range(2)
    ]
    builds = [run.value for run in runs if isinstance(run, Found)]
    assert len(builds) == 2 and all(isinstance(b, TorchBuild) for b in builds), runs
    build, again = builds
    assert isinstance(build, TorchBuild) and isinstance(again, TorchBuild)
    assert build.version.startswith("2.13.0")
    assert build.location.endswith("site-packages/torch")
    if build.is_cpu_build:
        assert not build.cuda_available
        reason = "not compiled with CUDA" if force_import else "built without CUDA"
        assert reason in build.unavailable_reason
    assert build.from_cache == ""
    if force_import:
        assert again.from_cache and again == replace(build, from_cache=again.from_cache)
        ((variable, verdict),) = build.alloc_conf  # the real torch's own words
        assert variable == "PYTORCH_CUDA_ALLOC_CONF"
        assert "Expected 'True' or 'False'" in verdict and "maybe" in verdict
    else:  # the version file is read every time: nothing to cache
        assert again == build and not any(tmp_path.rglob("torch-*.json"))


def test_real_interpreter_without_torch(tmp_path: Path) -> None:
    wrapper = tmp_path / "python-without-site"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    facts = probe_torch(SystemHost(), python=str(wrapper), deadline=Deadline(30))
    assert isinstance(facts.torch, Absent) and "not installed" in facts.torch.reason


def _pci_bus_read() -> bool:
    """Whether this machine's PCI bus can be listed (sandboxes may hide /sys/bus/pci)."""
    try:
        return bool(os.listdir("/sys/bus/pci/devices"))
    except OSError:
        return False


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has an NVIDIA driver")
def test_check_on_this_gpu_less_machine() -> None:
    """No NVIDIA GPU here: a healthy CPU machine, with a note (exit 0); expecting a GPU makes
    the missing GPU an error (exit 1), and the CPU torch with it."""
    result = _envdoctor("check", "--json")
    data = json.loads(result.stdout)
    codes = {f["code"]: f for f in data["findings"]}
    assert result.returncode == 0 and data["status"] == "healthy", result.stdout[-2000:]
    note = "machine.cpu-only" if _pci_bus_read() else "container.no-gpu-access"
    assert note in codes and "torch.cpu-build" not in codes
    outcomes = {c["name"]: c["outcome"] for c in data["checks"]}
    assert outcomes["torch.cuda-build"] == "not-applicable"
    assert "torch.cuda-available" not in data["passed"]
    expected = _envdoctor("check", "--json", "--expect", "gpu")
    data = json.loads(expected.stdout)
    codes = {f["code"]: f for f in data["findings"]}
    assert expected.returncode == 1 and data["status"] == "unhealthy"
    missing = "driver.not-installed" if _pci_bus_read() else "container.no-gpu-access"
    assert codes[missing]["severity"] == "error"
    assert codes["torch.cpu-build"]["remediation"]["steps"]
    if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists():
        assert codes["cuda.nvcc-without-driver"]["remediation"]["steps"]
    env = {**os.environ, "ENVDOCTOR_EXPECT": "gpu"}
    assert _envdoctor("check", env=env).returncode == 1


def test_check_never_imports_torch_in_its_own_process(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from envdoctor.cli.main import dispatch\n"
        "dispatch(['check', '--json'])\n"
        "print('TORCH-LOADED' if 'torch' in sys.modules else 'TORCH-ABSENT', file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert "TORCH-ABSENT" in result.stderr
    assert json.loads(result.stdout)["facts"]["torch"][
        "torch"
    ]  # and torch *was* inspected (in a child)


def test_python_dash_m_and_version() -> None:
    result = _envdoctor("--version")
    assert result.returncode == 0 and result.stdout.startswith("envdoctor ")
