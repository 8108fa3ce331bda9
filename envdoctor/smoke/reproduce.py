"""``envdoctor smoke --reproduce cublas-alloc|cudnn-init``: does running out of GPU memory
produce this failure, here?

Every probe is one child of the target interpreter that imports torch, creates its CUDA context,
holds device memory *itself* until only ``leave`` MiB are free, then runs the first GEMM (cuBLAS)
or the first convolution (cuDNN). The memory is held after the context exists, so the context's
own cost (issue #19 expects 0.4 to 0.6 GiB on a data-centre GPU) never eats into ``leave``; the baseline probe
measures that cost (NVML's free memory before it, minus the probe's after its context) and what
the first GEMM or convolution takes (handle, workspace, kernels). The memory is taken with the
CUDA driver API, outside torch's caching allocator: neither torch nor the library can get it
back, exactly like memory another process holds.

``in_process`` reproduces the commonest real case instead (pytorch/pytorch#128601): the first
GEMM or convolution runs on the main thread, torch's own cache then holds the memory (tensors
allocated and freed: torch keeps it reserved), and the step runs again in a new thread, which
must create its own cuBLAS or cuDNN handle outside torch's allocator.

The search: a baseline with nothing held, then a ladder down (2048 … 64 MiB) to the first
failure, then the last tens of MiB (48 … 0) where handle creation itself fails, then a
bisection between the highest level that failed and the lowest above it that passed, down to
4 MiB. Any failure of the step whose
text names a memory shortage (``Pattern.memory``: the status asked about, but also torch's
``OutOfMemoryError`` from the workspace, cuDNN's allocation statuses, "unable to find an
engine") confirms memory pressure; every level's verbatim text is kept as evidence.

Safety: a GPU NVML shows in use by other processes is never filled unless the user names it
(``--gpu N --force``); ``CUDA_VISIBLE_DEVICES`` bounds the choice; a GPU in the Prohibited
compute mode, or in an exclusive mode owned by another process, cannot be probed at all.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from envdoctor import exitcodes
from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts, GpuFacts, NvmlSystem
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Found, Probed, value_or, why_missing
from envdoctor.model.units import GiB, MiB, whole
from envdoctor.model.units import format_bytes as fmt_bytes
from envdoctor.platform.processes import ChildSet, sigterm_raises
from envdoctor.smoke.attribute import child_findings, describe_survivors, memory_picture, target_gpu
from envdoctor.smoke.classify import Classification, classify
from envdoctor.smoke.codes import CODES, DOCS
from envdoctor.smoke.environment import child_environment
from envdoctor.smoke.model import ChildRun, StepResult, Target
from envdoctor.smoke.runner import (
    SmokeOptions,
    monitor,
    not_started,
    plan,
    smoke_config,
    start_child,
)

LADDER_MIB = (2048, 1024, 512, 256, 128, 64)
GRAIN_MIB = 4
LOW_MIB = (48, 32, 16, 8, 4, 0)
BUDGET_S = 300.0
# More than this in use on a GPU NVML lists no process for: someone else's (another container's
# processes are invisible from here). It leaves room for the driver's own reservations on an
# idle GPU (their size on an H100 is still to be read on one: docs/smoke.md).
IDLE_USED = 1 * GiB
"""Memory in use on an idle GPU as NVML's original query counts it (the driver's reserve in)."""
IDLE_ALLOCATED = 256 * MiB
"""Memory allocated on an idle GPU as the v2 query counts it (the reserve, ~600 MiB, apart)."""
RAW = "raw"
TORCH_CACHE = "torch-cache"


@dataclass(frozen=True, slots=True)
class Kind:
    step: str
    status: str
    what: str
    library: str


KINDS = {
    "cublas-alloc": Kind(
        "gemm-fp32", "CUBLAS_STATUS_ALLOC_FAILED", "cuBLAS initialisation (first GEMM)", "cuBLAS"
    ),
    "cudnn-init": Kind(
        "conv-forward",
        "CUDNN_STATUS_NOT_INITIALIZED",
        "cuDNN initialisation (first convolution)",
        "cuDNN",
    ),
}


@dataclass(frozen=True, slots=True)
class ReproduceOptions:
    """``timeout`` bounds each probe child; ``budget`` the whole search (no probe starts after
    it); ``force`` allows filling a GPU others use, only with ``gpu`` named."""

    python: str
    kind: str
    gpu: int | None = None
    leave_mib: int | None = None
    timeout: float = 60.0
    env: Mapping[str, str | None] = field(default_factory=dict)
    force: bool = False
    in_process: bool = False
    budget: float = BUDGET_S
    ladder: tuple[int, ...] = LADDER_MIB
    grain: int = GRAIN_MIB
    low: tuple[int, ...] = LOW_MIB

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EnvdoctorError(f"--reproduce takes {' or '.join(KINDS)}, not {self.kind!r}")
        if self.leave_mib is not None and self.leave_mib < 0:
            raise EnvdoctorError("--leave must be zero or a positive number of MiB")
        if self.timeout <= 0 or self.budget <= 0:
            raise EnvdoctorError("--timeout and --budget must be positive numbers of seconds")
        if self.force and self.gpu is None:
            raise EnvdoctorError(
                "--force needs --gpu N: name the GPU you accept to fill, other jobs on it may fail"
            )

    @property
    def hold(self) -> str:
        return TORCH_CACHE if self.in_process else RAW


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe: how much it left free after its context (None: the baseline), and its run."""

    leave_mib: int | None
    run: ChildRun
    found: Classification | None = None  # the failed step's classification

    @property
    def passed(self) -> bool:
        return self.run.ok

    @property
    def failed_step(self) -> StepResult | None:
        failed = self.run.failed
        return failed[0] if failed else None

    @property
    def code(self) -> str:
        return self.found.code if self.found else ""

    def first_error(self) -> str:
        step = self.failed_step
        return step.first_line if step else ""

    @property
    def free_in_probe(self) -> int | None:
        """Free memory the probe measured right after creating its own context."""
        return self.run.byte_count("free")

    @property
    def free_held(self) -> int | None:
        """Free memory once the probe held what it was asked to."""
        return self.run.byte_count("free_held")

    @property
    def held(self) -> int:
        return self.run.byte_count("held") or 0

    @property
    def free_after(self) -> int | None:
        """Free memory after the step under test (the last step that measured it)."""
        values = [v for s in self.run.steps if (v := whole(s.get("free_after"), 24)) is not None]
        return values[-1] if values else None

    @property
    def free_at_step(self) -> int | None:
        """Free memory when the step under test began."""
        return self.free_held if self.leave_mib is not None else self.free_in_probe


@dataclass(frozen=True, slots=True)
class ReproduceRun:
    kind: str
    target: Target | None
    probes: tuple[Probe, ...] = ()
    problem: str = ""  # why the reproduction stopped or could not be carried out
    refused: bool = False  # the GPU is in use by others: nothing was started
    seconds: float = 0.0
    hold: str = RAW
    nvml_free: int | None = None  # NVML's free memory on the target before any probe
    notes: tuple[str, ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()  # what the choice of GPU was based on

    @property
    def context_cost(self) -> int | None:
        """What the probe's own CUDA context took: NVML's free before it minus its own after."""
        free = self.probes[0].free_in_probe if self.probes else None
        if self.nvml_free is None or free is None:
            return None
        return max(0, self.nvml_free - free)

    @property
    def first_use_cost(self) -> int | None:
        """What the first GEMM or convolution kept (handle, workspace, kernels), at baseline."""
        if not self.probes or not self.probes[0].passed:
            return None
        first = self.probes[0]
        before, after = first.free_in_probe, first.free_after
        return max(0, before - after) if before is not None and after is not None else None


class _StopError(Exception):
    """The search cannot go on (a probe survived SIGKILL, the budget ran out)."""


# --- choosing the GPU -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Choice:
    target: Target | None
    problem: str = ""
    refused: bool = False
    evidence: tuple[tuple[str, str], ...] = ()


def choose_gpu(facts: Facts, options: ReproduceOptions) -> Choice:
    """The GPU to fill: the one named, else the first that CUDA_VISIBLE_DEVICES leaves and that
    no other process uses. Raises EnvdoctorError for a GPU that does not exist or is hidden."""
    smoke = SmokeOptions(
        python=options.python,
        timeout=options.timeout,
        step_timeout=options.timeout,
        gpus=(options.gpu,) if options.gpu is not None else (),
    )
    targets, not_run = plan(facts, smoke)
    if not targets:
        why = not_run[0].reason if not_run else "no GPU to test"
        return Choice(None, why, evidence=not_run[0].evidence if not_run else ())
    blocked: list[tuple[str, str]] = []
    busy: list[tuple[str, str]] = []
    for target in targets:
        gpu = target_gpu(facts, target)
        mode = _compute_mode_block(gpu)
        in_use = _in_use(gpu)
        if mode:
            blocked.append((target.label, mode))
        elif in_use and not (options.force and options.gpu is not None):
            busy.append((target.label, in_use))
        else:
            forced = (("filled although in use (--force)", in_use),) if in_use else ()
            return Choice(target, evidence=forced)
    if busy:
        why = "; ".join(f"{label} is in use: {reason}" for label, reason in busy)
        return Choice(None, why, True, (*busy, *blocked))
    why = "; ".join(reason for _, reason in blocked)
    return Choice(None, why, evidence=tuple(blocked))


def _holders(gpu: GpuFacts) -> str:
    procs = gpu.processes.value if isinstance(gpu.processes, Found) else ()
    shown = [
        f"PID {p.pid} `{value_or(p.name, '?')}`"
        + (f" ({fmt_bytes(used)})" if (used := value_or(p.used_memory, None)) else "")
        for p in procs[:3]
    ]
    return ", ".join(shown) + (f" and {len(procs) - 3} more" if len(procs) > 3 else "")


def _compute_mode_block(gpu: GpuFacts | None) -> str:
    """Why no probe can create a context on this GPU at all (its compute mode), or ""."""
    if gpu is None:
        return ""
    mode = value_or(gpu.compute_mode, "default")
    if mode == "prohibited":
        return f"GPU {gpu.index} is in the Prohibited compute mode: no process may create a context"
    procs = value_or(gpu.processes, ())
    if mode.startswith("exclusive") and procs:
        return (
            f"GPU {gpu.index} is in the {mode} compute mode and {_holders(gpu)} owns it: "
            "no other process can create a context there"
        )
    return ""


def _busy_now(gpu: GpuFacts | None) -> str:
    """Why a GPU that was idle is in use now ("" when NVML shows nobody, or cannot tell)."""
    if gpu is None:
        return ""
    seen = (isinstance(gpu.processes, Found) and gpu.processes.value) or isinstance(
        gpu.memory, Found
    )
    return _in_use(gpu) if seen else ""


def _in_use(gpu: GpuFacts | None) -> str:
    """Why this GPU counts as used by someone else ("" when it does not)."""
    if gpu is None:
        return "NVML cannot say whether other processes use it (no NVML reading for this GPU)"
    if isinstance(gpu.processes, Found) and gpu.processes.value:
        return f"NVML lists {_holders(gpu)} on it"
    memory = gpu.memory
    idle = IDLE_ALLOCATED if isinstance(memory, Found) and memory.value.reserved else IDLE_USED
    if isinstance(memory, Found) and memory.value.used > idle:
        reserve = (
            f", the driver's own {fmt_bytes(memory.value.reserved)} apart"
            if memory.value.reserved
            else ""
        )
        return (
            f"{fmt_bytes(memory.value.used)} of its memory is allocated{reserve}, although NVML "
            "lists no process (processes in other containers are invisible from here)"
        )
    if not isinstance(memory, Found) and not isinstance(gpu.processes, Found):
        return f"NVML can say neither which processes use it nor how much memory is in use ({why_missing(memory)})"
    return ""


# --- running the probes ---------------------------------------------------------------------


def reproduce(
    facts: Facts,
    options: ReproduceOptions,
    recheck: Callable[[], Probed[NvmlSystem]] | None = None,
) -> ReproduceRun:
    """Choose the GPU, run the baseline and the search; always leaves no child behind.

    ``recheck`` reads NVML again: before every probe after the baseline, a GPU that another
    process has started to use since (NVML lists a process, or memory is allocated) stops the
    search, so that a job which arrived mid-search is never starved (not with ``--force``)."""
    started = time.monotonic()
    kind = KINDS[options.kind]
    choice = choose_gpu(facts, options)
    environment = child_environment(facts, options.env)
    base = ReproduceRun(
        options.kind,
        choice.target,
        hold=options.hold,
        notes=environment.notes,
        evidence=choice.evidence,
    )
    if choice.target is None:
        return replace(base, problem=choice.problem, refused=choice.refused)
    no_cache = _caching_off(facts, options)
    if no_cache:
        return replace(base, problem=no_cache)
    target = choice.target
    gpu = target_gpu(facts, target)
    nvml_free = gpu.memory.value.free if gpu and isinstance(gpu.memory, Found) else None
    probes: list[Probe] = []
    deadline = started + options.budget
    smoke = SmokeOptions(python=options.python, timeout=options.timeout)
    env = environment.as_dict()

    with sigterm_raises(), ChildSet() as children:

        def probe(leave: int | None) -> Probe:
            if probes and time.monotonic() > deadline:
                raise _StopError(
                    f"the time budget of {options.budget:g} s ran out after {len(probes)} probes"
                )
            if probes and recheck is not None and not options.force:
                busy = _busy_now(target_gpu(replace(facts, nvml=recheck()), target))
                if busy:
                    raise _StopError(
                        f"before probe {len(probes) + 1} the GPU was no longer idle ({busy}): "
                        "the search stopped rather than fill a GPU another job now uses"
                    )
            steps = probe_steps(kind, options, leave)
            config = {
                **smoke_config(target, smoke, steps),
                "mode": "reproduce",
                "probe": kind.step,
                "leave_mib": leave,
                "hold": options.hold,
            }
            child = start_child(children, target, options.python, config, env)
            if isinstance(child, str):
                run = not_started(target, options.python, child, steps)
            else:
                run = monitor(
                    child,
                    target,
                    options.python,
                    steps,
                    step_timeout=options.timeout,
                    budget=options.timeout,
                )
            failed = run.failed
            result = Probe(leave, run, classify(failed[0]) if failed else None)
            probes.append(result)
            if run.survivors:
                raise _StopError(
                    f"a probe is still there after SIGKILL ({describe_survivors(run.survivors)}):"
                    " the memory it holds may never come back, so the search stopped"
                )
            return result

        try:
            search(probe, options)
        except _StopError as exc:
            problem = str(exc)
        else:
            problem = ""
    return replace(
        base,
        probes=tuple(probes),
        problem=problem,
        seconds=round(time.monotonic() - started, 3),
        nvml_free=nvml_free,
    )


def probe_steps(kind: Kind, options: ReproduceOptions, leave: int | None) -> tuple[str, ...]:
    warm = ("warm-up",) if options.in_process else ()
    hold = ("hold",) if leave is not None else ()
    return ("import", "context", *warm, *hold, kind.step)


def search(probe: Callable[[int | None], Probe], options: ReproduceOptions) -> None:
    """Baseline; then ``--leave`` alone, or: down the ladder to the first failure, the last
    tens of MiB below it, then a bisection between the highest level that failed and the
    lowest one above it that passed, down to ``grain`` MiB."""
    baseline = probe(None)
    if not baseline.passed:
        return
    if options.leave_mib is not None:
        probe(options.leave_mib)
        return
    free = baseline.free_in_probe
    ceiling = free // MiB if free is not None else None
    done: dict[int, Probe] = {}

    def at(level: int) -> Probe:
        if level not in done:
            done[level] = probe(level)
        return done[level]

    for level in options.ladder:
        if ceiling is not None and level >= ceiling:
            continue  # the GPU has less free than that already: the baseline covered it
        if not at(level).passed:
            break
    for level in options.low:
        if not done or level < min(done):
            at(level)
    failed = [level for level, result in done.items() if not result.passed]
    if not failed:
        return
    low = max(failed)
    high = min((lv for lv, r in done.items() if r.passed and lv > low), default=ceiling)
    while high is not None and high - low > options.grain:
        middle = (high + low) // 2 // options.grain * options.grain
        if middle <= low:
            break
        if at(middle).passed:
            high = middle
        else:
            low = middle


# --- findings -------------------------------------------------------------------------------


NO_CACHING = "PYTORCH_NO_CUDA_MEMORY_CACHING"


def _caching_off(facts: Facts, options: ReproduceOptions) -> str:
    """Why ``--in-process`` cannot mean anything here ("" when it can): with torch's caching
    allocator off, freed tensors go back to CUDA, so torch's cache never holds the memory the
    new thread's handle would need."""
    value = options.env[NO_CACHING] if NO_CACHING in options.env else facts.env.get(NO_CACHING)
    if not options.in_process or value in (None, "", "0"):
        return ""
    return (
        f"{NO_CACHING}={value} turns torch's caching allocator off: freed memory goes back to "
        "CUDA, so torch's cache never holds what a new thread's handle needs and --in-process "
        f"cannot reproduce that case here; run without --in-process (memory held outside "
        f"torch), or unset {NO_CACHING} for the reproduction"
    )


def reproduce_findings(facts: Facts, run: ReproduceRun) -> tuple[Finding, ...]:
    label = run.target.label if run.target else "GPU"
    if run.refused:
        return (_refused(run),)
    if not run.probes:
        why = run.problem or "no probe ran"
        return (_inconclusive(label, why, run.evidence or _gpu_state(facts)),)
    baseline = run.probes[0]
    if not baseline.passed:
        return _baseline_failure(facts, run, baseline)
    kind = KINDS[run.kind]
    pressured = [p for p in run.probes[1:] if p.held > 0]
    broke = [p for p in pressured if not p.passed]
    memory = [p for p in broke if _memory_failure(facts, p) and _in_step(p, kind)]
    findings: list[Finding] = []
    if run.problem:
        findings.append(_inconclusive(label, run.problem, (_levels(run),)))
    if memory:
        findings.append(_reproduced(facts, run, kind, memory))
    elif broke:
        findings.append(_other_error(run, kind, broke[0]))
    elif pressured:
        lowest = min(pressured, key=lambda p: p.free_at_step or 0)
        info = CODES["smoke.pressure-ruled-out"]
        findings.append(
            Finding(
                code="smoke.pressure-ruled-out",
                severity=info.severity,
                title=(
                    f"{label}: the {kind.what} succeeds even with {_free(lowest.free_at_step)} "
                    f"left free after its context: memory pressure does not make it fail here"
                ),
                evidence=(_levels(run), *_costs(run)),
                remediation=info.fix,
                subject=label,
            )
        )
    elif not findings:
        asked = ", ".join(str(p.leave_mib) for p in run.probes[1:]) or "none"
        why = (
            f"nothing could be held: the GPU has only {_free(baseline.free_in_probe)} free "
            f"after the probe's own context (levels asked: {asked} MiB)"
        )
        findings.append(_inconclusive(label, why, (_levels(run),)))
    return tuple(_with_notes(f, run) for f in findings)


LAZY_LOADING_OOM = re.compile(r"\b(CUBLAS|CUDNN)_STATUS_EXECUTION_FAILED")
"""Under lazy module loading a kernel is loaded at its first launch; with no device memory
left for it, the launch fails with the library's execution status, not an allocation one."""


def lazy_loading(facts: Facts) -> bool:
    """CUDA_MODULE_LOADING=LAZY is the default since CUDA 12.2 (torch sets it too)."""
    return (facts.env.get("CUDA_MODULE_LOADING") or "LAZY").upper() != "EAGER"


def _memory_failure(facts: Facts, probe: Probe) -> bool:
    """Whether this failure, under held memory, confirms a shortage."""
    if probe.found is None:
        return False
    if probe.found.memory:
        return True
    step = probe.failed_step
    return lazy_loading(facts) and step is not None and bool(LAZY_LOADING_OOM.search(step.error))


def _in_step(probe: Probe, kind: Kind) -> bool:
    step = probe.failed_step
    return step is not None and step.step == kind.step


def _baseline_failure(facts: Facts, run: ReproduceRun, baseline: Probe) -> tuple[Finding, ...]:
    label = run.target.label if run.target else "GPU"
    if baseline.code == "smoke.device-busy":
        why = (
            "the GPU is busy or unavailable to a new process even with nothing held "
            f"({baseline.first_error()}): another process owns it in an exclusive compute mode, "
            "or its compute mode is Prohibited"
        )
        return (_inconclusive(label, why, _gpu_state(facts, run)),)
    note = (
        "reproduce",
        f"fails with no memory held ({_free(baseline.free_in_probe)} free after the probe's own "
        "context): memory pressure is not needed to trigger it",
    )
    return tuple(
        replace(f, evidence=(*f.evidence, note)) for f in child_findings(facts, baseline.run)
    )


def _reproduced(facts: Facts, run: ReproduceRun, kind: Kind, hits: list[Probe]) -> Finding:
    assert run.target is not None
    label = run.target.label
    top = max(hits, key=lambda p: p.free_at_step or 0)
    passes = [
        p
        for p in run.probes[1:]
        if p.passed and p.held > 0 and (p.free_at_step or 0) > (top.free_at_step or 0)
    ]
    best = min(passes, key=lambda p: p.free_at_step or 0) if passes else None
    how = "in a new thread while torch's cache holds the memory" if run.hold == TORCH_CACHE else ""
    title = (
        f"{label}: memory pressure reproduces the failure — the {kind.what}"
        f"{' ' + how if how else ''} fails with {_free(top.free_at_step)} free"
    )
    if best is not None:
        title += f" and succeeds with {_free(best.free_at_step)}"
    if not _where_status(hits, kind):
        title += f"; {kind.status} itself never appeared (the shortage showed as {top.code})"
    evidence: list[tuple[str, str]] = [
        _levels(run),
        ("failures by free memory", _bands(run)),
        (
            f"{kind.status} itself",
            _where_status(hits, kind)
            or f"did not appear: under pressure this torch reports the shortage with the "
            f"texts above (verbatim), which mean the same: {kind.library} ran out of memory",
        ),
        *_costs(run),
    ]
    if any(p.failed_step and LAZY_LOADING_OOM.search(p.failed_step.error) for p in hits):
        evidence.append(
            (
                "*_STATUS_EXECUTION_FAILED",
                "counted as memory: under lazy module loading (CUDA_MODULE_LOADING=LAZY, the "
                "default since CUDA 12.2) a kernel is loaded at its first launch, and a launch "
                "with no device memory left for it fails with this status",
            )
        )
    gpu = target_gpu(facts, run.probes[0].run.target)
    picture = memory_picture(facts, None, gpu)
    if picture.free is not None:
        evidence.append(("memory before the reproduction (NVML)", picture.line(label)))
    need = _per_process_need(run, best, top)
    steps = [
        f"kill {pid}   # `{name}` holds {fmt_bytes(used or 0)}"
        for pid, name, used in picture.holders[:3]
        if used
    ]
    if run.hold == TORCH_CACHE:
        steps.append(
            "leave room outside torch's cache for new threads' handles: create them early "
            "(run one GEMM/convolution in each worker thread first), or cap the cache with "
            "torch.cuda.set_per_process_memory_fraction(...)"
        )
    steps.append(f"keep more than {need} free on {label} for each process that starts CUDA work")
    steps.append("or give the job a GPU of its own: CUDA_VISIBLE_DEVICES=<idle GPU>")
    info = CODES["smoke.pressure-reproduces"]
    return Finding(
        code="smoke.pressure-reproduces",
        severity=info.severity,
        title=title,
        evidence=tuple(evidence),
        remediation=Remediation(
            summary=f"On this machine a {kind.library} initialisation failure means GPU memory "
            "ran out: free memory first",
            steps=tuple(steps),
            docs=DOCS,
        ),
        subject=label,
    )


def _per_process_need(run: ReproduceRun, best: Probe | None, top: Probe) -> str:
    """What one process needs free: its context plus the first use's threshold."""
    threshold = (best or top).free_at_step or 0
    context = run.context_cost
    if context is None:
        return f"{fmt_bytes(threshold)} (after its CUDA context)"
    return f"{fmt_bytes(threshold + context)} ({fmt_bytes(context)} for its CUDA context)"


def _where_status(hits: list[Probe], kind: Kind) -> str:
    levels = [p for p in hits if kind.status in (p.failed_step.error if p.failed_step else "")]
    if not levels:
        return ""
    top = max(levels, key=lambda p: p.free_at_step or 0)
    return f"appeared with {_free(top.free_at_step)} free or less"


def _other_error(run: ReproduceRun, kind: Kind, other: Probe) -> Finding:
    label = run.target.label if run.target else "GPU"
    step = other.failed_step
    where = f" in `{step.step}`" if step else ""
    info = CODES["smoke.pressure-other-error"]
    return Finding(
        code="smoke.pressure-other-error",
        severity=info.severity,
        title=(
            f"{label}: under memory pressure the {kind.what} fails{where} with "
            f"{other.code.split('.', 1)[-1]} ({other.first_error()}), a text that does not name "
            "a memory shortage"
        ),
        evidence=(_levels(run), ("error under pressure", other.first_error()), *_costs(run)),
        remediation=Remediation(
            summary="Memory pressure does not produce a memory error here; look for another cause",
            steps=("envdoctor smoke   # the full smoke run attributes other causes",),
            docs=DOCS,
        ),
        subject=label,
    )


def _refused(run: ReproduceRun) -> Finding:
    info = CODES["smoke.reproduce-refused"]
    label = run.target.label if run.target else "GPU"
    return Finding(
        code="smoke.reproduce-refused",
        severity=info.severity,
        title=f"the reproduction was not started — {run.problem}: filling it would starve that "
        "work into out-of-memory errors",
        evidence=(("why", run.problem), *run.evidence),
        remediation=Remediation(
            summary="Run the reproduction on an idle GPU, or accept the risk for one named GPU",
            steps=(
                "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
                f"envdoctor smoke --reproduce {run.kind} --gpu N           # an idle GPU",
                f"envdoctor smoke --reproduce {run.kind} --gpu N --force   # other jobs on GPU N may fail",
            ),
            docs=DOCS,
        ),
        inconclusive=True,
        subject=label,
    )


def _inconclusive(label: str, why: str, evidence: tuple[tuple[str, str], ...] = ()) -> Finding:
    info = CODES["smoke.reproduce-inconclusive"]
    return Finding(
        code="smoke.reproduce-inconclusive",
        severity=info.severity,
        title=f"{label}: the reproduction could not be carried out — {why}",
        evidence=(("why", why), *evidence),
        remediation=info.fix,
        inconclusive=True,
        subject=label,
    )


def _with_notes(finding: Finding, run: ReproduceRun) -> Finding:
    """The finding plus how the GPU was chosen (--force) and what the environment lost."""
    notes = (*run.evidence, *(("children's environment", note) for note in run.notes))
    return replace(finding, evidence=(*finding.evidence, *notes)) if notes else finding


def _gpu_state(facts: Facts, run: ReproduceRun | None = None) -> tuple[tuple[str, str], ...]:
    """What NVML says of the GPUs: why none could be tested, or the target's compute mode."""
    nvml = facts.nvml
    if not isinstance(nvml, Found):
        return (("NVML", why_missing(nvml)),)
    gpu = target_gpu(facts, run.target) if run and run.target else None
    if gpu is not None:
        mode = gpu.compute_mode
        shown = mode.value if isinstance(mode, Found) else why_missing(mode)
        return (("compute mode", shown), ("processes", _holders(gpu) or "none listed"))
    return (("GPUs NVML reports", str(len(nvml.value.gpus))),)


def _free(value: int | None) -> str:
    return fmt_bytes(value) if value is not None else "unknown"


def _costs(run: ReproduceRun) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    if run.context_cost is not None:
        out.append(
            (
                "the probe's own CUDA context",
                f"{fmt_bytes(run.context_cost)} (NVML's free memory before it minus the probe's "
                "after it); held memory is counted after it, so it is not in the levels",
            )
        )
    if run.first_use_cost is not None:
        out.append(
            (
                "the first use kept, at baseline",
                f"{fmt_bytes(run.first_use_cost)} (handle, workspace, kernels)",
            )
        )
    holder = next((p.run.info("holder") for p in run.probes if p.run.info("holder")), None)
    if holder:
        out.append(("memory held by", holder))
    return tuple(out)


def _outcome(probe: Probe) -> str:
    if probe.passed:
        return "passed"
    step = probe.failed_step
    where = f" in `{step.step}`" if step else ""
    text = probe.first_error()
    text = text if len(text) <= OUTCOME_CHARS else text[: OUTCOME_CHARS - 1] + "…"
    return f"{probe.code}{where}: {text}"


OUTCOME_CHARS = 120  # per level; the verbatim first lines are under "failures by free memory"


def _levels(run: ReproduceRun) -> tuple[str, str]:
    """The baseline, then every level from the most free memory down."""
    lines = []
    ordered = sorted(run.probes, key=lambda p: -1 if p.leave_mib is None else -p.leave_mib - 1)
    for p in sorted(ordered, key=lambda p: p.leave_mib is not None):
        if p.leave_mib is None:
            level = f"nothing held ({_free(p.free_in_probe)} free after the context)"
        else:
            level = f"{_free(p.free_at_step)} free (asked {p.leave_mib} MiB)"
        lines.append(f"{level}: {_outcome(p)}")
    return ("levels tried", "\n".join(lines))


def _bands(run: ReproduceRun) -> str:
    """Consecutive levels that failed with the same text, from the most free memory down."""
    ordered = sorted(
        (p for p in run.probes[1:] if p.held > 0 and not p.passed),
        key=lambda p: -(p.free_at_step or 0),
    )
    bands: list[tuple[Probe, Probe]] = []
    for p in ordered:
        if bands and bands[-1][0].first_error() == p.first_error():
            bands[-1] = (bands[-1][0], p)
        else:
            bands.append((p, p))
    return "\n".join(
        f"{_free(low.free_at_step)}–{_free(high.free_at_step)} free: {high.first_error()}"
        if high is not low
        else f"{_free(high.free_at_step)} free: {high.first_error()}"
        for high, low in bands
    )


def reproduce_exit_code(findings: tuple[Finding, ...]) -> int:
    """1: the failure reproduced (or fails even without pressure); 0: it did not; 2: unknown."""
    codes = {f.code for f in findings}
    if "smoke.pressure-reproduces" in codes or any(f.severity >= Severity.ERROR for f in findings):
        return exitcodes.UNHEALTHY
    if any(f.inconclusive for f in findings):
        return exitcodes.UNKNOWN
    return exitcodes.HEALTHY
