"""``recommend`` on machines whose NVML lists no (or half a) GPU: fix the driver, not a CPU wheel.

A CPU wheel on a machine with NVIDIA GPUs is what ``torch.cpu-build`` reports as an error, so
it is advised only where there is no NVIDIA hardware at all; elsewhere NVML's reason is kept.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.compat.loader import load_tables
from envdoctor.compat.recommend import Recommendation, machine_from_facts, recommend
from envdoctor.model.facts import Facts
from envdoctor.model.probed import Absent, Found, ProbeFailed
from tests import factories as f
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke

TABLES = load_tables()
CPU_WHEEL = "--index-url https://download.pytorch.org/whl/cpu"


def run(scenario: str, *args: str) -> tuple[int, str]:
    host = FakeHost.scenario(scenario)
    result = cli_invoke(["recommend", *args], obj=AppContext(host=host, python=PYTHON))
    return result.exit_code, result.output


def rec_for(facts: Facts) -> Recommendation:
    return recommend(TABLES, machine_from_facts(facts, TABLES))


def cpu_machine(**over: Any) -> Facts:
    """No NVIDIA anything: no module, no PCI function, no NVML library."""
    facts = f.facts(
        nvml=Absent("NVML library not found (libnvidia-ml.so.1): NVML Shared Library Not Found"),
        kernel=f.kernel(
            modules=f.modules("ecc"),
            driver=Absent("/proc/driver/nvidia/version does not exist"),
        ),
        host=f.host(nvidia_pci=Found(())),
    )
    return replace(facts, **over) if over else facts


# --- the reproducers, through the CLI ----------------------------------------------------------


def test_driver_mismatch_is_a_blocker_not_a_cpu_wheel(tmp_path: Path) -> None:
    snap = tmp_path / "driver_mismatch.json"
    collected = cli_invoke(
        ["collect", "--no-redact", "-o", str(snap)],
        obj=AppContext(host=FakeHost.scenario("driver_mismatch"), python=PYTHON),
    )
    assert collected.exit_code == 0, collected.output
    code, out = run("healthy_h100", "--snapshot", str(snap))
    assert code == 1, out
    assert CPU_WHEEL not in out and "CPU only" not in out
    assert "Fix first" in out
    assert "LibRmVersionMismatch: Driver/library version mismatch" in out
    assert "reload the NVIDIA kernel modules or reboot" in out


def test_driver_mismatch_json_names_the_blocker() -> None:
    code, out = run("driver_mismatch", "--json")
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1
    assert (data["status"], data["outcome"]) == ("unhealthy", "none")
    assert data["command"] is None and data["recommendation"] is None
    (blocker,) = data["blockers"]
    assert "Driver/library version mismatch" in blocker
    assert "the nvidia kernel module is loaded" in blocker


@pytest.mark.parametrize(
    ("scenario", "reason", "advice"),
    [
        ("no_driver", "NVML Shared Library Not Found", "install the NVIDIA driver"),
        ("nouveau_loaded", "DriverNotLoaded: Driver Not Loaded", "blacklist nouveau"),
    ],
)
def test_gpu_on_the_bus_without_a_driver_gets_no_cpu_wheel(
    scenario: str, reason: str, advice: str
) -> None:
    code, out = run(scenario)
    assert code == 1, out
    assert CPU_WHEEL not in out
    assert reason in out and advice in out
    assert "1 NVIDIA GPU is on the PCI bus" in out


@pytest.mark.parametrize(
    ("scenario", "line"),
    [
        ("gpu_lost", "GPU 1: GPU 1 (compute capability unknown: probe failed: GPUIsLost)"),
        ("no_permission", "GPU 0: GPU 0 (compute capability unknown: probe failed: NoPermission)"),
    ],
)
def test_a_gpu_whose_capability_is_unknown_keeps_the_reason(scenario: str, line: str) -> None:
    code, out = run(scenario)
    assert code == 0, out  # the wheel still follows from the driver; the GPU is noted, not judged
    assert line in out
    kind = line.rsplit(" ", 1)[-1].rstrip(")")
    assert f"compute capability unknown: probe failed: {kind}, not checked" in out


def test_json_gpu_carries_why_its_capability_is_unknown() -> None:
    _, out = run("gpu_lost", "--json")
    gpus = json.loads(out)["machine"]["gpus"]
    assert gpus[0]["compute_capability"] == "9.0" and "compute_capability_unknown" not in gpus[0]
    assert gpus[1]["compute_capability"] is None
    assert gpus[1]["compute_capability_unknown"] == "probe failed: GPUIsLost"


def test_healthy_machine_still_gets_its_cuda_wheel() -> None:
    code, out = run("healthy_h100")
    assert code == 0 and "Fix first" not in out
    assert (
        "pip install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 --index-url https://download.pytorch.org/whl/cu130"
        in out
    )


# --- the rule, on facts --------------------------------------------------------------------------


def test_only_a_machine_without_nvidia_hardware_gets_the_cpu_wheel() -> None:
    rec = rec_for(cpu_machine())
    assert rec.status == "cpu-only" and rec.exit_code == 0 and not rec.blockers
    assert rec.cpu_command is not None and rec.cpu_command.endswith(CPU_WHEEL)


def test_driver_not_loaded_on_a_cpu_machine_is_still_the_cpu_wheel() -> None:
    rec = rec_for(cpu_machine(nvml=ProbeFailed("DriverNotLoaded", "Driver Not Loaded")))
    assert rec.status == "cpu-only" and rec.exit_code == 0


def test_loaded_module_alone_is_evidence_of_a_gpu() -> None:
    facts = cpu_machine(
        nvml=ProbeFailed("LibRmVersionMismatch", "Driver/library version mismatch"),
        kernel=f.kernel(),  # /proc/driver/nvidia/version: 580.159.04
        host=f.host(nvidia_pci=Absent("/sys/bus/pci/devices is not readable")),
    )
    rec = rec_for(facts)
    assert rec.exit_code == 1 and rec.cpu_command is None
    (blocker,) = rec.blockers
    assert "LibRmVersionMismatch: Driver/library version mismatch" in blocker
    assert "the nvidia kernel module is loaded" in blocker


def test_an_nvml_error_that_needs_a_driver_is_evidence_of_a_gpu() -> None:
    rec = rec_for(
        cpu_machine(
            nvml=ProbeFailed("NoPermission", "Insufficient Permissions"),
            host=f.host(nvidia_pci=Absent("/sys/bus/pci/devices is not readable")),
        )
    )
    assert rec.exit_code == 1 and rec.cpu_command is None
    (blocker,) = rec.blockers
    assert "NoPermission: Insufficient Permissions" in blocker
    assert "/dev/nvidiactl" in blocker


def test_nvml_that_lists_no_gpu_on_a_gpu_machine_is_a_blocker() -> None:
    facts = f.facts(nvml=f.nvml(gpus=(), device_count_error="Unknown: device count failed"))
    rec = rec_for(facts)
    assert rec.exit_code == 1 and rec.cpu_command is None
    assert "Unknown: device count failed" in rec.blockers[0]


def test_a_container_without_gpu_access_is_told_so() -> None:
    facts = f.facts(
        nvml=Absent("NVML library not found (libnvidia-ml.so.1): not mounted"),
        host=f.host(containers=("docker",)),
    )
    rec = rec_for(facts)
    assert rec.exit_code == 1 and rec.cpu_command is None
    assert "start the container with GPU access" in rec.blockers[0]


def test_unreadable_driver_version_with_gpus_is_not_the_cpu_wheel() -> None:
    facts = f.facts(
        nvml=f.nvml(driver_version=ProbeFailed("Unknown", "driver version failed")),
        kernel=f.kernel(driver=ProbeFailed("permission denied")),
    )
    rec = rec_for(facts)
    assert rec.exit_code == 1 and rec.cpu_command is None
    assert "probe failed: Unknown" in rec.blockers[0]
