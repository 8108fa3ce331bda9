"""Findings and live facts → an ordered ``Plan``: only what is wrong, in a safe order.

The order, when the driver must be reloaded (``driver.version-mismatch``):

1. stop the GPU services that are active (and the systemd units holders run under), so that
   nothing re-opens /dev/nvidia* behind our back;
2. stop the containers whose processes hold the GPU (``docker stop``: no restart policy revives
   a stopped container), then SIGTERM → wait → SIGKILL each remaining holder, re-checked at run
   time; check that nobody holds /dev/nvidia* any more;
3. ``rmmod`` every NVIDIA module (and its users) in dependency order (``modules.unload_order``);
4. load them back, ``nvidia-modprobe -u -c 0`` for the uvm nodes, ``nvidia-smi``; start the
   services again;
5. verify with ``envdoctor check``.

A reboot replaces the reload when a reload cannot work or would do harm: nouveau owns the GPU, a
driver was just installed, a display server or PID 1 holds the GPU. The plan then says so
plainly (``RebootRequired``) and the script never reboots by itself. Kernel-level fixes are not
planned inside a container or on WSL: the host owns the driver there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from envdoctor.compat.index import PYTORCH_INDEX_HOSTS, untrusted_index
from envdoctor.compat.tables import CompatTables
from envdoctor.engine import Report
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Absent, Found
from envdoctor.model.units import whole
from envdoctor.model.views import denied_nodes, gpu_presence, group_only, nvml_gpus
from envdoctor.probes.holders import GPU_SERVICES, FixFacts, GpuHolder
from envdoctor.remedy import distro, wheel
from envdoctor.remedy.containers import container_steps
from envdoctor.remedy.model import (
    Action,
    CreateNodes,
    HolderRef,
    LoadModule,
    Note,
    Plan,
    RebootRequired,
    RequireNoHolders,
    RunCommand,
    SetMode,
    StartService,
    Step,
    StopContainer,
    StopService,
    Terminate,
    UnloadModule,
    Verify,
    WriteFile,
)
from envdoctor.remedy.modules import CANONICAL_ORDER, unload_order
from envdoctor.remedy.quoting import display

VERSION_MISMATCH = "driver.version-mismatch"
MODULE_NOT_LOADED = "driver.module-not-loaded"
NODE_MISSING = "device.node-missing"
PERMISSION_DENIED = "device.permission-denied"
NOUVEAU_LOADED = "driver.nouveau-loaded"
DRIVER_CODES = ("driver.not-installed", "driver.gpu-unsupported", "driver.open-modules-required")
DRIVER_TOO_OLD = "torch.driver-too-old"
CPU_BUILD = "torch.cpu-build"
ARCH_UNSUPPORTED = "torch.arch-unsupported"
COMPANIONS_MISMATCHED = "torch.companions-mismatched"  # the set reinstalled from torch's index
MEMORY_HELD = "gpu.memory-held"
KERNEL_CODES = frozenset(
    {
        VERSION_MISMATCH,
        MODULE_NOT_LOADED,
        NODE_MISSING,
        PERMISSION_DENIED,
        NOUVEAU_LOADED,
        MEMORY_HELD,
    }
    | set(DRIVER_CODES)
)

UVM_NODES = ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
UVM_COMMAND = ("nvidia-modprobe", "-u", "-c", "0")
NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_TEXT = "blacklist nouveau\noptions nouveau modeset=0\n"
DEFAULT_NODE_MODE = "0666"  # the NVIDIA driver's own default (NVreg_DeviceFileMode)
# The names of the driver's device nodes: a mode is set on nothing else (a snapshot could name
# /dev/../etc/shadow); the script checks the same name, and that it is a character device of
# NVIDIA's major, again right before its chmod.
NVIDIA_NODE = re.compile(
    r"/dev/nvidia(?:ctl|-uvm|-uvm-tools|-modeset|[0-9]{1,4}|-caps/nvidia-cap[0-9]{1,6})\Z"
)
CONTAINER_STOPPERS = ("docker", "podman")
_RELOAD = "reload"
_TITLE_COMMAND_CHARS = 100


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How to plan: the verify command, the target interpreter, and one preference."""

    verify_argv: tuple[str, ...] = ("envdoctor", "check")
    python: str = ""  # the interpreter pip runs in, when the facts do not name one
    prefer: str = "wheel"  # torch.driver-too-old: reinstall torch ("wheel") or upgrade ("driver")
    source: str = "live"
    envdoctor_version: str = ""
    tables: CompatTables | None = None  # for the torch wheel choice (`envdoctor recommend`)
    snapshot: str = ""  # planning from this snapshot: its interpreter is never used
    index_hosts: tuple[str, ...] = ()  # index hosts besides PyTorch's (`fix --index-host`)


def build_plan(report: Report, live: FixFacts, options: PlanOptions | None = None) -> Plan:
    """The remediation plan for ``report``'s findings on the machine ``live`` describes."""
    return _Planner(report, live, options or PlanOptions()).plan()


@dataclass
class _Planner:
    report: Report
    live: FixFacts
    options: PlanOptions
    steps: list[Step] = field(default_factory=list)
    addressed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reboot: list[tuple[str, str]] = field(default_factory=list)  # (reason, code)

    # --- the whole plan --------------------------------------------------------------------

    def plan(self) -> Plan:
        facts = self.report.facts
        codes = self._codes()
        host_side = not facts.host.containers and not facts.host.wsl
        kernel: set[str] = codes & KERNEL_CODES
        if kernel and not host_side:
            where = "WSL (the Windows driver)" if facts.host.wsl else "the container's host"
            self._add(
                f"Run `envdoctor fix` on {where}: kernel modules, device nodes and the driver "
                "belong to it",
                Note(
                    f"{', '.join(sorted(kernel))}: fix these on {where}"
                    + (
                        ""
                        if facts.host.wsl
                        else "; then restart this container with the GPUs passed in "
                        "(docker run --gpus all)"
                    )
                ),
            )
            kernel = set()
        wants_driver = bool(kernel & set(DRIVER_CODES)) or (
            DRIVER_TOO_OLD in codes and self.options.prefer == "driver" and host_side
        )
        if wants_driver and not self._has_nvidia_gpu():
            self.notes.append("no NVIDIA GPU is on the PCI bus: no driver to install here")
            wants_driver = False
        if NOUVEAU_LOADED in kernel:
            self.reboot.append(
                (
                    "nouveau holds the GPU; the blacklist takes effect at the next boot",
                    NOUVEAU_LOADED,
                )
            )
        if wants_driver:
            code = next((c for c in DRIVER_CODES if c in codes), DRIVER_TOO_OLD)
            self.reboot.append(("the new driver's kernel module loads at the next boot", code))
        if VERSION_MISMATCH in kernel:
            blocked = self._reload_blockers()
            if blocked:
                self.reboot.append((blocked, VERSION_MISMATCH))
            elif not self.reboot:
                self._reload()
            self._addressed(VERSION_MISMATCH)
        if MODULE_NOT_LOADED in kernel:
            if not self.reboot and VERSION_MISMATCH not in kernel:
                self._load()
            self._addressed(MODULE_NOT_LOADED)
        if NODE_MISSING in kernel:
            if not self.reboot and not ({VERSION_MISMATCH, MODULE_NOT_LOADED} & kernel):
                self._create_nodes()
            self._addressed(NODE_MISSING)
        if MEMORY_HELD in kernel and VERSION_MISMATCH not in kernel:
            self._free_memory()
        if NOUVEAU_LOADED in kernel:
            self._blacklist_nouveau()
        if wants_driver:
            self._install_driver(codes)
        if PERMISSION_DENIED in kernel:
            self._permissions()
        wheel_codes = tuple(
            c
            for c in (CPU_BUILD, ARCH_UNSUPPORTED, DRIVER_TOO_OLD, COMPANIONS_MISMATCHED)
            if c in codes and not (c == DRIVER_TOO_OLD and wants_driver)
        )
        if wheel_codes and wants_driver:
            self.notes.append(
                "torch is left alone until the new driver runs: after the reboot, "
                "`envdoctor fix` picks the wheel that matches it"
            )
        elif wheel_codes:
            self._reinstall_torch(wheel_codes)
        for title, action, code in container_steps(self.report):  # remedy/containers.py
            self._add(title, action, code, section="Containers")
            self._addressed(code)
        if self.options.snapshot:
            self.notes.append(
                f"made from the snapshot {display(self.options.snapshot)}, not from the machine "
                "the script runs on: for reading (--apply refuses it without --on-this-machine)"
            )
        self._finish()
        unaddressed = tuple(sorted(c for c in codes if c not in self.addressed))
        return Plan(
            steps=tuple(self.steps),
            holders=self._holders() or (),
            addressed=tuple(dict.fromkeys(self.addressed)),
            unaddressed=unaddressed,
            notes=(*self.live.notes, *self.notes),
            envdoctor_version=self.options.envdoctor_version,
            source=self.options.source,
            status=self.report.status,
            snapshot=self.options.snapshot,
            index_hosts=(*PYTORCH_INDEX_HOSTS, *self.options.index_hosts),
        )

    def _codes(self) -> set[str]:
        return {f.code for f in self.report.findings if f.severity >= Severity.WARNING}

    def _findings(self, code: str) -> list[Finding]:
        return [f for f in self.report.findings if f.code == code]

    def _add(self, title: str, action: Action, *because: str, section: str = "") -> None:
        self.steps.append(Step(title=title, action=action, because=because, section=section))

    def _addressed(self, code: str) -> None:
        if code not in self.addressed:
            self.addressed.append(code)

    def _holders(self) -> tuple[GpuHolder, ...] | None:
        holders = self.live.holders
        return holders.value if isinstance(holders, Found) else None

    # --- reload ----------------------------------------------------------------------------

    def _reload_blockers(self) -> str:
        holders = self._holders() or ()
        display_servers = [h for h in holders if h.is_display_server]
        if display_servers:
            who = ", ".join(
                f"{display(h.name or h.command)} (PID {h.pid})" for h in display_servers
            )
            return (
                f"a display server drives the GPU ({who}): unloading the driver would end the "
                "graphical session; reboot to load the installed driver"
            )
        if any(h.pid == 1 for h in holders):
            return (
                "PID 1 holds /dev/nvidia* and must not be killed; reboot to load the installed "
                "driver"
            )
        return ""

    def _reload(self) -> None:
        why = (VERSION_MISMATCH,)
        units = self._units_to_stop()
        for unit in units:
            self._add(
                f"Stop {unit}: it holds or re-opens /dev/nvidia*",
                StopService(unit, _refs(h for h in self._holders() or () if h.unit == unit)),
                *why,
                section=_RELOAD,
            )
        self._release_holders(self._holders(), why, units, section=_RELOAD)
        self._add(
            "Check that no process holds /dev/nvidia* any more",
            RequireNoHolders(),
            *why,
            section=_RELOAD,
        )
        modules = self.report.facts.kernel.modules
        if isinstance(modules, Found):
            order = unload_order(modules.value)
            reload = tuple(reversed(order))
        else:
            order, reload = CANONICAL_ORDER, ("nvidia",)
            self.notes.append(
                "the loaded modules are unknown: every NVIDIA module is unloaded if loaded, and "
                "only nvidia and nvidia_uvm are loaded again"
            )
        for name in order:
            self._add(f"Unload the {name} kernel module", UnloadModule(name), *why, section=_RELOAD)
        for name in reload:
            if name != "nvidia_uvm":
                self._add(
                    f"Load the {name} kernel module from the installed driver",
                    LoadModule(name),
                    *why,
                    section=_RELOAD,
                )
        self._add(
            "Load nvidia_uvm and create /dev/nvidia-uvm, /dev/nvidia-uvm-tools",
            CreateNodes(UVM_COMMAND, UVM_NODES, "nvidia_uvm"),
            *why,
            section=_RELOAD,
        )
        self._add(
            "Run nvidia-smi: the driver answers and creates /dev/nvidia0…",
            RunCommand(("nvidia-smi",), needs_root=False),
            *why,
            section=_RELOAD,
        )
        for unit in reversed(units):
            self._add(f"Start {unit} again", StartService(unit), *why, section=_RELOAD)

    def _units_to_stop(self) -> tuple[str, ...]:
        active = self.live.active_services
        units = list(active.value) if isinstance(active, Found) else []
        known = {f"{u}.service" for u in GPU_SERVICES}
        for holder in self._holders() or ():
            # A unit found from a holder is stopped only with a holder the script can verify.
            if holder.unit and holder.unit not in known | set(units) and _ref(holder):
                units.append(holder.unit)
        return tuple(units)

    def _release_holders(
        self,
        holders: tuple[GpuHolder, ...] | None,
        why: tuple[str, ...],
        stopped_units: Iterable[str],
        *,
        section: str = "",
    ) -> None:
        """Stop holders' containers, then terminate every holder no stopped unit covers."""
        if holders is None:
            self.notes.append(
                "processes holding /dev/nvidia* were not scanned (a snapshot, or /proc "
                "unreadable): the script checks at run time and stops if any remain"
            )
            return
        covered = {u if u.endswith(".service") else f"{u}.service" for u in stopped_units}
        stopped: set[str] = set()
        for holder in holders:
            box = holder.container
            if box is None or box.id in stopped:
                continue
            refs = _refs(h for h in holders if h.container is not None and h.container.id == box.id)
            if box.runtime in CONTAINER_STOPPERS and refs:
                label = display(box.name or box.id[:12])
                self._add(
                    f"Stop {box.runtime} container {label}: its processes hold the GPU",
                    StopContainer(box.runtime, box.id, box.cgroup, refs, box.name),
                    *why,
                    section=section,
                )
            elif box.runtime == "kubernetes":
                self._add(
                    f"Kubernetes pod container {box.id[:12]} holds the GPU: drain the node first",
                    Note(
                        f"PID {holder.pid} runs in a pod container ({box.id[:12]}) that its "
                        "kubelet restarts when killed: `kubectl drain NODE --ignore-daemonsets` "
                        "(or cordon the node and delete the pod) before this script"
                    ),
                    *why,
                    section=section,
                )
            stopped.add(box.id)
        for holder in holders:
            in_pod = holder.container is not None and holder.container.runtime == "kubernetes"
            if holder.unit in covered or in_pod:
                continue
            if not holder.argv or not _ref(holder):
                self._add(
                    f"PID {holder.pid} holds the GPU but its command line, owner or start "
                    "time is unreadable",
                    Note(f"stop PID {holder.pid} ({display(holder.name)}) yourself"),
                    *why,
                    section=section,
                )
                continue
            self._add(_terminate_title(holder), _terminate(holder), *why, section=section)

    # --- load, nodes, memory ---------------------------------------------------------------

    def _load(self) -> None:
        why = (MODULE_NOT_LOADED,)
        built = self.live.module_file
        if isinstance(built, Absent):  # modinfo: none built for this kernel; modprobe would fail
            if self.live.dkms is None:
                self.notes.append(
                    f"{built.reason}, and DKMS is not installed to build it: install the driver's "
                    "kernel module package for this kernel (Ubuntu: linux-modules-nvidia-BRANCH-"
                    "$(uname -r)), or reinstall the driver, then run envdoctor fix again"
                )
                return
            self._add(
                f"Build the nvidia module for this kernel: {built.reason}",
                RunCommand(("dkms", "autoinstall")),
                *why,
            )
        self._add("Load the nvidia kernel module", LoadModule("nvidia"), *why)
        self._add(
            "Load nvidia_uvm and create /dev/nvidia-uvm, /dev/nvidia-uvm-tools",
            CreateNodes(UVM_COMMAND, UVM_NODES, "nvidia_uvm"),
            *why,
        )
        self._add(
            "Run nvidia-smi: the driver answers and creates /dev/nvidia0…",
            RunCommand(("nvidia-smi",), needs_root=False),
            *why,
        )

    def _create_nodes(self) -> None:
        missing = self._missing_nodes()
        uvm = [n for n in missing if n in UVM_NODES]
        if uvm or not missing:
            self._add(
                "Load nvidia_uvm and create /dev/nvidia-uvm, /dev/nvidia-uvm-tools",
                CreateNodes(UVM_COMMAND, UVM_NODES, "nvidia_uvm"),
                NODE_MISSING,
            )
        for node in missing:
            if node in UVM_NODES:
                continue
            minor = "255" if node == "/dev/nvidiactl" else node.removeprefix("/dev/nvidia")
            if not minor.isdigit():
                self.notes.append(
                    f"{display(node)} is missing and nvidia-modprobe cannot create it"
                )
                continue
            self._add(
                f"Create {node}",
                CreateNodes(("nvidia-modprobe", "-c", minor), (node,), "nvidia"),
                NODE_MISSING,
            )

    def _missing_nodes(self) -> list[str]:
        facts = self.report.facts
        nodes = facts.kernel.device_nodes
        present = {n.path for n in nodes.value} if isinstance(nodes, Found) else set()
        count = gpu_presence(facts).count
        expected = ["/dev/nvidiactl", *(f"/dev/nvidia{i}" for i in range(count)), *UVM_NODES]
        return [n for n in expected if n not in present]

    def _free_memory(self) -> None:
        why = (MEMORY_HELD,)
        pids: list[int] = []
        names: dict[int, str] = {}
        facts = self.report.facts
        gpus = nvml_gpus(facts)
        subjects = {f.subject for f in self._findings(MEMORY_HELD)}
        for gpu in gpus:
            if subjects and str(gpu.index) not in subjects:
                continue
            if isinstance(gpu.processes, Found):
                for proc in gpu.processes.value:
                    if proc.pid not in pids:
                        pids.append(proc.pid)
                        names[proc.pid] = proc.name.value if isinstance(proc.name, Found) else "?"
        if not pids:
            return
        holders = self._holders()
        if holders is None:
            self._add(
                "Stop the processes holding GPU memory",
                Note(
                    "PIDs "
                    + ", ".join(f"{p} ({display(names[p])})" for p in pids)
                    + " hold GPU memory; check them on the machine and stop the ones you can"
                ),
                *why,
            )
            self._addressed(MEMORY_HELD)
            return
        by_pid = {h.pid: h for h in holders}
        visible = [by_pid[p] for p in pids if p in by_pid]
        for pid in (p for p in pids if p not in by_pid):
            self._add(
                f"PID {pid} ({display(names[pid])}) holds GPU memory but is not visible here",
                Note(
                    f"PID {pid} lives in another PID namespace (a container?): stop it "
                    "where it runs"
                ),
                *why,
            )
        units = tuple(dict.fromkeys(h.unit for h in visible if h.unit and _ref(h)))
        for unit in units:
            self._add(
                f"Stop {unit}: its process holds GPU memory (not restarted by this script)",
                StopService(unit, _refs(h for h in visible if h.unit == unit)),
                *why,
            )
        self._release_holders(tuple(visible), why, units)
        self._addressed(MEMORY_HELD)

    # --- nouveau, driver, permissions, torch -------------------------------------------------

    def _blacklist_nouveau(self) -> None:
        why = (NOUVEAU_LOADED,)
        self._add(
            f"Blacklist nouveau in {NOUVEAU_CONF}",
            WriteFile(NOUVEAU_CONF, NOUVEAU_TEXT),
            *why,
        )
        self._initramfs(why)
        self._addressed(NOUVEAU_LOADED)

    def _initramfs(self, why: tuple[str, ...]) -> None:
        fam = self._family()
        command = distro.initramfs_command(fam)
        if command:
            self._add(
                "Rebuild the initramfs so the blacklist applies at boot", RunCommand(command), *why
            )
        else:
            self._add(
                "Rebuild the initramfs (unknown distribution)",
                Note(
                    "rebuild the initramfs with your distribution's tool "
                    "(update-initramfs -u, dracut --force …)"
                ),
                *why,
            )

    def _install_driver(self, codes: set[str]) -> None:
        code = next((c for c in DRIVER_CODES if c in codes), DRIVER_TOO_OLD)
        findings = [f for c in (*DRIVER_CODES, DRIVER_TOO_OLD) for f in self._findings(c)]
        branch = _driver_branch(findings)
        open_modules = self._open_modules(codes)
        fam = self._family()
        commands = distro.driver_install_commands(fam, branch, open_modules=open_modules)
        flavour = "open" if open_modules else "proprietary"
        what = f"the NVIDIA driver {branch or '(newest)'} with the {flavour} kernel modules"
        if not commands:
            self._add(
                f"Install {what}",
                Note(
                    "install the driver with your distribution's packages: "
                    "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
                ),
                code,
            )
        for argv in commands:
            self._add(f"Install {what}: {' '.join(argv)}", RunCommand(argv), code)
        if not open_modules:
            self.notes.append(
                "a pre-Turing GPU needs the proprietary kernel modules (and a branch ≤ 580)"
            )
        self._addressed(code)
        if DRIVER_TOO_OLD in codes:
            self._addressed(DRIVER_TOO_OLD)

    def _open_modules(self, codes: set[str]) -> bool:
        if "driver.open-modules-required" in codes:
            return True
        caps = [g.compute_capability for g in nvml_gpus(self.report.facts)]
        versions = [_cc(c.value) for c in caps if isinstance(c, Found)]
        return not (versions and min(versions) < (7, 5))

    def _permissions(self) -> None:
        why = (PERMISSION_DENIED,)
        nodes = self.report.facts.kernel.device_nodes
        denied = denied_nodes(nodes.value if isinstance(nodes, Found) else ())
        if not denied:
            return
        gid = group_only(denied)
        user = self.report.facts.host.user
        if gid is not None:
            self._add(
                "Add the user to the group the device nodes grant access to",
                Note(
                    f'the nodes are read/write for group {gid}: sudo usermod -aG "$(getent '
                    f'group {gid} | cut -d: -f1)" {display(user)}, then log out and in'
                ),
                *why,
            )
            self._addressed(PERMISSION_DENIED)
            return
        strange = [n for n in denied if not NVIDIA_NODE.match(n.path)]
        if strange:
            self.notes.append(
                "no mode is set on "
                + ", ".join(display(n.path) for n in strange)
                + ": not the name of an NVIDIA device node"
            )
            denied = [n for n in denied if NVIDIA_NODE.match(n.path)]
        if not self.reboot:
            for node in denied:
                self._add(
                    f"Give everyone read/write access to {display(node.path)} "
                    f"(mode {display(node.mode)} → {DEFAULT_NODE_MODE}, the driver's default)",
                    SetMode(node.path, DEFAULT_NODE_MODE),
                    *why,
                )
        self._add(
            "Make the device permissions last",
            Note(
                "the mode lasts until the driver reloads; no group may use the nodes, so set "
                "the driver's device-file parameters: `options nvidia NVreg_DeviceFileMode=0666` "
                "in /etc/modprobe.d/nvidia-device-files.conf (or NVreg_DeviceFileUID/"
                "NVreg_DeviceFileGID with NVreg_DeviceFileMode=0660 to keep them to one group), "
                "or a udev rule where udev creates the nodes"
            ),
            *why,
        )
        self._addressed(PERMISSION_DENIED)

    def _reinstall_torch(self, reasons: tuple[str, ...]) -> None:
        findings = [f for c in reasons for f in self._findings(c)]
        choice, why_none = wheel.choose(
            self.report.facts, findings, self.options.tables, self.report.intent
        )
        if self.options.snapshot:
            # The snapshot's interpreter is a path its author chose: only --python counts.
            python = self.options.python
            if not python and choice is not None:
                self.notes.append(
                    "torch is not reinstalled: the plan is made from a snapshot, whose "
                    "interpreter is not taken; name the one to repair with --python"
                )
                return
        else:
            python = self.report.facts.torch.python or self.options.python
        if choice is None or not python:
            self.notes.append(
                why_none or "no torch wheel fits here: `envdoctor recommend` says why"
            )
            return
        untrusted = untrusted_index(choice.index_url, self.options.index_hosts)
        if untrusted:
            self.notes.append(
                f"torch is not reinstalled from {display(choice.index_url)}: {untrusted}; "
                "name a mirror you trust with --index-host"
            )
            return
        for title, action in wheel.set_actions(
            self.report.facts, choice, python, self.options.tables
        ):  # torch with its torchvision/torchaudio, in the environment's installer
            self._add(title, action, *reasons)
        for code in reasons:
            self._addressed(code)

    # --- the end ---------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.reboot:
            for reason, code in self.reboot:
                self._add("Reboot required", RebootRequired(reason), code)
            self._add(
                "After the reboot, verify",
                Note(f"after the reboot run: {' '.join(self.options.verify_argv)}"),
            )
            return
        self._add("Verify with envdoctor check", Verify(self.options.verify_argv))

    def _has_nvidia_gpu(self) -> bool:
        return gpu_presence(self.report.facts).seen

    def _family(self) -> str:
        ids = self.live.os_ids.value if isinstance(self.live.os_ids, Found) else ()
        os_name = self.report.facts.host.os_name
        return distro.family(ids, os_name.value if isinstance(os_name, Found) else "")


def _ref(holder: GpuHolder) -> tuple[HolderRef, ...]:
    """The holder as the script can find it again; () when its uid or start time is unknown."""
    if holder.uid < 0 or holder.start_time < 0:
        return ()
    return (HolderRef(holder.pid, holder.uid, holder.start_time),)


def _refs(holders: Iterable[GpuHolder]) -> tuple[HolderRef, ...]:
    return tuple(ref for holder in holders for ref in _ref(holder))


def _terminate(holder: GpuHolder) -> Terminate:
    box = holder.container
    return Terminate(
        pid=holder.pid,
        argv=holder.argv,
        uid=holder.uid,
        start_time=holder.start_time,
        user=holder.user,
        container=(box.name or box.id[:12]) if box else "",
    )


def _terminate_title(holder: GpuHolder) -> str:
    command = display(holder.command)
    if len(command) > _TITLE_COMMAND_CHARS:
        command = command[: _TITLE_COMMAND_CHARS - 1] + "…"
    where = ""
    if holder.container:
        where = f", container {display(holder.container.name or holder.container.id[:12])}"
    return f"Terminate PID {holder.pid} ({command}), user {display(holder.user)}{where}"


def _driver_branch(findings: Iterable[Finding]) -> str:
    """The driver branch the findings name ("570"), or "" for the distribution's newest."""
    patterns = (
        re.compile(r"nvidia-driver-([0-9]{3})\b"),
        re.compile(r"(?:>=|≥)\s*R?([0-9]{3})(?:\.[0-9]+)*\b"),
        re.compile(r"\bR([0-9]{3})\b"),
    )
    texts: list[str] = []
    for finding in findings:
        texts.append(finding.title)
        texts.extend(value for _, value in finding.evidence)
        if finding.remediation:
            texts.append(finding.remediation.summary)
            texts.extend(finding.remediation.steps)
    for pattern in patterns:
        for text in texts:
            match = pattern.search(text)
            if match:
                return match.group(1)
    return ""


def _cc(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    numbers = (whole(major, 9), whole(minor or "0", 9))
    return (
        (numbers[0], numbers[1]) if numbers[0] is not None and numbers[1] is not None else (99, 0)
    )
