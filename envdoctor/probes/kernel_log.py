"""Xid events since boot, from the kernel's log: ``/dev/kmsg``, else (full tier) the journal.

``/dev/kmsg`` needs no program and reads in a few milliseconds, but most distributions restrict
it to root (``kernel.dmesg_restrict = 1``); the journal (``journalctl -k -b``) is readable by the
groups ``adm`` and ``systemd-journal`` too. The probe tier starts no process, so it reads only
``/dev/kmsg``. Each source that could not be read is named with its reason.
"""

from __future__ import annotations

import re

from envdoctor.model.facts import KernelLog, XidEvents
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing
from envdoctor.platform.host import Deadline, Host

KMSG = "/dev/kmsg"
JOURNAL = ("journalctl", "-k", "-b", "-r", "--no-pager", "-o", "short-monotonic")
"""The kernel's messages of this boot, newest first: a cut-off output loses the oldest ones."""
JOURNAL_TIMEOUT = 5.0
BOOT_WITHIN_S = 60.0
"""The journal reaches back to boot when its oldest kernel line is this close to it."""
MAX_XID_KINDS = 256
MESSAGE_CHARS = 300
_DENIED_HINT = "not seeing messages from other users and the system"

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus." and its variants:
# without "PCI:", with a function number, or with no device at all ("NVRM: Xid 154, ...").
_XID = r"NVRM: Xid (?:\((?:PCI:)?(?P<device>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):? )?(?P<xid>\d{1,5})\b"
_JOURNAL_TIME = r"^\[\s*(\d+(?:\.\d+)?)\]"


def probe_kernel_log(host: Host, *, deadline: Deadline, fast: bool) -> Probed[KernelLog]:
    """The Xid events since boot from the first source that can be read."""
    kmsg = host.read_kmsg()
    if isinstance(kmsg, Found):
        return Found(parse_kmsg(kmsg.value))
    unread = [(KMSG, _why_kmsg(host, kmsg))]
    if not fast:
        journal = _journal(host, deadline)
        if isinstance(journal, Found):
            log = journal.value
            return Found(KernelLog(log.source, log.xids, log.complete, unread=tuple(unread)))
        unread.append(("journalctl -k", why_missing(journal).removeprefix("probe failed: ")))
    else:
        unread.append(("journalctl -k", "not read by the probe tier (envdoctor check reads it)"))
    return ProbeFailed(
        "no kernel log could be read", detail="; ".join(f"{src}: {why}" for src, why in unread)
    )


def parse_kmsg(text: str) -> KernelLog:
    """Xid events from ``/dev/kmsg`` records ("PRIO,SEQ,USEC,FLAGS;text", continuation lines
    indented). The log reaches back to boot when its first record is record 0."""
    tally = _Tally()
    first_seq: int | None = None
    for line in text.splitlines():
        head, sep, message = line.partition(";")
        if not sep or line.startswith(" "):
            continue
        fields = head.split(",")
        if len(fields) < 4 or not (fields[1].isdigit() and fields[2].isdigit()):
            continue
        if first_seq is None:
            first_seq = int(fields[1])
        tally.add(message, int(fields[2]) / 1e6)
    return KernelLog(source=KMSG, xids=tally.events(), complete=first_seq == 0)


def parse_journal(text: str, source: str = "journalctl -k -b") -> KernelLog:
    """Xid events from ``journalctl -o short-monotonic`` lines, in whichever order."""
    tally = _Tally()
    stamped: list[tuple[float, str]] = []
    for line in text.splitlines():
        match = re.match(_JOURNAL_TIME, line)
        if match:
            stamped.append((float(match.group(1)), line))
    stamped.sort(key=lambda pair: pair[0])  # journalctl -r prints the newest first
    for seconds, line in stamped:
        tally.add(line, seconds)
    oldest = stamped[0][0] if stamped else None
    return KernelLog(
        source=source,
        xids=tally.events(),
        complete=oldest is not None and oldest <= BOOT_WITHIN_S,
    )


def _journal(host: Host, deadline: Deadline) -> Probed[KernelLog]:
    if host.which(JOURNAL[0]) is None:
        return Absent("journalctl is not installed (no systemd journal here)")
    result = host.run(JOURNAL, timeout=deadline.cap(JOURNAL_TIMEOUT))
    if not result.ok:
        return ProbeFailed(result.describe())
    if _DENIED_HINT in result.stderr:
        return ProbeFailed(
            "this user may not read the system journal (members of the groups adm or "
            "systemd-journal may)"
        )
    if not re.search(_JOURNAL_TIME, result.stdout, flags=re.MULTILINE):
        return Absent("the journal holds no kernel message of this boot (journald not running?)")
    return Found(parse_journal(result.stdout))


def _why_kmsg(host: Host, kmsg: Probed[str]) -> str:
    reason = why_missing(kmsg).removeprefix("probe failed: ")
    if isinstance(kmsg, Absent):
        return f"{reason} (a container without the host's {KMSG}?)"
    restrict = host.read_text("/proc/sys/kernel/dmesg_restrict", limit=16)
    if isinstance(restrict, Found) and restrict.value.strip() == "1" and "denied" in reason:
        return f"{reason} (kernel.dmesg_restrict = 1: only root or CAP_SYSLOG may read it)"
    return reason


class _Entry:
    """The running tally of one (device, Xid) pair."""

    __slots__ = ("count", "first", "last", "message")

    def __init__(self, seconds: float | None, message: str) -> None:
        self.count = 1
        self.first = self.last = seconds
        self.message = message


class _Tally:
    """Counts Xid lines per (device, code), keeping the first and last time and the last line."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], _Entry] = {}

    def add(self, line: str, seconds: float | None) -> None:
        at = line.find("NVRM: Xid")
        match = re.match(_XID, line[at:]) if at >= 0 else None
        if match is None:
            return
        key = (match.group("device") or "", int(match.group("xid")))
        message = line[at : at + MESSAGE_CHARS].rstrip()
        entry = self._seen.get(key)
        if entry is not None:
            entry.count += 1
            entry.last = seconds
            entry.message = message
        elif len(self._seen) < MAX_XID_KINDS:
            self._seen[key] = _Entry(seconds, message)

    def events(self) -> tuple[XidEvents, ...]:
        return tuple(
            XidEvents(device, xid, e.count, e.first, e.last, e.message)
            for (device, xid), e in self._seen.items()
        )
