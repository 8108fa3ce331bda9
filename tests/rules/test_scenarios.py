"""Every recorded scenario, replayed through the Host seam, gives exactly its diagnosis."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from envdoctor.engine import Report
from tests.conftest import SCENARIO_NAMES

EXPECTED: dict[str, tuple[str, set[str]]] = {
    "healthy_h100": ("healthy", set()),
    "no_driver": ("unhealthy", {"driver.not-installed", "torch.cuda-unavailable"}),
    "driver_mismatch": ("unhealthy", {"driver.version-mismatch", "torch.cuda-unavailable"}),
    # a kernel upgrade DKMS built no module for: the user-space driver is there, nvidia is not
    "driver_module_not_loaded": (
        "unhealthy",
        {"driver.module-not-loaded", "torch.cuda-unavailable"},
    ),
    "nouveau_loaded": ("unhealthy", {"driver.nouveau-loaded", "torch.cuda-unavailable"}),
    "uvm_missing": ("unhealthy", {"device.node-missing", "torch.cuda-unavailable"}),
    "no_permission": ("unhealthy", {"device.permission-denied", "torch.cuda-unavailable"}),
    "cpu_wheel_on_gpu": ("unhealthy", {"torch.cpu-build"}),
    "uv_venv_cpu_wheel": ("unhealthy", {"torch.cpu-build"}),
    "conda_env_torch": ("unhealthy", {"torch.cpu-build"}),
    "cpu_torchvision_cuda_torch": ("unhealthy", {"torch.companions-mismatched"}),
    "gpu_lost": ("unhealthy", {"gpu.lost"}),
    "gpu_not_responding": ("unhealthy", {"gpu.not-responding"}),
    "nvml_crashed": ("unhealthy", {"gpu.nvml-crashed"}),
    "cvd_hides_all": ("unhealthy", {"env.cuda-visible-devices", "torch.cuda-unavailable"}),
    "mig_enabled": ("unhealthy", {"gpu.mig-enabled", "torch.cuda-unavailable"}),
    "memory_held": ("unhealthy", {"gpu.memory-held"}),
    "torch_import_fails": ("unhealthy", {"torch.import-failed"}),
    "torch_probe_hangs": ("unknown", {"torch.probe-failed"}),
    "cpu_only": ("healthy", {"machine.cpu-only"}),
    "mig_instances": ("healthy", {"gpu.mig-enabled"}),
    "container_no_gpu": ("healthy", {"container.no-gpu-access"}),
    "builtin_modules": ("healthy", set()),
    "mismatch_old_module": ("unhealthy", {"driver.version-mismatch", "torch.cuda-unavailable"}),
    "nouveau_builtin": ("unhealthy", {"driver.nouveau-loaded", "torch.cuda-unavailable"}),
    "memory_held_elsewhere": ("unhealthy", {"gpu.memory-held"}),
    "memory_held_some_gpus": ("unhealthy", {"gpu.memory-held"}),
    "nodes_root_only": (
        "unhealthy",
        {"device.permission-denied", "gpu.nvml-failed", "torch.cuda-unavailable"},
    ),
    "xid_reboot_required": ("unhealthy", {"gpu.lost", "gpu.xid-events"}),
    "xid_app_faults": ("healthy", {"gpu.xid-app-faults"}),
    # issue 39: the per-GPU health the driver reports
    "xid_consequences": (
        "unhealthy",
        {"gpu.xid-events", "gpu.recovery-required", "gpu.ecc-uncorrectable"},
    ),
    "xid_app_storm": ("healthy", {"gpu.xid-app-faults"}),
    "row_remap_pending": ("healthy", {"gpu.memory-repair-pending"}),
    "row_remap_failed": ("unhealthy", {"gpu.memory-repair-failed", "gpu.ecc-uncorrectable"}),
    "volta_retirement_pending": ("healthy", {"gpu.memory-repair-pending"}),
    "recovery_reset": ("unhealthy", {"gpu.recovery-required"}),
    "thermal_shutdown": ("unhealthy", {"gpu.temperature", "gpu.throttled"}),
    "persistence_off_multi_gpu": ("healthy", {"gpu.persistence-off"}),
    "xid_in_journal": ("healthy", {"gpu.xid-events"}),
    "kernel_log_unreadable": ("healthy", {"gpu.xid-unchecked"}),
    "fabric_manager_stopped": ("unhealthy", {"fabric.not-ready", "torch.cuda-unavailable"}),
    "fabric_manager_mismatch": (
        "unhealthy",
        {"fabric.not-ready", "fabric.manager-version", "torch.cuda-unavailable"},
    ),
    "persistence_off": ("healthy", {"gpu.persistence-off"}),
    # the interconnect (issue 39): the GPU or the port that matters, the others not named
    "hgx_nvlink_down": (
        "unhealthy",
        {"nvlink.links-down", "nvlink.errors-growing", "nvlink.errors-counted"},
    ),
    "pcie_p2p_blocked": (
        "healthy",
        {
            "p2p.unavailable",
            "pcie.acs-redirect",
            "pcie.iommu-translated",
            "pcie.link-degraded",
            "pcie.replays-growing",
            "pcie.aer-errors",
        },
    ),
    "vm_p2p_blocked": (
        "healthy",
        {
            "p2p.unavailable",
            "pcie.acs-redirect",
            "pcie.link-degraded",
            "pcie.replays-growing",
            "pcie.aer-errors",
        },
    ),
    "nvcc_mismatch": ("unhealthy", {"cuda.nvcc-torch-mismatch"}),
    "ld_preload_tcmalloc": ("healthy", {"env.ld-preload"}),
    # the container layer (docs/containers.md): one container finding per cause, and torch's
    # own symptom where torch is a CUDA build
    "container_cgroup_denied": (
        "unhealthy",
        {"container.cgroup-denied", "torch.cuda-unavailable"},
    ),
    "container_libs_missing": (
        "unhealthy",
        {"container.driver-libs-missing", "torch.cuda-unavailable"},
    ),
    "container_capabilities": (
        "unhealthy",
        {"container.driver-capabilities", "torch.cuda-unavailable"},
    ),
    # the image's 550 libcuda is also too old for torch's CUDA 13.0: the same fix clears both
    "container_image_driver": (
        "unhealthy",
        {"container.library-mismatch", "torch.cuda-unavailable", "torch.driver-too-old"},
    ),
    "container_require_cuda": ("unhealthy", {"container.require-cuda-unmet"}),
    "container_shm_small": ("healthy", {"container.shm-small"}),
    "host_toolkit_missing": ("healthy", {"container.toolkit-missing"}),
    "host_docker_snap": ("healthy", {"container.docker-snap"}),
    "host_k8s_default_runtime": ("healthy", {"container.default-runtime"}),
    "host_k8s_no_runtime": ("healthy", {"container.no-gpu-runtime"}),
    "host_docker_rootless": ("healthy", {"container.rootless-cgroups"}),
    "host_cdi_stale": ("unhealthy", {"container.cdi-stale"}),
    "host_cdi_missing": ("unhealthy", {"container.cdi-missing"}),
    "host_cdi_current": ("healthy", set()),
    "host_cdi_conflict": ("unhealthy", {"container.cdi-conflict"}),
    "host_cdi_default_kind": ("healthy", set()),
    "host_cdi_yml": ("healthy", {"container.cdi-missing"}),
    "host_cdi_shadowed": ("healthy", {"container.cdi-stale"}),
    "host_docker_cdi_mode": ("healthy", {"container.gpus-flag-refused"}),
    "host_k8s_dropin_replaces": ("healthy", {"container.no-gpu-runtime"}),
    "host_k8s_containerd2_no_runtime": ("healthy", {"container.no-gpu-runtime"}),
    "host_k8s_crio_no_runtime": ("healthy", {"container.no-gpu-runtime"}),
    "host_k8s_gpu_operator": ("healthy", set()),
    "host_podman_no_toolkit": ("healthy", {"container.toolkit-missing", "container.cdi-missing"}),
}


def test_every_scenario_has_an_expectation() -> None:
    assert set(SCENARIO_NAMES) == set(EXPECTED)


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_diagnosis(name: str, scenario_report: Callable[..., Report]) -> None:
    status, codes = EXPECTED[name]
    report = scenario_report(name)
    assert {f.code for f in report.findings} == codes
    assert report.status == status
    assert report.exit_code == {"healthy": 0, "unhealthy": 1, "unknown": 2}[status]


@pytest.mark.parametrize("name", [n for n in SCENARIO_NAMES if n != "healthy_h100"])
def test_every_problem_has_evidence_and_a_fix(
    name: str, scenario_report: Callable[..., Report]
) -> None:
    for finding in scenario_report(name).findings:
        assert finding.evidence, finding.code
        assert finding.remediation is not None and finding.remediation.steps, finding.code


def test_mismatch_names_both_versions(scenario_report: Callable[..., Report]) -> None:
    (finding,) = [
        f
        for f in scenario_report("driver_mismatch").findings
        if f.code == "driver.version-mismatch"
    ]
    text = str(finding.evidence)
    assert "580.95.05" in text and "580.159.04" in text
    assert finding.remediation is not None
    steps = finding.remediation.steps
    assert any("rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia" in s for s in steps)


def test_memory_held_names_the_pid_and_command(scenario_report: Callable[..., Report]) -> None:
    (finding,) = scenario_report("memory_held").findings
    evidence = dict(finding.evidence)
    assert evidence["PID 4242"] == "python train.py --epochs 100 holds 79.1 GiB"
    assert evidence["free"] == "210 MiB of 79.6 GiB"


def test_uvm_fix_creates_the_node(scenario_report: Callable[..., Report]) -> None:
    finding = next(
        f for f in scenario_report("uvm_missing").findings if f.code == "device.node-missing"
    )
    assert "/dev/nvidia-uvm" in dict(finding.evidence)["missing"]
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("sudo nvidia-modprobe -u -c 0")


def test_cuda_unavailable_keeps_torchs_reason(scenario_report: Callable[..., Report]) -> None:
    finding = next(
        f for f in scenario_report("no_driver").findings if f.code == "torch.cuda-unavailable"
    )
    assert dict(finding.evidence)["torch's reason"].startswith(
        "Found no NVIDIA driver on your system"
    )


def test_lost_gpu_is_named_and_the_healthy_one_is_not(
    scenario_report: Callable[..., Report],
) -> None:
    (finding,) = scenario_report("gpu_lost").findings
    assert finding.subject == "1"
    assert "0000:2a:00.0" in finding.title
    assert "0000:18:00.0" not in finding.title


def test_cpu_build_is_right_on_a_machine_without_nvidia_hardware(
    scenario_report: Callable[..., Report],
) -> None:
    report = scenario_report("cpu_only")
    assert report.exit_code == 0
    assert [f.code for f in report.findings] == ["machine.cpu-only"]
    outcome = {c.rule.name: c.outcome.value for c in report.checks}
    assert outcome["torch.cuda-build"] == "not-applicable"
    assert outcome["driver.installed"] == "not-applicable"


def test_volta_retirement_pending_says_neither_uncorrectable_nor_remapper(
    scenario_report: Callable[..., Report],
) -> None:
    """Issue 39's measured bug, on its recorded machine."""
    (finding,) = scenario_report("volta_retirement_pending").findings
    said = str(finding).lower()
    assert "uncorrectable" not in said and "remap" not in said
    assert ("page retirement", "pending: applied at the next GPU reset or driver reload") in (
        finding.evidence
    )


def test_thermal_shutdown_is_an_error_with_the_temperature_and_thresholds(
    scenario_report: Callable[..., Report],
) -> None:
    (hot,) = [
        f for f in scenario_report("thermal_shutdown").findings if f.code == "gpu.temperature"
    ]
    evidence = dict(hot.evidence)
    assert hot.severity.name == "ERROR"
    assert (evidence["temperature"], evidence["shutdown threshold"]) == ("92 °C", "92 °C (reached)")
