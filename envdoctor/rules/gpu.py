"""Per-GPU rules over NVML facts: lost, memory held, MIG, modes, PCIe (memory health, recovery,
temperature and clocks: rules/gpu_health.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields

from envdoctor.model.facts import GpuFacts, GpuProcess, NvmlErrorKind
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import Verdict, failed_elsewhere, not_applicable, passed, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.model.units import each, format_bytes
from envdoctor.model.views import free_gpus, gpu_label, module_state, nvml_gpus, show
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.container_inside import container_cause

HELD_WARN_FRACTION = 0.5
FREE_ERROR_FRACTION = 0.05


def _lost(ctx: RuleContext) -> Evaluation:
    facts = ctx.facts
    lost = [g for g in nvml_gpus(facts) if NvmlErrorKind.GPU_IS_LOST in g.failure_kinds()]
    whole = ctx.machine.presence.nvml_error == NvmlErrorKind.GPU_IS_LOST or (
        isinstance(facts.nvml, Found)
        and NvmlErrorKind.GPU_IS_LOST in facts.nvml.value.device_count_error
    )
    if not lost and not whole:
        yield from _reachable_verdict(ctx)
        return
    unmatched = _unreachable_pci(ctx)
    targets = lost_targets(ctx)
    who = ", ".join(f"GPU {g.index}" for g in lost) or "a GPU"
    if unmatched:
        who += f" (PCI {', '.join(unmatched)})"
    resets = [f"sudo nvidia-smi -r -i {t}" for t in targets] or [
        "sudo nvidia-smi -r   # nvidia-smi -L lists the GPUs it still reaches"
    ]
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
                "stop every process using the GPU, then reset it:",
                *resets,
                "if the reset fails: reboot (a power cycle if it still fails)",
                "recurring: check power, cooling, PCIe seating/riser; raise an RMA with the logs",
            ),
            needs_root=True,
            needs_reboot=True,
        ),
        subject=",".join(str(g.index) for g in lost),
    )


def lost_targets(ctx: RuleContext) -> tuple[str, ...]:
    """How to name each lost GPU to nvidia-smi -i: its PCI bus id when it is known (the
    GPU itself no longer answers, so the address comes from the PCI bus), else its index."""
    lost = [g for g in nvml_gpus(ctx.facts) if NvmlErrorKind.GPU_IS_LOST in g.failure_kinds()]
    unmatched = _unreachable_pci(ctx)
    if lost and len(unmatched) == len(lost):
        return tuple(unmatched)
    if lost:
        return tuple(
            g.pci_bus_id.value if isinstance(g.pci_bus_id, Found) else str(g.index) for g in lost
        )
    return tuple(unmatched)


def _reachable_verdict(ctx: RuleContext) -> Iterator[Verdict]:
    gpus = nvml_gpus(ctx.facts)
    if gpus:
        yield passed(f"NVML reaches {each(len(gpus), 'GPU')}")
        return
    scope = gpu_scope(ctx)
    if scope is not None:  # always, with no GPU listed
        yield scope


def _unreachable_pci(ctx: RuleContext) -> list[str]:
    """PCI addresses of NVIDIA GPUs that no reachable NVML device accounts for."""
    pci = ctx.facts.host.nvidia_pci
    if not isinstance(pci, Found):
        return []
    reached = {
        g.pci_bus_id.value.lower()[-7:]
        for g in nvml_gpus(ctx.facts)
        if isinstance(g.pci_bus_id, Found)
    }
    return [d.address for d in pci.value if d.address.lower()[-7:] not in reached]


def held_gpus(ctx: RuleContext) -> dict[int, bool]:
    """GPU index → whether its free memory is critically low, for each GPU whose memory other
    processes hold (the gpu.memory-held judgement, shared with the fix planner)."""
    out: dict[int, bool] = {}
    for g in nvml_gpus(ctx.facts):
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
        out[g.index] = low_free
    return out


def _memory_held(ctx: RuleContext) -> Iterator[Finding]:
    held = held_gpus(ctx)
    free = free_gpus(ctx.facts, frozenset(held))
    for g in nvml_gpus(ctx.facts):
        if g.index not in held or not isinstance(g.memory, Found):
            continue
        mem = g.memory.value
        procs = g.processes.value if isinstance(g.processes, Found) else ()
        ordered = sorted(
            procs, key=lambda p: -(p.used_memory.value if isinstance(p.used_memory, Found) else 0)
        )
        holders = [(f"PID {p.pid}", f"{_who(p)} holds {_amount(p)}") for p in ordered]
        if not procs:
            holders = [
                (
                    "processes",
                    show(g.processes)
                    if not isinstance(g.processes, Found)
                    else "none visible here (they may live in another container / PID namespace)",
                )
            ]
        steps = [_stop_step(p) for p in ordered]
        if free:
            steps.append(
                f"or run on the GPUs that are free: CUDA_VISIBLE_DEVICES={','.join(map(str, free))} "
                "python …"
            )
        else:
            steps.append("no other GPU here is free: wait for the holders, or stop them")
        steps.append(
            "cuBLAS/cuDNN handles need free memory: CUBLAS_STATUS_ALLOC_FAILED and "
            "CUDNN_STATUS_NOT_INITIALIZED are the usual symptoms"
        )
        yield Finding(
            code="gpu.memory-held",
            severity=Severity.ERROR if held[g.index] else Severity.WARNING,
            title=f"{gpu_label(g)} has {format_bytes(mem.free)} free of {format_bytes(mem.total)}: other processes hold its memory",
            evidence=(
                ("free", f"{format_bytes(mem.free)} of {format_bytes(mem.total)}"),
                ("allocated", format_bytes(mem.used)),
                *(
                    (("reserved by the driver", format_bytes(mem.reserved)),)
                    if mem.reserved
                    else ()
                ),
                *holders,
            ),
            remediation=Remediation(
                summary="Stop the processes holding the GPU, or run on another GPU",
                steps=tuple(steps),
            ),
            subject=str(g.index),
        )


def _who(p: GpuProcess) -> str:
    if isinstance(p.name, Found):
        return p.name.value
    return "(not visible here: another PID namespace, e.g. a container)"


def _amount(p: GpuProcess) -> str:
    return (
        format_bytes(p.used_memory.value)
        if isinstance(p.used_memory, Found)
        else show(p.used_memory)
    )


def _stop_step(p: GpuProcess) -> str:
    """``kill PID`` only for a process this PID namespace can see; else where to act."""
    if isinstance(p.name, Found):
        return f"check, then stop: kill {p.pid}   # {p.name.value}"
    return (
        f"PID {p.pid} is not visible here (another PID namespace: a container, or this is one): "
        "stop it where it runs (on the host: nvidia-smi, docker ps / kubectl get pods)"
    )


def _mig(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
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
        listed = g.mig_instances.value if isinstance(g.mig_instances, Found) else ()
        if empty:
            steps: tuple[str, ...] = (
                f"sudo nvidia-smi mig -i {g.index} -lgip   # the GPU instance profiles",
                f"sudo nvidia-smi mig -i {g.index} -cgi 0 -C   # one instance of profile 0, the "
                "whole GPU; smaller ones by the IDs -lgip lists",
                f"or disable: sudo nvidia-smi -i {g.index} -mig 0 && sudo nvidia-smi -r -i {g.index}",
            )
        elif listed:
            steps = (
                f"CUDA_VISIBLE_DEVICES={listed[0].uuid} python …   # one instance (CUDA uses one)",
                "nvidia-smi -L   # every GPU and MIG device with its UUID",
            )
        else:
            steps = ("nvidia-smi -L   # the MIG UUIDs, for CUDA_VISIBLE_DEVICES=MIG-…",)
        yield Finding(
            code="gpu.mig-enabled",
            severity=Severity.ERROR if empty else Severity.INFO,
            title=(
                f"{gpu_label(g)} is in MIG mode with no GPU instances: CUDA sees no device on it"
                if empty
                else f"{gpu_label(g)} is in MIG mode ({show(g.mig_devices)} instances); "
                "CUDA sees the instances, not the whole GPU"
            ),
            evidence=(
                ("MIG mode", "enabled"),
                ("MIG devices", show(g.mig_devices)),
                *(
                    (f"MIG device {n}", f"{m.uuid} ({m.name})" if m.name else m.uuid)
                    for n, m in enumerate(listed)
                ),
            ),
            remediation=Remediation(
                summary="Create MIG instances, or disable MIG"
                if empty
                else "Select a MIG instance by its UUID",
                steps=steps,
                needs_root=empty,
            ),
            subject=str(g.index),
        )


def _compute_mode(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
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


def _pcie(ctx: RuleContext) -> Iterator[Finding]:
    for g in nvml_gpus(ctx.facts):
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


_BROKEN_KINDS = (NvmlErrorKind.CRASHED, NvmlErrorKind.NOT_RESPONDING)
_NOT_READ = "not read: "


def _broken_reading(g: GpuFacts, kind: str) -> tuple[str, int] | None:
    """The message of the reading of ``g`` that failed with ``kind`` (the first one, not the
    ones skipped after it), and how many of its fields were read all the same."""
    values = [getattr(g, f.name) for f in fields(g)]
    failed = [v.detail for v in values if isinstance(v, ProbeFailed) and v.error == kind]
    if not failed:
        return None
    first = next((d for d in failed if not d.startswith(_NOT_READ)), failed[0])
    read = sum(isinstance(v, Found) for v in values)
    return first.removeprefix(_NOT_READ), read


def _responding(ctx: RuleContext) -> Evaluation:
    """A GPU on which NVML blocked or crashed (seen from outside: the probe's child)."""
    facts = ctx.facts
    gpus = nvml_gpus(facts)
    count_error = facts.nvml.value.device_count_error if isinstance(facts.nvml, Found) else ""
    said = False
    if any(kind in count_error for kind in _BROKEN_KINDS):
        said = True
        yield _broken_finding(None, count_error.partition(": ")[2] or count_error, 0)
    for g in gpus:
        for kind in _BROKEN_KINDS:
            broken = _broken_reading(g, kind)
            if broken is not None:
                said = True
                yield _broken_finding(g, *broken, crashed=kind == NvmlErrorKind.CRASHED)
                break
    if said:
        return
    if gpus:
        yield passed(f"NVML answered every query of {each(len(gpus), 'GPU')} without crashing")
    else:
        yield not_applicable("NVML lists no GPU")


def _broken_finding(
    g: GpuFacts | None, detail: str, read: int, *, crashed: bool = False
) -> Finding:
    who = "NVML" if g is None else gpu_label(g) if isinstance(g.name, Found) else f"GPU {g.index}"
    target = (
        g.pci_bus_id.value
        if g is not None and isinstance(g.pci_bus_id, Found)
        else (str(g.index) if g is not None else "")
    )
    kept = ("fields read before", str(read)) if g is not None else ("GPUs", "none could be listed")
    if crashed:
        return Finding(
            code="gpu.nvml-crashed",
            severity=Severity.ERROR,
            title=f"NVML crashed while reading {who}",
            evidence=(("NVML", detail), kept),
            remediation=Remediation(
                summary="The NVML library crashes on this GPU: check the driver's user-space "
                "library, then the GPU",
                steps=(
                    "timeout 60 nvidia-smi -q"
                    + (f" -i {target}" if target else "")
                    + "   # does NVIDIA's own tool crash too?",
                    "ldconfig -p | grep libnvidia-ml   # one copy, of the loaded module's version",
                    "cat /proc/driver/nvidia/version",
                    "sudo dmesg | grep -i xid",
                    "reinstall the driver's user-space libraries of the module's version; "
                    "if only this GPU crashes it, reset it or reboot",
                ),
                needs_root=True,
            ),
            subject=str(g.index) if g is not None else "",
        )
    reset = f"sudo nvidia-smi -r -i {target}" if target else "sudo nvidia-smi -r"
    return Finding(
        code="gpu.not-responding",
        severity=Severity.ERROR,
        title=f"{who} does not respond: {detail}",
        evidence=(("NVML", detail), kept),
        remediation=Remediation(
            summary="Drain the node: a GPU whose NVML queries block needs a reset or a reboot",
            steps=(
                "sudo dmesg | grep -i xid   # Xid 79/119/120: fallen off the bus, GSP timeouts",
                "timeout 60 nvidia-smi -q" + (f" -i {target}" if target else ""),
                "stop every process using the GPU, then: " + reset,
                "if the reset hangs or fails: reboot",
            ),
            needs_root=True,
            needs_reboot=True,
        ),
        subject=str(g.index) if g is not None else "",
    )


EXPLAINED_ELSEWHERE = {
    NvmlErrorKind.LIB_RM_VERSION_MISMATCH: "driver.version-mismatch",
    NvmlErrorKind.DRIVER_NOT_LOADED: "driver.module-not-loaded",
    NvmlErrorKind.GPU_IS_LOST: "gpu.lost",
}


def _nvml_failed(ctx: RuleContext) -> Evaluation:
    """NVML failures no other rule explains (NoPermission, Unknown, Timeout …)."""
    facts = ctx.facts
    nvml = facts.nvml
    if isinstance(nvml, Found):
        yield passed(f"NVML initialised with driver {show(nvml.value.driver_version)}")
        return
    cause = container_cause(facts, ctx.machine)  # in a container, its own cause comes first
    if cause:
        yield failed_elsewhere(f"NVML: {why_missing(nvml)}: {cause} says why")
        return
    if isinstance(nvml, Absent):
        yield from _nvml_absent(ctx, nvml)
        return
    code = EXPLAINED_ELSEWHERE.get(nvml.error)
    if code == "driver.module-not-loaded" and (
        module_state(facts, "nouveau").yes or ctx.machine.presence.bound_to("nouveau")
    ):
        code = "driver.nouveau-loaded"  # nvidia cannot load while nouveau holds the GPU
    if code is not None:
        yield failed_elsewhere(f"NVML failed with {nvml.error}: {code} says why")
        return
    kind, evidence = nvml.error, (("NVML", f"{nvml.error}: {nvml.detail}"),)
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
    if kind in _BROKEN_KINDS:  # the library crashed or hung in nvmlInit itself
        yield Finding(
            code="gpu.nvml-failed",
            severity=Severity.ERROR,
            title=f"NVML {'crashed' if kind == NvmlErrorKind.CRASHED else 'hung'} while initialising: no GPU could be read",
            evidence=evidence,
            remediation=Remediation(
                summary="Run nvidia-smi to see whether NVIDIA's own tool fails the same way",
                steps=(
                    "timeout 60 nvidia-smi",
                    "ldconfig -p | grep libnvidia-ml   # one copy, of the loaded module's version",
                    "sudo dmesg | grep -i xid; a GPU reset or a reboot may be needed",
                ),
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
                "Timeout: is persistence mode on? nvidia-smi -q | grep -i persistence; without it "
                "every nvmlInit sets the GPUs up again (seconds): "
                "sudo systemctl enable --now nvidia-persistenced",
                "Timeout/Unknown: sudo dmesg | grep -i xid; a GPU reset or reboot may be needed",
            ),
        ),
        inconclusive=True,
    )


def _nvml_absent(ctx: RuleContext, nvml: Absent) -> Evaluation:
    """No NVML library: nothing to say on a machine that needs no GPU; the driver's finding
    where no driver is installed; else the user-space driver is what is missing."""
    machine = ctx.machine
    if not machine.gpu_required:
        yield not_applicable(f"{machine.why_no_gpu()} ({nvml.reason})")
        return
    if not machine.driver.present:
        yield failed_elsewhere("NVML is not available: no driver (driver.not-installed)")
        return
    loaded = machine.driver.loaded
    version = loaded.version if loaded else "the loaded module's version"
    if ctx.facts.host.containers:
        summary = "Mount the host's NVIDIA user-space driver into the container"
        steps: tuple[str, ...] = (
            "docker run --gpus all … (the NVIDIA Container Toolkit mounts libnvidia-ml and "
            "libcuda of the host's driver)",
            "Kubernetes: the nvidia runtime must run the pod (runtimeClassName: nvidia, or "
            "nvidia as the default runtime)",
        )
    else:
        summary = f"Install the NVIDIA user-space driver of version {version}"
        steps = (
            f"Ubuntu/Debian: sudo apt install libnvidia-compute-{version.split('.')[0]} "
            f"nvidia-utils-{version.split('.')[0]}   # the loaded module's branch",
            "or reinstall the whole driver of the loaded module's version, then reboot",
            "nvidia-smi   # must list every GPU",
        )
    yield Finding(
        code="gpu.nvml-failed",
        severity=Severity.ERROR,
        title="The nvidia kernel module is loaded but NVML cannot be loaded: the user-space "
        "driver (libnvidia-ml) is missing",
        evidence=(
            ("NVML", nvml.reason),
            ("nvidia kernel module", machine.driver.module.describe()),
            ("kernel module version", version),
        ),
        remediation=Remediation(summary=summary, steps=steps, needs_root=True),
    )


def _onoff(flag: bool) -> str:
    return "enabled" if flag else "disabled"


NO_GPU = "NVML lists no GPU"


def gpu_scope(ctx: RuleContext) -> Verdict | None:
    """None when NVML lists GPUs to judge, else why a per-GPU check cannot judge any."""
    if nvml_gpus(ctx.facts):
        return None
    machine = ctx.machine
    nvml = ctx.facts.nvml
    if not machine.gpu_required:
        return not_applicable(machine.why_no_gpu())
    if not machine.driver.present:
        return not_applicable("no NVIDIA driver is installed: nothing can list the GPUs")
    if isinstance(nvml, Found):
        problem = nvml.value.device_count_error
        return unknown(f"NVML lists no GPU ({problem})") if problem else not_applicable(NO_GPU)
    return unknown(f"NVML lists no GPU: {why_missing(nvml)}")


def per_gpu(
    judge: Callable[[RuleContext], Iterator[Finding]],
    fields: tuple[str, ...],
    ok: str,
) -> Callable[[RuleContext], Evaluation]:
    """A per-GPU check with honest verdicts: passed only where one of ``fields`` was read (the
    per-GPU rules of ``gpu_health`` share it)."""

    def evaluate(ctx: RuleContext) -> Evaluation:
        scope = gpu_scope(ctx)
        if scope is not None:
            yield scope
            return
        gpus = nvml_gpus(ctx.facts)  # some: gpu_scope said so
        findings = list(judge(ctx))
        if findings:
            yield from findings
            return
        read = [g for g in gpus if any(isinstance(getattr(g, f), Found) for f in fields)]
        if read:
            which = "every GPU" if len(read) == len(gpus) else f"{len(read)} of {len(gpus)} GPUs"
            yield passed(f"{ok} ({which} read)")
            return
        first: object = getattr(gpus[0], fields[0])
        reason = why_missing(first) if isinstance(first, Absent | ProbeFailed) else "unread"
        verdict = not_applicable if isinstance(first, Absent) else unknown
        yield verdict(f"{fields[0].replace('_', ' ')}: {reason}")

    return evaluate


RULES = (
    Rule("gpu.reachable", "No GPU has fallen off the bus", ("gpu.lost",), _lost),
    Rule("gpu.nvml", "NVML initialises", ("gpu.nvml-failed",), _nvml_failed),
    Rule(
        "gpu.responding",
        "NVML answers every query of every GPU, without blocking or crashing",
        ("gpu.not-responding", "gpu.nvml-crashed"),
        _responding,
    ),
    Rule(
        "gpu.memory",
        "No other process holds most of a GPU's memory",
        ("gpu.memory-held",),
        per_gpu(_memory_held, ("memory",), "memory is mostly free or held by no one"),
    ),
    Rule(
        "gpu.mig",
        "MIG mode is consistent and usable",
        ("gpu.mig-enabled",),
        per_gpu(_mig, ("mig_mode",), "MIG is off, with no change pending"),
    ),
    Rule(
        "gpu.compute-mode",
        "Compute mode allows CUDA contexts",
        ("gpu.compute-mode",),
        per_gpu(_compute_mode, ("compute_mode",), "compute mode is default"),
    ),
    Rule(
        "gpu.pcie",
        "PCIe links run at full width",
        ("gpu.pcie-degraded",),
        per_gpu(_pcie, ("pcie",), "PCIe links run at full width"),
    ),
)
