"""FakeNvml: the NvmlSession protocol over a scenario's ``nvml:`` section.

A field may hold a value, or the name of an NVML error kind (e.g. "NotSupported",
"GPUIsLost") which the call raises as ``NvmlError``. ``errors: {all: GPUIsLost}`` makes every
query of that GPU fail the same way (a GPU that fell off the bus).
"""

from __future__ import annotations

from typing import Any

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.platform.nvml import NvmlError, NvmlProcess

KINDS = {v for k, v in vars(NvmlErrorKind).items() if k.isupper()}

DEFAULT_GPU: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": [9, 0],
    "memory": [85520809984, 1073741824, 84447068160],
    "persistence_mode": True,
    "compute_mode": "default",
    "mig_mode": [False, False],
    "mig_device_count": 0,
    "mig_devices": None,
    "ecc_uncorrectable": [0, 0],
    "retired_pages_pending": "NotSupported",
    "row_remap": [0, 0, False, False],
    "processes": [],
    "throttle_reasons": ["gpu-idle"],
    "pcie_link": [5, 16, 5, 16],
    "temperature": 34,
    "power_draw": 71234,
    "power_limit": 700000,
    "utilization": [0, 0],
    "ecc_corrected": [0, 0],
    "retired_pages": "NotSupported",
    "fabric_info": ["not-supported", "Success", 0],
    # per-GPU health (issue 39): thresholds and clocks of the order an idle H100 SXM reports
    # (nvidia-smi -q -d TEMPERATURE,CLOCK shows its own per GPU); no recovery action pending
    "recovery_action": 0,
    "temperature_thresholds": {"shutdown": 92, "slowdown": 89, "gpu_max": 87},
    "sm_clocks": [345, 1980],
    # --- the interconnect (issue 39, items 4-6; envdoctor/platform/nvml_links.py) ---
    # nvlinks: None (NVML NotSupported on link 0: no NVLink), or [[link, active, remote type,
    # remote bus id, [replay, recovery, crc flit, crc data] or None], ...]; nvlink_errors_later:
    # {link: counters} for the second reading (default: unchanged); peers: {peer: [read, write,
    # nvlink, level]} (default: P2P over PCIe, read and write OK, no NVLink, level 40 NODE).
    "nvlinks": None,
    "nvlink_errors_later": {},
    "pcie_replays": 0,
    "pcie_replays_later": None,
    "peers": {},
}
DEFAULT_PEER = [0, 0, 5, 40]


class FakeNvml:
    """Answers NVML queries from data; counts calls so tests can see what was asked."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._gpus = [{**DEFAULT_GPU, **gpu} for gpu in data.get("gpus", [])]
        for i, gpu in enumerate(self._gpus):
            gpu.setdefault("uuid", f"GPU-{i:08x}-0000-0000-0000-000000000000")
            gpu.setdefault("pci_bus_id", f"00000000:{0x18 + i:02X}:00.0")
        self.closed = False
        self._replays_read: dict[int, int] = {}

    def _value(self, source: dict[str, Any], key: str) -> Any:
        value = source[key]
        if isinstance(value, str) and value in KINDS:
            raise NvmlError(value, f"fake NVML: {value}")
        return value

    def _gpu(self, index: int, key: str) -> Any:
        gpu = self._gpus[index]
        errors = gpu.get("errors", {})
        kind = errors.get(key) or errors.get("all")
        if kind:
            raise NvmlError(kind, f"fake NVML: {kind}")
        return self._value(gpu, key)

    def driver_version(self) -> str:
        return str(self._value(self._data, "driver_version"))

    def cuda_driver_version(self) -> int:
        return int(self._value(self._data, "cuda_driver_version"))

    def device_count(self) -> int:
        if "device_count" in self._data:
            return int(self._value(self._data, "device_count"))
        return len(self._gpus)

    def name(self, index: int) -> str:
        return str(self._gpu(index, "name"))

    def uuid(self, index: int) -> str:
        return str(self._gpu(index, "uuid"))

    def pci_bus_id(self, index: int) -> str:
        return str(self._gpu(index, "pci_bus_id"))

    def compute_capability(self, index: int) -> tuple[int, int]:
        major, minor = self._gpu(index, "compute_capability")
        return int(major), int(minor)

    def memory(self, index: int) -> tuple[int, int, int, int]:
        """``[total, used, free]`` or ``[total, used, free, reserved]``."""
        total, used, free, *reserved = self._gpu(index, "memory")
        return int(total), int(used), int(free), int(reserved[0] if reserved else 0)

    def persistence_mode(self, index: int) -> bool:
        return bool(self._gpu(index, "persistence_mode"))

    def compute_mode(self, index: int) -> str:
        return str(self._gpu(index, "compute_mode"))

    def mig_mode(self, index: int) -> tuple[bool, bool]:
        current, pending = self._gpu(index, "mig_mode")
        return bool(current), bool(pending)

    def mig_devices(self, index: int) -> tuple[tuple[str, str], ...]:
        """``mig_devices: [[uuid, name], …]``, or a bare ``mig_device_count`` of unnamed ones."""
        listed = self._gpu(index, "mig_devices")
        if listed is None:
            count = int(self._gpu(index, "mig_device_count"))
            return tuple((f"MIG-{index:08x}-0000-0000-0000-{n:012x}", "") for n in range(count))
        return tuple((str(u), str(n)) for u, n in listed)

    def ecc_uncorrectable(self, index: int) -> tuple[int, int]:
        volatile, aggregate = self._gpu(index, "ecc_uncorrectable")
        return int(volatile), int(aggregate)

    def retired_pages_pending(self, index: int) -> bool:
        return bool(self._gpu(index, "retired_pages_pending"))

    def row_remap(self, index: int) -> tuple[int, int, bool, bool]:
        corr, unc, pending, failure = self._gpu(index, "row_remap")
        return int(corr), int(unc), bool(pending), bool(failure)

    def processes(self, index: int) -> tuple[NvmlProcess, ...]:
        return tuple(NvmlProcess(int(p[0]), p[1]) for p in self._gpu(index, "processes"))

    def throttle_reasons(self, index: int) -> tuple[str, ...]:
        return tuple(self._gpu(index, "throttle_reasons"))

    def pcie_link(self, index: int) -> tuple[int, int, int, int]:
        gen, width, max_gen, max_width = self._gpu(index, "pcie_link")
        return int(gen), int(width), int(max_gen), int(max_width)

    def temperature(self, index: int) -> int:
        return int(self._gpu(index, "temperature"))

    def power_draw(self, index: int) -> int:
        return int(self._gpu(index, "power_draw"))

    def power_limit(self, index: int) -> int:
        return int(self._gpu(index, "power_limit"))

    def utilization(self, index: int) -> tuple[int, int]:
        gpu, memory = self._gpu(index, "utilization")
        return int(gpu), int(memory)

    def ecc_corrected(self, index: int) -> tuple[int, int]:
        volatile, aggregate = self._gpu(index, "ecc_corrected")
        return int(volatile), int(aggregate)

    def retired_pages(self, index: int) -> tuple[int, int]:
        single, double = self._gpu(index, "retired_pages")
        return int(single), int(double)

    def fabric_info(self, index: int) -> tuple[str, str, int]:
        state, status, clique = self._gpu(index, "fabric_info")
        return str(state), str(status), int(clique)

    # per-GPU health (issue 39)

    def recovery_action(self, index: int) -> int:
        return int(self._gpu(index, "recovery_action"))

    def temperature_threshold(self, index: int, which: str) -> int:
        """``temperature_thresholds: {shutdown, slowdown, gpu_max}``, each a value or an error
        kind; the whole mapping may be an error kind too."""
        thresholds = self._gpu(index, "temperature_thresholds")
        return int(self._value(thresholds, which))

    def sm_clocks(self, index: int) -> tuple[int, int]:
        current, highest = self._gpu(index, "sm_clocks")
        return int(current), int(highest)

    # --- the interconnect (issue 39, items 4-6) ----------------------------------------------

    def nvlinks(self, index: int) -> list[Any] | None:
        links = self._gpu(index, "nvlinks")
        if links is None:
            return None
        return [(int(a), bool(b), int(c), str(d), e) for a, b, c, d, e in links]

    def nvlink_errors(self, index: int, links: list[int]) -> list[tuple[int, list[int]]]:
        later = {int(k): v for k, v in (self._gpu(index, "nvlink_errors_later") or {}).items()}
        first = {row[0]: row[4] for row in self._gpu(index, "nvlinks") or ()}
        out = []
        for link in links:
            counters = later.get(link, first.get(link))
            if counters is not None:
                out.append((link, list(counters)))
        return out

    def pcie_replays(self, index: int) -> int:
        """``pcie_replays`` the first time, ``pcie_replays_later`` (when set) after that."""
        seen = self._replays_read.get(index, 0)
        self._replays_read[index] = seen + 1
        later = self._gpu(index, "pcie_replays_later")
        return int(self._gpu(index, "pcie_replays") if later is None or not seen else later)

    def peers(self, index: int, others: list[int]) -> list[tuple[int, int, int, int, int]]:
        table = {int(k): v for k, v in (self._gpu(index, "peers") or {}).items()}
        rows = []
        for peer in others:
            if peer != index:
                read, write, nvlink, level = table.get(peer, DEFAULT_PEER)
                rows.append((peer, int(read), int(write), int(nvlink), int(level)))
        return rows

    def close(self) -> None:
        self.closed = True
