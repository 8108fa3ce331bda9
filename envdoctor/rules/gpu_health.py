"""Per-GPU health that NVML reports (issue 39): memory repair, the driver's own recovery verdict,
temperature against the GPU's thresholds, and clock events with the clocks they cost.

- Memory: uncorrectable ECC counts; on Ampere and later the row remapper (a pending remap is
  applied by a GPU reset; a failed one means a bank has no spare rows left: RMA), before Ampere
  page retirement (pending: a reset or driver reload applies it; a GPU retires 64 pages at
  most). A finding says "uncorrectable" only where uncorrectable errors were counted, and
  names the remapper only on a GPU that has one.
- The driver's verdict: NVML's recovery action field (R565+) and the "reset required" return
  code. A GPU the driver says must be reset (or the node rebooted) is an error whatever else
  reads clean; a driver or binding that cannot say leaves the value missing with its reason.
- Temperature: at or past the shutdown threshold is an error, at or past the slowdown threshold
  a warning; the evidence gives the temperature, the thresholds and the margins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

from envdoctor.model.facts import RECOVERY_ACTION_NAMES, GpuFacts, NvmlErrorKind, RowRemap
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.model.units import each, plural
from envdoctor.model.views import gpu_label, nvml_gpus
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.gpu import gpu_scope, per_gpu

MEMORY_DOCS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
RETIREMENT_DOCS = "https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html"
RECOVERY_DOCS = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
"""NVIDIA's Xid catalog: Xid 154 and the recovery actions it names."""
RETIREMENT_LIMIT = 64
"""Pages a pre-Ampere GPU can retire over its life (NVIDIA's memory error management guide,
"Row Remapping": page retirement supported at most 64 retirements; the remapper 512 rows)."""

# What each NVML_GPU_RECOVERY_ACTION_* asks of a person, and how grave it is; the number is also
# the one the driver logs in Xid 154 ("... changed from 0x0 (None) to 0x2 ...").
RECOVERY_ACTIONS: dict[int, tuple[str, Severity]] = {
    0: ("nothing", Severity.OK),
    1: ("a GPU reset", Severity.ERROR),
    2: ("a node reboot", Severity.ERROR),
    3: ("draining peer-to-peer traffic", Severity.WARNING),
    4: ("draining, then a GPU reset", Severity.ERROR),
    5: ("recovering the IMEX domain", Severity.WARNING),
    6: ("a bus reset", Severity.ERROR),
    7: ("a system reboot", Severity.ERROR),
}


def recovery_action(number: int) -> tuple[str, str, Severity]:
    """(label, what a person reads, severity) of a recovery action number; unknown: a warning."""
    what, severity = RECOVERY_ACTIONS.get(number, (f"recovery action {number}", Severity.WARNING))
    return RECOVERY_ACTION_NAMES.get(number, f"action-{number}"), what, severity


def _target(g: GpuFacts) -> str:
    """How nvidia-smi -i names the GPU: its PCI bus id where known (indices can change)."""
    return g.pci_bus_id.value if isinstance(g.pci_bus_id, Found) else str(g.index)


def _ids(g: GpuFacts) -> tuple[tuple[str, str], ...]:
    return (
        ("UUID", g.uuid.value if isinstance(g.uuid, Found) else why_missing(g.uuid)),
        ("PCI bus id", g.pci_bus_id.value if isinstance(g.pci_bus_id, Found) else "unknown"),
    )


def _drain_step(ctx: RuleContext, g: GpuFacts, why: str) -> str:
    """Take the node out of the scheduler first: Kubernetes inside a pod, else Slurm."""
    if "kubernetes" in ctx.facts.host.containers:
        return (
            "Kubernetes: NODE=$(kubectl get pod $HOSTNAME -o jsonpath='{.spec.nodeName}'); "
            "kubectl cordon $NODE && kubectl drain $NODE --ignore-daemonsets"
        )
    return (
        "Slurm: sudo scontrol update nodename=$(hostname -s) state=drain "
        f'reason="GPU {g.index} {why}"   # let the running jobs end first'
    )


def _reset_steps(ctx: RuleContext, g: GpuFacts) -> tuple[str, ...]:
    """Stop the GPU's work, then reset it: on the host, where envdoctor runs in a container."""
    where = "on the host (a container cannot reset a GPU): " if ctx.facts.host.containers else ""
    return (
        f"nvidia-smi --query-compute-apps=pid,process_name --format=csv -i {_target(g)}   "
        "# what still runs on it",
        _drain_step(ctx, g, "needs a reset"),
        f"{where}sudo nvidia-smi -r -i {_target(g)}   # with nothing running on the GPU",
        "envdoctor check   # the reading again, after the reset",
    )


# --- memory: ECC, row remapping, page retirement --------------------------------------------


def _memory(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
        yield from _ecc_counts(ctx, g)
        if isinstance(g.row_remap, Found):
            yield from _remapper(ctx, g, g.row_remap.value)
        else:
            yield from _retirement(ctx, g)


def _ecc_counts(ctx: RuleContext, g: GpuFacts) -> Iterator[Finding]:
    if not isinstance(g.ecc, Found):
        return
    ecc = g.ecc.value
    if not (ecc.volatile_uncorrectable or ecc.aggregate_uncorrectable):
        return
    remapper = isinstance(g.row_remap, Found)
    detail = "ECC,ROW_REMAPPER" if remapper else "ECC,PAGE_RETIREMENT"
    since_load = ecc.volatile_uncorrectable > 0
    yield Finding(
        code="gpu.ecc-uncorrectable",
        severity=Severity.ERROR if since_load else Severity.WARNING,
        title=f"{gpu_label(g)} counted "
        + (
            f"{plural(ecc.volatile_uncorrectable, 'uncorrectable ECC error')} since the driver "
            "was loaded"
            if since_load
            else f"{plural(ecc.aggregate_uncorrectable, 'uncorrectable ECC error')} over its "
            "life (none since the driver was loaded)"
        ),
        evidence=(
            (
                "uncorrectable ECC errors since the driver was loaded",
                str(ecc.volatile_uncorrectable),
            ),
            ("uncorrectable ECC errors over the GPU's life", str(ecc.aggregate_uncorrectable)),
            *_ids(g),
        ),
        remediation=Remediation(
            summary=(
                "Drain the GPU and reset it; replace it if uncorrectable errors come back"
                if since_load
                else "Watch the GPU: replace it if uncorrectable errors come back"
            ),
            steps=(
                f"nvidia-smi -q -d {detail} -i {_target(g)}",
                *(_reset_steps(ctx, g) if since_load else ()),
                "recurring after a reset: run `dcgmi diag -r 3`, then RMA the GPU with "
                "`sudo nvidia-bug-report.sh`",
            ),
            needs_root=since_load,
            docs=MEMORY_DOCS,
        ),
        subject=str(g.index),
    )


def _remapper(ctx: RuleContext, g: GpuFacts, remap: RowRemap) -> Iterator[Finding]:
    rows = (
        "rows remapped",
        f"{remap.correctable} for correctable errors, {remap.uncorrectable} for uncorrectable "
        "errors",
    )
    if remap.failure:
        yield Finding(
            code="gpu.memory-repair-failed",
            severity=Severity.ERROR,
            title=f"{gpu_label(g)}: a row remapping failed (a memory bank has no spare rows "
            "left): replace the GPU",
            evidence=(("row remapping", "failed"), rows, *_ids(g)),
            remediation=Remediation(
                summary="Drain the GPU and RMA it: the row remapper cannot repair its memory",
                steps=(
                    f"nvidia-smi -q -d ROW_REMAPPER -i {_target(g)}   # Remapping Failure "
                    "Occurred: Yes",
                    _drain_step(ctx, g, "row remap failure"),
                    "sudo nvidia-bug-report.sh   # attach it to the RMA",
                ),
                needs_root=True,
                docs=MEMORY_DOCS,
            ),
            subject=str(g.index),
        )
        return
    if remap.pending:
        yield Finding(
            code="gpu.memory-repair-pending",
            severity=Severity.WARNING,
            title=f"{gpu_label(g)}: a row remapping waits for a GPU reset",
            evidence=(("row remapping", "pending: applied at the next GPU reset"), rows, *_ids(g)),
            remediation=Remediation(
                summary="Reset the GPU to apply the remapping (no replacement needed)",
                steps=(f"nvidia-smi -q -d ROW_REMAPPER -i {_target(g)}", *_reset_steps(ctx, g)),
                needs_root=True,
                docs=MEMORY_DOCS,
            ),
            subject=str(g.index),
        )


def _retirement(ctx: RuleContext, g: GpuFacts) -> Iterator[Finding]:
    pending = isinstance(g.retired_pages_pending, Found) and g.retired_pages_pending.value
    pages = g.retired_pages.value if isinstance(g.retired_pages, Found) else None
    total = pages.single_bit + pages.double_bit if pages is not None else None
    retired = (
        (
            "retired pages",
            f"{pages.single_bit} for repeated single-bit errors, {pages.double_bit} for "
            f"double-bit errors: {total} of the {RETIREMENT_LIMIT} a GPU can retire",
        )
        if pages is not None
        else ("retired pages", why_missing(g.retired_pages))
    )
    if total is not None and total >= RETIREMENT_LIMIT:
        yield Finding(
            code="gpu.memory-repair-failed",
            severity=Severity.ERROR,
            title=f"{gpu_label(g)} has retired {total} memory pages, the most it can: "
            "replace the GPU",
            evidence=(retired, *_ids(g)),
            remediation=Remediation(
                summary="Drain the GPU and RMA it: it can retire no more pages",
                steps=(
                    f"nvidia-smi -q -d PAGE_RETIREMENT -i {_target(g)}",
                    "sudo nvidia-bug-report.sh   # attach it to the RMA",
                ),
                needs_root=True,
                docs=RETIREMENT_DOCS,
            ),
            subject=str(g.index),
        )
        return
    if pending:
        yield Finding(
            code="gpu.memory-repair-pending",
            severity=Severity.WARNING,
            title=f"{gpu_label(g)}: a page retirement waits for a GPU reset",
            evidence=(
                ("page retirement", "pending: applied at the next GPU reset or driver reload"),
                retired,
                *_ids(g),
            ),
            remediation=Remediation(
                summary="Reset the GPU (or reload the driver) to retire the page",
                steps=(
                    f"nvidia-smi -q -d PAGE_RETIREMENT -i {_target(g)}   # Pending Page "
                    "Blacklist: Yes",
                    *_reset_steps(ctx, g),
                ),
                needs_root=True,
                docs=RETIREMENT_DOCS,
            ),
            subject=str(g.index),
        )


# --- the driver's verdict: recovery action, reset required ----------------------------------


def _recovery(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
        reset_required = [
            f"{name.replace('_', ' ')}: {value.detail}"
            for name, value in _probed_fields(g)
            if isinstance(value, ProbeFailed) and value.error == NvmlErrorKind.RESET_REQUIRED
        ]
        number = g.recovery_action.value if isinstance(g.recovery_action, Found) else None
        label, what, severity = (
            recovery_action(number) if number is not None else ("", "", Severity.OK)
        )
        if reset_required and severity < Severity.ERROR:
            label, what, severity = "gpu-reset", "a GPU reset", Severity.ERROR
        if severity == Severity.OK:
            continue
        evidence: list[tuple[str, str]] = []
        if number is not None:
            evidence.append(("NVML recovery action", f"{number} ({recovery_action(number)[0]})"))
        else:
            evidence.append(("NVML recovery action", missing(g.recovery_action)))
        evidence.extend(("NVML answered ResetRequired", line) for line in reset_required[:4])
        evidence.extend(_ids(g))
        yield Finding(
            code="gpu.recovery-required",
            severity=severity,
            title=f"{gpu_label(g)}: the driver says it needs {what} before it is used again",
            evidence=tuple(evidence),
            remediation=_recovery_fix(ctx, g, label, what),
            subject=str(g.index),
        )


def _recovery_fix(ctx: RuleContext, g: GpuFacts, label: str, what: str) -> Remediation:
    drain = _drain_step(ctx, g, f"driver asks for {label}")
    if label in ("node-reboot", "system-reboot"):
        steps: tuple[str, ...] = (drain, "sudo reboot   # once the node's jobs have ended")
    elif label == "drain-p2p":
        steps = (
            "start no new multi-GPU job on this GPU; let the running ones end",
            *_reset_steps(ctx, g),
        )
    elif label == "recover-imex-domain":
        steps = (
            "sudo systemctl restart nvidia-imex   # on every node of the IMEX domain",
            "systemctl status nvidia-imex",
        )
    else:
        steps = _reset_steps(ctx, g)
    return Remediation(
        summary=f"Do what the driver asks: {what}",
        steps=steps,
        needs_root=True,
        needs_reboot="reboot" in label,
        docs=RECOVERY_DOCS,
    )


def _probed_fields(g: GpuFacts) -> Iterator[tuple[str, object]]:
    for f in fields(g):
        yield f.name, getattr(g, f.name)


# --- temperature ----------------------------------------------------------------------------


def _temperature(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
        if not isinstance(g.temperature, Found):
            continue
        now = g.temperature.value
        shutdown = _int(g.shutdown_temperature)
        slowdown = _int(g.slowdown_temperature)
        if shutdown is not None and now >= shutdown:
            severity, what = Severity.ERROR, f"at or past its shutdown temperature ({shutdown} °C)"
        elif slowdown is not None and now >= slowdown:
            severity, what = (
                Severity.WARNING,
                f"at or past its slowdown temperature ({slowdown} °C)",
            )
        else:
            continue
        yield Finding(
            code="gpu.temperature",
            severity=severity,
            title=f"{gpu_label(g)} is at {now} °C, {what}"
            + (": it powers off to protect itself" if severity == Severity.ERROR else ""),
            evidence=(*thermal_evidence(g), *_ids(g)),
            remediation=Remediation(
                summary="Cool the GPU: check its fans and airflow, and lower its load or power "
                "limit until it is cool",
                steps=(
                    f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE,POWER -i {_target(g)}",
                    *(
                        (_drain_step(ctx, g, "at shutdown temperature"),)
                        if severity == Severity.ERROR
                        else ()
                    ),
                    "sudo ipmitool sdr type temperature; sudo ipmitool sdr type fan   # the "
                    "chassis inlet and fans, from the BMC",
                    *_power_cap_step(g),
                ),
                needs_root=True,
            ),
            subject=str(g.index),
        )


def _power_cap_step(g: GpuFacts) -> tuple[str, ...]:
    """A lower power limit while the cooling is fixed: four fifths of the enforced one."""
    limit = _int(g.power_limit)
    if not limit:
        return ()
    watts = limit * 4 // 5 // 1000
    return (
        f"meanwhile: sudo nvidia-smi -i {_target(g)} -pl {watts}   # 80% of the enforced "
        f"{limit // 1000} W; nvidia-smi -q -d POWER gives the range allowed",
    )


def thermal_evidence(g: GpuFacts) -> tuple[tuple[str, str], ...]:
    """The temperature, each threshold with its margin, and the power against its limit."""
    now = _int(g.temperature)
    out: list[tuple[str, str]] = [
        ("temperature", f"{now} °C" if now is not None else why_missing(g.temperature))
    ]
    for label, value in (
        ("slowdown threshold", g.slowdown_temperature),
        ("shutdown threshold", g.shutdown_temperature),
        ("max operating temperature", g.max_operating_temperature),
    ):
        limit = _int(value)
        if limit is None:
            out.append((label, why_missing(value)))
        elif now is not None:
            margin = limit - now
            out.append((label, f"{limit} °C ({_margin(margin)})"))
        else:
            out.append((label, f"{limit} °C"))
    out.extend(power_evidence(g))
    return tuple(out)


def _margin(margin: int) -> str:
    if margin > 0:
        return f"{margin} °C below it"
    return "reached" if margin == 0 else f"{-margin} °C past it"


def power_evidence(g: GpuFacts) -> tuple[tuple[str, str], ...]:
    draw, limit = _int(g.power_draw), _int(g.power_limit)
    if draw is None or not limit:
        return ()
    return (("power", f"{draw / 1000:.0f} W of the {limit / 1000:.0f} W enforced limit "
                      f"({100 * draw / limit:.0f}%)"),)  # fmt: skip


def missing(value: object) -> str:
    """Why a value is missing, with NVML's own message where it failed."""
    if isinstance(value, ProbeFailed) and value.detail:
        return f"{value.error}: {value.detail}"
    return why_missing(value) if isinstance(value, Absent | ProbeFailed) else "unread"


def _int(value: object) -> int | None:
    return value.value if isinstance(value, Found) and isinstance(value.value, int) else None


# --- clock events -------------------------------------------------------------------------

BAD_THROTTLE = (
    "hw-slowdown",
    "hw-thermal-slowdown",
    "hw-power-brake-slowdown",
    "sw-thermal-slowdown",
)
THERMAL = frozenset({"hw-thermal-slowdown", "sw-thermal-slowdown", "hw-slowdown"})
POWER = frozenset({"hw-power-brake-slowdown", "sw-power-cap", "hw-slowdown"})


def _throttled(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
        reasons = g.throttle_reasons.value if isinstance(g.throttle_reasons, Found) else ()
        bad = [r for r in reasons if r in BAD_THROTTLE]
        if not bad:
            continue
        clock = g.sm_clock.value if isinstance(g.sm_clock, Found) else None
        cost = ""
        evidence: list[tuple[str, str]] = [("clock event reasons", ", ".join(reasons))]
        if clock is not None and clock.highest > 0:
            share = 100 * clock.current / clock.highest
            cost = f": its SM clock is {clock.current} of {clock.highest} MHz ({share:.0f}%)"
            evidence.append(
                ("SM clock", f"{clock.current} MHz of {clock.highest} MHz ({share:.0f}%)")
            )
        else:
            evidence.append(("SM clock", why_missing(g.sm_clock)))
        if THERMAL & set(bad):
            evidence.extend(e for e in thermal_evidence(g) if e[0] != "power")
        if POWER & set(bad):
            evidence.extend(power_evidence(g))
        thermal = bool(THERMAL & set(bad) - {"hw-slowdown"})
        brake = "hw-power-brake-slowdown" in bad
        yield Finding(
            code="gpu.throttled",
            severity=Severity.WARNING,
            title=f"{gpu_label(g)} is slowed down by {', '.join(bad)}{cost}",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary="Check cooling"
                if thermal and not brake
                else "Check power delivery (the power brake is an external signal: PSU or chassis)"
                if brake
                else "Check cooling and power delivery",
                steps=(
                    f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER,CLOCK -i {_target(g)}",
                    "sudo ipmitool sdr type temperature; sudo ipmitool sdr type 'power supply'",
                ),
            ),
            subject=str(g.index),
        )


# --- the rules ------------------------------------------------------------------------------


def _recovery_evaluate(ctx: RuleContext) -> Evaluation:
    """The recovery action, or an error that no field is read: a reset-required return code
    alone still judges."""
    scope = gpu_scope(ctx)
    if scope is not None:
        yield scope
        return
    findings = list(_recovery(ctx))
    if findings:
        yield from findings
        return
    gpus = nvml_gpus(ctx.facts)
    read = [g for g in gpus if isinstance(g.recovery_action, Found)]
    if read:
        yield passed(f"the driver asks for no recovery on {each(len(read), 'GPU')}")
        return
    first = gpus[0].recovery_action
    reason = missing(first)
    if isinstance(first, ProbeFailed) and first.error != NvmlErrorKind.FUNCTION_NOT_FOUND:
        yield unknown(f"the recovery action could not be read ({reason})")
        return
    yield not_applicable(f"the driver does not report a recovery action ({reason})")


RULES = (
    Rule(
        "gpu.ecc",
        "No uncorrectable ECC errors, failed or pending memory repairs",
        ("gpu.ecc-uncorrectable", "gpu.memory-repair-failed", "gpu.memory-repair-pending"),
        per_gpu(
            _memory,
            ("ecc", "row_remap", "retired_pages_pending"),
            "no uncorrectable ECC errors, failed or pending memory repairs",
        ),
    ),
    Rule(
        "gpu.recovery",
        "The driver asks for no GPU recovery (reset, reboot, drain)",
        ("gpu.recovery-required",),
        _recovery_evaluate,
    ),
    Rule(
        "gpu.temperature",
        "Every GPU is below its slowdown and shutdown temperatures",
        ("gpu.temperature",),
        per_gpu(
            _temperature,
            ("slowdown_temperature", "shutdown_temperature"),
            "every GPU is below its slowdown and shutdown temperatures",
        ),
    ),
    Rule(
        "gpu.clocks",
        "No hardware/thermal slowdown",
        ("gpu.throttled",),
        per_gpu(_throttled, ("throttle_reasons",), "no hardware or thermal slowdown"),
    ),
)
