"""The remediation plan as data: ordered steps, each one typed action with the values it needs.

A ``Plan`` is what `envdoctor fix` prints as a script, a numbered list or JSON; the three are
renderings of the same object. Actions hold raw values from the machine (PIDs, argv, unit
names); quoting happens only when a renderer writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from envdoctor.compat.index import PYTORCH_INDEX_HOSTS
from envdoctor.probes.holders import GpuHolder


@dataclass(frozen=True, slots=True)
class HolderRef:
    """A holder as the script finds it again: the same PID, real uid and start time.

    A PID alone can be reused by another process at any time; with the uid and the start time
    (/proc/PID/stat field 22) it names one process for the life of the machine.
    """

    pid: int
    uid: int
    start_time: int


@dataclass(frozen=True, slots=True)
class StopService:
    """Stop a systemd unit that holds or re-opens /dev/nvidia* (if it is active then).

    With ``holders`` (a unit found from a holder's cgroup, not a known GPU service) the script
    stops it only if one of them is still that process and still lies in the cgroup systemd
    gives for the unit (`systemctl show -p ControlGroup`).
    """

    unit: str
    holders: tuple[HolderRef, ...] = ()
    kind: ClassVar[str] = "stop-service"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class StartService:
    """Start a unit stopped earlier (if it is not active then)."""

    unit: str
    kind: ClassVar[str] = "start-service"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class StopContainer:
    """Stop a container whose processes hold the GPU, so its restart policy does not revive it.

    The script stops it only if the runtime's inspect names a running container whose main PID
    lies in ``cgroup`` and one of ``holders`` is still that process, in that cgroup.
    """

    runtime: str  # "docker" or "podman": the command that stops it
    container_id: str
    cgroup: str  # the container's own cgroup, from its holders' cgroup paths
    holders: tuple[HolderRef, ...]
    name: str = ""
    kind: ClassVar[str] = "stop-container"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Terminate:
    """SIGTERM, wait, then SIGKILL one PID, each signal only if it is still the same process
    (real uid, start time, exact argv) and still holds /dev/nvidia*."""

    pid: int
    argv: tuple[str, ...]
    uid: int
    start_time: int  # /proc/PID/stat field 22
    user: str = ""
    container: str = ""
    kind: ClassVar[str] = "terminate"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class RequireNoHolders:
    """Stop the script, listing them, if any process still holds /dev/nvidia*."""

    kind: ClassVar[str] = "require-no-holders"
    needs_root: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class UnloadModule:
    """rmmod one kernel module (if it is loaded then)."""

    name: str
    kind: ClassVar[str] = "unload-module"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class LoadModule:
    """modprobe one kernel module (if it is not loaded then)."""

    name: str
    kind: ClassVar[str] = "load-module"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class CreateNodes:
    """Run nvidia-modprobe to load a module and create device nodes (unless they all exist)."""

    argv: tuple[str, ...]
    nodes: tuple[str, ...]
    module: str = ""  # the module it loads; with it, the step is skipped only if it is loaded
    kind: ClassVar[str] = "create-nodes"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class RunCommand:
    """Run a fixed command (package installs, initramfs rebuilds, nvidia-smi)."""

    argv: tuple[str, ...]
    needs_root: bool = True
    kind: ClassVar[str] = "run"


@dataclass(frozen=True, slots=True)
class WriteFile:
    """Write a configuration file (mode 0644), unless it already has exactly this content."""

    path: str
    content: str
    kind: ClassVar[str] = "write-file"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class SetMode:
    """chmod a device node (unless it already has that mode)."""

    path: str
    mode: str
    kind: ClassVar[str] = "set-mode"
    needs_root: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class ReinstallTorch:
    """Reinstall torch in the target interpreter from the index of one CUDA variant."""

    python: str
    requirement: str  # "torch" or "torch==2.11.0"
    index_url: str
    variant: str  # "cu128": the local version tag that means the job is already done
    kind: ClassVar[str] = "reinstall-torch"
    needs_root: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Verify:
    """Run `envdoctor check` and report its verdict."""

    argv: tuple[str, ...]
    kind: ClassVar[str] = "verify"
    needs_root: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Note:
    """Something only a person can do; the script prints it and carries on."""

    text: str
    kind: ClassVar[str] = "note"
    needs_root: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class RebootRequired:
    """The verdict that a reboot, not a reload, finishes the fix; the script never reboots."""

    reason: str
    kind: ClassVar[str] = "reboot-required"
    needs_root: ClassVar[bool] = False


Action = Union[  # noqa: UP007 (a runtime alias used in isinstance-free dispatch and hints)
    StopService,
    StartService,
    StopContainer,
    Terminate,
    RequireNoHolders,
    UnloadModule,
    LoadModule,
    CreateNodes,
    RunCommand,
    WriteFile,
    SetMode,
    ReinstallTorch,
    Verify,
    Note,
    RebootRequired,
]


@dataclass(frozen=True, slots=True)
class Step:
    """One numbered step: what it does for the reader, and the finding codes it answers."""

    title: str
    action: Action
    because: tuple[str, ...] = ()
    section: str = ""  # "reload": skipped at run time once the loaded module is the installed one

    @property
    def needs_root(self) -> bool:
        return bool(self.action.needs_root)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything `envdoctor fix` decided, in the order the script runs it."""

    steps: tuple[Step, ...]
    holders: tuple[GpuHolder, ...] = ()
    addressed: tuple[str, ...] = ()  # finding codes the steps answer
    unaddressed: tuple[str, ...] = ()  # finding codes with no automatic fix (see `check`)
    notes: tuple[str, ...] = ()
    envdoctor_version: str = ""
    source: str = ""  # "live" or the snapshot path
    status: str = "unknown"  # the diagnosis the plan answers: healthy, unhealthy or unknown
    snapshot: str = ""  # the snapshot it was made from: then the script is for reading
    index_hosts: tuple[str, ...] = PYTORCH_INDEX_HOSTS  # where torch may come from (--index-host)

    @property
    def needs_root(self) -> bool:
        return any(step.needs_root for step in self.steps)

    @property
    def reboot_reasons(self) -> tuple[str, ...]:
        return tuple(s.action.reason for s in self.steps if isinstance(s.action, RebootRequired))

    @property
    def reboot_required(self) -> bool:
        return bool(self.reboot_reasons)
