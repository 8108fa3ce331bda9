"""NVML's interconnect queries (issue 39, items 4-6): NVLink, peer to peer, PCIe replays.

Kept apart from ``nvml.py`` so that the session there stays the GPU's own facts: the pynvml
side is a mixin of ``PynvmlSession`` (``PynvmlInterconnect``), the isolated side one of
``IsolatedSession`` (``IsolatedInterconnect``), and ``INTERCONNECT_METHODS`` are the requests the
NVML child answers for them. Each query reads a whole GPU in one request (eighteen links of
seven calls each would be 126 round trips to the child): a call that hangs or crashes in it
still costs that GPU alone, and names the C function it was in.

Values cross the pipe as plain lists; the probe (``probes/interconnect.py``) makes the records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

MAX_LINKS = 36
"""The most links a GPU may have (NVML_NVLINK_MAX_LINKS in R570's header; 18 before)."""

INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3

LinkRow = tuple[int, bool, int, str, "list[int] | None"]
"""(link, active, remote device type, remote PCI bus id, [replay, recovery, crc flit, crc data]
or None where NVML refused the counters)."""
PeerRow = tuple[int, int, int, int, int]
"""(peer, P2P read status, P2P write status, P2P NVLink status, topology level), NVML's numbers;
a status of -1: NVML refused that query."""

INTERCONNECT_METHODS = frozenset({"nvlinks", "nvlink_errors", "pcie_replays", "peers"})


class InterconnectQueries(Protocol):
    """What the interconnect probe asks of an NVML session (each may raise ``NvmlError``)."""

    def nvlinks(self, index: int) -> list[LinkRow] | None:
        """Every link of the GPU (None: NVLink not supported on it)."""
        ...

    def nvlink_errors(self, index: int, links: list[int]) -> list[tuple[int, list[int]]]:
        """The error counters of ``links`` again (links NVML refuses are left out)."""
        ...

    def pcie_replays(self, index: int) -> int: ...

    def peers(self, index: int, others: list[int]) -> list[PeerRow]:
        """GPU ``index`` against each GPU of ``others`` (never one known to hang or crash:
        the request would cost ``index`` too)."""
        ...


class _Session(Protocol):
    _nvml: Any

    def _q(self, index: int, fn: Callable[[Any], T]) -> T: ...
    def _handle(self, index: int) -> Any: ...


def _code(nvml: Any, exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(exc, nvml.NVMLError) and isinstance(value, int) else None


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _counters(nvml: Any, handle: Any, link: int) -> list[int] | None:
    try:
        return [int(nvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, c)) for c in range(4)]
    except nvml.NVMLError:
        return None


def _links(nvml: Any, handle: Any) -> list[LinkRow] | None:
    rows: list[LinkRow] = []
    for link in range(MAX_LINKS):
        try:
            active = int(nvml.nvmlDeviceGetNvLinkState(handle, link)) == 1
        except nvml.NVMLError as exc:
            code = _code(nvml, exc)
            if code == NOT_SUPPORTED and link == 0:
                return None  # no NVLink on this GPU (a PCIe board without a bridge)
            if code in (INVALID_ARGUMENT, NOT_SUPPORTED):
                break  # past the GPU's last link
            raise
        remote_type, remote_bus = -1, ""
        if active:
            try:
                remote_type = int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
            except (nvml.NVMLError, AttributeError):  # R460 and older: no such query
                remote_type = -1
            try:
                remote_bus = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
            except nvml.NVMLError:
                remote_bus = ""
        rows.append((link, active, remote_type, remote_bus, _counters(nvml, handle, link)))
    return rows


def _status(nvml: Any, fn: Callable[[], Any]) -> int:
    try:
        return int(fn())
    except nvml.NVMLError:
        return -1


class PynvmlInterconnect:
    """The interconnect queries over nvidia-ml-py (a mixin of ``PynvmlSession``)."""

    def nvlinks(self: _Session, index: int) -> list[LinkRow] | None:
        nvml = self._nvml
        return self._q(index, lambda h: _links(nvml, h))

    def nvlink_errors(self: _Session, index: int, links: list[int]) -> list[tuple[int, list[int]]]:
        nvml = self._nvml

        def read(handle: Any) -> list[tuple[int, list[int]]]:
            out = []
            for link in links:
                counters = _counters(nvml, handle, int(link))
                if counters is not None:
                    out.append((int(link), counters))
            return out

        return self._q(index, read)

    def pcie_replays(self: _Session, index: int) -> int:
        return int(self._q(index, self._nvml.nvmlDeviceGetPcieReplayCounter))

    def peers(self: _Session, index: int, others: list[int]) -> list[PeerRow]:
        nvml = self._nvml
        handles = [(int(j), self._handle(int(j))) for j in others if j != index]

        def read(handle: Any) -> list[PeerRow]:
            rows = []
            for j, other in handles:
                p2p = [
                    _status(nvml, functools.partial(nvml.nvmlDeviceGetP2PStatus, handle, other, c))
                    for c in (0, 1, 2)  # NVML_P2P_CAPS_INDEX_READ, _WRITE, _NVLINK
                ]
                ancestor = functools.partial(
                    nvml.nvmlDeviceGetTopologyCommonAncestor, handle, other
                )
                rows.append((j, p2p[0], p2p[1], p2p[2], _status(nvml, ancestor)))
            return rows

        return self._q(index, read)


class _Isolated(Protocol):
    def _call(self, method: str, index: int | None, *args: Any) -> Any: ...


class IsolatedInterconnect:
    """The interconnect queries in the NVML child (a mixin of ``IsolatedSession``)."""

    def nvlinks(self: _Isolated, index: int) -> list[LinkRow] | None:
        rows = self._call("nvlinks", index, index)
        if rows is None:
            return None
        return [
            (
                int(r[0]),
                bool(r[1]),
                int(r[2]),
                str(r[3]),
                None if r[4] is None else [int(c) for c in r[4]],
            )
            for r in rows
        ]

    def nvlink_errors(self: _Isolated, index: int, links: list[int]) -> list[tuple[int, list[int]]]:
        rows = self._call("nvlink_errors", index, index, list(links))
        return [(int(link), [int(c) for c in counters]) for link, counters in rows]

    def pcie_replays(self: _Isolated, index: int) -> int:
        return int(self._call("pcie_replays", index, index))

    def peers(self: _Isolated, index: int, others: list[int]) -> list[PeerRow]:
        rows = self._call("peers", index, index, list(others))
        return [(int(a), int(b), int(c), int(d), int(e)) for a, b, c, d, e in rows]
