"""What fails first on GPU nodes, seen before a job fails: Xid events, the NVLink fabric, and
persistence mode.

- Xid events since boot (the kernel log), each with its meaning from NVIDIA's Xid catalog, as
  DCGM and NHC report them. The driver's latest Xid 154 on a GPU states the recovery the GPU
  needs now ("GPU Reset Required", "Node Reboot Required"): that one is an error.
- NVSwitch systems (HGX/DGX): until the fabric manager has registered the GPUs with the NVLink
  fabric, CUDA fails on first use with error 802 ("system not yet initialized"); the fabric
  manager refuses to start unless its version is exactly the driver's.
- Persistence mode off on a data-centre GPU: the driver state is torn down whenever no process
  holds the GPU, so each first CUDA call (and each NVML query) pays for its set-up again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from envdoctor.catalogs.xid import XidCode, xid_catalog
from envdoctor.model.facts import NOT_COLLECTED, FabricManager, GpuFacts, KernelLog, XidEvents
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import Verdict, not_applicable, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import gpu_label, nvml_system, show
from envdoctor.model.views import nvml_gpus as gpus
from envdoctor.rules.base import Rule, RuleContext, judged
from envdoctor.rules.gpu import gpu_scope
from envdoctor.rules.gpu_health import recovery_action

XID_CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
FABRIC_GUIDE_URL = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/"

# A catalog class → how much an Xid logged since boot says about the GPU now. The Xid alone is
# history: the current state (a lost GPU, pending remaps, uncorrectable ECC counts) is judged by
# the gpu.* rules from NVML; the one Xid that states the present is 154 (below).
XID_SEVERITY = {
    "hardware": Severity.WARNING,
    "driver": Severity.WARNING,
    "app": Severity.INFO,
    "info": Severity.INFO,
}
UNKNOWN_XID_SEVERITY = Severity.WARNING
RECOVERY_XID = 154
# The catalog's resolution buckets that make a code a side effect of another Xid on the same GPU
# (NVIDIA's "Not Solo: IGNORE (follow other Xid)", "SYMPATHETIC_REPORT_SOLO"): beside another Xid
# it is attributed to that one; alone it keeps its own action.
SYMPATHETIC_BUCKETS = frozenset(
    {
        "WORKFLOW_XID_45",
        "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)",
        "SYMPATHETIC_REPORT_SOLO",
    }
)
_PROCESS = r"\bpid=([^,\s]{1,24}), name=([^,]{1,64}),"
_RECOVERY = r"\bto (0x[0-9A-Fa-f]{1,16}|[0-9]{1,9})\b"  # bounded: int() of it
INCOMPLETE = (
    "does not reach back to boot (the kernel's ring buffer wrapped, or the journal was cut): "
    "earlier Xid events may be missing"
)

# Data-centre GPU models (NVIDIA's data-centre product lines: Tesla, A/H/B/L/T series and the
# Grace superchips), as the model word of NVML's name: "NVIDIA H100 80GB HBM3" → "H100".
# Workstation (RTX, Quadro) and GeForce boards are left out: persistence mode is a server setting.
DATA_CENTRE_MODELS = frozenset(
    {
        *("K10", "K20", "K40", "K80", "M4", "M40", "M60", "P4", "P40", "P100", "V100", "T4"),
        *("A2", "A10", "A10G", "A16", "A30", "A40", "A100", "A800"),
        *("L4", "L20", "L40", "L40S", "H20", "H100", "H200", "H800", "GH200"),
        *("B100", "B200", "B300", "GB200", "GB300"),
    }
)


# --- Xid events -------------------------------------------------------------------------------


def _xid(ctx: RuleContext) -> Iterator[Finding]:
    log = ctx.facts.kernel_log
    if not isinstance(log, Found):
        return
    by_device: dict[str, list[XidEvents]] = {}
    for tally in log.value.xids:
        by_device.setdefault(tally.device, []).append(tally)
    if not by_device:
        return
    catalog = xid_catalog()  # reads the catalog's YAML: only when an Xid was logged
    faults: list[tuple[str, XidEvents]] = []
    for device, events in sorted(by_device.items()):
        app = [e for e in events if _is_app(catalog.get(e.xid))]
        rest = [e for e in events if e not in app]
        if app and not _causes(rest, catalog):
            # the application's, not the GPU's: with the channel clean-ups that follow them
            side = [e for e in rest if _sympathetic(catalog.get(e.xid))]
            faults.extend((device, e) for e in (*app, *side))
            rest = [e for e in rest if e not in side]
            if rest:
                yield _xid_finding(ctx, log.value, device, rest, catalog)
        else:
            yield _xid_finding(ctx, log.value, device, events, catalog)
    if faults:
        yield _app_faults(ctx, log.value, faults, catalog)


def _is_app(entry: XidCode | None) -> bool:
    return entry is not None and entry.severity == "app"


def _sympathetic(entry: XidCode | None) -> bool:
    return entry is not None and bool({entry.immediate, entry.investigatory} & SYMPATHETIC_BUCKETS)


def _causes(events: list[XidEvents], catalog: Mapping[int, XidCode]) -> list[XidEvents]:
    """The Xids that stand on their own: neither an application's fault, a side effect of
    another Xid, nor the recovery notice (154)."""
    return [
        e
        for e in events
        if e.xid != RECOVERY_XID
        and not _is_app(catalog.get(e.xid))
        and not _sympathetic(catalog.get(e.xid))
    ]


def _xid_finding(
    ctx: RuleContext,
    log: KernelLog,
    device: str,
    events: list[XidEvents],
    catalog: Mapping[int, XidCode],
) -> Finding:
    """One GPU's Xid events: each code with its catalog meaning and action; a side effect, an
    application's fault and the recovery notice attributed to the Xid that caused them; the
    recovery the driver asks for now, unless NVML now reports none."""
    gpu = _gpu_at(ctx, device)
    who = gpu_label(gpu) if gpu is not None else f"the GPU at PCI {device or '(unknown)'}"
    events.sort(key=lambda e: (e.first_seconds is None, e.first_seconds or 0.0, e.xid))
    causes = _causes(events, catalog)
    cause_codes = ", ".join(str(e.xid) for e in causes)
    severity = Severity.INFO
    evidence: list[tuple[str, str]] = []
    steps: list[str] = []
    for e in events:
        entry = catalog.get(e.xid)
        if entry is None:
            severity = max(severity, UNKNOWN_XID_SEVERITY)
            evidence.append((_xid_label(e), f"not in envdoctor's catalog: {e.last_message}"))
            steps.append(f"Xid {e.xid}: look it up in NVIDIA's Xid catalog ({XID_CATALOG_URL})")
            continue
        if causes and e not in causes:
            evidence.append(
                (_xid_label(e), f"{entry.name}: {_role(e, entry)}, attributed to Xid {cause_codes}")
            )
            continue
        severity = max(severity, XID_SEVERITY.get(entry.severity, UNKNOWN_XID_SEVERITY))
        evidence.append((_xid_label(e), f"{entry.name}: {entry.meaning}"))
        evidence.extend(_resolution(entry))
        steps.append(f"Xid {e.xid}: {entry.action}")
    recovery = _recovery(events)
    if recovery is not None:
        action, level, event = recovery
        now = gpu.recovery_action if gpu is not None else None
        if isinstance(now, Found) and now.value == 0:
            evidence.append(
                (
                    "recovery the driver asked for",
                    f"{action} (latest Xid 154{_at(event.last_seconds)}); NVML reports no "
                    "recovery needed now: it was done",
                )
            )
            recovery = None
        else:
            severity = max(severity, level)
            evidence.append(
                (
                    "recovery the driver asks for now",
                    f"{action} (latest Xid 154{_at(event.last_seconds)}: {event.last_message})",
                )
            )
    if gpu is not None:
        evidence.append(("UUID", gpu.uuid.value if isinstance(gpu.uuid, Found) else "unknown"))
    latest = max(events, key=lambda e: -1.0 if e.last_seconds is None else e.last_seconds)
    evidence.append(("latest line", latest.last_message))
    if not log.complete:
        evidence.append(("kernel log", INCOMPLETE))
    total = sum(e.count for e in events)
    codes = ", ".join(str(e.xid) for e in events)
    follow = f" (Xid {cause_codes}; the others follow from it)" if causes != events else ""
    return Finding(
        code="gpu.xid-events",
        severity=severity,
        title=f"{who} logged {plural(total, 'Xid event')} since boot (Xid {codes})"
        + (f": the driver says it needs {recovery[0]}" if recovery else ""),
        evidence=(("source", log.source), *evidence),
        remediation=Remediation(
            summary=(
                f"Do what the driver asks ({recovery[0]}), then look at the Xid before it"
                if recovery
                else "Act on each Xid as NVIDIA's catalog says" + (follow if causes else "")
            ),
            steps=(
                *dict.fromkeys(steps),
                "sudo dmesg -T | grep -i xid   # the lines with their times",
            ),
            needs_root=recovery is not None,
            needs_reboot=recovery is not None and "reboot" in recovery[0],
            docs=XID_CATALOG_URL,
        ),
        subject=str(gpu.index) if gpu is not None else device,
    )


def _resolution(entry: XidCode) -> tuple[tuple[str, str], ...]:
    """NVIDIA's resolution buckets of a code (immediate, then investigatory), as the catalog
    names them."""
    buckets = [b for b in (entry.immediate, entry.investigatory) if b]
    if not buckets:
        return ()
    return ((f"Xid {entry.code} resolution (NVIDIA)", " → ".join(dict.fromkeys(buckets))),)


def _role(e: XidEvents, entry: XidCode) -> str:
    if e.xid == RECOVERY_XID:
        return "the driver's recovery notice"
    return "an application's fault" if _is_app(entry) else "a side effect"


def _app_faults(
    ctx: RuleContext,
    log: KernelLog,
    faults: list[tuple[str, XidEvents]],
    catalog: Mapping[int, XidCode],
) -> Finding:
    """Application faults (Xid 13, 31, 43 …) on GPUs that logged nothing else: one finding for
    the node, with the count and the time span, as an application's fault, not the GPU's."""
    total = sum(e.count for _, e in faults)
    firsts = [e.first_seconds for _, e in faults if e.first_seconds is not None]
    lasts = [e.last_seconds for _, e in faults if e.last_seconds is not None]
    span = (
        f"between {since_boot(min(firsts))} and {since_boot(max(lasts))} after boot "
        f"(over {since_boot(max(lasts) - min(firsts))})"
        if firsts and lasts
        else "at times the log does not give"
    )
    gpus: dict[str, str] = {}
    evidence: list[tuple[str, str]] = []
    steps: list[str] = []
    programs: dict[str, None] = {}
    resolved: set[int] = set()
    for device, e in sorted(faults, key=lambda f: (f[0], f[1].first_seconds or 0.0, f[1].xid)):
        gpu = _gpu_at(ctx, device)
        who = f"GPU {gpu.index}" if gpu is not None else f"PCI {device or '(unknown)'}"
        gpus.setdefault(who, str(gpu.index) if gpu is not None else device)
        entry = catalog[e.xid]
        if _sympathetic(entry):
            evidence.append(
                (f"{who}: {_xid_label(e)}", f"{entry.name}: a side effect of these faults")
            )
            continue
        evidence.append((f"{who}: {_xid_label(e)}", f"{entry.name}: {entry.meaning}"))
        if entry.code not in resolved:
            resolved.add(entry.code)
            evidence.extend(_resolution(entry))
        steps.append(f"Xid {e.xid}: {entry.action}")
        match = re.search(_PROCESS, e.last_message)
        if match is not None:
            programs[f"{match.group(2).strip()} (PID {match.group(1)})"] = None
    codes = "/".join(dict.fromkeys(str(e.xid) for _, e in sorted(faults, key=lambda f: f[1].xid)))
    return Finding(
        code="gpu.xid-app-faults",
        severity=Severity.INFO,
        title=f"An application's faults, not the GPU's: {plural(total, 'Xid event')} "
        f"(Xid {codes}) on {', '.join(gpus)} {span}",
        evidence=(
            ("source", log.source),
            ("count", str(total)),
            ("time span", span),
            ("program", ", ".join(programs) or "not named in the lines"),
            *evidence,
            *((("kernel log", INCOMPLETE),) if not log.complete else ()),
        ),
        remediation=Remediation(
            summary="Debug the application; the GPU needs no reset unless the faults follow "
            "the GPU from one application to the next",
            steps=(
                *dict.fromkeys(steps),
                "compute-sanitizer python train.py   # or CUDA_LAUNCH_BLOCKING=1: the kernel "
                "that faulted",
            ),
            docs=XID_CATALOG_URL,
        ),
        subject=",".join(gpus.values()),
    )


def _xid_unchecked(ctx: RuleContext) -> Iterator[Finding]:
    log = ctx.facts.kernel_log
    if not isinstance(log, ProbeFailed):
        return
    yield Finding(
        code="gpu.xid-unchecked",
        severity=Severity.INFO,
        title="Xid events were not checked: no kernel log could be read",
        evidence=(("kernel log", log.detail or log.error),),
        remediation=Remediation(
            summary="Let envdoctor read the kernel log",
            steps=(
                "run it as root: sudo envdoctor check",
                "or add the user to the journal readers: sudo usermod -aG adm $USER",
                "in a container (Kubernetes DaemonSet): mount the host's /dev/kmsg, "
                "privileged or with CAP_SYSLOG",
            ),
        ),
    )


def _recovery(events: list[XidEvents]) -> tuple[str, Severity, XidEvents] | None:
    """The recovery action of the device's latest Xid 154, when it asks for one."""
    latest = next((e for e in events if e.xid == RECOVERY_XID), None)
    match = re.search(_RECOVERY, latest.last_message) if latest is not None else None
    if latest is None or match is None:
        return None
    text = match.group(1)  # int(text, 0) refused "02" (a leading zero) with a ValueError
    number = int(text, 16) if text[:2].lower() == "0x" else int(text)
    _, action, level = recovery_action(number)
    return None if level == Severity.OK else (action, level, latest)


def _gpu_at(ctx: RuleContext, device: str) -> GpuFacts | None:
    """The NVML GPU at the PCI address the driver printed ("0000:3b:00"), if any."""
    system = nvml_system(ctx.facts)
    return system.gpu_at_pci(device) if system is not None else None


def _xid_label(events: XidEvents) -> str:
    times = "" if events.count == 1 else f" ×{events.count}"
    return f"Xid {events.xid}{times}{_at(events.first_seconds, 'first ')}"


def _at(seconds: float | None, prefix: str = "") -> str:
    return "" if seconds is None else f", {prefix}{since_boot(seconds)} after boot"


def since_boot(seconds: float) -> str:
    """A time since boot as a person reads it: "42 s", "17 min", "5 h 03 min", "4 d 10 h"."""
    whole = int(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 2 * 3600:
        return f"{whole // 60} min"
    if whole < 2 * 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


# --- the NVLink fabric ------------------------------------------------------------------------


def _fabric(ctx: RuleContext) -> Iterator[Finding | Verdict]:
    facts = ctx.facts
    registering = [g for g in gpus(facts) if _fabric_state(g) in ("not-started", "in-progress")]
    refused = [
        g
        for g in gpus(facts)
        if _fabric_state(g) == "completed"
        and isinstance(g.fabric, Found)
        and g.fabric.value.status != "Success"
    ]
    nvswitches = _nvswitches(ctx)
    manager = facts.fabric.manager.value if isinstance(facts.fabric.manager, Found) else None
    service_down = manager is not None and _service_down(manager)
    # Pre-Hopper NVSwitch systems (HGX A100) have no NVML fabric state: the service tells.
    no_state = not any(_fabric_state(g) not in ("", "not-supported") for g in gpus(facts))
    if not (registering or refused or (nvswitches and no_state and service_down)):
        unread = facts.fabric.manager
        if nvswitches and no_state and not isinstance(unread, Found):
            # an HGX A100 tells by its service alone, which this run did not read
            yield unknown(f"the fabric manager's state: {show(unread)}")
        return
    evidence: list[tuple[str, str]] = [
        *((gpu_label(g), f"fabric registration {_fabric_state(g)}") for g in registering),
        *(
            (gpu_label(g), f"fabric registration failed: {g.fabric.value.status}")
            for g in refused
            if isinstance(g.fabric, Found)
        ),
        ("NVSwitches", ", ".join(nvswitches) if nvswitches else show(facts.fabric.nvswitches)),
        *_manager_evidence(ctx),
    ]
    stuck = [*registering, *refused]
    if stuck:
        what = f"{_gpus_text(stuck)} {'is' if len(stuck) == 1 else 'are'} not registered with it"
    else:
        what = "the fabric manager is not running on this NVSwitch system"
    yield Finding(
        code="fabric.not-ready",
        severity=Severity.ERROR,
        title=f"NVLink fabric not ready: {what}; CUDA fails on first use with error 802 "
        "(system not yet initialized)",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Start the fabric manager of exactly the driver's version",
            steps=(
                "systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager -b",
                f"install the nvidia-fabricmanager package of version "
                f"{ctx.machine.driver.version or '<the driver version>'} (the driver's exact version), "
                "then: sudo systemctl enable --now nvidia-fabricmanager",
                "HGX/DGX B200 and later also need NVLSM and the ib_umad module",
                "nvidia-smi -q | grep -A 3 -i fabric   # State: Completed, Status: Success",
            ),
            needs_root=True,
            docs=FABRIC_GUIDE_URL,
        ),
        subject=",".join(str(g.index) for g in (*registering, *refused)),
    )


def _fabric_version(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    manager = facts.fabric.manager.value if isinstance(facts.fabric.manager, Found) else None
    driver = ctx.machine.driver.version
    if manager is None or not isinstance(manager.version, Found) or driver is None:
        return
    if manager.version.value == driver:
        return
    ready = bool(gpus(facts)) and all(_fabric_state(g) == "completed" for g in gpus(facts))
    yield Finding(
        code="fabric.manager-version",
        severity=Severity.WARNING if ready else Severity.ERROR,
        title=f"The fabric manager is version {manager.version.value}, the driver {driver}: "
        + (
            "it will refuse to start at the next restart or reboot"
            if ready
            else "it refuses to start, and CUDA fails with error 802"
        ),
        evidence=_manager_evidence(ctx),
        remediation=Remediation(
            summary=f"Install the fabric manager of version {driver}, exactly the driver's",
            steps=(
                "Debian/Ubuntu: apt-cache policy 'nvidia-fabricmanager*'   # find the "
                f"{driver} package, install it and apt-mark hold it with the driver",
                "RHEL: dnf list --showduplicates 'nvidia-fabricmanager*'",
                "sudo systemctl restart nvidia-fabricmanager",
            ),
            needs_root=True,
            docs=FABRIC_GUIDE_URL,
        ),
    )


def _gpus_text(stuck: list[GpuFacts]) -> str:
    indices = ", ".join(str(g.index) for g in stuck)
    return f"GPU {indices}" if len(stuck) == 1 else f"GPUs {indices}"


def _fabric_state(gpu: GpuFacts) -> str:
    return gpu.fabric.value.state if isinstance(gpu.fabric, Found) else ""


def _nvswitches(ctx: RuleContext) -> tuple[str, ...]:
    listing = ctx.facts.fabric.nvswitches
    return listing.value if isinstance(listing, Found) else ()


def _service_down(manager: FabricManager) -> bool:
    """The service is known not to run: stopped, failed, or not installed at all."""
    service = manager.service
    if isinstance(service, Found):
        return not service.value.startswith("active")
    return isinstance(service, Absent) and "not installed" in service.reason


def _manager_evidence(ctx: RuleContext) -> tuple[tuple[str, str], ...]:
    manager = ctx.facts.fabric.manager
    if not isinstance(manager, Found):
        return (("fabric manager", why_missing(manager)),)
    return (
        ("nvidia-fabricmanager service", show(manager.value.service)),
        ("nv-fabricmanager version", show(manager.value.version)),
        ("driver", ctx.machine.driver.version or "unknown"),
    )


# --- persistence mode -------------------------------------------------------------------------


def _persistence(ctx: RuleContext) -> Iterator[Finding]:  # not on WSL: _needs_data_centre
    listed = [g for g in gpus(ctx.facts) if is_data_centre(g)]
    off = [
        g for g in listed if isinstance(g.persistence_mode, Found) and not g.persistence_mode.value
    ]
    daemon = ctx.facts.persistenced
    inside = bool(ctx.facts.host.containers)
    if not off:
        yield from _persistence_legacy(ctx, listed)
        return
    several = len(gpus(ctx.facts)) > 1
    if inside:
        steps: tuple[str, ...] = (
            "persistence mode is the host's: on the host, sudo systemctl enable --now "
            "nvidia-persistenced (Kubernetes: the GPU operator's driver container runs it)",
        )
    elif isinstance(daemon, Found) and not daemon.value.running:
        steps = (
            f"{daemon.value.pid_file} names PID {daemon.value.pid}, which is not "
            "nvidia-persistenced: the daemon died; journalctl -u nvidia-persistenced -b",
            "sudo systemctl restart nvidia-persistenced",
        )
    else:
        steps = (
            "sudo systemctl enable --now nvidia-persistenced   # NVIDIA's recommended way",
            "or (legacy, until the next reboot): sudo nvidia-smi -pm 1",
        )
    yield Finding(
        code="gpu.persistence-off",
        severity=Severity.WARNING if several else Severity.INFO,
        title=f"Persistence mode is off on {', '.join(gpu_label(g) for g in off)}: the first "
        "CUDA call of each job waits while the driver sets the GPU up again"
        + (", every GPU of the node in turn, and NVML queries can time out" if several else ""),
        evidence=(
            *(
                (gpu_label(g), f"persistence mode: {_mode(g)}")
                for g in (listed if several else off)
            ),
            ("nvidia-persistenced", _daemon_text(ctx)),
        ),
        remediation=Remediation(
            summary="Run the NVIDIA persistence daemon" + (" on the host" if inside else ""),
            steps=steps,
            needs_root=True,
        ),
        subject=",".join(str(g.index) for g in off),
    )


def _persistence_legacy(ctx: RuleContext, listed: list[GpuFacts]) -> Iterator[Finding]:
    """Every GPU in persistence mode, yet no daemon: set by ``nvidia-smi -pm 1``, the legacy
    way NVIDIA deprecates, which a reboot undoes (not judged in a container: the host's daemon
    is not visible there)."""
    daemon = ctx.facts.persistenced
    if ctx.facts.host.containers or len(listed) < 2:
        return
    if not all(isinstance(g.persistence_mode, Found) and g.persistence_mode.value for g in listed):
        return
    unread = isinstance(daemon, ProbeFailed) or (
        isinstance(daemon, Absent) and daemon.reason == NOT_COLLECTED.reason
    )
    if unread or (isinstance(daemon, Found) and daemon.value.running):
        return
    yield Finding(
        code="gpu.persistenced-not-running",
        severity=Severity.INFO,
        title="Persistence mode is on without nvidia-persistenced: set the legacy way "
        "(nvidia-smi -pm 1), it is lost at the next reboot",
        evidence=(
            *((gpu_label(g), f"persistence mode: {_mode(g)}") for g in listed),
            ("nvidia-persistenced", _daemon_text(ctx)),
        ),
        remediation=Remediation(
            summary="Run the NVIDIA persistence daemon, which keeps the mode across reboots",
            steps=("sudo systemctl enable --now nvidia-persistenced",),
            needs_root=True,
        ),
    )


def _mode(g: GpuFacts) -> str:
    if isinstance(g.persistence_mode, Found):
        return "enabled" if g.persistence_mode.value else "disabled"
    return why_missing(g.persistence_mode)


def _daemon_text(ctx: RuleContext) -> str:
    daemon = ctx.facts.persistenced
    if ctx.facts.host.containers:
        return "runs on the host, if at all (not visible from a container)"
    if isinstance(daemon, Found):
        state = "running" if daemon.value.running else "not running (a stale PID file)"
        return f"{state}: PID {daemon.value.pid} in {daemon.value.pid_file}"
    return why_missing(daemon)


def is_data_centre(gpu: GpuFacts) -> bool:
    """Whether NVML's name is one of a data-centre GPU ("Tesla V100-SXM2-16GB", "NVIDIA L40S")."""
    if not isinstance(gpu.name, Found):
        return False
    words = gpu.name.value.replace("-", " ").split()
    if words[:1] == ["Tesla"]:
        return True
    model = words[1] if words[:1] == ["NVIDIA"] and len(words) > 1 else words[0] if words else ""
    return model.upper() in DATA_CENTRE_MODELS


def _needs_log(ctx: RuleContext) -> Verdict | None:
    """Only the NVIDIA driver logs Xids: without one there is nothing to look for."""
    if not ctx.machine.driver.present:
        return not_applicable("no NVIDIA driver here: nothing logs Xid events")
    log = ctx.facts.kernel_log
    if isinstance(log, ProbeFailed):
        return unknown(f"the kernel log could not be read: {log.detail or log.error}")
    if isinstance(log, Absent):
        return not_applicable(f"the kernel log was not read: {log.reason}")
    return None


def _no_xid(ctx: RuleContext) -> str:
    log = ctx.facts.kernel_log
    if not isinstance(log, Found):
        return "no Xid event"
    span = "since boot" if log.value.complete else "in what the log still holds (not back to boot)"
    return f"no Xid event {span} ({log.value.source})"


def _needs_nvml(ctx: RuleContext) -> Verdict | None:
    if isinstance(ctx.facts.nvml, Absent) and not ctx.machine.driver.present:
        return not_applicable(ctx.machine.why_no_gpu())
    return None


def _log_read(ctx: RuleContext) -> str:
    log = ctx.facts.kernel_log
    source = f" from {log.value.source}" if isinstance(log, Found) else ""
    return f"the kernel log was read{source}"


def _needs_fabric(ctx: RuleContext) -> Verdict | None:
    scope = gpu_scope(ctx)
    if scope is not None:
        return scope
    has_state = any(_fabric_state(g) not in ("", "not-supported") for g in gpus(ctx.facts))
    if not _nvswitches(ctx) and not has_state:
        return not_applicable("no NVSwitch and no NVLink fabric state here")
    return None


def _needs_manager(ctx: RuleContext) -> Verdict | None:
    manager = ctx.facts.fabric.manager
    if not isinstance(manager, Found):
        return not_applicable(f"no fabric manager here ({show(manager)})")
    if not isinstance(manager.value.version, Found):
        return unknown(f"the fabric manager's version: {show(manager.value.version)}")
    if ctx.machine.driver.version is None:
        return unknown("the driver version could not be read")
    return None


def _needs_data_centre(ctx: RuleContext) -> Verdict | None:
    scope = gpu_scope(ctx)
    if scope is not None:
        return scope
    if ctx.facts.host.wsl:
        return not_applicable("WSL has no persistence mode to set")
    if not any(is_data_centre(g) for g in gpus(ctx.facts)):
        return not_applicable("no data-centre GPU here")
    return None


RULES = (
    Rule(
        "gpu.xid",
        "No Xid event in the kernel log since boot",
        ("gpu.xid-events", "gpu.xid-app-faults"),
        judged(_xid, _needs_log, ok=_no_xid),
    ),
    Rule(
        "gpu.xid-log",
        "The kernel log can be read for Xid events",
        ("gpu.xid-unchecked",),
        judged(_xid_unchecked, _needs_nvml, ok=_log_read),
    ),
    Rule(
        "fabric.ready",
        "On an NVSwitch system, every GPU has joined the NVLink fabric",
        ("fabric.not-ready",),
        judged(
            _fabric,
            _needs_fabric,
            ok=lambda ctx: "every GPU is registered with the NVLink fabric",
        ),
    ),
    Rule(
        "fabric.manager-version",
        "The fabric manager's version is the driver's",
        ("fabric.manager-version",),
        judged(
            _fabric_version,
            _needs_manager,
            ok=lambda ctx: f"fabric manager and driver are both {ctx.machine.driver.version}",
        ),
    ),
    Rule(
        "gpu.persistence",
        "Data-centre GPUs keep persistence mode on",
        ("gpu.persistence-off", "gpu.persistenced-not-running"),
        judged(
            _persistence,
            _needs_data_centre,
            ok=lambda ctx: "persistence mode is on for every data-centre GPU",
        ),
    ),
)
