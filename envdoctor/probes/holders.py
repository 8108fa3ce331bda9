"""What `envdoctor fix` needs beyond ``Facts``: who holds /dev/nvidia*, which GPU services run.

Holders are found by scanning ``/proc/*/fd`` for links to ``/dev/nvidia*`` (the kernel's own
answer), then cross-checked with ``lsof`` (or ``fuser``) when one is installed: a PID only the
cross-check saw is kept and marked, a PID only the scan saw is normal (lsof may be missing
or slower). For each holder we read ``cmdline`` (the exact argv the script re-checks before
any signal), ``status`` (name, real uid), ``stat`` (start time: with the uid, what tells a
reused PID apart) and ``cgroup`` (container or systemd unit).

A cgroup path is evidence only where its owner is the system: a user with a delegated subtree
(``/user.slice/user-1000.slice/user@1000.service/…``) can create any names below it, such as
``…/system.slice/sshd.service`` or ``…/docker-<64 hex>.scope``. Containers and units are
therefore recognised only at the top of the systemd hierarchy (``/system.slice/…``,
``/machine.slice/…``, ``/kubepods…``, ``/docker/…``); a unit is kept only when systemd agrees
that the process lies in the unit's own cgroup, and only for a holder owned by root or by the
unit's ``User=``; and never for units that carry logins, schedulers or container runtimes
(``PROTECTED_UNITS``). Any other holder is terminated by PID, with its identity re-checked.

Everything goes through the ``Host`` seam; nothing here raises. Without root, other users'
``/proc/PID/fd`` cannot be listed: the count of such processes is kept as a note so the plan
can say its list may be incomplete.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace

from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.model.units import plural, whole
from envdoctor.platform.host import Deadline, Host

# Daemons that open /dev/nvidia* and re-open it at once when killed, in the order they are
# stopped (consumers first); they are started again in the reverse order.
GPU_SERVICES = (
    "dcgm-exporter",
    "nvidia-dcgm",
    "dcgm",
    "nvidia-imex",
    "nvidia-gridd",
    "nvidia-fabricmanager",
    "nvidia-persistenced",
)

# Display servers and compositors: a GPU driving a screen cannot have its modules reloaded
# from inside that session, so these make the plan say "reboot" instead.
DISPLAY_SERVERS = frozenset(
    {
        "X",
        "Xorg",
        "Xwayland",
        "gnome-shell",
        "kwin_wayland",
        "kwin_x11",
        "mutter",
        "sway",
        "weston",
        "Hyprland",
        "cosmic-comp",
        "gdm-x-session",
        "sddm-greeter",
    }
)

_HEX = "[0-9a-f]{64}"
# Container cgroups, matched from the start of the path only (see the module docstring); the
# match is the container's own cgroup, everything in it belongs to that container.
_CONTAINER_PATTERNS = tuple(
    (runtime, re.compile(pattern.replace("HEX", _HEX) + r"(?=/|$)"))
    for runtime, pattern in (
        # Kubernetes: /kubepods[.slice]/<qos>/<pod>/<runtime>-<id>[.scope] (systemd or cgroupfs)
        (
            "kubernetes",
            r"/kubepods(?:\.slice)?(?:/[^/]+){1,2}/(?:(?:cri-containerd|crio|docker)-)?"
            r"(HEX)(?:\.scope)?",
        ),
        ("docker", r"/system\.slice/docker-(HEX)\.scope"),
        ("docker", r"/docker/(HEX)"),
        ("podman", r"/machine\.slice/libpod-(?:conmon-)?(HEX)\.scope"),
        ("podman", r"/libpod_parent/libpod-(HEX)"),
        ("containerd", r"/system\.slice/cri-containerd-(HEX)\.scope"),
        ("cri-o", r"/(?:system|machine)\.slice/crio-(HEX)\.scope"),
    )
)
_SYSTEM_UNIT = re.compile(r"/system\.slice/(?:[^/]+\.slice/)*([A-Za-z0-9:_.@\\-]+\.service)(?=/|$)")
# Units a holder may run in without being their daemon (a user logged in over ssh without
# pam_systemd, a cron job, a container's process under its runtime): stopping one would cut
# off logins or stop every container, so their holders are terminated by PID instead.
PROTECTED_UNITS = (
    "ssh.service",
    "sshd.service",
    "sshd@*.service",
    "dropbear.service",
    "cron.service",
    "crond.service",
    "cronie.service",
    "atd.service",
    "getty@*.service",
    "serial-getty@*.service",
    "console-getty.service",
    "systemd-*.service",
    "dbus.service",
    "dbus-broker.service",
    "polkit.service",
    "docker.service",
    "containerd.service",
    "podman.service",
    "crio.service",
    "kubelet.service",
    "slurmd.service",
    "slurmctld.service",
)
_MAX_PROCESSES = 65536
_CROSS_CHECK_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Container:
    """The container a holder runs in, from its cgroup path."""

    runtime: str  # "docker", "podman", "containerd", "cri-o" or "kubernetes"
    id: str  # the full 64-hex id
    name: str = ""  # from `docker inspect`, when it answered
    cgroup: str = ""  # the container's own cgroup ("/system.slice/docker-<id>.scope")


@dataclass(frozen=True, slots=True)
class GpuHolder:
    """A process with a file descriptor open on a /dev/nvidia* node."""

    pid: int
    name: str  # the kernel's short name (status: Name)
    argv: tuple[str, ...]  # /proc/PID/cmdline split on NUL: what the script re-checks
    uid: int  # real uid; -1 when status could not be read
    user: str
    devices: tuple[str, ...]  # the /dev/nvidia* nodes it holds ("" entries never)
    container: Container | None = None
    unit: str = ""  # the systemd system service it runs under, confirmed by systemd
    seen_by: tuple[str, ...] = ("proc",)  # "proc" (the fd scan), "lsof", "fuser"
    start_time: int = -1  # /proc/PID/stat field 22 (clock ticks after boot); -1 unreadable
    cgroup: str = ""  # its path in the systemd hierarchy (see ``cgroup_path``)

    @property
    def command(self) -> str:
        """The command line for people: argv joined by spaces, or the name in brackets."""
        return " ".join(self.argv) if self.argv else f"[{self.name}]"

    @property
    def is_display_server(self) -> bool:
        program = self.argv[0].rsplit("/", 1)[-1] if self.argv else ""
        return self.name in DISPLAY_SERVERS or program in DISPLAY_SERVERS


@dataclass(frozen=True, slots=True)
class FixFacts:
    """The live facts `envdoctor fix` adds to ``Facts`` (all absent for a snapshot)."""

    holders: Probed[tuple[GpuHolder, ...]]
    active_services: Probed[tuple[str, ...]]  # GPU_SERVICES entries that are active, in order
    os_ids: Probed[tuple[str, ...]]  # ID and ID_LIKE words from /etc/os-release
    self_pid: int = 0  # envdoctor's own PID (never listed as a holder); 0 when unknown
    notes: tuple[str, ...] = ()
    module_file: Probed[str] = ProbeFailed("not read")
    """Where the running kernel's nvidia module is (``modinfo -n nvidia``); Absent: none is built
    for this kernel (a kernel upgrade DKMS did not build for), so ``modprobe nvidia`` would fail;
    ProbeFailed: not known (a snapshot, no modinfo), and the plan loads it as usual."""
    dkms: str | None = None  # the dkms program, which builds it


def absent_fix_facts(reason: str) -> FixFacts:
    """FixFacts for a run that cannot look at the machine (``--snapshot``)."""
    return FixFacts(
        holders=Absent(reason),
        active_services=Absent(reason),
        os_ids=Absent(reason),
        module_file=ProbeFailed(reason),
    )


def probe_fix_facts(host: Host, *, deadline: Deadline, loads_module: bool = True) -> FixFacts:
    """Holders, active GPU services and the OS family of the live machine; with ``loads_module``
    (a plan that loads the nvidia module) also whether one is built for this kernel."""
    notes: list[str] = []
    self_pid = _self_pid(host)
    holders = scan_holders(host, deadline=deadline, self_pid=self_pid, notes=notes)
    return FixFacts(
        holders=holders,
        active_services=probe_services(host, deadline=deadline),
        os_ids=probe_os_ids(host),
        self_pid=self_pid,
        notes=tuple(notes),
        module_file=(
            probe_module_file(host, deadline=deadline)
            if loads_module
            else ProbeFailed("not read: no plan loads the module")
        ),
        dkms=host.which("dkms") if loads_module else None,
    )


def scan_holders(
    host: Host, *, deadline: Deadline, self_pid: int = 0, notes: list[str] | None = None
) -> Probed[tuple[GpuHolder, ...]]:
    """Every process holding /dev/nvidia*, by the /proc fd scan plus the lsof/fuser cross-check."""
    notes = [] if notes is None else notes
    listing = host.list_dir("/proc")
    if not isinstance(listing, Found):
        return listing
    pids = sorted(int(entry) for entry in listing.value if entry.isdigit())[:_MAX_PROCESSES]
    held: dict[int, list[str]] = {}
    unreadable = 0
    for pid in pids:
        if pid == self_pid:
            continue
        if deadline.expired():
            notes.append("the /proc scan ran out of time; the holder list may be incomplete")
            break
        fds = host.list_dir(f"/proc/{pid}/fd")
        if isinstance(fds, ProbeFailed):
            unreadable += 1
            continue
        if not isinstance(fds, Found):
            continue  # the process exited meanwhile
        devices = _nvidia_targets(host, pid, fds.value)
        if devices:
            held[pid] = devices
    if unreadable:
        notes.append(
            f"the open files of {plural(unreadable, 'process', 'processes')} could not be read "
            "(run as root for a complete list)"
        )
    seen_by: dict[int, list[str]] = {pid: ["proc"] for pid in held}
    nodes = _nvidia_nodes(host)
    tool, cross = _cross_check(host, nodes, deadline) if nodes else ("", [])
    if nodes and not tool:
        notes.append("neither lsof nor fuser is installed: holders come from the /proc scan only")
    for pid in cross:
        if pid == self_pid:
            continue
        seen_by.setdefault(pid, []).append(tool)
        if pid not in held:
            held[pid] = []
            notes.append(f"PID {pid} was reported by {tool} only (not by the /proc scan)")
    passwd = _passwd(host)
    holders = [_describe(host, pid, held[pid], tuple(seen_by[pid]), passwd) for pid in sorted(held)]
    holders = _confirm_units(host, holders, passwd, deadline, notes)
    return Found(tuple(_name_containers(host, holders, deadline)))


def probe_services(host: Host, *, deadline: Deadline) -> Probed[tuple[str, ...]]:
    """Which of GPU_SERVICES systemd reports active (one `systemctl is-active` call)."""
    if host.which("systemctl") is None:
        return Absent("systemctl is not installed (no systemd services to stop)")
    result = host.run(("systemctl", "is-active", *GPU_SERVICES), timeout=deadline.cap(10.0))
    if result.status != "ok":
        return ProbeFailed(result.describe())
    states = result.stdout.split()
    if len(states) != len(GPU_SERVICES):
        return ProbeFailed(
            f"systemctl is-active answered {len(states)} lines for {len(GPU_SERVICES)} units"
        )
    return Found(
        tuple(unit for unit, state in zip(GPU_SERVICES, states, strict=True) if state == "active")
    )


def probe_module_file(host: Host, *, deadline: Deadline) -> Probed[str]:
    """The nvidia module the running kernel would load (``modinfo -n nvidia``, which resolves it
    through /lib/modules/$(uname -r) as modprobe does)."""
    if host.which("modinfo") is None:
        return ProbeFailed("modinfo is not installed (kmod): cannot tell whether a module is built")
    result = host.run(("modinfo", "-n", "nvidia"), timeout=deadline.cap(5.0))
    if result.status != "ok":
        return ProbeFailed(result.describe())
    path = result.stdout.strip()
    if result.returncode == 0 and path:
        return Found(path)
    if "not found" in result.stderr:
        release = host.identity().kernel_release
        return Absent(f"no nvidia module is built for kernel {release} ({result.stderr.strip()})")
    return ProbeFailed(result.describe())


def probe_os_ids(host: Host) -> Probed[tuple[str, ...]]:
    """ID and ID_LIKE from /etc/os-release (e.g. ("ubuntu", "debian"))."""
    text = host.read_text("/etc/os-release")
    if not isinstance(text, Found):
        return text
    ids: list[str] = []
    for line in text.value.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            ids.extend(value.strip().strip("\"'").lower().split())
    return Found(tuple(dict.fromkeys(ids)))


def cgroup_path(cgroup: str) -> str:
    """The path in the systemd hierarchy of a /proc/PID/cgroup text.

    ``name=systemd`` (cgroup v1 and hybrid), else the unified ``0::`` line (v2), else the first
    line (a v1 machine without systemd). It is the path `systemctl show -p ControlGroup` speaks
    of, and the one the fix script reads again before it stops anything.
    """
    unified = first = ""
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[1] == "name=systemd":
            return parts[2]
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
        first = first or parts[2]
    return unified or first


def container_of(cgroup: str) -> Container | None:
    """The container a /proc/PID/cgroup text places the process in, if the system made it."""
    path = cgroup_path(cgroup)
    for runtime, pattern in _CONTAINER_PATTERNS:
        match = pattern.match(path)
        if match:
            return Container(runtime=runtime, id=match.group(1), cgroup=match.group(0))
    return None


def unit_of(cgroup: str) -> str:
    """The systemd system service (``name.service``) a /proc/PID/cgroup text places it in."""
    match = _SYSTEM_UNIT.match(cgroup_path(cgroup))
    return match.group(1) if match else ""


def is_protected_unit(unit: str) -> bool:
    """A unit never stopped for a holder found in it (``PROTECTED_UNITS``)."""
    return any(fnmatch.fnmatchcase(unit, pattern) for pattern in PROTECTED_UNITS)


def within(path: str, root: str) -> bool:
    """``path`` is the cgroup ``root`` or lies below it (never true for an empty or "/" root)."""
    return root.startswith("/") and root != "/" and (path == root or path.startswith(root + "/"))


def start_time_of(stat: str) -> int:
    """Field 22 of /proc/PID/stat, the start time; -1 when the text is not a stat line.

    The second field is the command name in parentheses, and a name may hold spaces and
    parentheses itself ("a) R 1 (b"): the fields after it are counted from the *last* ")".
    """
    head, paren, rest = stat.rpartition(")")
    fields = rest.split()
    if not paren or "(" not in head or len(fields) < 20 or not fields[19].isdigit():
        return -1
    return int(fields[19])


def split_cmdline(text: str) -> tuple[str, ...]:
    """/proc/PID/cmdline (NUL-separated, NUL-terminated) as argv; () for a kernel thread."""
    if not text:
        return ()
    parts = text.split("\0")
    return tuple(parts[:-1] if parts[-1] == "" else parts)


def _resolve(host: Host, path: str) -> str:
    """``host.realpath`` that never raises (the kernel refuses some /proc/PID/fd links)."""
    try:
        return host.realpath(path)
    except OSError:
        return path


def _self_pid(host: Host) -> int:
    resolved = _resolve(host, "/proc/self").rsplit("/", 1)[-1]
    return int(resolved) if resolved.isdigit() else 0


def _nvidia_targets(host: Host, pid: int, fds: tuple[str, ...]) -> list[str]:
    devices: list[str] = []
    for fd in fds:
        if not fd.isdigit():
            continue
        target = _resolve(host, f"/proc/{pid}/fd/{fd}")
        if target.startswith("/dev/nvidia") and target not in devices:
            devices.append(target)
    return devices


def _cross_check(host: Host, nodes: tuple[str, ...], deadline: Deadline) -> tuple[str, list[int]]:
    """PIDs lsof (or fuser) says hold ``nodes``; ("", []) when neither tool is installed."""
    if host.which("lsof"):
        result = host.run(
            ("lsof", "-t", "-w", "--", *nodes), timeout=deadline.cap(_CROSS_CHECK_TIMEOUT)
        )
        return "lsof", _pids(result.stdout) if result.status == "ok" else []
    if host.which("fuser"):
        # fuser prints the PIDs on stdout (with access letters) and the file names on stderr.
        result = host.run(("fuser", *nodes), timeout=deadline.cap(_CROSS_CHECK_TIMEOUT))
        return "fuser", _pids(result.stdout) if result.status == "ok" else []
    return "", []


def _nvidia_nodes(host: Host) -> tuple[str, ...]:
    listing = host.list_dir("/dev")
    if not isinstance(listing, Found):
        return ()
    nodes = [f"/dev/{name}" for name in listing.value if name.startswith("nvidia")]
    caps = host.list_dir("/dev/nvidia-caps")
    if isinstance(caps, Found):
        nodes = [n for n in nodes if n != "/dev/nvidia-caps"]
        nodes.extend(f"/dev/nvidia-caps/{name}" for name in caps.value)
    return tuple(nodes)


def _pids(text: str) -> list[int]:
    return sorted({int(m) for m in re.findall(r"\b([0-9]{1,9})[a-zA-Z]*\b", text)})


def _passwd(host: Host) -> dict[int, str]:
    text = host.read_text("/etc/passwd")
    users: dict[int, str] = {}
    if isinstance(text, Found):
        for line in text.value.splitlines():
            fields = line.split(":")  # writable by the user in some containers (OpenShift)
            uid = whole(fields[2], 10) if len(fields) > 2 else None
            if uid is not None:
                users.setdefault(uid, fields[0])
    return users


def _describe(
    host: Host,
    pid: int,
    devices: list[str],
    seen_by: tuple[str, ...],
    passwd: dict[int, str],
) -> GpuHolder:
    # argv exactly, bytes that are not UTF-8 included (as surrogates, which the script's quoting
    # writes back as those bytes): decoded with replacement, it matched nothing the script read
    cmdline = host.read_bytes(f"/proc/{pid}/cmdline")
    argv = (
        split_cmdline(cmdline.value.decode("utf-8", "surrogateescape"))
        if isinstance(cmdline, Found)
        else ()
    )
    name, uid = "", -1
    status = host.read_text(f"/proc/{pid}/status")
    if isinstance(status, Found):
        for line in status.value.splitlines():
            key, _, value = line.partition(":")
            if key == "Name":
                name = value.strip()
            elif key == "Uid" and value.split():
                found = whole(value.split()[0], 10)
                uid = -1 if found is None else found
    stat = host.read_text(f"/proc/{pid}/stat")
    cgroup = host.read_text(f"/proc/{pid}/cgroup")
    cgroup_text = cgroup.value if isinstance(cgroup, Found) else ""
    container = container_of(cgroup_text)
    return GpuHolder(
        pid=pid,
        name=name,
        argv=argv,
        uid=uid,
        user=passwd.get(uid, str(uid) if uid >= 0 else "?"),
        devices=tuple(devices),
        container=container,
        unit="" if container else unit_of(cgroup_text),  # a candidate until systemd confirms
        seen_by=seen_by,
        start_time=start_time_of(stat.value) if isinstance(stat, Found) else -1,
        cgroup=cgroup_path(cgroup_text),
    )


def _confirm_units(
    host: Host,
    holders: list[GpuHolder],
    passwd: dict[int, str],
    deadline: Deadline,
    notes: list[str],
) -> list[GpuHolder]:
    """Keep a holder's unit only where stopping that unit is right (module docstring).

    One `systemctl show` call answers, for every candidate unit, its ``User=`` and its
    ``ControlGroup``; a holder whose unit is dropped is terminated by PID instead.
    """
    wanted = tuple(dict.fromkeys(h.unit for h in holders if h.unit))
    if not wanted:
        return holders
    confirmed = _unit_properties(host, wanted, deadline)
    uids = {name: uid for uid, name in passwd.items()}
    out: list[GpuHolder] = []
    for holder in holders:
        why = _why_not_stop(holder, confirmed, uids) if holder.unit else ""
        if why:
            notes.append(
                f"PID {holder.pid} runs under {holder.unit}, which is not stopped for it: {why}; "
                "the PID itself is terminated"
            )
            holder = replace(holder, unit="")
        out.append(holder)
    return out


def _why_not_stop(
    holder: GpuHolder, confirmed: dict[str, tuple[str, str]], uids: dict[str, int]
) -> str:
    """Why stopping ``holder.unit`` for this holder would be wrong; "" when it is right."""
    unit = holder.unit
    if is_protected_unit(unit):
        return f"{unit} carries logins or other services"
    if unit not in confirmed:
        return f"systemd did not confirm {unit} (`systemctl show` failed)"
    user, control_group = confirmed[unit]
    if not within(holder.cgroup, control_group):
        return f"it is not in {unit}'s own cgroup ({control_group or 'none'})"
    if unit.removesuffix(".service") in GPU_SERVICES:
        return ""  # stopped by name whenever active (nvidia-persistenced drops to its user)
    if holder.uid < 0 or holder.uid not in (0, _uid_of(user, uids)):
        return f"it is not owned by root or by {unit}'s user ({user or 'root'})"
    return ""


def _unit_properties(
    host: Host, units: tuple[str, ...], deadline: Deadline
) -> dict[str, tuple[str, str]]:
    """unit -> (User=, ControlGroup=) from systemd; {} when systemctl cannot answer."""
    if host.which("systemctl") is None:
        return {}
    result = host.run(
        ("systemctl", "show", "--property=User,ControlGroup", "--", *units),
        timeout=deadline.cap(10.0),
    )
    if not result.ok:
        return {}
    blocks = [b for b in result.stdout.split("\n\n") if b.strip()]
    if len(blocks) != len(units):
        return {}
    answer: dict[str, tuple[str, str]] = {}
    for unit, block in zip(units, blocks, strict=True):
        props = dict(line.partition("=")[::2] for line in block.splitlines())
        answer[unit] = (props.get("User", "").strip(), props.get("ControlGroup", "").strip())
    return answer


def _uid_of(user: str, uids: dict[str, int]) -> int:
    """The uid of a unit's ``User=`` (empty: root); -2 when it cannot be resolved."""
    if not user:
        return 0
    number = whole(user, 10)
    return number if number is not None else uids.get(user, -2)


def _name_containers(host: Host, holders: list[GpuHolder], deadline: Deadline) -> list[GpuHolder]:
    """Docker containers' names, one `docker inspect` per container."""
    if not host.which("docker"):
        return holders
    names: dict[str, str] = {}
    named = []
    for holder in holders:
        box = holder.container
        if box is not None and box.runtime == "docker":
            if box.id not in names:
                names[box.id] = _docker_name(host, box.id, deadline)
            holder = replace(holder, container=replace(box, name=names[box.id]))
        named.append(holder)
    return named


def _docker_name(host: Host, container_id: str, deadline: Deadline) -> str:
    result = host.run(
        ("docker", "inspect", "--format", "{{.Name}}", container_id), timeout=deadline.cap(5.0)
    )
    return result.stdout.strip().lstrip("/") if result.ok else ""
