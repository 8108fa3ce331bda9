"""The interconnect probes (issue 39, items 4-6): NVML's links and peers, the kernel's PCIe path.

NVML's half is read in two passes in the NVML session: ``first_pass`` before the GPUs' own facts
(links, their error counters, the PCIe replay counter), ``second_pass`` after them (every pair's
P2P status and common ancestor, then the counters again), so that counters that climb while
envdoctor runs are seen climbing without a wait of their own; where a counter was already above
zero the pause is topped up to ``SAMPLE_SECONDS``. The kernel's half (``probe_pci_paths``) reads
sysfs: each GPU's bridges up to the root port with their ACS control, its AER counters, the
IOMMU groups and ``/proc/cmdline``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from envdoctor.model.facts import pci_key
from envdoctor.model.interconnect import (
    P2P_STATUS,
    REMOTE_TYPES,
    TOPOLOGY_LEVELS,
    AerCounts,
    GpuInterconnect,
    GpuPciPath,
    IommuFacts,
    LinkErrors,
    NvLink,
    NvlinkFacts,
    PciBridge,
    PciPathFacts,
    PeerStatus,
)
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Deadline, Host
from envdoctor.platform.nvml import MAX_WORKERS, NvmlSession, probed

T = TypeVar("T")

SAMPLE_SECONDS = 0.5
"""The least time between the two readings of the error counters."""
SAMPLE_MARGIN = 2.0
"""The second reading is skipped unless this much of the deadline is left after the pause."""
NO_NVLINK = "no NVLink on this GPU (NVML NotSupported on link 0)"


def _errors(counters: list[int] | None) -> Probed[LinkErrors]:
    if counters is None:
        return Absent("NVML did not give this link's error counters")
    return Found(LinkErrors(*counters[:4]))


def _side_by_side(count: int, read: Callable[[int], T]) -> list[T]:
    """``read(i)`` for every GPU, up to ``MAX_WORKERS`` at once (each reading never raises)."""
    results: list[T | None] = [None] * count
    workers = max(1, min(MAX_WORKERS, count))

    def share(first: int) -> None:
        for i in range(first, count, workers):
            results[i] = read(i)

    threads = [threading.Thread(target=share, args=(n,), daemon=True) for n in range(1, workers)]
    for thread in threads:
        thread.start()
    share(0)
    for thread in threads:
        thread.join()
    return [r for r in results if r is not None]


class FirstPass:
    """The first reading, and when it began."""

    def __init__(self, gpus: list[GpuInterconnect], began: float) -> None:
        self.gpus = gpus
        self.began = began


def first_pass(session: NvmlSession, count: int) -> FirstPass:
    began = time.monotonic()

    def read(i: int) -> GpuInterconnect:
        raw = probed(lambda: session.nvlinks(i))
        links: Probed[tuple[NvLink, ...]]
        if isinstance(raw, Found):
            links = (
                Absent(NO_NVLINK)
                if raw.value is None
                else Found(
                    tuple(
                        NvLink(
                            link=link,
                            active=active,
                            remote_type=REMOTE_TYPES.get(kind, "") if kind >= 0 else "",
                            remote_bus_id=bus,
                            errors=_errors(counters),
                        )
                        for link, active, kind, bus, counters in raw.value
                    )
                )
            )
        else:
            links = raw
        return GpuInterconnect(
            index=i,
            links=links,
            errors_later=Absent("not read again yet"),
            pcie_replays=probed(lambda: session.pcie_replays(i)),
            pcie_replays_later=Absent("not read again yet"),
            peers=Absent("not read yet"),
        )

    return FirstPass(_side_by_side(count, read), began)


def _peer(row: tuple[int, int, int, int, int]) -> PeerStatus:
    peer, read, write, nvlink, level = row

    def status(code: int) -> str:
        return "unread" if code < 0 else P2P_STATUS.get(code, f"status-{code}")

    return PeerStatus(
        peer=peer,
        read=status(read),
        write=status(write),
        nvlink=status(nvlink),
        level="unread" if level < 0 else TOPOLOGY_LEVELS.get(level, f"level-{level}"),
    )


def _has_erred(first: FirstPass) -> bool:
    """Whether some counter was above zero at the first reading: only then is the pause topped
    up (a clean link read twice while the GPUs are read still shows a storm; one that has erred
    before is watched for ``SAMPLE_SECONDS``)."""
    for gpu in first.gpus:
        if isinstance(gpu.pcie_replays, Found) and gpu.pcie_replays.value:
            return True
        links = gpu.links.value if isinstance(gpu.links, Found) else ()
        if any(isinstance(link.errors, Found) and link.errors.value.total() for link in links):
            return True
    return False


def second_pass(
    session: NvmlSession,
    first: FirstPass,
    deadline: Deadline,
    *,
    broken: frozenset[int] = frozenset(),
    sample: float = SAMPLE_SECONDS,
) -> NvlinkFacts:
    """Each pair's P2P status and common ancestor, and the counters again, at least ``sample``
    seconds after the first reading began. GPUs in ``broken`` (lost, hung, crashed in their own
    reading) are left out of every pair: a query of them would cost the other GPU too."""
    healthy = [g.index for g in first.gpus if g.index not in broken]

    def pairs(i: int) -> Probed[tuple[PeerStatus, ...]]:
        if i in broken:
            return Absent("not read: this GPU did not answer its own queries")
        others = [j for j in healthy if j != i]
        if not others:
            return Found(())
        rows = probed(lambda: session.peers(i, others))
        return Found(tuple(_peer(r) for r in rows.value)) if isinstance(rows, Found) else rows

    wait = sample - (time.monotonic() - first.began) if _has_erred(first) else 0.0
    if deadline.remaining() < max(wait, 0.0) + SAMPLE_MARGIN:
        why = Absent("not read again: the time budget was too short for a second reading")
        gpus = [
            replace(g, errors_later=why, pcie_replays_later=why, peers=pairs(g.index))
            for g in first.gpus
        ]
        return NvlinkFacts(gpus=tuple(gpus), seconds=0.0)
    peers = _side_by_side(len(first.gpus), pairs)  # the pairs fill part of the pause
    wait = sample - (time.monotonic() - first.began) if _has_erred(first) else 0.0
    if wait > 0:
        time.sleep(wait)

    def read(i: int) -> GpuInterconnect:
        gpu = replace(first.gpus[i], peers=peers[i])
        if i in broken:
            return gpu
        later: Probed[tuple[tuple[int, LinkErrors], ...]]
        if isinstance(gpu.links, Found):
            active = [link.link for link in gpu.links.value if link.active]
            got = probed(lambda: session.nvlink_errors(i, active))
            later = (
                Found(tuple((link, LinkErrors(*c[:4])) for link, c in got.value))
                if isinstance(got, Found)
                else got
            )
        else:
            later = Absent("no NVLink to read again")
        replays = (
            probed(lambda: session.pcie_replays(i))
            if isinstance(gpu.pcie_replays, Found)
            else Absent("not read the first time")
        )
        return replace(gpu, errors_later=later, pcie_replays_later=replays)

    gpus = _side_by_side(len(first.gpus), read)
    # to a tenth of a second, as the rules show it: milliseconds of reading are noise (two
    # snapshots of one machine would differ in them)
    return NvlinkFacts(gpus=tuple(gpus), seconds=round(time.monotonic() - first.began, 1))


# --- sysfs ------------------------------------------------------------------------------------

PCI_DEVICES = "/sys/bus/pci/devices"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"
ACS_CAP_ID = 0x000D
"""The PCIe extended capability ID of Access Control Services."""
CONFIG_LIMIT = 4096
IOMMU_WORDS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict")


def probe_pci_paths(host: Host, bus_ids: tuple[str, ...]) -> Probed[PciPathFacts]:
    """The PCIe path of each GPU (NVML's bus ids), the IOMMU and the hypervisor flag."""
    if not bus_ids:
        return Absent("no GPU whose PCIe path to read")
    gpus = tuple(_gpu_path(host, bus) for bus in bus_ids)
    return Found(PciPathFacts(gpus=gpus, iommu=_iommu(host), hypervisor=_hypervisor(host)))


def sysfs_name(bus_id: str) -> str | None:
    """NVML's "00000000:18:00.0" → sysfs's "0000:18:00.0"."""
    key = pci_key(bus_id)
    if key is None:
        return None
    function = bus_id.rsplit(".", 1)[-1] if "." in bus_id else "0"
    domain, bus, device = key
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function}"


def _gpu_path(host: Host, bus_id: str) -> GpuPciPath:
    name = sysfs_name(bus_id)
    if name is None:
        return GpuPciPath(bus_id, ProbeFailed("Other", f"not a PCI address: {bus_id}"), NO_AER)
    device = f"{PCI_DEVICES}/{name}"
    real = host.realpath(device)
    if real == device:
        missing = Absent(f"{device} is not in sysfs (a container without /sys, or a VM)")
        return GpuPciPath(name, missing, missing)
    parts = [p for p in real.split("/") if pci_key(p) is not None and p != name]
    bridges = tuple(
        PciBridge(address=p, root_port=(n == 0), acs_control=_acs(host, p))
        for n, p in enumerate(parts)
    )
    return GpuPciPath(name, Found(tuple(reversed(bridges))), _aer(host, real))


NO_AER = Absent("not read")


def _acs(host: Host, address: str) -> Probed[int]:
    config = host.read_bytes(f"{PCI_DEVICES}/{address}/config", limit=CONFIG_LIMIT)
    if not isinstance(config, Found):
        return config
    data = config.value
    if len(data) <= 256:
        return Absent(
            "config space past 64 bytes is readable by root only (run envdoctor as root)"
            if len(data) <= 64
            else "no PCIe extended configuration space"
        )
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(data) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(data[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_CAP_ID:
            return Found(int.from_bytes(data[offset + 6 : offset + 8], "little"))
        offset = (header >> 20) & 0xFFC
    return Absent("no ACS capability on this bridge")


def _aer(host: Host, device: str) -> Probed[AerCounts]:
    totals = {}
    for kind, key in (
        ("correctable", "TOTAL_ERR_COR"),
        ("nonfatal", "TOTAL_ERR_NONFATAL"),
        ("fatal", "TOTAL_ERR_FATAL"),
    ):
        text = host.read_text(f"{device}/aer_dev_{kind}", limit=8192)
        if isinstance(text, Absent):
            return Absent("the kernel reports no AER counters for this GPU (no AER, or older)")
        if not isinstance(text, Found):
            return text
        totals[kind] = _total(text.value, key)
    return Found(AerCounts(**totals))


def _total(text: str, key: str) -> int:
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == key and words[1].isdigit():
            return int(words[1])
    return sum(int(w[1]) for w in (line.split() for line in text.splitlines()) if _count(w))


def _count(words: list[str]) -> bool:
    return len(words) == 2 and words[1].isdigit() and not words[0].startswith("TOTAL")


def _iommu(host: Host) -> IommuFacts:
    cmdline = host.read_text("/proc/cmdline", limit=8192)
    words: Probed[str] = (
        Found(
            " ".join(w for w in cmdline.value.split() if w.split("=", 1)[0].lower() in IOMMU_WORDS)
        )
        if isinstance(cmdline, Found)
        else cmdline
    )
    listing = host.list_dir(IOMMU_GROUPS)
    groups: Probed[int] = (
        Found(len(listing.value))
        if isinstance(listing, Found)
        else Found(0)
        if isinstance(listing, Absent)
        else listing
    )
    return IommuFacts(cmdline=words, groups=groups)


def _hypervisor(host: Host) -> Probed[bool]:
    cpuinfo = host.read_text("/proc/cpuinfo", limit=1 << 20)
    if isinstance(cpuinfo, Found):
        for line in cpuinfo.value.splitlines():
            if line.startswith("flags"):
                return Found("hypervisor" in line.split(":", 1)[-1].split())
    hyp = host.read_text("/sys/hypervisor/type", limit=64)
    if isinstance(hyp, Found):
        return Found(bool(hyp.value.strip()))
    return Absent("no CPU flags in /proc/cpuinfo (not x86?) and no /sys/hypervisor")
