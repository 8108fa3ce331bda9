"""`envdoctor probe`: verdict line, exit codes, formats, gates, and the watchdog's hard budget."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.platform.host import Identity
from envdoctor.platform.nvml import NvmlSession
from tests.conftest import PYTHON, SCENARIO_NAMES
from tests.fakes.host import FakeHost
from tests.fleet.conftest import promtool_check
from tests.runner import invoke as cli_invoke
from tests.runner import run_probe

ROOT = Path(__file__).resolve().parents[2]
UNHEALTHY = {"cvd_hides_all", "driver_mismatch", "gpu_lost", "memory_held", "mig_enabled"}
UNHEALTHY |= {"no_driver", "no_permission", "nouveau_loaded", "uvm_missing"}
UNHEALTHY |= {"mismatch_old_module", "memory_held_elsewhere", "memory_held_some_gpus"}
UNHEALTHY |= {"nodes_root_only", "nouveau_builtin", "driver_module_not_loaded"}
# The probe tier judges the fabric by NVML's state and reads only /dev/kmsg: an HGX A100 whose
# fabric manager failed, or Xids only the journal shows, need `envdoctor check`.
UNHEALTHY |= {"xid_reboot_required", "fabric_manager_stopped"}
UNHEALTHY |= {"container_cgroup_denied", "container_require_cuda", "container_libs_missing"}
UNHEALTHY |= {"container_capabilities", "container_image_driver", "host_cdi_stale"}
UNHEALTHY |= {"host_cdi_missing", "host_cdi_conflict"}
# NVML blocked on one GPU, or crashed in one query (issue 34): the probe must not say healthy
UNHEALTHY |= {"gpu_not_responding", "nvml_crashed"}
# issue 39: the driver asks for a reset, a failed row remap, the shutdown temperature
UNHEALTHY |= {"recovery_reset", "row_remap_failed", "thermal_shutdown", "xid_consequences"}


def invoke(scenario: str, *args: str, **overrides: object):  # type: ignore[no-untyped-def]  # click's Result
    host = FakeHost.scenario(scenario, **overrides)
    return cli_invoke(["probe", *args], obj=AppContext(host=host, python=PYTHON))


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_one_verdict_line_of_at_most_80_bytes(scenario: str) -> None:
    result = invoke(scenario)
    expected = 1 if scenario in UNHEALTHY else 0
    assert result.exit_code == expected, result.output
    assert result.output.endswith("\n") and result.output.count("\n") == 1
    line = result.output.rstrip("\n")
    assert len(line.encode("utf-8")) <= 80
    assert (
        line.startswith("unhealthy: ") if expected else line.startswith(("healthy: ", "healthy ("))
    )


def test_starts_neither_torch_nor_nvcc() -> None:
    """NVML, /proc, /dev and the loader's cache file: no process at all (torch, nvcc, ldconfig)."""
    host = FakeHost.scenario("healthy_h100")
    result = cli_invoke(["probe", "--json"], obj=AppContext(host=host, python=PYTHON))
    assert host.ran == []
    facts = json.loads(result.output)["facts"]
    assert facts["torch"]["torch"]["absent"].startswith("not probed by the fast tier")
    assert facts["env"]["nvcc"]["absent"].startswith("not probed by the fast tier")
    assert "found" in facts["libraries"]


def test_a_cuda_stub_shadowing_libcuda_fails_the_probe() -> None:
    """The stub first on LD_LIBRARY_PATH breaks every CUDA program in the container."""
    stubs = "/usr/local/cuda/lib64/stubs"
    result = invoke(
        "healthy_h100", env={"LD_LIBRARY_PATH": stubs}, files={f"{stubs}/libcuda.so": ""}
    )
    assert result.exit_code == 1
    assert result.output.startswith("unhealthy: libs.shadowed")


def test_verdicts_name_the_problem() -> None:
    assert invoke("healthy_h100").output == "healthy: 1x NVIDIA H100 80GB HBM3, driver 580.159.04\n"
    assert invoke("gpu_lost").output.startswith("unhealthy: gpu.lost: GPU 1 ")


def test_verbose_lists_each_finding_after_the_verdict() -> None:
    lines = invoke("driver_mismatch", "-v").output.splitlines()
    assert lines[0].startswith("unhealthy: driver.version-mismatch")
    assert any(line.startswith("  error   driver.version-mismatch: ") for line in lines[1:])


def test_json() -> None:
    result = invoke("memory_held", "--json")
    data = json.loads(result.output)
    assert (data["kind"], data["schema_version"]) == ("probe", 2)
    assert (
        (data["status"], data["exit_code"]) == ("unhealthy", result.exit_code) == ("unhealthy", 1)
    )
    assert data["verdict"].startswith("unhealthy: gpu.memory-held")
    assert data["findings"][0]["code"] == "gpu.memory-held"
    assert data["facts"]["torch"]["torch"]["absent"].startswith("not probed")
    assert data["budget_s"] == 1.0


def test_requirements_gate_a_healthy_node() -> None:
    ok = invoke("healthy_h100", "--require", "gpus>=1", "--require", "model~=H100")
    assert ok.exit_code == 0
    gated = invoke("healthy_h100", "--require", "gpus>=8", "--require", "memory_free>=70GiB", "-v")
    assert gated.exit_code == 1
    lines = gated.output.splitlines()
    assert lines[0] == "unhealthy: require.unmet: Requirement gpus>=8 not met: 1"
    assert "  require gpus>=8: unmet (1)" in lines
    assert "  require memory_free>=70GiB: met (GPU 0: 78.6 GiB)" in lines
    data = json.loads(invoke("healthy_h100", "--require", "gpus>=8", "--json").output)
    assert data["requirements"] == [{"requirement": "gpus>=8", "verdict": "unmet", "actual": "1"}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--require", "gpus>>8"], "gpus needs a whole number"),
        (["--require", "vram>=8"], "unknown requirement key 'vram'"),
        (["--timeout", "0"], "--timeout must be a positive number"),
        (["--timeout", "soon"], "--timeout: input should be a valid number"),
        (["--format", "xml"], "--format: 'xml' is not one of 'text', 'json', 'prometheus'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = invoke("healthy_h100", *args)
    assert result.exit_code == 2
    assert message in result.output


def test_help_exits_0_without_probing() -> None:
    host = FakeHost.scenario("gpu_lost")
    result = cli_invoke(["probe", "--help"], obj=AppContext(host=host, python=PYTHON))
    assert result.exit_code == 0
    assert result.output.startswith("Usage: envdoctor probe ")
    assert "--require EXPR" in result.output and "gpu.lost" not in result.output


def test_prometheus_to_stdout_and_atomically_to_a_file(tmp_path: Path) -> None:
    result = invoke("gpu_lost", "--format", "prometheus")
    assert result.exit_code == 1
    assert 'envdoctor_finding{code="gpu.lost",severity="error"} 1' in result.output
    assert 'envdoctor_info{version="' in result.output and 'command="probe"' in result.output
    out = tmp_path / "envdoctor.prom"
    result = invoke("gpu_lost", "--format", "prometheus", "-o", str(out))
    assert result.output.startswith("unhealthy: gpu.lost") and result.output.count("\n") == 1
    assert 'envdoctor_status{status="unhealthy"} 1' in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envdoctor.prom"]
    promtool_check(out)


# --- the watchdog -----------------------------------------------------------------------------


class HangingHost(FakeHost):
    """A healthy machine on which one path's read (or NVML's start) never returns."""

    def __init__(self, hang_on: str) -> None:
        super().__init__(FakeHost.scenario("healthy_h100").data)
        self.hang_on = hang_on
        self.release = threading.Event()

    def read_text(self, path: str, *, limit: int = 1 << 20):  # type: ignore[no-untyped-def]  # as FakeHost
        if path == self.hang_on:
            self.release.wait(30)
        return super().read_text(path, limit=limit)

    def read_bytes(self, path: str, *, limit: int = 1 << 20):  # type: ignore[no-untyped-def]  # as FakeHost
        if path == self.hang_on:
            self.release.wait(30)
        return super().read_bytes(path, limit=limit)

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        if self.hang_on == "nvml":
            self.release.wait(30)
        return super().open_nvml(timeout=timeout, init_timeout=init_timeout, remaining=remaining)

    def identity(self) -> Identity:
        if self.hang_on == "identity":  # getpwuid through a dead LDAP server
            self.release.wait(30)
        return super().identity()


@pytest.mark.parametrize(
    ("hang_on", "stuck"),
    [
        ("/proc/modules", "stuck reading /proc/modules"),
        ("/etc/ld.so.cache", "stuck reading /etc/ld.so.cache"),
        ("nvml", "stuck initialising NVML"),
        ("identity", "stuck looking up the current user"),
    ],
)
def test_watchdog_answers_unknown_within_the_budget(hang_on: str, stuck: str) -> None:
    host = HangingHost(hang_on)
    exits: list[int] = []

    def hard_exit(code: int) -> None:  # stands in for os._exit so pytest survives
        exits.append(code)
        host.release.set()

    out = io.StringIO()
    started = time.monotonic()
    code = run_probe(
        ["--timeout", "0.3"], host=host, python=PYTHON, stdout=out, hard_exit=hard_exit
    )
    elapsed = time.monotonic() - started
    assert exits == [2] and code == 2
    assert out.getvalue() == f"unknown: no verdict within 0.3 s; {stuck}\n"
    assert elapsed < 1.5


def probe_on_root(root: Path, *args: str, timeout: float = 15) -> subprocess.CompletedProcess[str]:
    """The real probe in a child process, reading the machine under ``root`` (os._exit and all)."""
    script = (
        "import sys\n"
        "from envdoctor.platform.system import SystemHost\n"
        "from tests.runner import run_probe\n"
        "sys.exit(run_probe(sys.argv[2:], host=SystemHost(root=sys.argv[1])))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def hung_proc(tmp_path: Path) -> Path:
    """A root whose /proc/modules is a FIFO with no writer: opening it blocks forever."""
    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc" / "modules")
    return tmp_path


def test_hung_read_ends_the_real_process_with_exit_2(hung_proc: Path) -> None:
    started = time.monotonic()
    result = probe_on_root(hung_proc, "--timeout", "0.5")
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert result.stdout == "unknown: no verdict within 0.5 s; stuck reading /proc/modules\n"
    assert elapsed < 5  # the budget plus the interpreter's start, never a hang


def test_hung_read_with_stderr_closed_still_ends_with_exit_2(hung_proc: Path) -> None:
    """Started with ``2>&-`` (sys.stderr is None): the watchdog's flush skips the missing
    stream instead of dying on it and leaving the process hung."""
    script = (
        "import sys\n"
        "from envdoctor.platform.system import SystemHost\n"
        "from tests.runner import run_probe\n"
        "sys.exit(run_probe(sys.argv[2:], host=SystemHost(root=sys.argv[1])))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(hung_proc), "--timeout", "0.5"],
        stdout=subprocess.PIPE,
        text=True,
        timeout=15,
        cwd=ROOT,
        preexec_fn=lambda: os.close(2),
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == "unknown: no verdict within 0.5 s; stuck reading /proc/modules\n"


def test_hung_read_still_writes_json_and_the_metrics_file(hung_proc: Path, tmp_path: Path) -> None:
    data = json.loads(probe_on_root(hung_proc, "--timeout", "0.4", "--json").stdout)
    assert (data["status"], data["exit_code"]) == ("unknown", 2)
    out = tmp_path / "envdoctor.prom"
    result = probe_on_root(hung_proc, "--timeout", "0.4", "--format", "prometheus", "-o", str(out))
    assert result.returncode == 2
    text = out.read_text()
    assert 'envdoctor_status{status="unknown"} 1' in text
    assert "stuck reading /proc/modules" in text
    promtool_check(out)


# What the probe's start-up must not pay for (see docs/fleet.md, "start-up"): torch and rich
# (Typer's fancy help) never; the others are what a plain run does not use (tables, gates,
# formats, the torch child). Typer itself loads subprocess and shutil: a child process the probe
# never starts is checked by tests/fleet's fake hosts, not by what is imported.
HEAVY = (
    "torch",
    "rich",
    "click",
    "argparse",
    "json",
    "concurrent.futures",
    "yaml",
    "packaging",
    "envdoctor.compat.tables",
    "envdoctor.fleet.requirements",
    "envdoctor.probes.torch_build",
)


def test_probe_process_never_imports_what_it_does_not_use() -> None:
    # The entry point ends with os._exit: look at the modules just before it.
    script = (
        f"HEAVY = {HEAVY!r}\n"
        "import os, sys\n"
        "sys.argv = ['envdoctor', 'probe', '--timeout', '10']\n"
        "real_exit = os._exit\n"
        "def exit_(code):\n"
        "    found = sorted(m for m in HEAVY if m in sys.modules)\n"
        "    print(found, file=sys.stderr, flush=True)\n"
        "    real_exit(code)\n"
        "os._exit = exit_\n"
        "from envdoctor.cli import entry\n"
        "entry.main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode in (0, 1, 2)
    assert result.stderr.strip().splitlines()[-1] == "[]"
    assert len(result.stdout.splitlines()[0].encode()) <= 80


def test_unwritable_output_is_one_line_and_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "envdoctor.prom"
    result = invoke("healthy_h100", "--format", "prometheus", "-o", str(target))
    assert result.exit_code == 2
    assert result.output.startswith("envdoctor: error: ")
    assert "cannot write the metrics file" in result.output and "Traceback" not in result.output
