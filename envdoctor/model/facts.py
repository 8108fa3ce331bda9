"""Facts: everything the probes read about one machine, gathered once, judged by pure rules.

Every field that can be missing is ``Probed`` so that its reason travels with it into the
report, the snapshot and the findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from envdoctor.model.containers import NOT_READ, ContainerFacts
from envdoctor.model.interconnect import NvlinkFacts, PciPathFacts
from envdoctor.model.probed import Absent, Probed

SNAPSHOT_SCHEMA_VERSION = 1

CLOCK_EVENT_REASONS = (
    "gpu-idle",
    "applications-clocks-setting",
    "sw-power-cap",
    "hw-slowdown",
    "sync-boost",
    "sw-thermal-slowdown",
    "hw-thermal-slowdown",
    "hw-power-brake-slowdown",
    "display-clock-setting",
)
"""NVML's clock event (throttle) reasons, bit 0 upwards (nvmlClocksEventReason*, nvml.h)."""

RECOVERY_ACTION_NAMES = {
    0: "none",
    1: "gpu-reset",
    2: "node-reboot",
    3: "drain-p2p",
    4: "drain-and-reset",
    5: "recover-imex-domain",
    6: "bus-reset",
    7: "system-reboot",
}
"""NVML_GPU_RECOVERY_ACTION_* by number (nvml.h, nvmlDeviceGpuRecoveryAction_t; issue 39)."""

NOT_COLLECTED = Absent("not collected (a snapshot written by an older envdoctor)")
"""The default of a field added after snapshots existed: an old snapshot still decodes."""


class NvmlErrorKind:
    """NVML failure kinds, as strings so they serialise and read well in evidence.

    They mirror pynvml's ``NVMLError_*`` classes that matter on real machines.
    """

    LIBRARY_NOT_FOUND = "LibraryNotFound"
    DRIVER_NOT_LOADED = "DriverNotLoaded"
    LIB_RM_VERSION_MISMATCH = "LibRmVersionMismatch"
    NO_PERMISSION = "NoPermission"
    GPU_IS_LOST = "GPUIsLost"
    UNKNOWN = "Unknown"
    NOT_SUPPORTED = "NotSupported"
    TIMEOUT = "Timeout"
    FUNCTION_NOT_FOUND = "FunctionNotFound"
    RESET_REQUIRED = "ResetRequired"
    """NVML_ERROR_RESET_REQUIRED (16): the GPU needs a reset before it answers again."""
    VGPU_ECC_NOT_SUPPORTED = "VgpuEccNotSupported"
    """NVML_ERROR_VGPU_ECC_NOT_SUPPORTED (22): a vGPU guest whose host has ECC on."""
    ARGUMENT_VERSION_MISMATCH = "ArgumentVersionMismatch"
    """NVML_ERROR_ARGUMENT_VERSION_MISMATCH (25): the driver does not know that struct version."""
    DEPRECATED = "Deprecated"
    """NVML_ERROR_DEPRECATED (26): a query this driver no longer serves (use the versioned one)."""
    NOT_READY = "NotReady"
    """NVML_ERROR_NOT_READY (27): the GPU or the driver is still initialising."""
    CRASHED = "Crashed"
    """The library crashed (SIGSEGV, abort) in a call: seen from the probe's parent process."""
    NOT_RESPONDING = "NotResponding"
    """A call on this GPU never returned within its bound (the child reading it was killed)."""
    BINDING_ERROR = "BindingError"
    """The Python bindings raised something that is not an NVML return code."""
    OTHER = "Other"


# --- the host -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PciDevice:
    """An NVIDIA PCI function seen in sysfs, whatever driver (if any) is bound to it."""

    address: str
    device_id: str
    pci_class: str
    driver: Probed[str]


@dataclass(frozen=True, slots=True)
class HostFacts:
    """Operating system, kernel, container and the user envdoctor runs as."""

    os_name: Probed[str]
    kernel: Probed[str]
    machine: str
    hostname: Probed[str]
    user: str
    uid: int
    containers: tuple[str, ...]
    wsl: bool
    cgroup_version: Probed[int]
    nvidia_pci: Probed[tuple[PciDevice, ...]]


# --- the kernel side ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KernelModule:
    """A line of /proc/modules."""

    name: str
    refcount: int
    used_by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SysModule:
    """/sys/module/NAME of an NVIDIA-related module: also built-in modules, which
    /proc/modules never lists. ``initstate`` is "live", "coming" or "going" for a loadable
    module and "" for a built-in one (the kernel writes no initstate for those)."""

    name: str
    initstate: str
    refcount: Probed[int]
    holders: tuple[str, ...]

    @property
    def builtin(self) -> bool:
        return not self.initstate


@dataclass(frozen=True, slots=True)
class KernelDriver:
    """The NVIDIA kernel module as /proc/driver/nvidia/version reports it."""

    version: str
    flavor: str  # "open" or "proprietary"
    raw: str


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """One /dev/nvidia* node and what the current user may do with it.

    ``readable``/``writable`` come from the mode bits (access(2)); ``uid``/``gid`` are the
    owner (-1: not recorded by an older snapshot).
    """

    path: str
    is_char_device: bool
    mode: str
    readable: bool
    writable: bool
    uid: int = -1
    gid: int = -1


@dataclass(frozen=True, slots=True)
class KernelFacts:
    """Loaded modules (/proc/modules, and /sys/module for the NVIDIA-related names), the
    kernel driver version and the device nodes."""

    modules: Probed[tuple[KernelModule, ...]]
    driver: Probed[KernelDriver]
    device_nodes: Probed[tuple[DeviceNode, ...]]
    sys_modules: Probed[tuple[SysModule, ...]] = Absent(
        "/sys/module was not read (a snapshot from an older envdoctor)"
    )


# --- NVML -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """Bytes, as NVML reports them."""

    total: int
    used: int
    """Allocated by processes (NVML's v2 query); the original query counted ``reserved`` too."""
    free: int
    reserved: int = 0
    """Kept by the driver itself (~600 MiB on an idle H200): not a sign that the GPU is busy."""


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device (GPU instance + compute instance) as CUDA_VISIBLE_DEVICES names it."""

    uuid: str
    name: str


@dataclass(frozen=True, slots=True)
class MigMode:
    current: bool
    pending: bool


@dataclass(frozen=True, slots=True)
class EccErrors:
    """Uncorrectable ECC error counts since the last driver load (volatile) and ever (aggregate)."""

    volatile_uncorrectable: int
    aggregate_uncorrectable: int


@dataclass(frozen=True, slots=True)
class RowRemap:
    """Ampere+ memory row remapping: ``pending`` means a GPU reset is needed."""

    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


@dataclass(frozen=True, slots=True)
class EccCorrected:
    """Corrected (single-bit) ECC error counts: since the last driver load, and ever."""

    volatile: int
    aggregate: int


@dataclass(frozen=True, slots=True)
class RetiredPages:
    """Pages retired (pre-Ampere dynamic page retirement), by cause."""

    single_bit: int
    double_bit: int


@dataclass(frozen=True, slots=True)
class Utilization:
    """NVML's utilisation over its last sample period, in percent (0 to 100)."""

    gpu: int
    memory: int


@dataclass(frozen=True, slots=True)
class FabricInfo:
    """The GPU's registration with the NVLink fabric (NVSwitch systems, Hopper and later).

    ``state`` is "not-supported" (no NVSwitch fabric), "not-started", "in-progress" or
    "completed"; ``status`` is NVML's result of the registration ("Success" or an NVML error
    kind), meaningful once completed.
    """

    state: str
    status: str
    clique_id: int


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process with a context on a GPU; ``name`` may be unreadable (other PID namespace)."""

    pid: int
    name: Probed[str]
    used_memory: Probed[int]


@dataclass(frozen=True, slots=True)
class PcieLink:
    gen: int
    width: int
    max_gen: int
    max_width: int


# --- per-GPU health (issue 39): clocks -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class SmClock:
    """The SM clock now and at its highest, in MHz: what a clock event reason costs."""

    current: int
    highest: int


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """One physical GPU as NVML sees it. A field NVML refused keeps NVML's reason."""

    index: int
    name: Probed[str]
    uuid: Probed[str]
    pci_bus_id: Probed[str]
    compute_capability: Probed[str]
    memory: Probed[MemoryInfo]
    persistence_mode: Probed[bool]
    compute_mode: Probed[str]
    mig_mode: Probed[MigMode]
    mig_devices: Probed[int]
    ecc: Probed[EccErrors]
    retired_pages_pending: Probed[bool]
    row_remap: Probed[RowRemap]
    processes: Probed[tuple[GpuProcess, ...]]
    throttle_reasons: Probed[tuple[str, ...]]
    pcie: Probed[PcieLink]
    temperature: Probed[int] = NOT_COLLECTED
    """Degrees Celsius (the GPU die sensor)."""
    power_draw: Probed[int] = NOT_COLLECTED
    """Milliwatts, as NVML reports them."""
    power_limit: Probed[int] = NOT_COLLECTED
    """The enforced power limit, in milliwatts."""
    utilization: Probed[Utilization] = NOT_COLLECTED
    ecc_corrected: Probed[EccCorrected] = NOT_COLLECTED
    retired_pages: Probed[RetiredPages] = NOT_COLLECTED
    fabric: Probed[FabricInfo] = NOT_COLLECTED
    mig_instances: Probed[tuple[MigInstance, ...]] = NOT_COLLECTED
    # per-GPU health (issue 39): the driver's verdict and the thermal limits
    recovery_action: Probed[int] = NOT_COLLECTED
    """NVML_GPU_RECOVERY_ACTION_* (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain
    and reset …): NVML's field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, where the driver has it."""
    shutdown_temperature: Probed[int] = NOT_COLLECTED
    """Degrees Celsius at which the GPU shuts down (NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)."""
    slowdown_temperature: Probed[int] = NOT_COLLECTED
    """Degrees Celsius at which hardware slows the clocks (NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)."""
    max_operating_temperature: Probed[int] = NOT_COLLECTED
    """The highest temperature the GPU is meant to run at (NVML_TEMPERATURE_THRESHOLD_GPU_MAX)."""
    sm_clock: Probed[SmClock] = NOT_COLLECTED

    def failure_kinds(self) -> frozenset[str]:
        """The NVML error kinds any field of this GPU failed with (e.g. {"GPUIsLost"})."""
        kinds = set()
        for f in fields(self):
            value = getattr(self, f.name)
            error = getattr(value, "error", None)
            if isinstance(error, str):
                kinds.add(error)
        return frozenset(kinds)


@dataclass(frozen=True, slots=True)
class NvmlSystem:
    """What NVML reported once it initialised."""

    driver_version: Probed[str]
    cuda_driver_version: Probed[str]
    gpus: tuple[GpuFacts, ...]
    device_count_error: str = ""
    interconnect: Probed[NvlinkFacts] = NOT_COLLECTED
    """NVLink, P2P and PCIe counters (model/interconnect.py): read by ``check``, not ``probe``."""

    def gpu_at_pci(self, address: str) -> GpuFacts | None:
        """The GPU at a PCI address as the kernel log prints it ("0000:3b:00", "0000:3b:00.0")
        or as NVML does ("00000000:3B:00.0"): domain, bus and device compared as numbers."""
        wanted = pci_key(address)
        if wanted is None:
            return None
        for gpu in self.gpus:
            bus_id = getattr(gpu.pci_bus_id, "value", None)
            if isinstance(bus_id, str) and pci_key(bus_id) == wanted:
                return gpu
        return None


def pci_key(address: str) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI address, or None when it is not one."""
    parts = address.split(".")[0].split(":")
    if len(parts) != 3:
        return None
    try:
        domain, bus, device = (int(part, 16) for part in parts)
    except ValueError:
        return None
    return domain, bus, device


# --- the kernel's log and the NVLink fabric ------------------------------------------------


@dataclass(frozen=True, slots=True)
class XidEvents:
    """The ``NVRM: Xid`` lines of one code on one device in the kernel log since boot.

    ``device`` is the PCI address as the driver prints it ("0000:3b:00"); times are seconds
    since boot (None where the source gave none); ``last_message`` is the latest such line
    from "NVRM:" on, shortened (for Xid 154 it names the recovery action the GPU needs now).
    """

    device: str
    xid: int
    count: int
    first_seconds: float | None
    last_seconds: float | None
    last_message: str


@dataclass(frozen=True, slots=True)
class KernelLog:
    """What the kernel log says about the GPUs since boot (Xid events).

    ``complete`` is False when the log no longer reaches back to boot (the kernel's ring
    buffer wrapped, or the journal's output was cut): an Xid may then be missing.
    ``unread`` lists the sources tried first that could not be read, and why.
    """

    source: str
    xids: tuple[XidEvents, ...]
    complete: bool
    unread: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class FabricManager:
    """The nvidia-fabricmanager service: its systemd state and the daemon's version."""

    service: Probed[str]
    version: Probed[str]


@dataclass(frozen=True, slots=True)
class PersistenceDaemon:
    """nvidia-persistenced, as its PID file and /proc show it (issue 39): ``pid`` is the
    process the PID file names, and it is running when /proc names that process the daemon."""

    pid_file: str
    pid: int
    running: bool


@dataclass(frozen=True, slots=True)
class FabricFacts:
    """NVSwitches (``/proc/driver/nvidia-nvswitch/devices``) and the fabric manager."""

    nvswitches: Probed[tuple[str, ...]]
    manager: Probed[FabricManager]


# --- user-space libraries -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LibraryCopy:
    """One file that the dynamic loader could pick for a library family."""

    path: str
    realpath: str
    version: str
    origin: str  # "LD_LIBRARY_PATH", "ldconfig", "pip-wheel", "CUDA_HOME"


@dataclass(frozen=True, slots=True)
class LibraryFamily:
    """All copies of one library (libcuda, libcudnn …) in loader search order."""

    name: str
    copies: tuple[LibraryCopy, ...]


# --- environment ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Nvcc:
    path: str
    version: str


@dataclass(frozen=True, slots=True)
class EnvFacts:
    """The variables that change how CUDA and torch behave, and the local CUDA toolkit."""

    variables: tuple[tuple[str, str], ...]
    nvcc: Probed[Nvcc]
    build_nvcc: Probed[Nvcc] = NOT_COLLECTED
    """The nvcc torch.utils.cpp_extension builds with: $CUDA_HOME (or $CUDA_PATH)/bin/nvcc,
    else the nvcc on PATH, else /usr/local/cuda/bin/nvcc (torch's own search order)."""

    def get(self, name: str) -> str | None:
        """The variable's value, or None when it is unset (unset is itself the fact)."""
        for key, value in self.variables:
            if key == name:
                return value
        return None


# --- torch ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TorchBuild:
    """The torch that the target interpreter imports, as the child probe saw it."""

    version: str
    location: str
    cuda: str  # "" for a build without CUDA
    hip: str
    cudnn_version: Probed[str]
    nccl_version: Probed[str]
    arch_list: tuple[str, ...]
    cuda_available: bool
    unavailable_reason: str
    device_count: Probed[int]
    loaded_libraries: tuple[tuple[str, str], ...]
    nvidia_wheels: tuple[tuple[str, str], ...]
    imported: bool = True
    """False when the child read a CPU-only build from torch/version.py without importing it:
    ``cuda_available`` is then known without the import, and the import itself unchecked."""
    alloc_conf: tuple[tuple[str, str], ...] = ()
    """(variable, "" or torch's error) for each allocator-config variable set: torch's own
    parser's verdict on PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, asked in the child."""
    from_cache: str = ""
    """When ``import torch`` ran (UTC), if it was not in this run: the import's facts come from
    envdoctor's cache (nothing the import read has changed since); ``cuda_available``,
    ``unavailable_reason`` and ``device_count`` were read now through the CUDA driver API.
    "" when torch was imported (or its version file read) in this run."""

    @property
    def is_cpu_build(self) -> bool:
        return not self.cuda and not self.hip


@dataclass(frozen=True, slots=True)
class TorchBroken:
    """torch is installed but ``import torch`` raised."""

    version: Probed[str]
    error: str
    traceback: str


OWN_INTERPRETER = "envdoctor's own interpreter (no active environment and no python3 on PATH)"
"""``TorchFacts.chosen_by`` when no interpreter of the user's was found: advice must not install
torch there (envdoctor's own venv, pipx's), which would fix nothing the user runs."""


COMPANION_NAMES = ("torchvision", "torchaudio", "triton")
"""The packages released with torch whose builds must match it, as the torch child reports them."""

NOT_REPORTED = Absent(
    "not reported (a snapshot from an older envdoctor, or a torch probe that gave no result)"
)


@dataclass(frozen=True, slots=True)
class Companion:
    """A package released with torch (torchvision, torchaudio, triton), from its distribution
    metadata in the target interpreter (never imported). ``version`` keeps the local tag
    (``0.28.0+cpu``); Absent("not installed") when the environment has no such distribution."""

    name: str
    version: Probed[str]
    installer: str = ""  # its dist-info's INSTALLER ("pip", "uv", "conda"), "" when unrecorded


@dataclass(frozen=True, slots=True)
class InstallerFacts:
    """How the target environment installs packages, read from the environment itself.

    ``prefix``: ``sys.prefix``. ``pip``: the environment has pip (``python -m pip`` works).
    ``uv_venv``: a venv made by uv (its ``pyvenv.cfg`` has a ``uv =`` line). ``conda``: a conda
    environment (``conda-meta/`` in the prefix). ``torch_by_conda``: conda installed torch there
    (``conda-meta/pytorch-*.json`` or ``torch-*.json``, or torch's INSTALLER says conda).
    ``torch_installer``: the INSTALLER file of torch's dist-info ("pip", "uv", "conda"; "" when
    there is none)."""

    prefix: str
    pip: bool
    uv_venv: bool
    conda: bool
    torch_by_conda: bool = False
    torch_installer: str = ""
    uv_version: str = ""  # the ``uv = X`` of pyvenv.cfg


@dataclass(frozen=True, slots=True)
class TorchFacts:
    python: str
    torch: Probed[TorchBuild | TorchBroken]
    chosen_by: str = ""
    """Why this interpreter was the one read (``--python``, the active venv, …); empty in
    snapshots from before it was recorded."""
    companions: Probed[tuple[Companion, ...]] = NOT_REPORTED
    """torchvision, torchaudio and triton in the target environment, each installed or not."""
    installer: Probed[InstallerFacts] = NOT_REPORTED
    """How the target environment installs packages (pip, a uv venv, conda)."""

    def companion(self, name: str) -> Companion | None:
        """The companion ``name`` when the probe reported it (installed or not)."""
        found = getattr(self.companions, "value", None)
        if not isinstance(found, tuple):
            return None
        return next((c for c in found if c.name == name), None)


# --- everything -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Facts:
    """One machine, probed once."""

    host: HostFacts
    kernel: KernelFacts
    nvml: Probed[NvmlSystem]
    libraries: Probed[tuple[LibraryFamily, ...]]
    env: EnvFacts
    torch: TorchFacts
    envdoctor_version: str = ""
    collected_at: str = ""
    notes: tuple[str, ...] = field(default=())
    kernel_log: Probed[KernelLog] = NOT_COLLECTED
    fabric: FabricFacts = FabricFacts(nvswitches=NOT_COLLECTED, manager=NOT_COLLECTED)
    containers: ContainerFacts = NOT_READ
    """The container layer (model/containers.py); older snapshots load with its reason."""
    persistenced: Probed[PersistenceDaemon] = NOT_COLLECTED
    """nvidia-persistenced (issue 39): Absent when no PID file says it runs."""
    pci_paths: Probed[PciPathFacts] = NOT_COLLECTED
    """The GPUs' PCIe paths as the kernel sees them: ACS, AER, IOMMU (model/interconnect.py)."""
