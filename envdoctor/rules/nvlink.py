"""NVLink: every GPU's active links against the count its board has, and link errors climbing.

- An SXM board (H100/H200/B200: 18 links, A100: 12, V100: 6; ``gpu_links.yaml``) with a link
  down talks to its peers at a fraction of the bandwidth, or not at all through the NVSwitches:
  NCCL falls back to slower paths and a job is slow on one GPU for no visible reason. The finding
  names the GPU and its down links (the healthy GPUs are not mentioned).
- The data-link error counters (replay, recovery, CRC flit and data) are read twice within the
  run: counters that climbed in that time are a link failing now (a warning); a link that had to
  retrain (recovery) or saw data CRC errors since the driver loaded, but is quiet now, is noted.
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import GpuFacts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.interconnect import GpuInterconnect, LinkErrors, NvLink, NvlinkFacts
from envdoctor.model.outcome import Outcome, Verdict, not_applicable, unknown
from envdoctor.model.probed import Found, ProbeFailed, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import gpu_label, nvml_gpus, nvml_system
from envdoctor.rules.base import Rule, RuleContext, judged
from envdoctor.rules.gpu import gpu_scope
from envdoctor.rules.links_data import Board, link_data

NVLINK_DOCS = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
COUNTER_WORDS = {
    "replay": "replays",
    "recovery": "recoveries",
    "crc_flit": "CRC flit errors",
    "crc_data": "CRC data errors",
}


def link_scope(ctx: RuleContext) -> Verdict | None:
    """``gpu_scope``, but where NVML lists no GPU because it failed, not applicable: the GPU
    checks report that failure, and the interconnect's checks would only repeat it."""
    scope = gpu_scope(ctx)
    if scope is not None and scope.outcome == Outcome.UNKNOWN:
        return not_applicable(f"{scope.reason} (the GPU checks report it)")
    return scope


def interconnect(ctx: RuleContext) -> NvlinkFacts | None:
    system = nvml_system(ctx.facts)
    if system is None or not isinstance(system.interconnect, Found):
        return None
    return system.interconnect.value


def gpu_facts(ctx: RuleContext, index: int) -> GpuFacts | None:
    return next((g for g in nvml_gpus(ctx.facts) if g.index == index), None)


def label(ctx: RuleContext, index: int) -> str:
    gpu = gpu_facts(ctx, index)
    return gpu_label(gpu) if gpu is not None else f"GPU {index}"


def board_of(ctx: RuleContext, index: int) -> Board | None:
    gpu = gpu_facts(ctx, index)
    if gpu is None or not isinstance(gpu.name, Found):
        return None
    return link_data().board(gpu.name.value)


def links_of(gpu: GpuInterconnect) -> tuple[NvLink, ...]:
    return gpu.links.value if isinstance(gpu.links, Found) else ()


def remote_summary(links: tuple[NvLink, ...]) -> str:
    """ "18 to NVSwitches" / "4 to GPU 00000000:28:00.0, …" for the active links."""
    kinds: dict[str, int] = {}
    for link in links:
        if link.active:
            key = {"nvswitch": "NVSwitches", "gpu": "peer GPUs"}.get(link.remote_type, "")
            key = key or (link.remote_type or "an unreported far end")
            kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{n} to {k}" for k, n in kinds.items()) or "none active"


# --- links down -------------------------------------------------------------------------------


def _links_down(ctx: RuleContext) -> Iterator[Finding]:
    facts = interconnect(ctx)
    assert facts is not None  # _needs_links
    for gpu in facts.gpus:
        board = board_of(ctx, gpu.index)
        links = links_of(gpu)
        if board is None or not links:
            continue
        active = [link for link in links if link.active]
        if len(active) >= board.links:
            continue
        down = [link.link for link in links if not link.active]
        missing = board.links - len(links)
        who = label(ctx, gpu.index)
        yield Finding(
            code="nvlink.links-down",
            severity=Severity.ERROR,
            title=f"{who} has {len(active)} of its {board.links} NVLink links up: its traffic to "
            "the other GPUs runs at a fraction of the bandwidth, or falls back to PCIe",
            evidence=(
                (who, f"{board.model}: {board.links} NVLink {board.nvlink} links ({board.source})"),
                ("active links", f"{len(active)} ({remote_summary(links)})"),
                ("links down", ", ".join(str(n) for n in down) or "none reported"),
                *((("links NVML does not list", str(missing)),) if missing > 0 else ()),
            ),
            remediation=Remediation(
                summary=f"Find why GPU {gpu.index}'s NVLink links are down; drain the node, "
                "reset the GPU, and replace the board if they stay down",
                steps=(
                    f"nvidia-smi nvlink --status -i {gpu.index}   # the state of each link",
                    f"nvidia-smi nvlink --errorcounters -i {gpu.index}",
                    "on an NVSwitch system: systemctl status nvidia-fabricmanager, and "
                    "journalctl -u nvidia-fabricmanager -b for the links it could not train",
                    f"with no process on it: sudo nvidia-smi --gpu-reset -i {gpu.index} "
                    "(or reboot the node), then run envdoctor check again",
                    "still down after a reset: reseat or replace the GPU board (NVIDIA field "
                    "diagnostics, then an RMA)",
                ),
                needs_root=True,
                docs=NVLINK_DOCS,
            ),
            subject=str(gpu.index),
        )


def _needs_links(ctx: RuleContext) -> Verdict | None:
    scope = link_scope(ctx)
    if scope is not None:
        return scope
    system = nvml_system(ctx.facts)
    wired = system.interconnect if system is not None else None
    if wired is None or not isinstance(wired, Found):
        return not_applicable(
            f"NVLink was not read: {why_missing(wired) if wired is not None else 'no NVML'}"
        )
    if not any(links_of(g) for g in wired.value.gpus):
        reasons = {why_missing(g.links) for g in wired.value.gpus if not isinstance(g.links, Found)}
        failed = [g for g in wired.value.gpus if isinstance(g.links, ProbeFailed)]
        if failed:
            return unknown(f"NVLink could not be read: {'; '.join(sorted(reasons))}")
        return not_applicable(f"no GPU here has NVLink ({'; '.join(sorted(reasons))})")
    return None


def _needs_boards(ctx: RuleContext) -> Verdict | None:
    missing = _needs_links(ctx)
    if missing is not None:
        return missing
    facts = interconnect(ctx)
    assert facts is not None
    if not any(board_of(ctx, g.index) for g in facts.gpus if links_of(g)):
        names = sorted(
            {
                g.name.value
                for g in nvml_gpus(ctx.facts)
                if isinstance(g.name, Found) and board_of(ctx, g.index) is None
            }
        )
        return not_applicable(
            f"no link count is known for {', '.join(names) or 'these GPUs'} (envdoctor knows "
            "the SXM boards: PCIe boards' NVLink bridges are optional)"
        )
    return None


def _links_ok(ctx: RuleContext) -> str:
    facts = interconnect(ctx)
    assert facts is not None
    judged_gpus = [g for g in facts.gpus if board_of(ctx, g.index) and links_of(g)]
    first = judged_gpus[0]
    return (
        f"every NVLink board has all its links up ({plural(len(judged_gpus), 'GPU')}; "
        f"GPU {first.index}: {remote_summary(links_of(first))})"
    )


# --- link errors ------------------------------------------------------------------------------


def _growth(gpu: GpuInterconnect) -> list[tuple[int, LinkErrors, LinkErrors]]:
    """(link, first, later) for each link whose counters climbed between the two readings."""
    if not isinstance(gpu.errors_later, Found):
        return []
    first = {
        link.link: link.errors.value for link in links_of(gpu) if isinstance(link.errors, Found)
    }
    out = []
    for link, later in gpu.errors_later.value:
        before = first.get(link)
        if before is not None and later.total() > before.total():
            out.append((link, before, later))
    return out


def _delta(before: LinkErrors, after: LinkErrors) -> str:
    parts = []
    for name, words in COUNTER_WORDS.items():
        grew = getattr(after, name) - getattr(before, name)
        if grew > 0:
            parts.append(f"+{grew} {words}")
    return ", ".join(parts)


def _counts(errors: LinkErrors) -> str:
    return ", ".join(
        f"{getattr(errors, name)} {words}"
        for name, words in COUNTER_WORDS.items()
        if getattr(errors, name)
    )


def _link_errors(ctx: RuleContext) -> Iterator[Finding]:
    facts = interconnect(ctx)
    assert facts is not None  # _needs_links
    for gpu in facts.gpus:
        who = label(ctx, gpu.index)
        growing = _growth(gpu)
        if growing:
            yield Finding(
                code="nvlink.errors-growing",
                severity=Severity.WARNING,
                title=f"NVLink errors on {who} climbed while envdoctor ran "
                f"({plural(len(growing), 'link')} in {facts.seconds:.1f} s): a link is failing now",
                evidence=(
                    *(
                        (f"link {link}", f"{_delta(a, b)} in {facts.seconds:.1f} s")
                        for link, a, b in growing
                    ),
                    ("counters since the driver loaded", _counts(growing[0][2])),
                ),
                remediation=Remediation(
                    summary=f"Watch GPU {gpu.index}'s links; drain the node if the errors keep "
                    "climbing, then reset the GPU",
                    steps=(
                        f"nvidia-smi nvlink --errorcounters -i {gpu.index}   # twice, a minute "
                        "apart: still climbing?",
                        "envdoctor smoke --deep   # measure the all-reduce and each pair's copy",
                        f"climbing under load: drain, then sudo nvidia-smi --gpu-reset -i "
                        f"{gpu.index}; if they return, NVIDIA field diagnostics and an RMA",
                    ),
                    docs=NVLINK_DOCS,
                ),
                subject=str(gpu.index),
            )
            continue
        hurt = [
            link
            for link in links_of(gpu)
            if isinstance(link.errors, Found)
            and (link.errors.value.recovery or link.errors.value.crc_data)
        ]
        if hurt:
            yield Finding(
                code="nvlink.errors-counted",
                severity=Severity.INFO,
                title=f"{who} has NVLink link recoveries or data CRC errors since the driver "
                "loaded; they did not climb while envdoctor ran",
                evidence=(
                    *(
                        (f"link {link.link}", _counts(link.errors.value))
                        for link in hurt
                        if isinstance(link.errors, Found)
                    ),
                    ("between the two readings", _quiet(gpu, facts)),
                ),
                remediation=Remediation(
                    summary="Nothing to do now; if they climb, the link is failing",
                    steps=(f"nvidia-smi nvlink --errorcounters -i {gpu.index}   # compare later",),
                    docs=NVLINK_DOCS,
                ),
                subject=str(gpu.index),
            )


def _quiet(gpu: GpuInterconnect, facts: NvlinkFacts) -> str:
    if isinstance(gpu.errors_later, Found):
        return f"no change in {facts.seconds:.1f} s"
    return f"not read twice ({why_missing(gpu.errors_later)})"


def _errors_ok(ctx: RuleContext) -> str:
    facts = interconnect(ctx)
    assert facts is not None
    twice = any(isinstance(g.errors_later, Found) for g in facts.gpus)
    return (
        f"no NVLink error counter climbed in {facts.seconds:.1f} s, and no link recovery or "
        "data CRC error since the driver loaded"
        if twice
        else "no link recovery or data CRC error since the driver loaded (read once)"
    )


RULES = (
    Rule(
        "nvlink.links",
        "Every NVLink board has all its links up",
        ("nvlink.links-down",),
        judged(_links_down, _needs_boards, ok=_links_ok),
    ),
    Rule(
        "nvlink.errors",
        "NVLink error counters do not climb",
        ("nvlink.errors-growing", "nvlink.errors-counted"),
        judged(_link_errors, _needs_links, ok=_errors_ok),
    ),
)
