"""The five machines the fix scripts are tested on, as (Report, FixFacts) and a matching sandbox.

Reports are built directly from findings (the codes `envdoctor check` emits) over facts from
``tests.factories``, so these tests pin the remediation, not the rules. PIDs are above the
kernel's ``pid_max`` limit (4194304), so they can never be a real process of the test machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from envdoctor.engine import Report
from envdoctor.model.facts import DeviceNode, Facts, KernelDriver, KernelModule, NvmlErrorKind
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.probes.holders import Container, FixFacts, GpuHolder
from envdoctor.remedy import Plan, PlanOptions, build_plan
from tests import factories as f
from tests.remedy.sandbox import SESSION_CGROUP, START_TIME, Sandbox

PYTHON_PID = 5_000_001
DOCKER_PID = 5_000_002
PERSISTENCED_PID = 5_000_003
CONTAINER_ID = "c0ffee" + "0" * 58
CONTAINER_CGROUP = f"/system.slice/docker-{CONTAINER_ID}.scope"
PERSISTENCED_CGROUP = "/system.slice/nvidia-persistenced.service"
UBUNTU: Probed[tuple[str, ...]] = Found(("ubuntu", "debian"))

LOADED = (
    KernelModule("nvidia_uvm", 4, ()),
    KernelModule("nvidia_drm", 0, ()),
    KernelModule("nvidia_modeset", 1, ("nvidia_drm",)),
    KernelModule("video", 1, ("nvidia_modeset",)),
    KernelModule("nvidia", 14, ("nvidia_uvm", "nvidia_modeset")),
)


def finding(code: str, *evidence: tuple[str, str], steps: Sequence[str] = ()) -> Finding:
    return Finding(
        code=code,
        severity=Severity.ERROR,
        title=f"test finding {code}",
        evidence=tuple(evidence),
        remediation=Remediation(summary="fix it", steps=tuple(steps)),
    )


def report(facts: Facts, *findings: Finding) -> Report:
    return Report(facts=facts, findings=findings)


def fix_facts(
    holders: Sequence[GpuHolder] = (),
    services: Sequence[str] = (),
    os_ids: Probed[tuple[str, ...]] = UBUNTU,
) -> FixFacts:
    return FixFacts(
        holders=Found(tuple(holders)), active_services=Found(tuple(services)), os_ids=os_ids
    )


def options(box: Sandbox, **over: Any) -> PlanOptions:
    base = PlanOptions(verify_argv=box.verify, python=box.python, source="test machine")
    return replace(base, **over)


# --- 1. driver/library version mismatch, held by Docker, a Python process and persistenced -------

PYTHON_ARGV = ("python", "train.py", "--epochs", "100")
DOCKER_ARGV = ("python3", "-m", "vllm.entrypoints.api_server")
PERSISTENCED_ARGV = ("/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced")


def mismatch_holders() -> tuple[GpuHolder, ...]:
    return (
        GpuHolder(
            PYTHON_PID,
            "python",
            PYTHON_ARGV,
            1000,
            "alice",
            ("/dev/nvidia0", "/dev/nvidia-uvm"),
            start_time=START_TIME,
            cgroup=SESSION_CGROUP,
        ),
        GpuHolder(
            DOCKER_PID,
            "python3",
            DOCKER_ARGV,
            0,
            "root",
            ("/dev/nvidia0",),
            container=Container("docker", CONTAINER_ID, "vllm", CONTAINER_CGROUP),
            start_time=START_TIME,
            cgroup=CONTAINER_CGROUP,
        ),
        GpuHolder(
            PERSISTENCED_PID,
            "nvidia-persistenced",
            PERSISTENCED_ARGV,
            112,
            "nvidia-persistenced",
            ("/dev/nvidiactl", "/dev/nvidia0"),
            unit="nvidia-persistenced.service",
            start_time=START_TIME,
            cgroup=PERSISTENCED_CGROUP,
        ),
    )


def mismatch_report() -> Report:
    facts = f.facts(
        kernel=f.kernel(
            modules=Found(LOADED),
            driver=Found(KernelDriver("580.95.05", "open", "NVRM version: … 580.95.05 …")),
        ),
        nvml=ProbeFailed(NvmlErrorKind.LIB_RM_VERSION_MISMATCH, "Driver/library version mismatch"),
    )
    return report(
        facts,
        finding(
            "driver.version-mismatch",
            ("kernel module (/proc/driver/nvidia/version)", "580.95.05"),
            ("user-space libnvidia-ml.so", "580.159.04"),
        ),
    )


def mismatch_plan(box: Sandbox) -> Plan:
    live = fix_facts(mismatch_holders(), services=("nvidia-persistenced",))
    return build_plan(mismatch_report(), live, options(box))


def mismatch_machine(box: Sandbox, *, python_stubborn: bool = True) -> None:
    box.modules(LOADED)
    box.loaded_driver("580.95.05")
    box.state("installed", "580.159.04")
    box.process(PYTHON_PID, PYTHON_ARGV, stubborn=python_stubborn, uid=1000)
    box.process(DOCKER_PID, DOCKER_ARGV, cgroup=CONTAINER_CGROUP)
    box.process(
        PERSISTENCED_PID,
        PERSISTENCED_ARGV,
        devices=("/dev/nvidiactl",),
        uid=112,
        cgroup=PERSISTENCED_CGROUP,
    )
    box.service("nvidia-persistenced", pids=(PERSISTENCED_PID,), cgroup=PERSISTENCED_CGROUP)
    box.container(CONTAINER_ID, pids=(DOCKER_PID,))


# --- 2. nouveau loaded -------------------------------------------------------------------------


def nouveau_plan(box: Sandbox) -> Plan:
    facts = f.facts(
        kernel=f.kernel(
            modules=f.modules("nouveau", "drm_kms_helper"),
            driver=Absent("/proc/driver/nvidia/version does not exist"),
            device_nodes=Found(()),
        ),
        nvml=ProbeFailed(NvmlErrorKind.DRIVER_NOT_LOADED, "Driver Not Loaded"),
    )
    rep = report(facts, finding("driver.nouveau-loaded", ("nouveau in /proc/modules", "yes")))
    return build_plan(rep, fix_facts(), options(box))


# --- 3. /dev/nvidia-uvm missing ------------------------------------------------------------------


def uvm_missing_plan(box: Sandbox) -> Plan:
    nodes = Found(
        tuple(DeviceNode(p, True, "0666", True, True) for p in ("/dev/nvidia0", "/dev/nvidiactl"))
    )
    facts = f.facts(kernel=f.kernel(modules=f.modules("nvidia"), device_nodes=nodes))
    rep = report(facts, finding("device.node-missing", ("missing", "/dev/nvidia-uvm")))
    return build_plan(rep, fix_facts(), options(box))


# --- 4. a CPU-only torch wheel on a GPU machine ----------------------------------------------------


def cpu_wheel_plan(box: Sandbox) -> Plan:
    facts = f.facts(
        torch=f.torch(Found(f.torch_build(version="2.13.0+cpu", cuda="")), python=box.python)
    )
    rep = report(facts, finding("torch.cpu-build", ("torch", "2.13.0+cpu")))
    return build_plan(rep, fix_facts(), options(box))


# --- 5. torch built for a newer CUDA than the driver supports --------------------------------------


def too_old_facts(box: Sandbox) -> Facts:
    return f.facts(
        nvml=f.nvml(driver_version=Found("535.104.05"), cuda_driver_version=Found("12.2")),
        kernel=f.kernel(driver=Found(KernelDriver("535.104.05", "open", "NVRM … 535.104.05"))),
        torch=f.torch(Found(f.torch_build(version="2.13.0+cu130", cuda="13.0")), python=box.python),
    )


def too_old_plan(box: Sandbox, *, prefer: str = "wheel") -> Plan:
    rep = report(
        too_old_facts(box),
        finding(
            "torch.driver-too-old",
            ("torch CUDA", "13.0"),
            ("driver", "535.104.05 (CUDA 12.2)"),
            ("needs", "driver ≥ 580.65.06"),
        ),
    )
    return build_plan(rep, fix_facts(), options(box, prefer=prefer))
