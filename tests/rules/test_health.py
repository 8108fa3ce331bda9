"""Xid events, the NVLink fabric, persistence mode and nvcc against torch: facts to findings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from envdoctor.catalogs.xid import xid_catalog
from envdoctor.engine import evaluate
from envdoctor.kb import explain, load_default_kb, scan_bytes
from envdoctor.model.facts import (
    FabricFacts,
    FabricInfo,
    FabricManager,
    Facts,
    KernelLog,
    Nvcc,
    XidEvents,
)
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes.environment import probe_env
from envdoctor.probes.fabric import NO_FABRIC, probe_fabric
from envdoctor.rules import core_rules
from envdoctor.rules.health import is_data_centre, since_boot
from tests import factories as fx
from tests.conftest import scenario_facts
from tests.fakes.host import FakeHost

REBOOT = "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"


def findings(facts: Facts, code: str) -> list[Finding]:
    return [f for f in evaluate(facts, core_rules()).findings if f.code == code]


def xid(code: int, message: str = "", device: str = "0000:18:00", count: int = 1) -> XidEvents:
    text = message or f"NVRM: Xid (PCI:{device}): {code}, something"
    return XidEvents(device, code, count, 100.0, 200.0, text)


def xid_findings(facts: Facts) -> list[Finding]:
    """A GPU's Xid finding, or the node's application-fault one (issue 39)."""
    codes = ("gpu.xid-events", "gpu.xid-app-faults")
    return [f for f in evaluate(facts, core_rules()).findings if f.code in codes]


def with_log(*events: XidEvents, complete: bool = True) -> Facts:
    return fx.facts(kernel_log=Found(KernelLog("/dev/kmsg", events, complete)))


# --- Xid events ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [31, 95, 140, 163])
def test_check_and_explain_say_the_same_of_an_xid(code: int) -> None:
    """One catalog: the check's evidence and explain's note for a code carry the same words."""
    line = f"NVRM: Xid (PCI:0000:18:00): {code}, pid=77, name=python, something"
    (finding,) = xid_findings(with_log(xid(code, line)))
    kb = load_default_kb()
    (cause,) = [
        c for c in explain(scan_bytes(line.encode(), kb), kb).causes if c.id == "kernel.xid"
    ]
    entry = xid_catalog()[code]
    said = f"{entry.name}: {entry.meaning}"
    assert any(said == text for _, text in finding.evidence)
    assert f"Xid {code} ({entry.name}): {entry.meaning}" in cause.notes
    assert f"Action: {entry.action}" in cause.notes
    assert finding.remediation is not None
    assert f"Xid {code}: {entry.action}" in finding.remediation.steps


@pytest.mark.parametrize(
    ("code", "severity"),
    [(45, Severity.INFO), (48, Severity.WARNING), (119, Severity.WARNING)],
)
def test_an_xid_is_judged_by_its_catalog_class(code: int, severity: Severity) -> None:
    (finding,) = findings(with_log(xid(code)), "gpu.xid-events")
    assert finding.severity == severity
    assert finding.subject == "0"  # the NVML GPU at PCI 00000000:18:00.0
    assert finding.title.startswith("GPU 0 (NVIDIA H100 80GB HBM3) logged 1 Xid event since boot")
    entry = xid_catalog()[code]
    assert (f"Xid {code}, first 100 s after boot", f"{entry.name}: {entry.meaning}") in (
        finding.evidence
    )
    assert finding.remediation is not None
    assert f"Xid {code}: {entry.action}" in finding.remediation.steps


def test_an_xid_missing_from_the_catalog_warns_and_points_to_nvidias() -> None:
    (finding,) = findings(with_log(xid(999)), "gpu.xid-events")
    assert finding.severity == Severity.WARNING
    assert finding.remediation is not None
    assert any("docs.nvidia.com/deploy/xid-errors" in s for s in finding.remediation.steps)


def test_the_latest_xid_154_asking_for_a_reboot_is_an_error() -> None:
    (finding,) = findings(with_log(xid(79), xid(154, REBOOT)), "gpu.xid-events")
    assert finding.severity == Severity.ERROR
    assert finding.title.endswith("the driver says it needs a node reboot")
    assert finding.remediation is not None and finding.remediation.needs_reboot


def test_a_recovery_that_went_back_to_none_is_history() -> None:
    back = "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    (finding,) = findings(with_log(xid(154, back, count=2)), "gpu.xid-events")
    assert finding.severity < Severity.ERROR
    assert "needs" not in finding.title


def test_events_on_several_gpus_give_one_finding_each() -> None:
    facts = replace(
        with_log(xid(119), xid(79, device="0000:19:00"), xid(48, device="0000:99:00")),
        nvml=fx.nvml(gpus=(fx.gpu(0), fx.gpu(1))),
    )
    got = {f.subject: f for f in findings(facts, "gpu.xid-events")}
    assert set(got) == {"0", "1", "0000:99:00"}
    assert got["0000:99:00"].title.startswith("the GPU at PCI 0000:99:00 logged")


def test_a_log_that_no_longer_reaches_boot_says_so() -> None:
    for code in (13, 48):  # the application's faults, and a GPU's own Xid
        (finding,) = xid_findings(with_log(xid(code), complete=False))
        assert any(label == "kernel log" and "earlier Xid" in v for label, v in finding.evidence)


def test_a_clean_log_passes_and_an_unreadable_one_is_a_note() -> None:
    assert findings(with_log(), "gpu.xid-events") == []
    unread = fx.facts(
        kernel_log=ProbeFailed("no kernel log could be read", detail="/dev/kmsg: permission denied")
    )
    (note,) = findings(unread, "gpu.xid-unchecked")
    assert note.severity == Severity.INFO and not note.inconclusive
    assert ("kernel log", "/dev/kmsg: permission denied") in note.evidence


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5.9, "5 s"), (119, "119 s"), (1500, "25 min"), (18_180, "5 h 03 min"), (384_211, "4 d 10 h")],
)
def test_times_since_boot_read_naturally(seconds: float, text: str) -> None:
    assert since_boot(seconds) == text


# --- the NVLink fabric ------------------------------------------------------------------------


def fabric_facts(
    state: str | None,
    *,
    status: str = "Success",
    nvswitches: tuple[str, ...] = (),
    service: object = Found("active (running)"),
    version: object = Found(fx.DRIVER),
) -> Facts:
    fabric = Found(FabricInfo(state, status, 0)) if state else Absent("NotSupported")
    return fx.facts(
        nvml=fx.nvml(gpus=(fx.gpu(0, fabric=fabric), fx.gpu(1, fabric=fabric))),
        fabric=FabricFacts(
            nvswitches=Found(nvswitches) if nvswitches else Absent("no NVSwitch"),
            manager=Found(FabricManager(service, version)),  # type: ignore[arg-type]  # Probed values
        ),
    )


def test_a_registered_fabric_without_a_local_fabric_manager_is_healthy() -> None:
    """GB200 compute nodes: the switch trays manage the fabric, no local service runs."""
    facts = fabric_facts(
        "completed", service=Absent("the nvidia-fabricmanager.service unit is not installed")
    )
    assert findings(facts, "fabric.not-ready") == []


@pytest.mark.parametrize("state", ["not-started", "in-progress"])
def test_gpus_still_registering_fail_with_802(state: str) -> None:
    (finding,) = findings(fabric_facts(state, service=Found("inactive (dead)")), "fabric.not-ready")
    assert finding.severity == Severity.ERROR and "error 802" in finding.title
    assert finding.title.startswith("NVLink fabric not ready: GPUs 0, 1 are not registered")
    assert ("nvidia-fabricmanager service", "inactive (dead)") in finding.evidence
    assert ("GPU 0 (NVIDIA H100 80GB HBM3)", f"fabric registration {state}") in finding.evidence


def test_a_failed_registration_is_named_with_nvmls_status() -> None:
    (finding,) = findings(fabric_facts("completed", status="Unknown"), "fabric.not-ready")
    assert (
        "GPU 1 (NVIDIA H100 80GB HBM3)",
        "fabric registration failed: Unknown",
    ) in finding.evidence


def test_hgx_a100_without_a_running_fabric_manager_is_an_error() -> None:
    switches = ("0000:07:00.0", "0000:08:00.0")
    for service in (
        Found("failed (failed)"),
        Absent("the nvidia-fabricmanager.service unit is not installed"),
    ):
        (finding,) = findings(
            fabric_facts(None, nvswitches=switches, service=service), "fabric.not-ready"
        )
        assert "the fabric manager is not running on this NVSwitch system" in finding.title


def test_a_service_state_that_could_not_be_read_is_not_a_fault() -> None:
    facts = fabric_facts(None, nvswitches=("0000:07:00.0",), service=ProbeFailed("no systemd"))
    assert findings(facts, "fabric.not-ready") == []


def test_a_fabric_manager_of_another_version_fails_now_or_at_the_next_restart() -> None:
    (broken,) = findings(
        fabric_facts("in-progress", version=Found("580.95.05")), "fabric.manager-version"
    )
    assert broken.severity == Severity.ERROR and "refuses to start" in broken.title
    (later,) = findings(
        fabric_facts("completed", version=Found("580.95.05")), "fabric.manager-version"
    )
    assert later.severity == Severity.WARNING and "next restart" in later.title
    assert findings(fabric_facts("completed"), "fabric.manager-version") == []


def test_the_fabric_manager_is_asked_only_where_there_is_a_fabric() -> None:
    host = FakeHost.scenario("healthy_h100")
    facts = probe_fabric(host, scenario_facts("healthy_h100").nvml, deadline=Deadline(5))
    assert facts.manager == Absent(NO_FABRIC)
    assert host.ran == []


def test_fabric_manager_service_and_version_are_read() -> None:
    host = FakeHost.scenario("fabric_manager_stopped")
    facts = probe_fabric(host, scenario_facts("fabric_manager_stopped").nvml, deadline=Deadline(5))
    assert facts.nvswitches == Found(
        ("0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0")
    )
    assert facts.manager == Found(FabricManager(Found("inactive (dead)"), Found("580.159.04")))


@pytest.mark.parametrize(
    ("command", "service"),
    [
        (
            {"stdout": "LoadState=not-found\nActiveState=inactive\nSubState=dead\n"},
            Absent("the nvidia-fabricmanager.service unit is not installed"),
        ),
        (
            {
                "returncode": 1,
                "stderr": "System has not been booted with systemd as init system (PID 1). Can't operate.\n",
            },
            ProbeFailed(
                "cannot ask systemd",
                detail="`systemctl show nvidia-fabricmanager.service …` exited 1: System has not "
                "been booted with systemd as init system (PID 1). Can't operate.",
            ),
        ),
    ],
)
def test_the_service_state_keeps_why_it_is_missing(
    command: dict[str, object], service: object
) -> None:
    argv = [
        "systemctl",
        "show",
        "nvidia-fabricmanager.service",
        "--property=LoadState,ActiveState,SubState",
    ]
    host = FakeHost.scenario(
        "fabric_manager_stopped",
        commands=[
            {"argv": argv, **command},
            {"argv": ["nv-fabricmanager", "--version"], "stdout": "?"},
        ],
    )
    facts = probe_fabric(host, scenario_facts("fabric_manager_stopped").nvml, deadline=Deadline(5))
    assert isinstance(facts.manager, Found)
    assert facts.manager.value.service == service
    assert isinstance(facts.manager.value.version, ProbeFailed)


# --- persistence mode ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data_centre"),
    [
        ("NVIDIA H100 80GB HBM3", True),
        ("NVIDIA A100-SXM4-80GB", True),
        ("Tesla V100-SXM2-16GB", True),
        ("NVIDIA L40S", True),
        ("NVIDIA GH200 480GB", True),
        ("NVIDIA A10G", True),
        ("NVIDIA GeForce RTX 4090", False),
        ("NVIDIA RTX A6000", False),
        ("Quadro RTX 8000", False),
        ("", False),
    ],
)
def test_data_centre_gpus_by_name(name: str, data_centre: bool) -> None:
    assert is_data_centre(fx.gpu(0, name=Found(name))) is data_centre


def test_persistence_off_is_a_note_on_data_centre_gpus_only() -> None:
    off = fx.gpu(0, persistence_mode=Found(False))
    (note,) = findings(fx.facts(nvml=fx.nvml(gpus=(off,))), "gpu.persistence-off")
    assert note.severity == Severity.INFO and note.subject == "0"
    assert note.remediation is not None
    assert note.remediation.steps[0].startswith("sudo systemctl enable --now nvidia-persistenced")
    geforce = replace(off, name=Found("NVIDIA GeForce RTX 4090"))
    assert findings(fx.facts(nvml=fx.nvml(gpus=(geforce,))), "gpu.persistence-off") == []
    wsl = fx.facts(nvml=fx.nvml(gpus=(off,)), host=replace(fx.host(), wsl=True))
    assert findings(wsl, "gpu.persistence-off") == []


# --- nvcc against torch -------------------------------------------------------------------------


def nvcc_facts(version: str, torch_cuda: str = "13.0", **variables: str) -> Facts:
    env = fx.env(variables, build_nvcc=Found(Nvcc(f"/usr/local/cuda-{version}/bin/nvcc", version)))
    return fx.facts(env=env, torch=fx.torch(Found(fx.torch_build(cuda=torch_cuda))))


def test_another_major_cuda_in_nvcc_fails_extension_builds() -> None:
    (finding,) = findings(nvcc_facts("12.4"), "cuda.nvcc-torch-mismatch")
    assert finding.severity == Severity.ERROR
    evidence = dict(finding.evidence)
    assert evidence["torch.utils.cpp_extension says"] == (
        "The detected CUDA version (12.4) mismatches the version that was used to compile "
        "PyTorch (13.0)"
    )
    assert evidence["found through"] == "PATH (no $CUDA_HOME set)"
    assert finding.remediation is not None
    assert "export CUDA_HOME=/usr/local/cuda-13.0; export PATH=$CUDA_HOME/bin:$PATH" in (
        finding.remediation.steps
    )


def test_another_minor_cuda_is_a_warning_and_the_same_passes() -> None:
    (finding,) = findings(
        nvcc_facts("12.6", "12.8", CUDA_HOME="/usr/local/cuda-12.6"), "cuda.nvcc-torch-mismatch"
    )
    assert finding.severity == Severity.WARNING
    assert dict(finding.evidence)["found through"] == "$CUDA_HOME=/usr/local/cuda-12.6"
    assert findings(nvcc_facts("13.0"), "cuda.nvcc-torch-mismatch") == []


def test_a_cpu_torch_has_no_cuda_to_compare() -> None:
    assert findings(nvcc_facts("12.4", torch_cuda=""), "cuda.nvcc-torch-mismatch") == []


def test_torch_builds_with_cuda_home_before_the_nvcc_on_path() -> None:
    host = FakeHost.scenario(
        "nvcc_mismatch",
        env={"CUDA_HOME": "/usr/local/cuda-13.0"},
        files={"/usr/local/cuda-13.0/bin/nvcc": ""},
        commands=[
            {
                "argv": ["nvcc", "--version"],
                "stdout": "Cuda compilation tools, release 12.4, V12.4.131\n",
            },
        ],
    )
    env = probe_env(host, deadline=Deadline(5))
    assert isinstance(env.nvcc, Found) and env.nvcc.value.path == "/usr/local/cuda-12.4/bin/nvcc"
    assert isinstance(env.build_nvcc, Found)
    assert env.build_nvcc.value.path == "/usr/local/cuda-13.0/bin/nvcc"
    assert len(host.ran) == 2  # two different toolkits: each asked once


def test_one_nvcc_is_asked_once() -> None:
    host = FakeHost.scenario("nvcc_mismatch")
    env = probe_env(host, deadline=Deadline(5))
    assert env.nvcc == env.build_nvcc and isinstance(env.nvcc, Found)
    assert len(host.ran) == 1


def test_a_hung_nvcc_is_asked_once_too() -> None:
    """The toolkit's nvcc and the one extensions build with are the same binary: its timeout is
    paid once, not twice."""
    host = FakeHost.scenario(
        "nvcc_mismatch", commands=[{"argv": ["nvcc", "--version"], "status": "timeout"}]
    )
    env = probe_env(host, deadline=Deadline(5))
    assert isinstance(env.nvcc, ProbeFailed) and env.build_nvcc == env.nvcc
    assert len(host.ran) == 1


def test_cuda_home_without_a_toolkit_warns_with_a_cuda_torch() -> None:
    host = FakeHost.scenario("healthy_h100", env={"CUDA_HOME": "/opt/cuda-gone"})
    env = probe_env(host, deadline=Deadline(5))
    assert env.build_nvcc == Absent("$CUDA_HOME is '/opt/cuda-gone', which has no bin/nvcc")
    facts = fx.facts(env=fx.env({"CUDA_HOME": "/opt/cuda-gone"}, build_nvcc=env.build_nvcc))
    (finding,) = findings(facts, "cuda.cuda-home-invalid")
    assert finding.severity == Severity.WARNING


def test_a_relative_cuda_home_is_reported_and_nothing_under_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA_HOME=cuda names ./cuda/bin/nvcc from wherever a build runs: envdoctor says so and
    does not run the nvcc that the current directory holds (root may run it in anyone's)."""
    marker = tmp_path / "ran"
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\ntouch {marker}\necho 'Cuda compilation tools, release 12.1'\n")
    nvcc.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        host = SystemHost(environ={var: "cuda", "PATH": str(tmp_path / "empty")})
        env = probe_env(host, deadline=Deadline(10))
        assert env.build_nvcc == Absent(
            f"${var} is 'cuda', a relative path: it depends on the directory a build runs from"
        )
        assert not (isinstance(env.nvcc, Found) and env.nvcc.value.path.startswith("cuda"))
        assert not marker.exists(), "the current directory's nvcc ran"
    facts = fx.facts(env=fx.env({"CUDA_PATH": "cuda"}, build_nvcc=env.build_nvcc))
    (finding,) = findings(facts, "cuda.cuda-home-invalid")
    assert "a relative path" in dict(finding.evidence)["CUDA toolkit"]
    assert finding.title.startswith("CUDA_PATH points to no CUDA toolkit")  # the one set
