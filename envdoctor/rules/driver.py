"""Driver rules: installed, loaded, kernel/user-space versions agree, nouveau out of the way."""

from __future__ import annotations

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import Verdict, failed_elsewhere, not_applicable, passed, unknown
from envdoctor.model.probed import Found, ProbeFailed
from envdoctor.model.views import MachineKind, module_state, show
from envdoctor.rules.base import Evaluation, Rule, RuleContext, judged
from envdoctor.rules.container_inside import LIBRARY_MISMATCH, container_cause

RELOAD_STEPS = (
    "sudo systemctl stop nvidia-persistenced nvidia-fabricmanager 2>/dev/null || true",
    "sudo lsof /dev/nvidia*   # stop or kill every process listed (often Docker containers)",
    "sudo rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia   # unload in this order",
    "sudo modprobe nvidia && sudo nvidia-modprobe -u -c 0   # load the new module, uvm node",
    "envdoctor check   # or reboot if a module stays in use",
)
NO_GPU_STEPS = (
    "lspci | grep -i nvidia   # no output: this machine has no NVIDIA GPU",
    "on a cloud VM, choose a GPU instance type; on a VM, pass the GPU through",
)
CONTAINER_NO_GPU_STEPS = (
    "Kubernetes: request nvidia.com/gpu in the pod's resources, so that it is scheduled on a "
    "GPU node",
    "Docker/Podman: run it on a host where nvidia-smi lists a GPU, with --gpus all",
    "Kata Containers or gVisor: the GPU must be passed into the sandbox (VFIO; gVisor's nvproxy)",
    "a CPU-only container is fine: then drop --expect gpu (or ENVDOCTOR_EXPECT)",
)
INSTALL_STEPS = (
    "Ubuntu/Debian: sudo ubuntu-drivers install   (or: sudo apt install nvidia-driver-580-open)",
    "RHEL/Rocky/Fedora: sudo dnf module install nvidia-driver:580-open",
    "sudo reboot",
    "nvidia-smi   # must list every GPU",
)


def _host_side(ctx: RuleContext) -> Verdict | None:
    """Not applicable where the host's driver is not this check's business (WSL, a container
    that was given no GPU)."""
    if ctx.facts.host.wsl:
        return not_applicable("WSL: the Windows NVIDIA driver serves the GPU")
    if ctx.machine.kind is MachineKind.CONTAINER_WITHOUT_GPU:
        return not_applicable(
            "a container: the host's driver serves the GPU, and this one was given none"
        )
    return None


def _installed(ctx: RuleContext) -> Evaluation:
    machine = ctx.machine
    driver = machine.driver
    if driver.present:
        yield passed(
            f"driver {driver.describe()} (read from {driver.version_source or 'its files'})"
        )
        return
    presence = machine.presence
    if machine.kind is MachineKind.CPU and not machine.intent.expect_gpu:
        yield not_applicable(
            "the PCI bus lists no NVIDIA GPU"
            if presence.pci == ()
            else f"no NVIDIA GPU here (the PCI bus: {presence.describe_pci()})"
        )
        return
    evidence = [
        ("NVML", show(ctx.facts.nvml)),
        ("nvidia kernel module loaded", driver.module.describe()),
        ("NVIDIA PCI devices", presence.describe_pci()),
    ]
    if machine.intent.expect_gpu:
        evidence.append(("a GPU is expected", machine.intent.source))
    if presence.seen:
        fix = Remediation(
            summary="Install the NVIDIA driver, then reboot",
            steps=INSTALL_STEPS,
            needs_root=True,
            needs_reboot=True,
        )
        title = "No NVIDIA driver is installed: nothing on this machine can use its GPU"
    elif machine.containers and not ctx.facts.host.wsl:
        # a container sees its host's PCI bus: the host has no NVIDIA GPU to give it
        fix = Remediation(
            summary="Run this container on a host with an NVIDIA GPU", steps=CONTAINER_NO_GPU_STEPS
        )
        title = (
            f"A GPU is expected ({machine.intent.source}) but the PCI bus this container sees "
            "lists no NVIDIA GPU: its host has none (or a sandbox runtime shows its own bus)"
        )
    else:
        fix = Remediation(
            summary="Run on a machine with an NVIDIA GPU, or attach one", steps=NO_GPU_STEPS
        )
        title = (
            f"A GPU is expected ({machine.intent.source}) but this machine has no NVIDIA GPU "
            "and no driver"
        )
    yield Finding(
        code="driver.not-installed",
        severity=Severity.ERROR,
        title=title,
        evidence=tuple(evidence),
        remediation=fix,
    )


def _module_not_loaded(ctx: RuleContext) -> Evaluation:
    machine = ctx.machine
    driver = machine.driver
    if not driver.present:
        yield not_applicable("no NVIDIA driver is installed")
        return
    module = driver.module
    if module.yes:
        how = "built into the kernel" if module.builtin else "loaded"
        yield passed(f"nvidia is {how} ({module.source})")
        return
    said_not_loaded = driver.nvml_error == NvmlErrorKind.DRIVER_NOT_LOADED
    if not (module.no or said_not_loaded):
        if driver.nvml_version is not None:
            yield passed("NVML answers, so the nvidia module is loaded")
        else:
            yield unknown(f"whether nvidia is loaded: {module.describe()}")
        return
    nouveau = module_state(ctx.facts, "nouveau")
    if nouveau.yes or machine.presence.bound_to("nouveau"):
        yield not_applicable("nouveau holds the GPU, so nvidia cannot load (driver.nouveau-loaded)")
        return
    yield Finding(
        code="driver.module-not-loaded",
        severity=Severity.ERROR,
        title="The NVIDIA driver is installed but its kernel module is not loaded",
        evidence=(
            ("NVML", show(ctx.facts.nvml)),
            ("nvidia loaded", module.describe()),
            ("kernel module", driver.loaded_reason or "loaded"),
            *((f"user-space {path}", version) for path, version in driver.userspace[:2]),
        ),
        remediation=Remediation(
            summary="Load the nvidia kernel module (and find out why it did not load)",
            steps=(
                "sudo modprobe nvidia && sudo nvidia-modprobe -u -c 0",
                "if modprobe fails: sudo dmesg | grep -iE 'nvidia|secure boot'",
                "a kernel upgraded without rebuilding the module: sudo dkms autoinstall, then reboot",
                "Secure Boot on: enrol the module signing key (mokutil) or use signed modules",
            ),
            needs_root=True,
        ),
    )


def _version_mismatch(ctx: RuleContext) -> Evaluation:
    driver = ctx.machine.driver
    loaded = driver.loaded
    if container_cause(ctx.facts, ctx.machine) == LIBRARY_MISMATCH:  # the image's, not a reload
        yield failed_elsewhere(f"the container's driver libraries differ: {LIBRARY_MISMATCH}")
        return
    if not driver.mismatch:
        if driver.nvml_version is not None:
            yield passed(f"NVML initialised with driver {driver.nvml_version}")
        elif loaded is not None and driver.userspace:
            yield passed(f"kernel module and user-space libraries are all {loaded.version}")
        elif loaded is None:
            yield not_applicable(f"no kernel module to compare: {driver.loaded_reason}")
        else:
            yield unknown("no user-space driver library with a version in its file name was found")
        return
    shown = f"{loaded.version} ({loaded.flavor})" if loaded is not None else driver.loaded_reason
    differing = [(path, v) for path, v in driver.userspace if loaded is None or v != loaded.version]
    evidence: list[tuple[str, str]] = [("kernel module (/proc/driver/nvidia/version)", shown)]
    evidence.extend((f"user-space {path}", version) for path, version in differing)
    if isinstance(ctx.facts.nvml, ProbeFailed):
        evidence.append(("NVML", f"{ctx.facts.nvml.error}: {ctx.facts.nvml.detail}"))
    if driver.installed:
        evidence.append(("judged against", f"{driver.installed}, the installed driver"))
    yield Finding(
        code="driver.version-mismatch",
        severity=Severity.ERROR,
        title="Driver/library version mismatch: the loaded kernel module is not the installed "
        "driver (upgraded without a reload or reboot)",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Reload the NVIDIA kernel modules (or reboot) so they match the installed driver",
            steps=(*RELOAD_STEPS, "`envdoctor fix` writes these steps as a reviewable script"),
            needs_root=True,
        ),
    )


def _nouveau(ctx: RuleContext) -> Evaluation:
    machine = ctx.machine
    nouveau = module_state(ctx.facts, "nouveau")
    bound = machine.presence.bound_to("nouveau")
    if not nouveau.yes and not bound:
        if machine.kind is not MachineKind.GPU:
            yield not_applicable(machine.why_no_gpu())
        elif nouveau.no and machine.presence.pci is not None:
            yield passed(f"nouveau is not loaded ({nouveau.source}) and no GPU is bound to it")
        elif nouveau.no:
            yield passed(f"nouveau is not loaded ({nouveau.source})")
        else:
            yield unknown(f"whether nouveau is loaded: {nouveau.describe()}")
        return
    evidence = [("nouveau loaded", nouveau.describe())]
    if bound:
        evidence.append(("GPUs bound to nouveau", ", ".join(bound)))
    yield Finding(
        code="driver.nouveau-loaded",
        severity=Severity.ERROR,
        title="The open-source nouveau driver holds the GPU, so the NVIDIA driver cannot",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Blacklist nouveau, rebuild the initramfs and reboot",
            steps=(
                "printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | "
                "sudo tee /etc/modprobe.d/blacklist-nouveau.conf",
                "sudo update-initramfs -u   # RHEL/Fedora: sudo dracut --force",
                "sudo reboot",
            ),
            needs_root=True,
            needs_reboot=True,
        ),
    )


def kernel_loaded(ctx: RuleContext) -> bool:
    """The nvidia kernel module runs (read from /proc/modules, /sys/module or /proc/driver)."""
    driver = ctx.machine.driver
    return driver.module.yes or isinstance(ctx.facts.kernel.driver, Found)


RULES = (
    Rule(
        "driver.installed",
        "An NVIDIA driver is installed",
        ("driver.not-installed",),
        judged(_installed, _host_side, ok=None),
    ),
    Rule(
        "driver.loaded",
        "The nvidia kernel module is loaded",
        ("driver.module-not-loaded",),
        judged(_module_not_loaded, _host_side, ok=None),
    ),
    Rule(
        "driver.versions-agree",
        "Kernel module and user-space driver libraries are the same version",
        ("driver.version-mismatch",),
        _version_mismatch,
    ),
    Rule(
        "driver.no-nouveau",
        "nouveau is not loaded or bound to an NVIDIA GPU",
        ("driver.nouveau-loaded",),
        _nouveau,
    ),
)
