"""Facts of the container layer: the NVIDIA Container Toolkit and the engines on a host, the CDI
specs they resolve devices from, and what a container itself sees of its GPU.

Read by ``envdoctor/probes/containers.py`` (host side) and ``probes/container_inside.py``;
judged by ``envdoctor/rules/containers.py``. Every field that can be missing keeps its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.model.probed import Absent, Probed

OLD_SNAPSHOT = "not read (a snapshot from an older envdoctor)"
SHM_PATH = "/dev/shm"  # noqa: S108 (the shared-memory mount that is judged, not a temp file)
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
"""Where CDI specs are looked for when nothing configures it (container-device-interface)."""
DEFAULT_CDI_SPEC = f"{CDI_DIRS[0]}/nvidia.yaml"
"""Where envdoctor's fixes have ``nvidia-ctk cdi generate`` write the NVIDIA spec."""
NVIDIA_KIND = "nvidia.com/gpu"
"""The CDI kind of NVIDIA's GPUs (``--device nvidia.com/gpu=all``), and the toolkit's default
``default-kind`` (nvidia-container-toolkit api/config/v1)."""


def clean_dir(path: str) -> str:
    """A spec directory as Go's filepath.Clean spells it (CDI cleans its spec-dirs so): one
    leading slash, no "." or ".." parts, no trailing slash."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    if path.startswith("/"):
        return "/" + "/".join(parts)
    return "/".join(parts) or "."


SHM_ENOUGH = 1 << 30
"""A shared-memory mount this large is enough for DataLoader workers and NCCL (NVIDIA runs its containers with
--shm-size=1g at least); Docker's default is 64 MiB."""


@dataclass(frozen=True, slots=True)
class ToolkitConfig:
    """/etc/nvidia-container-runtime/config.toml, the keys that change a container's GPU access.

    ``mode`` is ``nvidia-container-runtime.mode`` ("auto" when unset, as the toolkit defaults);
    ``no_cgroups`` is ``nvidia-container-cli.no-cgroups`` (rootless engines need it on);
    ``default_kind`` the CDI kind the runtime asks for in cdi mode (``modes.cdi.default-kind``:
    ``NVIDIA_VISIBLE_DEVICES=all`` becomes ``<default-kind>=all``).
    """

    path: str
    mode: str
    no_cgroups: bool
    spec_dirs: tuple[str, ...] = CDI_DIRS
    default_kind: str = NVIDIA_KIND


@dataclass(frozen=True, slots=True)
class ToolkitFacts:
    """The NVIDIA Container Toolkit's programs (name, path) and versions, and its config.

    The versions come from ``nvidia-ctk --version`` and ``nvidia-container-cli --version``
    (subprocesses: the full tier only; the probe tier records why they are missing).
    """

    programs: tuple[tuple[str, str], ...]
    ctk_version: Probed[str]
    cli_version: Probed[str]
    lib_version: Probed[str]
    config: Probed[ToolkitConfig]

    @property
    def installed(self) -> bool:
        return bool(self.programs)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """One engine's configuration, reduced to what GPU containers depend on.

    ``runtimes`` are the names registered; ``nvidia_runtimes`` those that run an NVIDIA
    Container Runtime binary; ``default_runtime`` is "" when the engine's own default applies
    (containerd: runc; CRI-O: crun since 1.31, runc before); ``cdi`` whether the engine resolves CDI devices (Docker ``features.cdi``,
    containerd ``enable_cdi``); ``cgroup_driver`` Docker's ``native.cgroupdriver`` exec-opt.
    """

    path: str
    runtimes: tuple[str, ...]
    nvidia_runtimes: tuple[str, ...]
    default_runtime: str
    cdi: bool
    cgroup_driver: str = ""
    version: int = 0
    files: tuple[str, ...] = ()
    """Every file read (containerd: the main config and the drop-ins it imports)."""
    merge: str = ""
    """How containerd's imported files were merged: "section" (containerd 1.x: a plugin named in
    an imported file replaces that plugin's whole table) or "key" (2.x: tables merge key by
    key); "" where nothing was imported."""
    release: str = ""
    """containerd's own version from ``containerd --version`` ("" where not read: the probe
    tier, which then goes by the config's version: 3 is containerd 2.x's)."""


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """A container engine on this host: ``docker``, ``containerd``, ``cri-o`` or ``podman``."""

    name: str
    program: str
    config: Probed[EngineConfig]
    snap: bool = False
    rootless: bool = False


@dataclass(frozen=True, slots=True)
class CdiSpec:
    """One CDI spec file (/etc/cdi, /var/run/cdi): what it names and what of it is missing.

    ``driver_version`` is the driver the spec was generated for ("" when it names none);
    ``missing`` the device nodes and host paths it mounts that do not exist; ``error`` why the
    file cannot be used at all ("" when it parsed).
    """

    path: str
    kind: str
    devices: tuple[str, ...]
    driver_version: str
    missing: tuple[str, ...]
    error: str = ""


@dataclass(frozen=True, slots=True)
class ContainerHostFacts:
    """The host side: toolkit, engines, CDI specs, and whether this is a Kubernetes node."""

    toolkit: ToolkitFacts
    engines: tuple[EngineFacts, ...]
    cdi_specs: Probed[tuple[CdiSpec, ...]]
    kubelet: bool = False


@dataclass(frozen=True, slots=True)
class DeviceOpen:
    """What opening a device node read-write answered: "ok", an errno name, or "timeout"."""

    path: str
    result: str


@dataclass(frozen=True, slots=True)
class ShmMount:
    """The shared-memory mount as /proc/self/mounts lists it; ``size`` 0 when no ``size=`` limit is shown
    (tmpfs's default, half of the memory, or the host's /dev/shm with ``--ipc=host``)."""

    fstype: str
    size: int


@dataclass(frozen=True, slots=True)
class InsideFacts:
    """What a container sees: device nodes it could open, /dev/shm, the image's requirements.

    ``opens`` is read only where it can tell something (in a container whose NVML failed);
    ``require`` holds ``NVIDIA_REQUIRE_*``, ``NVIDIA_DISABLE_REQUIRE`` and ``CUDA_VERSION``.
    """

    opens: Probed[tuple[DeviceOpen, ...]]
    shm: Probed[ShmMount]
    require: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerFacts:
    host: Probed[ContainerHostFacts]
    inside: Probed[InsideFacts]


NOT_READ = ContainerFacts(host=Absent(OLD_SNAPSHOT), inside=Absent(OLD_SNAPSHOT))
