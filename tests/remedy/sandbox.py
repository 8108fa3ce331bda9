"""A sandbox to run generated fix scripts in: a fake root and PATH shims that record every call.

``PATH`` holds only the sandbox's ``bin``: a recording shim for every command a fix script may
run (rmmod, modprobe, systemctl, kill, docker, pip's python, …) and links to the few harmless
utilities the script itself uses (find, grep, sed, sort, mkdir). A command the sandbox does not
know is "command not found", never the real one. Shims record their argv exactly (NUL-separated,
one file per call) and act on a small simulated machine:

- ``root/`` stands in for ``/`` (the script's ``--test-root``): ``proc/modules``,
  ``proc/driver/nvidia/version``, ``proc/PID/{cmdline,stat,status,cgroup,fd/N -> /dev/nvidia0}``,
  ``etc/``;
- ``world/`` holds the simulation state: services (state, PIDs, cgroup), containers (state,
  PIDs; the first is the main PID ``inspect`` reports), which PIDs ignore SIGTERM, the installed
  driver version, the uid ``id -u`` reports, the torch version pip reports, whether the python
  shim accepts ``-P``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envdoctor.model.facts import KernelModule

SHIMS = (
    "rmmod",
    "modprobe",
    "modinfo",
    "systemctl",
    "kill",
    "lsof",
    "fuser",
    "nvidia-smi",
    "nvidia-modprobe",
    "docker",
    "podman",
    "pip",
    "python",
    "id",
    "sleep",
    "chmod",
    "update-initramfs",
    "dracut",
    "mkinitcpio",
    "apt-get",
    "dnf",
    "zypper",
    "pacman",
    "ubuntu-drivers",
    "envdoctor",
    "reboot",
    "shutdown",
    "touch",
    "rm",
)
# What the scripts themselves may use besides the shims (on PATH next to them).
REAL_TOOLS = ("find", "grep", "sed", "sort", "mkdir", "cat", "bash", "stat")
# What the shims' behaviours use (on their PATH only, never the script's).
BEHAVIOUR_TOOLS = ("rm", "mv", "awk", "cat", "grep", "find", "head", "chmod")

_RECORDER = r"""#!/usr/bin/env bash
set -u
shopt -s nullglob
name=${0##*/}
calls=("$SANDBOX/calls"/*)
printf '%s\0' "$name" "$@" >"$SANDBOX/calls/$(printf '%06d' "${#calls[@]}")"
rc=0
PATH="$SANDBOX/real"
if [ -f "$SANDBOX/behaviour/$name" ]; then
    # shellcheck disable=SC1090
    source "$SANDBOX/behaviour/$name"
fi
exit "$rc"
"""

# Behaviours: bash sourced by the recorder with the shim's "$@"; they set rc to fail.
_BEHAVIOUR = {
    "kill": r"""
sig=$2 pid=$3
if [ "$sig" = KILL ] || [ ! -e "$SANDBOX/world/stubborn/$pid" ]; then
    rm -rf "$ROOT/proc/$pid"
fi
""",
    "systemctl": r"""
case "$1" in
is-active)
    unit=${!#}
    [ "$(cat "$SANDBOX/world/services/$unit" 2>/dev/null)" = active ] || rc=3 ;;
show)
    cat "$SANDBOX/world/services/${!#}.cgroup" 2>/dev/null || echo ;;
stop)
    echo inactive >"$SANDBOX/world/services/$2"
    for pid in $(cat "$SANDBOX/world/services/$2.pids" 2>/dev/null); do
        rm -rf "$ROOT/proc/$pid"
    done ;;
start)
    echo active >"$SANDBOX/world/services/$2" ;;
esac
""",
    "docker": r"""
case "$1" in
inspect)
    state=$(cat "$SANDBOX/world/containers/${!#}" 2>/dev/null) || { rc=1; state=; }
    read -r main _ <"$SANDBOX/world/containers/${!#}.pids" 2>/dev/null || main=0
    out=${3//'{{.State.Running}}'/$state}
    [ -n "$state" ] && echo "${out//'{{.State.Pid}}'/${main:-0}}" ;;
stop)
    echo false >"$SANDBOX/world/containers/$2"
    for pid in $(cat "$SANDBOX/world/containers/$2.pids" 2>/dev/null); do
        rm -rf "$ROOT/proc/$pid"
    done
    echo "$2" ;;
esac
""",
    "rmmod": r"""
mods="$ROOT/proc/modules"
users=$(awk -v m="$1" '$1 == m { print $4 }' "$mods")
fds=("$ROOT"/proc/[0-9]*/fd)  # nullglob: empty when no process is left (never find's ".")
held=
if [ "${#fds[@]}" -gt 0 ]; then
    held=$(find "${fds[@]}" -lname '/dev/nvidia*' 2>/dev/null | head -n1)
fi
if [ -n "$users" ] && [ "$users" != "-" ]; then
    echo "rmmod: ERROR: Module $1 is in use by: ${users%,}" >&2
    rc=1
elif [ "$1" = nvidia ] && [ -n "$held" ]; then
    echo "rmmod: ERROR: Module nvidia is in use" >&2
    rc=1
else
    awk -v m="$1" '$1 != m {
        n = split($4, u, ","); out = ""
        for (i = 1; i <= n; i++) if (u[i] != "" && u[i] != "-" && u[i] != m) out = out u[i] ","
        if (out == "") out = "-"
        $4 = out; print }' "$mods" >"$mods.new"
    mv "$mods.new" "$mods"
fi
""",
    "modprobe": r"""
echo "$1 0 0 - Live 0x0" >>"$ROOT/proc/modules"
if [ "$1" = nvidia ]; then
    v=$(cat "$SANDBOX/world/installed")
    echo "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  $v  Release Build" \
        >"$ROOT/proc/driver/nvidia/version"
fi
""",
    "nvidia-modprobe": r"""
if [ "$1" = -u ] && ! grep -q '^nvidia_uvm ' "$ROOT/proc/modules"; then
    echo "nvidia_uvm 0 0 - Live 0x0" >>"$ROOT/proc/modules"
fi
""",
    "modinfo": r"""
cat "$SANDBOX/world/installed"
""",
    "id": r"""
cat "$SANDBOX/world/uid"
""",
    "python": r"""
# `-P -V`: a Python 3.11+ prints its version; an older one refuses -P (world/python_safe_path).
if [ "$*" = "-P -V" ]; then
    if [ "$(cat "$SANDBOX/world/python_safe_path")" = yes ]; then
        echo "Python 3.12.3"
    else
        echo "Unknown option: -P" >&2
        rc=2
    fi
    set --
elif [ "${1:-}" = -P ]; then
    shift
fi
if [ "$*" = "-m pip show torch" ]; then
    echo "Name: torch"
    echo "Version: $(cat "$SANDBOX/world/torch")"
elif [ "${1:-} ${2:-} ${3:-}" = "-m pip install" ]; then
    cat "$SANDBOX/world/torch_after" >"$SANDBOX/world/torch" 2>/dev/null || true
fi
""",
    "envdoctor": r"""
rc=$(cat "$SANDBOX/world/verify_rc" 2>/dev/null || echo 0)
""",
    "chmod": r"""
chmod "$@" || rc=$?
""",
}


START_TIME = 4_242_000  # clock ticks after boot: field 22 of every sandbox process's stat
SESSION_CGROUP = "/user.slice/user-1000.slice/session-2.scope"


def stat_line(pid: int, comm: str, start_time: int) -> str:
    """A /proc/PID/stat line as the kernel writes it (52 fields; field 22 the start time)."""
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560", *["0"] * 8, "20", "0", "1", "0"]
    fields += [str(start_time), "1000000", "1000", *["0"] * 28]
    return f"{pid} ({comm}) {' '.join(fields)}\n"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[tuple[str, ...]]


class Sandbox:
    """A fake machine for one test (see the module docstring)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.bin = base / "bin"
        self.world = base / "world"
        for d in (
            self.root / "proc" / "driver" / "nvidia",
            self.root / "etc",
            self.root / "dev",
            self.bin,
            self.world / "services",
            self.world / "containers",
            self.world / "stubborn",
            base / "calls",
            base / "behaviour",
            base / "real",
        ):
            d.mkdir(parents=True, exist_ok=True)
        for name in SHIMS:
            shim = self.bin / name
            shim.write_text(_RECORDER)
            shim.chmod(0o755)
        for name, code in _BEHAVIOUR.items():
            (base / "behaviour" / name).write_text(code)
        for tool in REAL_TOOLS:
            (self.bin / tool).symlink_to(_which(tool))
        for tool in BEHAVIOUR_TOOLS:
            (base / "real" / tool).symlink_to(_which(tool))
        self.state("uid", "0")
        self.state("installed", "580.159.04")
        self.state("torch", "2.13.0+cpu")
        self.state("python_safe_path", "yes")
        self.modules(())
        self.python = str(self.bin / "python")
        self.verify = (str(self.bin / "envdoctor"), "check")

    # --- the simulated machine --------------------------------------------------------------

    def state(self, key: str, value: str) -> None:
        (self.world / key).write_text(value + "\n")

    def modules(self, modules: Iterable[KernelModule]) -> None:
        lines = [
            f"{m.name} 16384 {m.refcount} {''.join(u + ',' for u in m.used_by) or '-'} Live 0x0"
            for m in modules
        ]
        (self.root / "proc" / "modules").write_text("".join(line + "\n" for line in lines))

    def loaded_driver(self, version: str) -> None:
        (self.root / "proc" / "driver" / "nvidia" / "version").write_text(
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build\n"
        )

    def process(
        self,
        pid: int,
        argv: Sequence[str],
        *,
        devices: Sequence[str] = ("/dev/nvidia0", "/dev/nvidiactl"),
        stubborn: bool = False,
        uid: int = 0,
        start_time: int = START_TIME,
        cgroup: str = SESSION_CGROUP,
        comm: str = "",
    ) -> None:
        """A process holding ``devices``; ``stubborn`` ones ignore SIGTERM.

        ``stat`` carries ``comm`` (default: argv[0]'s base name, cut to 15 characters as the
        kernel does) and ``start_time`` as field 22; ``status`` the real ``uid``.
        """
        proc = self.root / "proc" / str(pid)
        (proc / "fd").mkdir(parents=True, exist_ok=True)
        (proc / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
        name = comm or (argv[0].rsplit("/", 1)[-1][:15] if argv else "")
        (proc / "stat").write_bytes(stat_line(pid, name, start_time).encode())
        (proc / "status").write_text(f"Name:\t{name}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        (proc / "cgroup").write_text(f"0::{cgroup}\n")
        for n, dev in enumerate(devices, start=3):
            os.symlink(dev, proc / "fd" / str(n))
        if stubborn:
            (self.world / "stubborn" / str(pid)).touch()

    def service(
        self, unit: str, *, active: bool = True, pids: Sequence[int] = (), cgroup: str = ""
    ) -> None:
        """A unit; ``cgroup`` is what `systemctl show -p ControlGroup --value` prints."""
        (self.world / "services" / unit).write_text("active\n" if active else "inactive\n")
        (self.world / "services" / f"{unit}.pids").write_text(" ".join(map(str, pids)) + "\n")
        (self.world / "services" / f"{unit}.cgroup").write_text(cgroup + "\n")

    def container(self, cid: str, *, running: bool = True, pids: Sequence[int] = ()) -> None:
        (self.world / "containers" / cid).write_text("true\n" if running else "false\n")
        (self.world / "containers" / f"{cid}.pids").write_text(" ".join(map(str, pids)) + "\n")

    def pids(self) -> set[int]:
        return {int(p.name) for p in (self.root / "proc").iterdir() if p.name.isdigit()}

    def loaded_modules(self) -> list[str]:
        return [
            line.split()[0] for line in (self.root / "proc" / "modules").read_text().splitlines()
        ]

    # --- running a script -------------------------------------------------------------------

    def run(
        self, script: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
    ) -> Run:
        path = self.base / "fix.sh"
        path.write_text(script)
        path.chmod(0o755)
        for old in (self.base / "calls").iterdir():
            old.unlink()
        environ = {
            "PATH": str(self.bin),
            "HOME": str(self.base),
            "LC_ALL": "C.UTF-8",
            "SANDBOX": str(self.base),
            "ROOT": str(self.root),
            **(env or {}),
        }
        # The script takes nothing from its environment: the fake root, the shims' PATH and
        # short waits are given on its command line (the environment above is the shims').
        options = (
            *("--test-root", str(self.root), "--path", str(self.bin)),
            *("--term-wait", "2", "--kill-wait", "1"),
        )
        bash = shutil.which("bash")
        assert bash
        proc = subprocess.run(
            [bash, str(path), *options, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr, self.calls())

    def calls(self) -> list[tuple[str, ...]]:
        out = []
        for record in sorted((self.base / "calls").iterdir()):
            words = record.read_bytes().split(b"\0")[:-1]
            out.append(tuple(w.decode() for w in words))
        return out


def _which(tool: str) -> str:
    found = shutil.which(tool, path="/usr/bin:/bin")
    assert found, f"the sandbox needs {tool}"
    return found
