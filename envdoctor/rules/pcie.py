"""PCIe: each GPU's link against what it and its slot can do, replays, and AER errors.

- A link trained below its generation (a riser, a dirty slot, a BIOS speed setting) caps
  host-to-device copies and P2P over PCIe. Idle GPUs lower their link generation to save power by
  design and raise it under load, so the generation is judged only on a GPU that is busy now
  (NVML's utilization); for an idle one the verdict says so. A narrow link is ``gpu.pcie``'s.
- The PCIe replay counter (the GPU resent a packet the link corrupted) read twice: climbing
  within the run is a link failing now. AER (the kernel's Advanced Error Reporting counters in
  sysfs): uncorrectable errors, non-fatal or fatal, since boot.
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import GpuFacts, PcieLink, pci_key
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.interconnect import GpuPciPath
from envdoctor.model.outcome import Verdict, not_applicable
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import gpu_label, nvml_gpus
from envdoctor.rules.base import Rule, RuleContext, judged
from envdoctor.rules.links_data import link_data
from envdoctor.rules.nvlink import interconnect, link_scope

BUSY_UTILIZATION = 30
"""GPU utilization (%) from which a link below its best is judged (an idle link downtrains)."""
AER_DOCS = "https://docs.kernel.org/PCI/pcieaer-howto.html"


def _link(gpu: GpuFacts) -> PcieLink | None:
    return gpu.pcie.value if isinstance(gpu.pcie, Found) else None


def _busy(gpu: GpuFacts) -> int | None:
    return gpu.utilization.value.gpu if isinstance(gpu.utilization, Found) else None


def _below(link: PcieLink) -> bool:
    """A generation below the best at full width (a narrow link is gpu.pcie-degraded's, at any
    load: width does not change with power saving)."""
    return link.gen < link.max_gen and link.width >= link.max_width


def _gbps(gen: int, width: int) -> str:
    rate = link_data().pcie_gbps(gen, width)
    return f"{rate:.0f} GB/s" if rate is not None else "?"


def _degraded(ctx: RuleContext) -> Iterator[Finding]:
    for gpu in nvml_gpus(ctx.facts):
        link, busy = _link(gpu), _busy(gpu)
        if link is None or busy is None or busy < BUSY_UTILIZATION or not _below(link):
            continue
        who = gpu_label(gpu)
        bus = gpu.pci_bus_id.value if isinstance(gpu.pci_bus_id, Found) else "<bus id>"
        yield Finding(
            code="pcie.link-degraded",
            severity=Severity.WARNING,
            title=f"{who}'s PCIe link runs at Gen{link.gen} under load, below the "
            f"Gen{link.max_gen} it and its slot can do",
            evidence=(
                (
                    "link now",
                    f"Gen{link.gen} x{link.width} (about {_gbps(link.gen, link.width)} each way)",
                ),
                (
                    "link possible",
                    f"Gen{link.max_gen} x{link.max_width} (about "
                    f"{_gbps(link.max_gen, link.max_width)} each way)",
                ),
                ("GPU utilization", f"{busy} % (busy: an idle link downtrains by design)"),
            ),
            remediation=Remediation(
                summary="Find what holds the link down: the slot, a riser or the BIOS",
                steps=(
                    f"sudo lspci -vv -s {bus.removeprefix('0000')} | grep -E 'LnkCap|LnkSta'",
                    "check the BIOS's PCIe speed setting for that slot (Auto or the highest Gen)",
                    "reseat the GPU (and its riser or cable); try another slot",
                ),
                needs_root=True,
            ),
            subject=str(gpu.index),
        )


def _link_ok(ctx: RuleContext) -> str:
    idle = [
        g
        for g in nvml_gpus(ctx.facts)
        if (link := _link(g)) is not None
        and _below(link)
        and (_busy(g) is None or (_busy(g) or 0) < BUSY_UTILIZATION)
    ]
    judged_gpus = [g for g in nvml_gpus(ctx.facts) if _link(g) is not None]
    text = f"every busy GPU's PCIe link is at its best ({plural(len(judged_gpus), 'GPU')} read)"
    if idle:
        where = ", ".join(
            f"GPU {g.index} Gen{link.gen} x{link.width}"
            for g in idle
            if (link := _link(g)) is not None
        )
        text += (
            f"; idle GPUs below their best ({where}) are not judged: an idle link trains down "
            "to save power by design and back up under load"
        )
    return text


def _needs_links(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    if not any(_link(g) for g in nvml_gpus(ctx.facts)):
        first = nvml_gpus(ctx.facts)[0]
        return not_applicable(f"no PCIe link state: {why_missing(first.pcie)}")
    return None


# --- replays and AER ----------------------------------------------------------------------------


def _path_of(ctx: RuleContext, gpu: GpuFacts) -> GpuPciPath | None:
    paths = ctx.facts.pci_paths
    if not isinstance(paths, Found) or not isinstance(gpu.pci_bus_id, Found):
        return None
    key = pci_key(gpu.pci_bus_id.value)
    return next((p for p in paths.value.gpus if pci_key(p.address) == key), None)


def _errors(ctx: RuleContext) -> Iterator[Finding]:
    wired = interconnect(ctx)
    for gpu in nvml_gpus(ctx.facts):
        who = gpu_label(gpu)
        state = next((g for g in wired.gpus if g.index == gpu.index), None) if wired else None
        if (
            state is not None
            and isinstance(state.pcie_replays, Found)
            and isinstance(state.pcie_replays_later, Found)
            and state.pcie_replays_later.value > state.pcie_replays.value
            and wired is not None
        ):
            grew = state.pcie_replays_later.value - state.pcie_replays.value
            yield Finding(
                code="pcie.replays-growing",
                severity=Severity.WARNING,
                title=f"{who} resent {grew} PCIe packets while envdoctor ran "
                f"({wired.seconds:.1f} s): its PCIe link corrupts data now",
                evidence=(
                    (
                        "PCIe replays",
                        f"{state.pcie_replays.value} → "
                        f"{state.pcie_replays_later.value} in {wired.seconds:.1f} s",
                    ),
                    *_aer_evidence(ctx, gpu),
                ),
                remediation=Remediation(
                    summary=f"Check GPU {gpu.index}'s slot and riser; drain the node if the "
                    "replays keep climbing",
                    steps=(
                        f"nvidia-smi -q -i {gpu.index} -d PCIE   # Replays Since Reset, again "
                        "in a minute",
                        "reseat the GPU and its riser or cable; check the slot for damage",
                        "still climbing: move the GPU to another slot, or replace the riser",
                    ),
                    needs_root=True,
                ),
                subject=str(gpu.index),
            )
            continue
        path = _path_of(ctx, gpu)
        if path is None or not isinstance(path.aer, Found):
            continue
        aer = path.aer.value
        if aer.nonfatal or aer.fatal:
            yield Finding(
                code="pcie.aer-errors",
                severity=Severity.WARNING,
                title=f"The kernel counted uncorrectable PCIe errors on {who} since boot "
                f"({aer.fatal} fatal, {aer.nonfatal} non-fatal)",
                evidence=(
                    (
                        "AER counters",
                        f"{aer.fatal} fatal, {aer.nonfatal} non-fatal, "
                        f"{aer.correctable} correctable ({path.address})",
                    ),
                ),
                remediation=Remediation(
                    summary="Find the PCIe errors in the kernel log; reseat the GPU if they recur",
                    steps=(
                        "sudo journalctl -k -b | grep -iE 'AER|pcieport'   # when and which device",
                        f"cat /sys/bus/pci/devices/{path.address}/aer_dev_nonfatal",
                        "recurring: reseat the GPU and riser, update the BIOS and the "
                        "switch firmware; a fatal error often comes with an Xid 79",
                    ),
                    needs_root=True,
                    docs=AER_DOCS,
                ),
                subject=str(gpu.index),
            )


def _aer_evidence(ctx: RuleContext, gpu: GpuFacts) -> tuple[tuple[str, str], ...]:
    path = _path_of(ctx, gpu)
    if path is None or not isinstance(path.aer, Found):
        return ()
    aer = path.aer.value
    return (
        (
            "AER counters",
            f"{aer.fatal} fatal, {aer.nonfatal} non-fatal, {aer.correctable} correctable",
        ),
    )


def _needs_counters(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    wired = interconnect(ctx)
    replays = wired is not None and any(isinstance(g.pcie_replays, Found) for g in wired.gpus)
    aer = any(
        (path := _path_of(ctx, g)) is not None and isinstance(path.aer, Found)
        for g in nvml_gpus(ctx.facts)
    )
    if not replays and not aer:
        return not_applicable("neither NVML's PCIe replay counter nor the kernel's AER was read")
    return None


def _errors_ok(ctx: RuleContext) -> str:
    wired = interconnect(ctx)
    parts = []
    if wired is not None and any(isinstance(g.pcie_replays_later, Found) for g in wired.gpus):
        parts.append(f"no PCIe replay climbed in {wired.seconds:.1f} s")
    elif wired is not None:
        parts.append("PCIe replays read once")
    if any((p := _path_of(ctx, g)) and isinstance(p.aer, Found) for g in nvml_gpus(ctx.facts)):
        parts.append("no uncorrectable AER error since boot")
    return "; ".join(parts) or "nothing to judge"


RULES = (
    Rule(
        "pcie.link",
        "Busy GPUs' PCIe links run at the generation and width they and their slot can do",
        ("pcie.link-degraded",),
        judged(_degraded, _needs_links, ok=_link_ok),
    ),
    Rule(
        "pcie.errors",
        "No PCIe replays climbing and no uncorrectable AER errors",
        ("pcie.replays-growing", "pcie.aer-errors"),
        judged(_errors, _needs_counters, ok=_errors_ok),
    ),
)
