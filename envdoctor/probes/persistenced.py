"""nvidia-persistenced: whether the daemon that keeps the GPUs initialised runs (issue 39).

Read from files alone (the probe tier starts no process): the daemon writes its PID to
``/run/nvidia-persistenced/nvidia-persistenced.pid`` (its ``--pid-file`` default, per the
nvidia-persistenced man page), and ``/proc/PID/comm`` says whether that process is still the
daemon (a PID file outlives a killed daemon, and its PID may be reused).
"""

from __future__ import annotations

from envdoctor.model.facts import PersistenceDaemon
from envdoctor.model.probed import Absent, Found, Probed, why_missing
from envdoctor.platform.host import Host

PID_FILES = (
    "/run/nvidia-persistenced/nvidia-persistenced.pid",
    "/var/run/nvidia-persistenced/nvidia-persistenced.pid",
)
COMM = "nvidia-persiste"
"""The daemon's name as /proc/PID/comm holds it: the kernel keeps 15 characters."""


def probe_persistenced(host: Host) -> Probed[PersistenceDaemon]:
    """The daemon's PID file and whether its process runs; Absent when there is no PID file."""
    reasons = []
    for path in PID_FILES:
        text = host.read_text(path, limit=64)
        if not isinstance(text, Found):
            reasons.append(f"{path}: {why_missing(text)}")
            continue
        word = text.value.strip()
        if not word.isdigit() or len(word) > 9:
            return Found(PersistenceDaemon(pid_file=path, pid=0, running=False))
        pid = int(word)
        comm = host.read_text(f"/proc/{pid}/comm", limit=64)
        running = isinstance(comm, Found) and comm.value.strip().startswith(COMM)
        return Found(PersistenceDaemon(pid_file=path, pid=pid, running=running))
    return Absent("nvidia-persistenced is not running (no PID file: " + "; ".join(reasons) + ")")
