"""One interpretation of the facts, shared by every command.

The facts say what each source read; these views say what that means, once: which driver
version counts (the loaded kernel module, the installed user space, and which one each
judgment uses), whether a kernel module is loaded (from /proc/modules and /sys/module, "no"
only where it was read as no), which NVIDIA GPUs are here by every source and what drives them,
what kind of machine this is and what its owner expects of it, and which torch is in use.

check's rules, recommend, fix, probe, slurm-healthcheck, spec, diff, the smoke attribution and
explain --with-host all read these, so that they cannot give different answers to one question.
Pure functions of ``Facts`` (and the ``Intent`` of the invocation): no I/O, no tables.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from envdoctor.model.facts import (
    DeviceNode,
    Facts,
    GpuFacts,
    KernelDriver,
    LibraryCopy,
    NvmlErrorKind,
    NvmlSystem,
    PciDevice,
    TorchBroken,
    TorchBuild,
)
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing

EXPECT_ENV = "ENVDOCTOR_EXPECT"
"""The environment variable that says what a machine is for (``gpu``), like ``--expect``."""

# NVML failures that prove nothing about the hardware: a CPU machine answers the same.
_NO_DRIVER_KINDS = frozenset({NvmlErrorKind.LIBRARY_NOT_FOUND, NvmlErrorKind.DRIVER_NOT_LOADED})
GPU_NODE = re.compile(r"/dev/nvidia[0-9]+")
"""A GPU's own device node (not nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps)."""


# --- intent -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Intent:
    """What the machine's owner expects of it; ``source`` says who said so."""

    expect_gpu: bool = False
    source: str = ""

    @staticmethod
    def of(expect: str | None, env_value: str | None, *, spec_gpus: bool = False) -> Intent:
        """``--expect`` wins over ``ENVDOCTOR_EXPECT``, which wins over a node spec's GPUs."""
        if expect is not None:
            return Intent(expect == "gpu", f"--expect {expect}")
        value = (env_value or "").strip().lower()
        if value in ("gpu", "cpu"):
            return Intent(value == "gpu", f"{EXPECT_ENV}={value}")
        if spec_gpus:
            return Intent(True, "the node spec lists GPUs")
        return Intent()


NO_INTENT = Intent()


# --- kernel modules ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModuleState:
    """Whether a kernel module is loaded; ``loaded`` is ``Found(False)`` only when read as no."""

    name: str
    loaded: Probed[bool]
    source: str
    builtin: bool = False
    refcount: int | None = None
    holders: tuple[str, ...] = ()

    @property
    def yes(self) -> bool:
        return isinstance(self.loaded, Found) and self.loaded.value

    @property
    def no(self) -> bool:
        """Read as not loaded (unknown is neither yes nor no)."""
        return isinstance(self.loaded, Found) and not self.loaded.value

    def describe(self) -> str:
        """ "yes (/proc/modules)", "no (/proc/modules, /sys/module)", "unknown (reason)"."""
        if isinstance(self.loaded, Found):
            word = "yes" if self.loaded.value else "no"
            if self.builtin:
                word = "yes, built into the kernel"
            return f"{word} ({self.source})"
        return f"unknown ({why_missing(self.loaded)})"


def module_state(facts: Facts, name: str) -> ModuleState:
    """One module, from /proc/modules and /sys/module together."""
    kernel = facts.kernel
    sys_mods = kernel.sys_modules
    entry = None
    if isinstance(sys_mods, Found):
        entry = next((m for m in sys_mods.value if m.name == name), None)
    if entry is not None:
        refcount = entry.refcount.value if isinstance(entry.refcount, Found) else None
        if entry.builtin:
            return ModuleState(
                name, Found(True), f"/sys/module/{name}", builtin=True, holders=entry.holders
            )
        live = entry.initstate == "live"
        source = f"/sys/module/{name}/initstate: {entry.initstate}"
        return ModuleState(name, Found(live), source, refcount=refcount, holders=entry.holders)
    procs = kernel.modules
    if isinstance(procs, Found):
        line = next((m for m in procs.value if m.name == name), None)
        if line is not None:
            return ModuleState(
                name, Found(True), "/proc/modules", refcount=line.refcount, holders=line.used_by
            )
        both = "/proc/modules, /sys/module" if isinstance(sys_mods, Found) else "/proc/modules"
        return ModuleState(name, Found(False), both)
    if isinstance(sys_mods, Found):
        return ModuleState(name, Found(False), "/sys/module")
    reasons = f"/proc/modules: {why_missing(procs)}; /sys/module: {why_missing(sys_mods)}"
    return ModuleState(name, ProbeFailed("neither module list could be read", reasons), "")


# --- the driver -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DriverView:
    """The NVIDIA driver as every judgment must read it.

    ``loaded`` is the kernel module running now; ``installed`` the user-space driver the
    loader picks (``libnvidia-ml``/``libcuda``), which is also what runs after the kernel module
    is reloaded. Compatibility (which CUDA the driver runs) is judged against ``version``: the
    installed driver when it is known, else the loaded module.
    """

    loaded: KernelDriver | None
    loaded_reason: str
    installed: str | None
    installed_source: str
    nvml_version: str | None
    nvml_error: str
    userspace: tuple[tuple[str, str], ...]
    module: ModuleState

    @property
    def version(self) -> str | None:
        """The version compatibility is judged against (see the class docstring)."""
        if self.nvml_version:
            return self.nvml_version
        if self.installed:
            return self.installed
        return self.loaded.version if self.loaded else None

    @property
    def version_source(self) -> str:
        if self.nvml_version:
            return "NVML"
        if self.installed:
            return self.installed_source
        return "the loaded kernel module" if self.loaded else ""

    @property
    def mismatch(self) -> bool:
        """The loaded kernel module is not the installed user-space driver."""
        if self.nvml_error == NvmlErrorKind.LIB_RM_VERSION_MISMATCH:
            return True
        return self.loaded is not None and any(v != self.loaded.version for _, v in self.userspace)

    @property
    def flavor(self) -> str | None:
        return self.loaded.flavor if self.loaded else None

    @property
    def present(self) -> bool:
        """Any sign of an NVIDIA driver: module, /proc entry, NVML or a user-space library."""
        return (
            self.module.yes
            or self.loaded is not None
            or self.nvml_version is not None
            or (self.nvml_error not in ("", *_NO_DRIVER_KINDS))
            or bool(self.userspace)
        )

    def describe(self) -> str:
        """ "580.159.04" or "580.159.04 installed; kernel module 550.54.14 loaded" …"""
        version = self.version
        if version is None:
            return "not installed" if not self.present else "version unknown"
        if self.mismatch and self.loaded is not None and self.loaded.version != version:
            return f"{version} installed, kernel module {self.loaded.version} loaded"
        return version


def driver_view(facts: Facts) -> DriverView:
    nvml = facts.nvml
    system = nvml.value if isinstance(nvml, Found) else None
    nvml_version = None
    if system is not None and isinstance(system.driver_version, Found):
        nvml_version = system.driver_version.value
    kernel = facts.kernel.driver
    userspace = userspace_driver_versions(facts)  # libnvidia-ml's first: the one the loader picks
    return DriverView(
        loaded=kernel.value if isinstance(kernel, Found) else None,
        loaded_reason=why_missing(kernel),
        installed=userspace[0][1] if userspace else None,
        installed_source=f"the installed user-space driver ({userspace[0][0]})"
        if userspace
        else "",
        nvml_version=nvml_version,
        nvml_error=nvml.error if isinstance(nvml, ProbeFailed) else "",
        userspace=userspace,
        module=module_state(facts, "nvidia"),
    )


def library_copies(facts: Facts, family: str) -> tuple[LibraryCopy, ...]:
    libs = facts.libraries
    if not isinstance(libs, Found):
        return ()
    for fam in libs.value:
        if fam.name == family:
            return fam.copies
    return ()


def userspace_driver_versions(facts: Facts) -> tuple[tuple[str, str], ...]:
    """(file, version) of libcuda / libnvidia-ml copies whose file names carry a full version."""
    out: list[tuple[str, str]] = []
    for family in ("libnvidia-ml", "libcuda"):
        for copy in library_copies(facts, family):
            if copy.version.count(".") >= 1 and "/stubs/" not in copy.realpath:
                pair = (copy.realpath, copy.version)
                if pair not in out:
                    out.append(pair)
    return tuple(out)


# --- NVIDIA GPUs, by every source -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuPresence:
    """The NVIDIA GPUs seen by each source, and what drives them."""

    nvml: tuple[GpuFacts, ...]
    nvml_error: str
    pci: tuple[PciDevice, ...] | None
    pci_reason: str
    gpu_nodes: tuple[str, ...]

    @property
    def count(self) -> int:
        """The GPUs the best source shows: NVML's list, else the PCI bus, else /dev nodes."""
        return len(self.nvml) or len(self.pci or ()) or len(self.gpu_nodes)

    @property
    def seen(self) -> bool:
        return bool(self.nvml or self.pci or self.gpu_nodes)

    def bound_to(self, driver: str) -> tuple[str, ...]:
        """PCI addresses of the GPUs the named kernel driver is bound to."""
        return tuple(
            d.address
            for d in self.pci or ()
            if isinstance(d.driver, Found) and d.driver.value == driver
        )

    def describe_pci(self) -> str:
        if self.pci is None:
            return f"unknown ({self.pci_reason})"
        if not self.pci:
            return "none (PCI bus read)"
        parts = []
        for d in self.pci:
            bound = d.driver.value if isinstance(d.driver, Found) else "no driver bound"
            parts.append(f"{d.address} ({bound})")
        return ", ".join(parts)


def gpu_presence(facts: Facts) -> GpuPresence:
    nvml = facts.nvml
    system = nvml.value if isinstance(nvml, Found) else None
    pci = facts.host.nvidia_pci
    nodes = facts.kernel.device_nodes
    gpu_nodes = tuple(
        n.path
        for n in (nodes.value if isinstance(nodes, Found) else ())
        if GPU_NODE.fullmatch(n.path)
    )
    return GpuPresence(
        nvml=system.gpus if system else (),
        nvml_error=nvml.error if isinstance(nvml, ProbeFailed) else "",
        pci=pci.value if isinstance(pci, Found) else None,
        pci_reason=why_missing(pci),
        gpu_nodes=gpu_nodes,
    )


def nvml_system(facts: Facts) -> NvmlSystem | None:
    return facts.nvml.value if isinstance(facts.nvml, Found) else None


def nvml_gpus(facts: Facts) -> tuple[GpuFacts, ...]:
    system = nvml_system(facts)
    return system.gpus if system else ()


# --- the machine ------------------------------------------------------------------------------


class MachineKind(str, enum.Enum):
    """What this machine is, from what was read (not from what its owner expects)."""

    GPU = "gpu"
    """NVIDIA hardware or an NVIDIA driver is here: GPU rules apply in full."""
    CPU = "cpu"
    """No NVIDIA device and no driver: the CPU build of torch is the right one."""
    CONTAINER_WITHOUT_GPU = "container-without-gpu"
    """A container that was given no GPU device (the host may have GPUs)."""


@dataclass(frozen=True, slots=True)
class MachineView:
    """The machine kind, the intent, and what that means for a GPU being required."""

    kind: MachineKind
    intent: Intent
    containers: tuple[str, ...]
    presence: GpuPresence
    driver: DriverView

    @property
    def gpu_required(self) -> bool:
        """Rules that need a GPU judge (instead of saying "not applicable")."""
        return self.kind is MachineKind.GPU or self.intent.expect_gpu

    @property
    def cpu_is_right(self) -> bool:
        """A CPU build of torch is what this machine should run."""
        return not self.gpu_required

    def why_no_gpu(self) -> str:
        """One line for "not applicable" verdicts on a machine that needs no GPU."""
        if self.kind is MachineKind.CONTAINER_WITHOUT_GPU:
            return "this container was given no NVIDIA GPU device"
        return "no NVIDIA GPU or driver on this machine"


def machine_view(facts: Facts, intent: Intent = NO_INTENT) -> MachineView:
    presence = gpu_presence(facts)
    driver = driver_view(facts)
    containers = facts.host.containers
    device_given = bool(presence.nvml or presence.gpu_nodes) or (
        driver.nvml_version is not None or driver.nvml_error not in ("", *_NO_DRIVER_KINDS)
    )
    # A container sees the host's PCI bus (sysfs) and kernel modules: NVIDIA hardware there
    # without a device given to the container is a container started without GPU access;
    # a bus read as having no NVIDIA GPU is a CPU machine, container or not.
    host_has_none = presence.pci is not None and not presence.pci
    if containers and not facts.host.wsl and not device_given and not host_has_none:
        kind = MachineKind.CONTAINER_WITHOUT_GPU
    elif presence.seen or (driver.present and not (containers and host_has_none)):
        kind = MachineKind.GPU
    else:
        kind = MachineKind.CPU
    return MachineView(
        kind=kind, intent=intent, containers=containers, presence=presence, driver=driver
    )


# --- torch --------------------------------------------------------------------------------------


def torch_build(facts: Facts) -> TorchBuild | None:
    """The torch in use when it was read (imported or read from its version file)."""
    probed = facts.torch.torch
    if isinstance(probed, Found) and isinstance(probed.value, TorchBuild):
        return probed.value
    return None


def torch_broken(facts: Facts) -> TorchBroken | None:
    probed = facts.torch.torch
    if isinstance(probed, Found) and isinstance(probed.value, TorchBroken):
        return probed.value
    return None


def cuda_torch(facts: Facts) -> TorchBuild | None:
    """The installed torch when it is a CUDA build."""
    build = torch_build(facts)
    return build if build is not None and build.cuda else None


def torch_not_probed(facts: Facts) -> str:
    """Why torch was not looked at (the fast tier, or a command that skips it), or ""."""
    probed = facts.torch.torch
    if isinstance(probed, Absent) and probed.reason.startswith("not probed"):
        return probed.reason
    return ""


def torch_python(facts: Facts) -> str:
    return facts.torch.python or "python"


# --- device nodes -----------------------------------------------------------------------------

MODESET_NODE = "/dev/nvidia-modeset"  # display only: CUDA never opens it


def denied_nodes(nodes: tuple[DeviceNode, ...]) -> list[DeviceNode]:
    """Character nodes CUDA opens that the mode bits do not let this user read and write."""
    return [
        n
        for n in nodes
        if n.is_char_device and not (n.readable and n.writable) and n.path != MODESET_NODE
    ]


def _octal(mode: str) -> int:
    """A node's permission bits ("0666"); 0 for text that is not octal (a snapshot's mode is
    any text: int("²", 8) raises)."""
    ok = 0 < len(mode) <= 7 and all(c in "01234567" for c in mode)
    return int(mode, 8) if ok else 0


def group_only(nodes: list[DeviceNode]) -> int | None:
    """The one non-root group that every denied node grants read/write to (mode 0660-like),
    or None: then only the driver's device-file parameters (or a udev rule) help."""
    gids = {n.gid for n in nodes}
    if len(gids) != 1:
        return None
    gid = gids.pop()
    group_rw = all(_octal(n.mode) & 0o060 == 0o060 for n in nodes)
    return gid if gid > 0 and group_rw else None


# --- GPUs in detail ---------------------------------------------------------------------------


def gpu_label(gpu: GpuFacts) -> str:
    name = gpu.name.value if isinstance(gpu.name, Found) else "GPU"
    return f"GPU {gpu.index} ({name})"


def free_gpus(facts: Facts, busy: frozenset[int]) -> tuple[int, ...]:
    """Indices of the GPUs NVML lists that are not in ``busy`` and not lost."""
    out = []
    for gpu in nvml_gpus(facts):
        if gpu.index in busy or NvmlErrorKind.GPU_IS_LOST in gpu.failure_kinds():
            continue
        out.append(gpu.index)
    return tuple(out)


def show(probed: Probed[object]) -> str:
    """A probed value for evidence: the value, or why it is missing."""
    return str(probed.value) if isinstance(probed, Found) else why_missing(probed)
