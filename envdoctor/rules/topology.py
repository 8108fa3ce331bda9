"""Peer to peer, the topology matrix, and what stands between two GPUs: ACS and the IOMMU.

- P2P read and write between every pair of GPUs (NVML's P2P status). NCCL and CUDA fall back to
  copies through host memory where P2P is off: all-reduce runs at a fraction of its bandwidth.
  Consumer boards do not do P2P by design (said, not alarmed); otherwise the finding says why
  it is off and what fits this machine: bare metal or a VM.
- ACS (PCIe Access Control Services) on the switch ports above the GPUs: with P2P request or
  completion redirect on, every P2P transfer goes up to the root complex and back (slow, or
  refused). On bare metal it can be turned off (``setpci``, per port, after each boot); in a VM
  it is what keeps the passed-through devices apart, so it is the host's to change.
- The IOMMU translating every DMA (on, not in pass-through mode) on a bare-metal multi-GPU node
  costs GPUDirect P2P and RDMA throughput: ``iommu=pt`` keeps the IOMMU for VMs and isolation
  while DMA of the host's own drivers goes untranslated. ``iommu=off`` is never advised.
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import pci_key
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.interconnect import (
    TOPO_M,
    GpuInterconnect,
    GpuPciPath,
    NvlinkFacts,
    PciBridge,
    PeerStatus,
)
from envdoctor.model.outcome import Verdict, not_applicable, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import nvml_gpus
from envdoctor.rules.base import Rule, RuleContext, judged
from envdoctor.rules.nvlink import interconnect, link_scope, links_of

NCCL_ACS_URL = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
    "#pci-access-control-services-acs"
)
ACS_REDIRECT = 0x0004 | 0x0008
"""ACS Control: P2P Request Redirect (bit 2) and P2P Completion Redirect (bit 3)."""
ACS_BITS = (
    (0x01, "source validation"),
    (0x02, "translation blocking"),
    (0x04, "P2P request redirect"),
    (0x08, "P2P completion redirect"),
    (0x10, "upstream forwarding"),
    (0x20, "egress control"),
    (0x40, "direct translated P2P"),
)
WHY_OFF = {
    "gpu-not-supported": "the GPU model does not do P2P (consumer and some workstation boards)",
    "chipset-not-supported": "the chipset (root complex) does not pass P2P between them",
    "topology-not-supported": "the PCIe path between them does not allow P2P (across CPU "
    "sockets on some platforms, or redirected by ACS)",
    "disabled-by-regkey": "the NVIDIA driver was told to turn P2P off (a registry key in its "
    "module options)",
    "not-supported": "NVML reports P2P not supported between them",
    "unknown": "NVML could not tell",
    "unread": "NVML did not answer the query",
}
MAX_PAIRS_SHOWN = 12


def _pairs(facts: NvlinkFacts) -> list[tuple[int, PeerStatus]]:
    """Each unordered pair once (the lower index's view of it)."""
    out: list[tuple[int, PeerStatus]] = []
    for gpu in facts.gpus:
        if isinstance(gpu.peers, Found):
            out.extend((gpu.index, p) for p in gpu.peers.value if p.peer > gpu.index)
    return out


def _bus(ctx: RuleContext, index: int) -> tuple[int, int, int] | None:
    gpu = next((g for g in nvml_gpus(ctx.facts) if g.index == index), None)
    if gpu is None or not isinstance(gpu.pci_bus_id, Found):
        return None
    return pci_key(gpu.pci_bus_id.value)


def matrix(ctx: RuleContext, facts: NvlinkFacts) -> list[str]:
    """The GPU rows of ``nvidia-smi topo -m``: X, NV# (NVLink links between the two: direct,
    or through NVSwitches, the fewer of the two GPUs' switch links), else PIX/PXB/PHB/NODE/SYS."""
    by_index = {g.index: g for g in facts.gpus}
    indices = sorted(by_index)
    rows = []
    for i in indices:
        known = by_index[i].peers
        peers = known.value if isinstance(known, Found) else ()
        cells = []
        for j in indices:
            if i == j:
                cells.append("X")
                continue
            peer = next((p for p in peers if p.peer == j), None)
            cells.append(_cell(ctx, by_index[i], by_index[j], peer))
        rows.append(f"GPU{i}  " + " ".join(f"{c:>5}" for c in cells))
    header = "      " + " ".join(f"{'GPU' + str(j):>5}" for j in indices)
    return [header, *rows]


def _cell(ctx: RuleContext, a: GpuInterconnect, b: GpuInterconnect, peer: PeerStatus | None) -> str:
    bus_b = _bus(ctx, b.index)
    direct = [
        link
        for link in links_of(a)
        if link.active and link.remote_type == "gpu" and pci_key(link.remote_bus_id) == bus_b
    ]
    if direct:
        return f"NV{len(direct)}"
    switched_a = [x for x in links_of(a) if x.active and x.remote_type == "nvswitch"]
    switched_b = [x for x in links_of(b) if x.active and x.remote_type == "nvswitch"]
    if switched_a and switched_b:
        return f"NV{min(len(switched_a), len(switched_b))}"
    if peer is None:
        return "?"
    return TOPO_M.get(peer.level, "?")


# --- P2P ------------------------------------------------------------------------------------


def _p2p(ctx: RuleContext) -> Iterator[Finding]:
    facts = interconnect(ctx)
    assert facts is not None  # _needs_pairs
    off = [(i, p) for i, p in _pairs(facts) if p.read != "ok" or p.write != "ok"]
    if not off:
        return
    reasons = {p.read if p.read != "ok" else p.write for _, p in off}
    by_design = reasons == {"gpu-not-supported"}
    vm = _in_vm(ctx)
    redirecting = [b for b in _redirecting_bridges(ctx) if not b.root_port]
    iommu_translates = _iommu_translates(ctx)
    steps: list[str] = []
    if "disabled-by-regkey" in reasons:
        steps.append(
            "grep -r NVreg_RegistryDwords /etc/modprobe.d /lib/modprobe.d   # remove the key "
            "that turns P2P off, then reload the driver (or reboot)"
        )
    if vm and not by_design:
        steps.append(
            "this is a VM: P2P between passed-through GPUs is the host's to give. Ask your "
            "provider or host admin for GPUs passed through under one PCIe switch with P2P "
            "enabled in the hypervisor (or an NVLink/SXM instance type)"
        )
    elif redirecting:
        steps.append(
            "ACS redirects P2P on the switch ports above these GPUs: see the "
            "pcie.acs-redirect finding for the setpci lines"
        )
    if iommu_translates and not vm and not by_design:
        steps.append(
            "the IOMMU translates every DMA: add iommu=pt to the kernel command line (see "
            "pcie.iommu-translated)"
        )
    steps.append("nvidia-smi topo -p2p rw   # the driver's own P2P matrix")
    if by_design:
        steps = ["nothing to fix: NCCL moves the data through host memory on these boards"]
    shown = off[:MAX_PAIRS_SHOWN]
    yield Finding(
        code="p2p.unavailable",
        severity=Severity.INFO if by_design else Severity.WARNING,
        title=f"Peer-to-peer access is off between {plural(len(off), 'pair')} of GPUs: "
        + (
            "these boards do not do P2P (by design)"
            if by_design
            else "NCCL and CUDA copy through host memory there, at a fraction of the bandwidth"
        ),
        evidence=(
            *(
                (
                    f"GPU {i} ↔ GPU {p.peer}",
                    f"read {p.read}, write {p.write}: {WHY_OFF.get(p.read if p.read != 'ok' else p.write, p.read)}",
                )
                for i, p in shown
            ),
            *((("more pairs", str(len(off) - len(shown))),) if len(off) > len(shown) else ()),
            (
                "machine",
                "a VM" if vm else "bare metal" if vm is False else "unknown (no CPU flags)",
            ),
            ("topology (nvidia-smi topo -m)", " | ".join(matrix(ctx, facts)[1:])),
        ),
        remediation=Remediation(
            summary="Nothing to do: these GPUs do not do P2P"
            if by_design
            else (
                "Ask the host for P2P between these GPUs"
                if vm
                else "Let P2P through between these GPUs"
            ),
            steps=tuple(steps),
            needs_root=not by_design and not vm,
            docs=NCCL_ACS_URL,
        ),
        subject=",".join(sorted({str(i) for i, _ in off} | {str(p.peer) for _, p in off})),
    )


def _needs_pairs(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    if len(nvml_gpus(ctx.facts)) < 2:
        return not_applicable("one GPU: no pair to check")
    facts = interconnect(ctx)
    if facts is None:
        return not_applicable("peer to peer was not read (envdoctor check reads it)")
    if not _pairs(facts):
        failed = [g for g in facts.gpus if isinstance(g.peers, ProbeFailed)]
        if failed:
            return unknown(f"P2P status could not be read: {why_missing(failed[0].peers)}")
        return not_applicable("no pair of GPUs answered for P2P")
    return None


def _p2p_ok(ctx: RuleContext) -> str:
    facts = interconnect(ctx)
    assert facts is not None
    rows = matrix(ctx, facts)
    return (
        f"P2P read and write work between all {plural(len(_pairs(facts)), 'pair')} of GPUs; "
        f"topology: {' | '.join(rows[1:])}"
    )


# --- ACS --------------------------------------------------------------------------------------


def _paths(ctx: RuleContext) -> tuple[GpuPciPath, ...]:
    paths = ctx.facts.pci_paths
    return paths.value.gpus if isinstance(paths, Found) else ()


def _in_vm(ctx: RuleContext) -> bool | None:
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found) or not isinstance(paths.value.hypervisor, Found):
        return None
    return paths.value.hypervisor.value


def _bridges(ctx: RuleContext) -> list[tuple[str, PciBridge]]:
    """(GPU address, bridge) for every bridge above every GPU, each bridge once."""
    seen: dict[str, tuple[str, PciBridge]] = {}
    for path in _paths(ctx):
        if isinstance(path.bridges, Found):
            for bridge in path.bridges.value:
                seen.setdefault(bridge.address, (path.address, bridge))
    return list(seen.values())


def _redirecting_bridges(ctx: RuleContext) -> list[PciBridge]:
    return [
        b
        for _, b in _bridges(ctx)
        if isinstance(b.acs_control, Found) and b.acs_control.value & ACS_REDIRECT
    ]


def _acs_words(value: int) -> str:
    on = [name for bit, name in ACS_BITS if value & bit]
    return f"0x{value:04x} ({', '.join(on) or 'nothing enabled'})"


def _acs(ctx: RuleContext) -> Iterator[Finding]:
    gpus_below: dict[str, list[str]] = {}
    for path in _paths(ctx):
        if isinstance(path.bridges, Found):
            for bridge in path.bridges.value:
                gpus_below.setdefault(bridge.address, []).append(path.address)
    # a switch port matters when P2P between GPUs would pass it: below the root port
    bad = [b for b in _redirecting_bridges(ctx) if not b.root_port]
    if not bad:
        return
    vm = _in_vm(ctx)
    evidence = tuple(
        (f"bridge {b.address}", f"ACS control {_acs_words(b.acs_control.value)}, above GPU "
         f"{', '.join(gpus_below.get(b.address, []))}")
        for b in bad
        if isinstance(b.acs_control, Found)
    )  # fmt: skip
    if vm:
        yield Finding(
            code="pcie.acs-redirect",
            severity=Severity.INFO,
            title=f"ACS redirects P2P on {plural(len(bad), 'PCIe switch port')} above the GPUs "
            "of this VM: P2P goes through the host's root complex, which it may refuse",
            evidence=(*evidence, ("machine", "a VM: ACS isolates the devices passed through")),
            remediation=Remediation(
                summary="Leave ACS alone in the VM; ask the host for P2P between these GPUs",
                steps=(
                    "ACS is what keeps passthrough devices isolated: the guest must not turn it off",
                    "ask your provider or host admin for: these GPUs passed through together "
                    "(one IOMMU group or P2P enabled in the hypervisor, with ATS), or an "
                    "NVLink/SXM instance type",
                ),
                docs=NCCL_ACS_URL,
            ),
            subject=",".join(b.address for b in bad),
        )
        return
    yield Finding(
        code="pcie.acs-redirect",
        severity=Severity.WARNING,
        title=f"ACS redirects P2P on {plural(len(bad), 'PCIe switch port')} above the GPUs: "
        "every GPU-to-GPU transfer through that switch goes up to the CPU and back",
        evidence=(*evidence, ("machine", "bare metal" if vm is False else "unknown")),
        remediation=Remediation(
            summary="Turn ACS off on those switch ports (bare metal), after every boot",
            steps=(
                *(f"sudo setpci -v -s {b.address} ECAP_ACS+0x6.w=0000" for b in bad),
                "the setting is lost at reboot: run those lines from a boot-time unit, or "
                "disable ACS (PCIe ACS / 'ACS control') in the BIOS where it offers it",
                "keep ACS on (and skip this) where the node runs VMs with device passthrough: "
                "it is what isolates their devices",
                "then: nvidia-smi topo -p2p rw, and envdoctor smoke --deep",
            ),
            needs_root=True,
            docs=NCCL_ACS_URL,
        ),
        subject=",".join(b.address for b in bad),
    )


def _needs_bridges(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found):
        return not_applicable(f"the GPUs' PCIe paths were not read: {why_missing(paths)}")
    if len(paths.value.gpus) < 2:
        return not_applicable("one GPU: no P2P path to hold ACS to")
    switch_ports = [b for _, b in _bridges(ctx) if not b.root_port]
    if not switch_ports:
        return not_applicable("no PCIe switch above the GPUs (each hangs off its own root port)")
    unread = [b for b in switch_ports if isinstance(b.acs_control, ProbeFailed)] or [
        b
        for b in switch_ports
        if isinstance(b.acs_control, Absent) and "root" in b.acs_control.reason
    ]
    if unread and len(unread) == len(switch_ports):
        return unknown(f"ACS could not be read: {why_missing(unread[0].acs_control)}")
    return None


def _acs_ok(ctx: RuleContext) -> str:
    ports = [b for _, b in _bridges(ctx) if not b.root_port]
    return f"no P2P redirect on the {plural(len(ports), 'PCIe switch port')} above the GPUs"


# --- the IOMMU --------------------------------------------------------------------------------


def _iommu_translates(ctx: RuleContext) -> bool:
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found):
        return False
    iommu = paths.value.iommu
    groups = iommu.groups.value if isinstance(iommu.groups, Found) else 0
    words = iommu.cmdline.value.split() if isinstance(iommu.cmdline, Found) else []
    passthrough = "iommu=pt" in words or "iommu.passthrough=1" in words
    return groups > 0 and not passthrough


def _iommu(ctx: RuleContext) -> Iterator[Finding]:
    if not _iommu_translates(ctx):
        return
    paths = ctx.facts.pci_paths
    assert isinstance(paths, Found)
    iommu = paths.value.iommu
    vendor = "intel_iommu=on " if "intel_iommu=on" in _words(ctx) else ""
    yield Finding(
        code="pcie.iommu-translated",
        severity=Severity.INFO,
        title="The IOMMU translates every DMA on this multi-GPU node: GPUDirect P2P and RDMA "
        "lose throughput to it (pass-through mode keeps the IOMMU without that cost)",
        evidence=(
            ("IOMMU groups", str(iommu.groups.value if isinstance(iommu.groups, Found) else "?")),
            ("kernel command line (IOMMU words)", _words(ctx) or "none (the kernel's default)"),
            ("machine", "bare metal"),
        ),
        remediation=Remediation(
            summary="Put the IOMMU in pass-through mode (iommu=pt); do not turn it off",
            steps=(
                f'add "{vendor}iommu=pt" to GRUB_CMDLINE_LINUX in /etc/default/grub',
                "sudo update-grub (Debian/Ubuntu) or sudo grub2-mkconfig -o "
                "/boot/grub2/grub.cfg (RHEL), then reboot",
                "keep the IOMMU on (never iommu=off): VMs, VFIO and isolation need it",
            ),
            needs_root=True,
            needs_reboot=True,
            docs=NCCL_ACS_URL,
        ),
    )


def _words(ctx: RuleContext) -> str:
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found) or not isinstance(paths.value.iommu.cmdline, Found):
        return ""
    return paths.value.iommu.cmdline.value


def _needs_bare_metal_gpus(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    if len(nvml_gpus(ctx.facts)) < 2:
        return not_applicable("one GPU: no P2P to slow down")
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found):
        return not_applicable(f"the IOMMU was not read: {why_missing(paths)}")
    if _in_vm(ctx):
        return not_applicable("a VM: the host's IOMMU is the one that matters")
    groups = paths.value.iommu.groups
    if not isinstance(groups, Found):
        return unknown(f"the IOMMU groups could not be listed: {why_missing(groups)}")
    return None


def _iommu_ok(ctx: RuleContext) -> str:
    paths = ctx.facts.pci_paths
    assert isinstance(paths, Found)
    groups = paths.value.iommu.groups
    if isinstance(groups, Found) and groups.value == 0:
        return "no IOMMU translates DMA here (no IOMMU groups)"
    return f"the IOMMU is in pass-through mode ({_words(ctx)})"


RULES = (
    Rule(
        "p2p.status",
        "Peer-to-peer access works between every pair of GPUs",
        ("p2p.unavailable",),
        judged(_p2p, _needs_pairs, ok=_p2p_ok),
    ),
    Rule(
        "pcie.acs",
        "No ACS redirect on the PCIe switch ports between GPUs",
        ("pcie.acs-redirect",),
        judged(_acs, _needs_bridges, ok=_acs_ok),
    ),
    Rule(
        "pcie.iommu",
        "The IOMMU does not translate the GPUs' DMA on a bare-metal multi-GPU node",
        ("pcie.iommu-translated",),
        judged(_iommu, _needs_bare_metal_gpus, ok=_iommu_ok),
    ),
)
