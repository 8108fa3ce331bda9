"""The interconnect as Prometheus metrics (issue 39): NVLink links and errors, P2P and topology
per pair, PCIe replays and AER, per GPU, with the labels of ``gpu_metrics`` (``gpu``, ``uuid``,
``pci_bus_id``: the values dcgm-exporter's ``gpu``, ``UUID`` and ``pci_bus_id`` carry). A value
that was not read is left out, never written as 0; ``envdoctor_gpu_interconnect_up`` says
whether NVML's interconnect was read for the GPU at all.
"""

from __future__ import annotations

from envdoctor.model.facts import Facts, GpuFacts, pci_key
from envdoctor.model.interconnect import NVLINK_COUNTERS, TOPO_M, GpuInterconnect, LinkErrors
from envdoctor.model.probed import Found
from envdoctor.render.exposition import Labels, Sample, Writer
from envdoctor.render.gpu_metrics import gpu_labels


def link_metrics(out: Writer, facts: Facts) -> None:
    """Every interconnect family, for the GPUs NVML listed."""
    nvml = facts.nvml.value if isinstance(facts.nvml, Found) else None
    if nvml is None or not nvml.gpus:
        return
    by_index = {g.index: g for g in nvml.gpus}
    wired = nvml.interconnect.value.gpus if isinstance(nvml.interconnect, Found) else ()
    pairs = [(by_index[w.index], w) for w in wired if w.index in by_index]
    out.metric(
        "envdoctor_gpu_interconnect_up",
        "1 when NVML's NVLink, P2P and PCIe counters were read for the GPU (check; not probe).",
        [(gpu_labels(g), int(any(g.index == w.index for w in wired))) for g in nvml.gpus],
    )
    out.metric(
        "envdoctor_gpu_nvlink_links",
        "NVLink links of the GPU, by state (active, inactive).",
        [s for g, w in pairs for s in _links(g, w)],
    )
    out.metric(
        "envdoctor_gpu_nvlink_expected_links",
        "NVLink links the GPU's board has (SXM boards envdoctor knows).",
        [s for g, w in pairs for s in _expected(g, w)],
    )
    out.metric(
        "envdoctor_gpu_nvlink_errors_total",
        "NVLink data-link errors since the driver loaded, summed over the GPU's links, by counter.",
        [s for g, w in pairs for s in _errors(g, w)],
        kind="counter",
    )
    out.metric(
        "envdoctor_gpu_peer_access_ok",
        "1 when peer-to-peer access to the peer GPU works, by peer and capability (read, write, "
        "nvlink).",
        [s for g, w in pairs for s in _p2p(by_index, g, w)],
    )
    out.metric(
        "envdoctor_gpu_topology_info",
        "Where the GPU's and the peer's PCIe paths meet, as nvidia-smi topo -m names it.",
        [s for g, w in pairs for s in _topology(by_index, g, w)],
    )
    out.metric(
        "envdoctor_gpu_pcie_replays_total",
        "PCIe packets the GPU resent (the link corrupted them), as NVML counts them.",
        [s for g, w in pairs for s in _replays(g, w)],
        kind="counter",
    )
    out.metric(
        "envdoctor_gpu_pcie_aer_errors_total",
        "PCIe errors the kernel's AER counted for the GPU since boot, by severity.",
        _aer(facts, nvml.gpus),
        kind="counter",
    )


def _links(gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    if not isinstance(wired.links, Found):
        return []
    active = sum(1 for link in wired.links.value if link.active)
    labels = gpu_labels(gpu)
    return [
        ((*labels, ("state", "active")), active),
        ((*labels, ("state", "inactive")), len(wired.links.value) - active),
    ]


def _expected(gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    from envdoctor.rules.links_data import link_data  # the YAML: only where NVLink was read

    if not isinstance(wired.links, Found) or not isinstance(gpu.name, Found):
        return []
    board = link_data().board(gpu.name.value)
    return [(gpu_labels(gpu), board.links)] if board is not None else []


def _latest(wired: GpuInterconnect) -> list[LinkErrors]:
    """Each active link's latest reading (the second where there was one)."""
    if not isinstance(wired.links, Found):
        return []
    later = dict(wired.errors_later.value) if isinstance(wired.errors_later, Found) else {}
    out = []
    for link in wired.links.value:
        if link.link in later:
            out.append(later[link.link])
        elif isinstance(link.errors, Found):
            out.append(link.errors.value)
    return out


def _errors(gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    readings = _latest(wired)
    if not readings:
        return []
    labels = gpu_labels(gpu)
    return [
        ((*labels, ("counter", name)), sum(getattr(r, name) for r in readings))
        for name in NVLINK_COUNTERS
    ]


def _peer_labels(by_index: dict[int, GpuFacts], peer: int) -> Labels:
    other = by_index.get(peer)
    uuid = other.uuid.value if other is not None and isinstance(other.uuid, Found) else ""
    return (("peer", str(peer)), ("peer_uuid", uuid))


def _p2p(by_index: dict[int, GpuFacts], gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    if not isinstance(wired.peers, Found):
        return []
    labels = gpu_labels(gpu)
    return [
        ((*labels, *_peer_labels(by_index, p.peer), ("capability", cap)), int(status == "ok"))
        for p in wired.peers.value
        for cap, status in (("read", p.read), ("write", p.write), ("nvlink", p.nvlink))
        if status != "unread"
    ]


def _topology(by_index: dict[int, GpuFacts], gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    if not isinstance(wired.peers, Found):
        return []
    labels = gpu_labels(gpu)
    return [
        ((*labels, *_peer_labels(by_index, p.peer), ("level", TOPO_M[p.level])), 1)
        for p in wired.peers.value
        if p.level in TOPO_M
    ]


def _replays(gpu: GpuFacts, wired: GpuInterconnect) -> list[Sample]:
    latest = wired.pcie_replays_later if isinstance(wired.pcie_replays_later, Found) else None
    value = latest or (wired.pcie_replays if isinstance(wired.pcie_replays, Found) else None)
    return [(gpu_labels(gpu), value.value)] if value is not None else []


def _aer(facts: Facts, gpus: tuple[GpuFacts, ...]) -> list[Sample]:
    paths = facts.pci_paths
    if not isinstance(paths, Found):
        return []
    by_key = {pci_key(p.address): p for p in paths.value.gpus}
    out: list[Sample] = []
    for gpu in gpus:
        bus = gpu.pci_bus_id.value if isinstance(gpu.pci_bus_id, Found) else ""
        path = by_key.get(pci_key(bus))
        if path is None or not isinstance(path.aer, Found):
            continue
        aer = path.aer.value
        for severity, count in (
            ("correctable", aer.correctable),
            ("nonfatal", aer.nonfatal),
            ("fatal", aer.fatal),
        ):
            out.append(((*gpu_labels(gpu), ("severity", severity)), count))
    return out
