"""Driver rules: installed, loaded, kernel/user-space versions agree, nouveau out of the way."""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.rules.base import Rule, RuleContext
from envdoctor.rules.facts_view import (
    library_copies,
    module_names,
    nvidia_pci_count,
    nvml_error_kind,
    show,
    userspace_driver_versions,
)

RELOAD_STEPS = (
    "sudo systemctl stop nvidia-persistenced nvidia-fabricmanager 2>/dev/null || true",
    "sudo lsof /dev/nvidia*   # stop or kill every process listed (often Docker containers)",
    "sudo rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia   # unload in this order",
    "sudo modprobe nvidia && sudo nvidia-modprobe -u -c 0   # load the new module, uvm node",
    "envdoctor check   # or reboot if a module stays in use",
)


def _not_installed(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    if facts.host.wsl or not isinstance(facts.nvml, Absent):
        return
    mods = module_names(facts) or frozenset()
    if "nvidia" in mods or isinstance(facts.kernel.driver, Found):
        return  # the kernel module is there: user space is what is missing (module-not-loaded
        # does not apply either); libs.* and the NVML evidence cover it
    pci = nvidia_pci_count(facts)
    containers = facts.host.containers
    evidence = [
        ("NVML", show(facts.nvml)),
        ("kernel module", why_missing(facts.kernel.driver) or "loaded"),
        ("libcuda.so on the loader path", "no" if not library_copies(facts, "libcuda") else "yes"),
        ("NVIDIA PCI devices", show(facts.host.nvidia_pci) if pci is None else str(pci)),
    ]
    if containers:
        evidence.append(("container", ", ".join(containers)))
        fix = Remediation(
            summary="Start the container with GPU access (NVIDIA Container Toolkit)",
            steps=(
                "docker run --gpus all …   (or --runtime=nvidia; podman: --device nvidia.com/gpu=all)",
                "Kubernetes: request `nvidia.com/gpu` in the pod's resources and install the "
                "NVIDIA device plugin / GPU Operator on the node",
                "on the host: nvidia-smi must work before any container can see the GPU",
            ),
        )
    elif pci == 0:
        fix = Remediation(
            summary="Run on a machine with an NVIDIA GPU, or attach one",
            steps=(
                "lspci | grep -i nvidia   # no output: this machine has no NVIDIA GPU",
                "on a cloud VM, choose a GPU instance type; on a VM, pass the GPU through",
            ),
        )
    else:
        fix = Remediation(
            summary="Install the NVIDIA driver, then reboot",
            steps=(
                "Ubuntu/Debian: sudo ubuntu-drivers install   (or: sudo apt install nvidia-driver-580-open)",
                "RHEL/Rocky/Fedora: sudo dnf module install nvidia-driver:580-open",
                "sudo reboot",
                "nvidia-smi   # must list every GPU",
            ),
            needs_root=True,
            needs_reboot=True,
        )
    yield Finding(
        code="driver.not-installed",
        severity=Severity.ERROR,
        title="No NVIDIA driver is installed: nothing on this machine can use a GPU",
        evidence=tuple(evidence),
        remediation=fix,
    )


def _module_not_loaded(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    if facts.host.wsl:
        return
    mods = module_names(facts)
    kind = nvml_error_kind(facts)
    userspace = bool(library_copies(facts, "libnvidia-ml") or library_copies(facts, "libcuda"))
    module_missing = mods is not None and "nvidia" not in mods
    if not (kind == NvmlErrorKind.DRIVER_NOT_LOADED or (module_missing and userspace)):
        return
    if mods is not None and "nouveau" in mods:
        return  # nvidia cannot load while nouveau holds the GPU: driver.nouveau-loaded says so
    if facts.host.containers and kind != NvmlErrorKind.DRIVER_NOT_LOADED:
        return  # a container sees the host's modules; libraries alone prove nothing here
    yield Finding(
        code="driver.module-not-loaded",
        severity=Severity.ERROR,
        title="The NVIDIA driver is installed but its kernel module is not loaded",
        evidence=(
            ("NVML", show(facts.nvml)),
            ("nvidia in /proc/modules", "no" if module_missing else "unknown"),
            ("kernel module", why_missing(facts.kernel.driver) or "loaded"),
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


def _version_mismatch(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    kind = nvml_error_kind(facts)
    kernel = facts.kernel.driver
    kernel_version = kernel.value.version if isinstance(kernel, Found) else None
    userspace = userspace_driver_versions(facts)
    differing = [(path, v) for path, v in userspace if kernel_version and v != kernel_version]
    if kind != NvmlErrorKind.LIB_RM_VERSION_MISMATCH and not differing:
        return
    loaded = (
        f"{kernel.value.version} ({kernel.value.flavor})"
        if isinstance(kernel, Found)
        else show(kernel)
    )
    evidence: list[tuple[str, str]] = [("kernel module (/proc/driver/nvidia/version)", loaded)]
    evidence.extend((f"user-space {path}", version) for path, version in (differing or userspace))
    if isinstance(facts.nvml, ProbeFailed):
        evidence.append(("NVML", f"{facts.nvml.error}: {facts.nvml.detail}"))
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


def _nouveau(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    mods = module_names(facts) or frozenset()
    bound = []
    if isinstance(facts.host.nvidia_pci, Found):
        bound = [d.address for d in facts.host.nvidia_pci.value if show(d.driver) == "nouveau"]
    if "nouveau" not in mods and not bound:
        return
    evidence = [("nouveau in /proc/modules", "yes" if "nouveau" in mods else "no")]
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


RULES = (
    Rule(
        "driver.installed",
        "An NVIDIA driver is installed",
        ("driver.not-installed",),
        _not_installed,
    ),
    Rule(
        "driver.loaded",
        "The nvidia kernel module is loaded",
        ("driver.module-not-loaded",),
        _module_not_loaded,
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
