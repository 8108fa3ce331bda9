"""Per-GPU health rules over NVML facts: lost, ECC, memory held, MIG, modes, throttling, PCIe."""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.model.units import format_bytes
from envdoctor.rules.base import Rule, RuleContext
from envdoctor.rules.facts_view import gpu_label, gpus, nvml_error_kind, show

HELD_WARN_FRACTION = 0.5
FREE_ERROR_FRACTION = 0.05
BAD_THROTTLE = (
    "hw-slowdown",
    "hw-thermal-slowdown",
    "hw-power-brake-slowdown",
    "sw-thermal-slowdown",
)


def _lost(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    lost = [g for g in gpus(facts) if NvmlErrorKind.GPU_IS_LOST in g.failure_kinds()]
    whole = nvml_error_kind(facts) == NvmlErrorKind.GPU_IS_LOST or (
        isinstance(facts.nvml, Found)
        and NvmlErrorKind.GPU_IS_LOST in facts.nvml.value.device_count_error
    )
    if not lost and not whole:
        return
    unmatched = _unreachable_pci(ctx)
    who = ", ".join(f"GPU {g.index}" for g in lost) or "a GPU"
    if unmatched:
        who += f" (PCI {', '.join(unmatched)})"
    yield Finding(
        code="gpu.lost",
        severity=Severity.ERROR,
        title=f"{who} has fallen off the bus (NVML: GPU is lost)",
        evidence=(
            ("NVML", "GPUIsLost"),
            *((f"GPU {g.index}", "every query answers GPUIsLost") for g in lost),
            ("NVIDIA PCI functions NVML cannot reach", ", ".join(unmatched) or "none known"),
        ),
        remediation=Remediation(
            summary="Reset the GPU or reboot; if it recurs, treat it as a hardware fault",
            steps=(
                "sudo dmesg | grep -i xid   # Xid 79 = fallen off the bus, Xid 48 = DBE ECC",
                "stop every process using the GPU, then: sudo nvidia-smi -r -i <index>",
                "if the reset fails: reboot (a power cycle if it still fails)",
                "recurring: check power, cooling, PCIe seating/riser; raise an RMA with the logs",
            ),
            needs_root=True,
            needs_reboot=True,
        ),
        subject=",".join(str(g.index) for g in lost),
    )


def _unreachable_pci(ctx: RuleContext) -> list[str]:
    """PCI addresses of NVIDIA GPUs that no reachable NVML device accounts for."""
    pci = ctx.facts.host.nvidia_pci
    if not isinstance(pci, Found):
        return []
    reached = {
        g.pci_bus_id.value.lower()[-7:] for g in gpus(ctx.facts) if isinstance(g.pci_bus_id, Found)
    }
    return [d.address for d in pci.value if d.address.lower()[-7:] not in reached]


def _ecc(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        evidence: list[tuple[str, str]] = []
        severity = Severity.OK
        if isinstance(g.ecc, Found):
            if g.ecc.value.volatile_uncorrectable:
                severity = Severity.ERROR
                evidence.append(
                    ("volatile uncorrectable ECC errors", str(g.ecc.value.volatile_uncorrectable))
                )
            if g.ecc.value.aggregate_uncorrectable:
                severity = max(severity, Severity.WARNING)
                evidence.append(
                    ("aggregate uncorrectable ECC errors", str(g.ecc.value.aggregate_uncorrectable))
                )
        if isinstance(g.row_remap, Found):
            if g.row_remap.value.failure:
                severity = Severity.ERROR
                evidence.append(("row remapping", "failed: no spare rows left"))
            if g.row_remap.value.pending:
                severity = max(severity, Severity.WARNING)
                evidence.append(("row remapping", "pending: needs a GPU reset"))
        if isinstance(g.retired_pages_pending, Found) and g.retired_pages_pending.value:
            severity = max(severity, Severity.WARNING)
            evidence.append(("page retirement", "pending: needs a GPU reset"))
        if severity == Severity.OK:
            continue
        yield Finding(
            code="gpu.ecc-uncorrectable",
            severity=severity,
            title=f"{gpu_label(g)} has uncorrectable memory errors",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary="Reset the GPU to apply page retirement / row remapping; replace it if errors persist",
                steps=(
                    f"nvidia-smi -q -d ECC,ROW_REMAPPER -i {g.index}",
                    f"stop the GPU's processes, then: sudo nvidia-smi -r -i {g.index}",
                    "row remapping failure or recurring volatile errors: drain the node and RMA the GPU",
                ),
                needs_root=True,
            ),
            subject=str(g.index),
        )


def _memory_held(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        if not isinstance(g.memory, Found) or g.memory.value.total <= 0:
            continue
        mem = g.memory.value
        procs = g.processes.value if isinstance(g.processes, Found) else ()
        held = sum(p.used_memory.value for p in procs if isinstance(p.used_memory, Found))
        used = max(held, mem.used)
        low_free = mem.free < FREE_ERROR_FRACTION * mem.total
        if not low_free and used < HELD_WARN_FRACTION * mem.total:
            continue
        if not procs and not low_free:
            continue  # high usage with nobody to name is normal driver/MIG reservation
        holders = [
            (
                f"PID {p.pid}",
                f"{show(p.name)} holds {format_bytes(p.used_memory.value) if isinstance(p.used_memory, Found) else show(p.used_memory)}",
            )
            for p in sorted(
                procs,
                key=lambda p: -(p.used_memory.value if isinstance(p.used_memory, Found) else 0),
            )
        ]
        if not procs:
            holders = [
                (
                    "processes",
                    show(g.processes)
                    if not isinstance(g.processes, Found)
                    else "none visible here (they may live in another container / PID namespace)",
                )
            ]
        yield Finding(
            code="gpu.memory-held",
            severity=Severity.ERROR if low_free else Severity.WARNING,
            title=f"{gpu_label(g)} has {format_bytes(mem.free)} free of {format_bytes(mem.total)}: other processes hold its memory",
            evidence=(("free", f"{format_bytes(mem.free)} of {format_bytes(mem.total)}"), *holders),
            remediation=Remediation(
                summary="Stop the processes holding the GPU, or run on another GPU",
                steps=(
                    *(f"check, then stop: kill {p.pid}   # {show(p.name)}" for p in procs),
                    "or pick a free GPU: CUDA_VISIBLE_DEVICES=<index> python …",
                    "cuBLAS/cuDNN handles need free memory: CUBLAS_STATUS_ALLOC_FAILED and "
                    "CUDNN_STATUS_NOT_INITIALIZED are the usual symptoms",
                ),
            ),
            subject=str(g.index),
        )


def _mig(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        if not isinstance(g.mig_mode, Found):
            continue
        mode = g.mig_mode.value
        instances = g.mig_devices.value if isinstance(g.mig_devices, Found) else None
        if mode.current != mode.pending:
            yield Finding(
                code="gpu.mig-enabled",
                severity=Severity.WARNING,
                title=f"{gpu_label(g)}: a MIG mode change is pending until the GPU is reset",
                evidence=(
                    ("MIG current", _onoff(mode.current)),
                    ("MIG pending", _onoff(mode.pending)),
                ),
                remediation=Remediation(
                    summary="Reset the GPU to apply the MIG mode change",
                    steps=(f"sudo nvidia-smi -r -i {g.index}",),
                    needs_root=True,
                ),
                subject=str(g.index),
            )
        if not mode.current:
            continue
        empty = instances == 0
        yield Finding(
            code="gpu.mig-enabled",
            severity=Severity.ERROR if empty else Severity.INFO,
            title=(
                f"{gpu_label(g)} is in MIG mode with no GPU instances: CUDA sees no device on it"
                if empty
                else f"{gpu_label(g)} is in MIG mode ({show(g.mig_devices)} instances); "
                "CUDA sees the instances, not the whole GPU"
            ),
            evidence=(("MIG mode", "enabled"), ("MIG devices", show(g.mig_devices))),
            remediation=Remediation(
                summary="Create MIG instances, or disable MIG"
                if empty
                else "Select a MIG instance by UUID",
                steps=(
                    f"sudo nvidia-smi mig -i {g.index} -cgi <profile> -C   # create instances",
                    f"or disable: sudo nvidia-smi -i {g.index} -mig 0 && sudo nvidia-smi -r -i {g.index}",
                    "nvidia-smi -L lists MIG UUIDs for CUDA_VISIBLE_DEVICES=MIG-…",
                ),
                needs_root=empty,
            ),
            subject=str(g.index),
        )


def _compute_mode(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        mode = g.compute_mode.value if isinstance(g.compute_mode, Found) else "default"
        if mode == "default":
            continue
        prohibited = mode == "prohibited"
        yield Finding(
            code="gpu.compute-mode",
            severity=Severity.ERROR if prohibited else Severity.INFO,
            title=f"{gpu_label(g)} is in compute mode {mode}"
            + (
                ": no process may create a CUDA context"
                if prohibited
                else ": one process at a time"
            ),
            evidence=(("compute mode", mode),),
            remediation=Remediation(
                summary="Set the compute mode back to default",
                steps=(f"sudo nvidia-smi -i {g.index} -c DEFAULT",),
                needs_root=True,
            ),
            subject=str(g.index),
        )


def _throttled(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        reasons = g.throttle_reasons.value if isinstance(g.throttle_reasons, Found) else ()
        bad = [r for r in reasons if r in BAD_THROTTLE]
        if not bad:
            continue
        yield Finding(
            code="gpu.throttled",
            severity=Severity.WARNING,
            title=f"{gpu_label(g)} is slowed down by {', '.join(bad)}",
            evidence=(("clock event reasons", ", ".join(reasons)),),
            remediation=Remediation(
                summary="Check cooling and power delivery",
                steps=(f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {g.index}",),
            ),
            subject=str(g.index),
        )


def _pcie(ctx: RuleContext) -> Iterator[Finding]:
    for g in gpus(ctx.facts):
        if not isinstance(g.pcie, Found):
            continue
        link = g.pcie.value
        if link.width >= link.max_width:
            continue  # a lower generation alone is normal power saving when idle
        yield Finding(
            code="gpu.pcie-degraded",
            severity=Severity.WARNING,
            title=f"{gpu_label(g)} runs at PCIe x{link.width} instead of x{link.max_width}",
            evidence=(
                (
                    "PCIe link",
                    f"gen {link.gen} x{link.width} (max gen {link.max_gen} x{link.max_width})",
                ),
            ),
            remediation=Remediation(
                summary="Reseat the GPU / riser or move it to a full-width slot",
                steps=("sudo lspci -vv | grep -E 'LnkCap|LnkSta'",),
            ),
            subject=str(g.index),
        )


def _nvml_failed(ctx: RuleContext) -> Iterator[Finding]:
    """NVML failures no other rule explains (NoPermission, Unknown, Timeout …)."""
    facts = ctx.facts
    if not isinstance(facts.nvml, ProbeFailed):
        return
    if facts.nvml.error in (
        NvmlErrorKind.LIB_RM_VERSION_MISMATCH,
        NvmlErrorKind.DRIVER_NOT_LOADED,
        NvmlErrorKind.GPU_IS_LOST,
    ):
        return
    kind, evidence = facts.nvml.error, (("NVML", f"{facts.nvml.error}: {facts.nvml.detail}"),)
    if kind == NvmlErrorKind.NO_PERMISSION:
        yield Finding(
            code="gpu.nvml-failed",
            severity=Severity.ERROR,
            title="NVML refused access (NoPermission): this user cannot query the GPUs",
            evidence=evidence,
            remediation=Remediation(
                summary="Give the user access to /dev/nvidiactl and /dev/nvidia*",
                steps=("ls -l /dev/nvidia*", "see device.permission-denied"),
                needs_root=True,
            ),
        )
        return
    yield Finding(
        code="gpu.nvml-failed",
        severity=Severity.WARNING,
        title=f"NVML could not be initialised ({kind}): GPU health is unknown",
        evidence=evidence,
        remediation=Remediation(
            summary="Run nvidia-smi to see the driver's own error",
            steps=(
                "nvidia-smi",
                "Timeout/Unknown: sudo dmesg | grep -i xid; a GPU reset or reboot may be needed",
            ),
        ),
        inconclusive=True,
    )


def _onoff(flag: bool) -> str:
    return "enabled" if flag else "disabled"


def _has_gpus(ctx: RuleContext) -> bool:
    return bool(gpus(ctx.facts))


def _nvml_tried(ctx: RuleContext) -> bool:
    return not isinstance(ctx.facts.nvml, Absent)


RULES = (
    Rule(
        "gpu.reachable", "No GPU has fallen off the bus", ("gpu.lost",), _lost, applies=_nvml_tried
    ),
    Rule("gpu.nvml", "NVML initialises", ("gpu.nvml-failed",), _nvml_failed, applies=_nvml_tried),
    Rule(
        "gpu.ecc",
        "No uncorrectable ECC errors or pending remaps",
        ("gpu.ecc-uncorrectable",),
        _ecc,
        applies=_has_gpus,
    ),
    Rule(
        "gpu.memory",
        "No other process holds most of a GPU's memory",
        ("gpu.memory-held",),
        _memory_held,
        applies=_has_gpus,
    ),
    Rule(
        "gpu.mig",
        "MIG mode is consistent and usable",
        ("gpu.mig-enabled",),
        _mig,
        applies=_has_gpus,
    ),
    Rule(
        "gpu.compute-mode",
        "Compute mode allows CUDA contexts",
        ("gpu.compute-mode",),
        _compute_mode,
        applies=_has_gpus,
    ),
    Rule(
        "gpu.clocks",
        "No hardware/thermal slowdown",
        ("gpu.throttled",),
        _throttled,
        applies=_has_gpus,
    ),
    Rule(
        "gpu.pcie", "PCIe link runs at full width", ("gpu.pcie-degraded",), _pcie, applies=_has_gpus
    ),
)
