"""The one interpretation of the facts (model/views.py), item by item of issue 12.

Each test replays a recorded machine and asserts what a user reads: which driver version is
judged, which module state is shown, what a fix step says. Every one of them failed before the
interpretation layer.
"""

from __future__ import annotations

from collections.abc import Callable

from envdoctor.engine import Report
from envdoctor.model.finding import Finding
from envdoctor.model.outcome import Outcome
from envdoctor.model.views import Intent, driver_view, module_state
from tests.conftest import scenario_facts

Scenario = Callable[..., Report]


def _finding(report: Report, code: str) -> Finding:
    return next(f for f in report.findings if f.code == code)


def _steps(finding: Finding) -> str:
    assert finding.remediation is not None
    return "\n".join(finding.remediation.steps)


def _outcomes(report: Report) -> dict[str, tuple[Outcome, str]]:
    return {c.rule.name: (c.outcome, c.reason) for c in report.checks}


def test_a_cpu_machine_is_healthy_and_its_cpu_torch_is_right(scenario_report: Scenario) -> None:
    report = scenario_report("cpu_only")
    assert report.exit_code == 0
    assert [f.code for f in report.findings] == ["machine.cpu-only"]
    outcomes = _outcomes(report)
    assert outcomes["torch.cuda-build"][0] is Outcome.NOT_APPLICABLE
    assert "CPU build of torch is the right one" in outcomes["torch.cuda-build"][1]
    assert outcomes["gpu.nvml"][0] is Outcome.NOT_APPLICABLE


def test_expecting_a_gpu_makes_the_same_machine_unhealthy(scenario_report: Scenario) -> None:
    report = scenario_report("cpu_only", intent=Intent.of("gpu", None))
    assert report.exit_code == 1
    assert {f.code for f in report.findings} == {"driver.not-installed", "torch.cpu-build"}
    missing = _finding(report, "driver.not-installed")
    assert dict(missing.evidence)["a GPU is expected"] == "--expect gpu"
    assert "Run on a machine with an NVIDIA GPU" in (missing.remediation.summary or "")  # type: ignore[union-attr]  # it has one
    assert Intent.of(None, "gpu").source == "ENVDOCTOR_EXPECT=gpu"
    assert Intent.of("cpu", "gpu") == Intent(False, "--expect cpu")


def test_the_installed_driver_is_judged_not_the_stale_module() -> None:
    """550.54.14 loaded, 580.159.04 installed: torch's CUDA 13.0 is judged against 580."""
    view = driver_view(scenario_facts("mismatch_old_module"))
    assert view.loaded is not None and view.loaded.version == "550.54.14"
    assert view.version == "580.159.04" and view.mismatch
    assert "installed" in view.version_source


def test_a_stale_module_raises_no_driver_upgrade(scenario_report: Scenario) -> None:
    report = scenario_report("mismatch_old_module")
    codes = {f.code for f in report.findings}
    assert codes == {"driver.version-mismatch", "torch.cuda-unavailable"}
    assert "judged against" in dict(_finding(report, "driver.version-mismatch").evidence)


def test_built_in_modules_are_read_from_sys_module(scenario_report: Scenario) -> None:
    facts = scenario_facts("builtin_modules")
    state = module_state(facts, "nvidia")
    assert state.yes and "/sys/module/nvidia/initstate: live" in state.describe()
    assert state.refcount == 14 and set(state.holders) == {"nvidia_uvm", "nvidia_modeset"}
    report = scenario_report("builtin_modules")
    assert report.exit_code == 0
    assert "nvidia is loaded (/sys/module" in _outcomes(report)["driver.loaded"][1]


def test_unreadable_module_lists_say_unknown_not_no(scenario_report: Scenario) -> None:
    facts = scenario_facts(
        "builtin_modules",
        unreadable=["/proc/modules", "/sys/module"],
    )
    state = module_state(facts, "nouveau")
    assert not state.yes and not state.no
    assert state.describe().startswith("unknown (")


def test_built_in_nouveau_bound_to_the_gpu(scenario_report: Scenario) -> None:
    report = scenario_report("nouveau_builtin")
    nouveau = dict(_finding(report, "driver.nouveau-loaded").evidence)
    assert nouveau["nouveau loaded"].startswith("yes, built into the kernel")
    assert nouveau["GPUs bound to nouveau"] == "0000:18:00.0"
    outcomes = _outcomes(report)
    assert "driver.module-not-loaded" not in {f.code for f in report.findings}
    assert outcomes["driver.no-nouveau"][0] is Outcome.FAILED
    assert "driver.nouveau-loaded" in outcomes["gpu.nvml"][1]


def test_no_kill_for_a_process_in_another_pid_namespace(scenario_report: Scenario) -> None:
    steps = _steps(_finding(scenario_report("memory_held_elsewhere"), "gpu.memory-held"))
    assert "kill 4242" not in steps
    assert "not visible here" in steps and "stop it where it runs" in steps


def test_a_held_gpu_names_the_free_ones(scenario_report: Scenario) -> None:
    steps = _steps(_finding(scenario_report("memory_held_some_gpus"), "gpu.memory-held"))
    assert "CUDA_VISIBLE_DEVICES=1 " in steps and "<index>" not in steps
    assert "kill 4242" in steps


def test_root_only_nodes_need_the_driver_parameters(scenario_report: Scenario) -> None:
    steps = _steps(_finding(scenario_report("nodes_root_only"), "device.permission-denied"))
    assert "NVreg_DeviceFileMode" in steps and "usermod" not in steps


def test_group_nodes_need_the_group(scenario_report: Scenario) -> None:
    steps = _steps(_finding(scenario_report("no_permission"), "device.permission-denied"))
    assert "usermod -aG" in steps and "getent group 44" in steps


def test_a_lost_gpu_is_reset_by_its_pci_address(scenario_report: Scenario) -> None:
    steps = _steps(_finding(scenario_report("gpu_lost"), "gpu.lost"))
    assert "nvidia-smi -r -i 0000:2a:00.0" in steps and "<index>" not in steps


def test_a_cpu_torch_read_from_its_version_file_is_not_said_to_import(
    scenario_report: Scenario,
) -> None:
    report = scenario_report("cpu_wheel_on_gpu")
    outcomes = _outcomes(report)
    assert outcomes["torch.importable"][0] is Outcome.NOT_APPLICABLE
    assert outcomes["torch.cuda-available"][0] is Outcome.FAILED
    assert "torch.cpu-build" in outcomes["torch.cuda-available"][1]
    assert "torch.importable" not in {r.name for r in report.passed}


def test_nothing_passes_on_a_machine_without_a_driver(scenario_report: Scenario) -> None:
    report = scenario_report("no_driver")
    passed = {r.name for r in report.passed}
    assert not passed & {"driver.loaded", "gpu.nvml", "torch.cuda-available"}


def test_a_container_given_no_gpu_warns(scenario_report: Scenario) -> None:
    report = scenario_report("container_no_gpu")
    assert report.status == "healthy"
    finding = _finding(report, "container.no-gpu-access")
    assert finding.severity.label == "warning"
    assert "0000:18:00.0" in dict(finding.evidence)["NVIDIA PCI devices"]


def test_mig_instances_are_listed_by_uuid(scenario_report: Scenario) -> None:
    finding = _finding(scenario_report("mig_instances"), "gpu.mig-enabled")
    evidence = dict(finding.evidence)
    assert evidence["MIG device 0"].startswith("MIG-4b3a1c2e-9f0d-5e6a-8b7c-1d2e3f4a5b6c (")
    assert evidence["MIG device 1"].startswith("MIG-7e8f9a0b-1c2d-5e3f-9a4b-5c6d7e8f9a0b")
    steps = _steps(finding)
    assert "CUDA_VISIBLE_DEVICES=MIG-4b3a1c2e-9f0d-5e6a-8b7c-1d2e3f4a5b6c " in steps
    assert "MIG-…" not in steps


def test_a_container_on_a_host_without_a_gpu_is_told_to_move(scenario_report: Scenario) -> None:
    """The PCI bus a container sees is its host's: no NVIDIA GPU there means the host has none,
    so the fix is another host (a GPU node), not a driver or a VM's instance type."""
    report = scenario_report("cpu_only", intent=Intent.of("gpu", None), files={"/.dockerenv": ""})
    assert report.exit_code == 1
    missing = _finding(report, "driver.not-installed")
    assert "the PCI bus this container sees lists no NVIDIA GPU" in missing.title
    assert "nvidia.com/gpu" in _steps(missing) and "instance type" not in _steps(missing)
    assert "container.no-gpu-access" not in {f.code for f in report.findings}
