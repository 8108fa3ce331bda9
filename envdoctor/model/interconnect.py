"""Interconnect facts: NVLink, peer to peer, the PCIe path of each GPU (issue 39, items 4-6).

NVML's half (``NvlinkFacts``: links, their error counters read twice, the PCIe replay counter,
each pair's P2P status and common ancestor) is read in the NVML session, by the isolated child;
the kernel's half (``PciPathFacts``: the bridges above each GPU and their ACS control, AER
counters, the IOMMU) from sysfs and ``/proc/cmdline`` through the Host.
"""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.model.probed import Probed

NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
"""nvmlNvLinkErrorCounter_t 0-3 (NVML_NVLINK_ERROR_DL_REPLAY … _DL_CRC_DATA), in that order."""

TOPOLOGY_LEVELS = {
    0: "internal",
    10: "single",
    20: "multiple",
    30: "hostbridge",
    40: "node",
    50: "system",
}
"""nvmlGpuTopologyLevel_t → envdoctor's word; ``nvidia-smi topo -m`` prints them as
(board-internal), PIX, PXB, PHB, NODE, SYS."""

TOPO_M = {
    "internal": "X",
    "single": "PIX",
    "multiple": "PXB",
    "hostbridge": "PHB",
    "node": "NODE",
    "system": "SYS",
}

P2P_STATUS = {
    0: "ok",
    1: "chipset-not-supported",
    2: "gpu-not-supported",
    3: "topology-not-supported",
    4: "disabled-by-regkey",
    5: "not-supported",
    6: "unknown",
}
"""nvmlGpuP2PStatus_t (NVML_P2P_STATUS_OK … _UNKNOWN; 3 is IOH_TOPOLOGY_NOT_SUPPORTED)."""

REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "nvswitch", 255: "unknown"}
"""nvmlIntNvLinkDeviceType_t: what is at the far end of a link."""


@dataclass(frozen=True, slots=True)
class LinkErrors:
    """One NVLink's data-link error counters (since the driver was loaded)."""

    replay: int
    recovery: int
    crc_flit: int
    crc_data: int

    def total(self) -> int:
        return self.replay + self.recovery + self.crc_flit + self.crc_data


@dataclass(frozen=True, slots=True)
class NvLink:
    """One link of a GPU: whether it is up, what is at its far end, and its error counters."""

    link: int
    active: bool
    remote_type: str
    """"gpu", "nvswitch", "ibmnpu", "unknown", or "" where NVML did not say."""
    remote_bus_id: str
    """The far end's PCI address as NVML gives it ("" where it did not)."""
    errors: Probed[LinkErrors]


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """GPU ``index`` towards GPU ``peer``: P2P read, write and NVLink status, and where their
    PCIe paths meet (``TOPOLOGY_LEVELS``)."""

    peer: int
    read: str
    write: str
    nvlink: str
    level: str


@dataclass(frozen=True, slots=True)
class GpuInterconnect:
    """What NVML says of one GPU's links; each part keeps its own reason when missing."""

    index: int
    links: Probed[tuple[NvLink, ...]]
    """Absent: no NVLink on this GPU (NVML NotSupported on link 0)."""
    errors_later: Probed[tuple[tuple[int, LinkErrors], ...]]
    """The error counters of the active links read again, ``NvlinkFacts.seconds`` later."""
    pcie_replays: Probed[int]
    pcie_replays_later: Probed[int]
    peers: Probed[tuple[PeerStatus, ...]]


@dataclass(frozen=True, slots=True)
class NvlinkFacts:
    """Every GPU's interconnect as NVML reports it, and the time between the two readings."""

    gpus: tuple[GpuInterconnect, ...]
    seconds: float


# --- the kernel's view ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PciBridge:
    """A PCI bridge above a GPU (from the GPU upward): a switch port or the root port."""

    address: str
    root_port: bool
    """The bridge nearest the CPU (ACS there does not stand between two GPUs of one switch)."""
    acs_control: Probed[int]
    """The ACS Control register (16 bits); Absent: no ACS capability, or config space past
    64 bytes is root's only."""


@dataclass(frozen=True, slots=True)
class AerCounts:
    """The kernel's AER totals for one PCI function since boot."""

    correctable: int
    nonfatal: int
    fatal: int


@dataclass(frozen=True, slots=True)
class GpuPciPath:
    address: str
    """The GPU's sysfs name ("0000:18:00.0")."""
    bridges: Probed[tuple[PciBridge, ...]]
    aer: Probed[AerCounts]


@dataclass(frozen=True, slots=True)
class IommuFacts:
    cmdline: Probed[str]
    """The IOMMU words of the kernel command line ("intel_iommu=on iommu=pt"; "" when none)."""
    groups: Probed[int]
    """How many IOMMU groups the kernel made (0: no IOMMU is translating DMA)."""


@dataclass(frozen=True, slots=True)
class PciPathFacts:
    gpus: tuple[GpuPciPath, ...]
    iommu: IommuFacts
    hypervisor: Probed[bool]
    """Whether this kernel runs under a hypervisor (the ``hypervisor`` flag of /proc/cpuinfo)."""
