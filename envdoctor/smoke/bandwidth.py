"""The multi-GPU child's measurements judged against the links between the GPUs (issue 39).

``nccl-bandwidth`` reports nccl-tests' bus bandwidth of an all-reduce (busbw = algbw * 2(n-1)/n:
what each GPU's links carried), ``p2p-bandwidth`` one device-to-device copy per ordered pair, as
nvbandwidth measures it. Each is held to the nominal of the path between the GPUs, from the facts:
NVLink (the active links, direct or through NVSwitches, times what one link carries in one
direction: ``rules/gpu_links.yaml``), else the narrower PCIe link of the two at its best
generation and width. Below ``SLOW_SHARE`` of the nominal is slow; with three or more pairs, a
pair below ``SLOW_SHARE`` of the median pair is slow too (the one GPU or cable that matters,
named; the others not alarmed).
"""

from __future__ import annotations

import math
import statistics

from envdoctor.model.facts import Facts, GpuFacts, pci_key
from envdoctor.model.finding import Finding
from envdoctor.model.interconnect import GpuInterconnect, NvLink
from envdoctor.model.probed import Found
from envdoctor.smoke.codes import CODES
from envdoctor.smoke.model import PASSED, ChildRun

SLOW_SHARE = 0.5
MAX_PAIRS_NAMED = 8


def _gpu(facts: Facts, index: int) -> GpuFacts | None:
    nvml = facts.nvml.value if isinstance(facts.nvml, Found) else None
    return next((g for g in nvml.gpus if g.index == index), None) if nvml else None


def _links(facts: Facts, index: int) -> tuple[NvLink, ...]:
    nvml = facts.nvml.value if isinstance(facts.nvml, Found) else None
    if nvml is None or not isinstance(nvml.interconnect, Found):
        return ()
    wired: GpuInterconnect | None = next(
        (g for g in nvml.interconnect.value.gpus if g.index == index), None
    )
    if wired is None or not isinstance(wired.links, Found):
        return ()
    return tuple(link for link in wired.links.value if link.active)


def _link_gbps(facts: Facts, index: int) -> float | None:
    from envdoctor.rules.links_data import link_data  # reads the YAML: only when judging

    gpu = _gpu(facts, index)
    if gpu is None or not isinstance(gpu.name, Found):
        return None
    board = link_data().board(gpu.name.value)
    return board.link_gbps if board is not None else None


def _pcie_gbps(facts: Facts, index: int) -> float | None:
    from envdoctor.rules.links_data import link_data

    gpu = _gpu(facts, index)
    if gpu is None or not isinstance(gpu.pcie, Found):
        return None
    return link_data().pcie_gbps(gpu.pcie.value.max_gen, gpu.pcie.value.max_width)


def pair_nominal(facts: Facts, a: int, b: int) -> tuple[float, str] | None:
    """One direction's nominal GB/s between NVML GPUs ``a`` and ``b``, and what it is."""
    per_link = _link_gbps(facts, a)
    links_a, links_b = _links(facts, a), _links(facts, b)
    gpu_b = _gpu(facts, b)
    bus_b = (
        pci_key(gpu_b.pci_bus_id.value) if gpu_b and isinstance(gpu_b.pci_bus_id, Found) else None
    )
    direct = [x for x in links_a if x.remote_type == "gpu" and pci_key(x.remote_bus_id) == bus_b]
    switched = min(
        len([x for x in links_a if x.remote_type == "nvswitch"]),
        len([x for x in links_b if x.remote_type == "nvswitch"]),
    )
    if per_link is not None and (direct or switched):
        count, how = (len(direct), "direct") if direct else (switched, "through NVSwitches")
        return count * per_link, f"NVLink {how}: {count} links × {per_link:g} GB/s"
    pcie = [g for g in (_pcie_gbps(facts, a), _pcie_gbps(facts, b)) if g is not None]
    if len(pcie) == 2:
        return min(pcie), f"PCIe: the narrower link of the two at its best, {min(pcie):.0f} GB/s"
    return None


def allreduce_nominal(facts: Facts, gpus: tuple[int, ...]) -> tuple[float, str] | None:
    """The bus bandwidth the GPUs' links allow: the slowest GPU's way to the others."""
    pairs = [pair_nominal(facts, a, b) for a in gpus for b in gpus if a != b]
    known = [p for p in pairs if p is not None]
    if not known or len(known) != len(pairs):
        return None
    return min(known, key=lambda p: p[0])


def _number(text: str | None) -> float | None:
    """A finite, non-negative figure the child sent, else None (the child's output is data)."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def bandwidth_findings(facts: Facts, child: ChildRun) -> list[Finding]:
    """Findings of the multi-GPU child's two bandwidth steps (none when they did not pass)."""
    gpus = child.target.nvml_indices
    if len(gpus) < 2:
        return []
    out: list[Finding] = []
    step = child.step("nccl-bandwidth")
    if step is not None and step.status == PASSED:
        finding = _allreduce(facts, child, step.get("busbw_gbps"), step.get("algbw_gbps"))
        if finding is not None:
            out.append(finding)
    step = child.step("p2p-bandwidth")
    if step is not None and step.status == PASSED:
        finding = _pairs(facts, child, step.get("pairs") or "")
        if finding is not None:
            out.append(finding)
    return out


def _allreduce(
    facts: Facts, child: ChildRun, busbw_text: str | None, algbw_text: str | None
) -> Finding | None:
    busbw = _number(busbw_text)
    nominal = allreduce_nominal(facts, child.target.nvml_indices)
    if busbw is None or nominal is None or busbw >= SLOW_SHARE * nominal[0]:
        return None
    info = CODES["smoke.allreduce-slow"]
    n = len(child.target.nvml_indices)
    return Finding(
        code="smoke.allreduce-slow",
        severity=info.severity,
        title=f"{child.target.label}: the NCCL all-reduce reached {busbw:.0f} GB/s of bus "
        f"bandwidth, {busbw / nominal[0]:.0%} of the {nominal[0]:.0f} GB/s the links allow",
        evidence=(
            ("bus bandwidth (nccl-tests' busbw)", f"{busbw:g} GB/s = algbw × 2({n}-1)/{n}"),
            ("algorithm bandwidth", f"{algbw_text} GB/s"),
            ("nominal", nominal[1]),
            ("threshold", f"{SLOW_SHARE:.0%} of the nominal"),
        ),
        remediation=info.fix,
        subject=child.target.label,
    )


def _pairs(facts: Facts, child: ChildRun, text: str) -> Finding | None:
    gpus = child.target.nvml_indices
    measured: list[tuple[int, int, float, str]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or ">" not in parts[0]:
            continue
        left, _, right = parts[0].partition(">")
        gbps = _number(parts[1])
        if not (left.isdigit() and right.isdigit()) or gbps is None:
            continue
        a, b = int(left), int(right)
        if a < len(gpus) and b < len(gpus) and a != b:
            measured.append((gpus[a], gpus[b], gbps, parts[2]))
    if not measured:
        return None
    median = statistics.median(m[2] for m in measured)
    slow = []
    for a, b, gbps, mode in measured:
        nominal = pair_nominal(facts, a, b)
        below_nominal = nominal is not None and gbps < SLOW_SHARE * nominal[0]
        below_others = len(measured) >= 3 and gbps < SLOW_SHARE * median
        if below_nominal or below_others:
            slow.append((gbps / (nominal[0] if nominal else median), a, b, gbps, mode, nominal))
    if not slow:
        return None
    slow.sort()
    info = CODES["smoke.p2p-slow"]
    every = len(slow) == len(measured)
    named = ", ".join(f"GPU {a}→{b}" for _, a, b, *_ in slow[:MAX_PAIRS_NAMED])
    evidence = [
        (
            f"GPU {a} → GPU {b}",
            f"{gbps:.1f} GB/s ({'P2P' if mode == 'p2p' else 'through host memory'}); "
            + (f"nominal {nominal[0]:.0f} GB/s ({nominal[1]})" if nominal else "no nominal known")
            + f"; median pair {median:.1f} GB/s",
        )
        for _, a, b, gbps, mode, nominal in slow[:MAX_PAIRS_NAMED]
    ]
    if len(slow) > MAX_PAIRS_NAMED:
        evidence.append(("more slow pairs", str(len(slow) - MAX_PAIRS_NAMED)))
    return Finding(
        code="smoke.p2p-slow",
        severity=info.severity,
        title=(
            f"{child.target.label}: every peer copy is slow (below half of its link's nominal): "
            "the path between the GPUs (P2P off, ACS, IOMMU) rather than one GPU"
            if every and len(measured) > 1
            else f"{child.target.label}: peer copies are slow on {named}"
        ),
        evidence=tuple(evidence),
        remediation=info.fix,
        subject=",".join(f"{a}>{b}" for _, a, b, *_ in slow),
    )


def skipped_reason(run_targets: list[ChildRun]) -> str | None:
    """Why no multi-GPU child ran (None when one did)."""
    if any(len(r.target.nvml_indices) > 1 or r.target.devices > 1 for r in run_targets):
        return None
    if any(r.target.device == "cpu" for r in run_targets):
        return "skipped: the CPU run has no GPUs to all-reduce across"
    singles = [r for r in run_targets if len(r.target.nvml_indices) <= 1]
    if len(singles) <= 1:
        return "skipped: one GPU, no all-reduce or peer copy to measure"
    return "skipped: fewer than two GPUs got a CUDA context (or the NCCL child was turned off)"
