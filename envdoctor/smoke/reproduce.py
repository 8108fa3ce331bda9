"""``envdoctor smoke --reproduce cublas-alloc|cudnn-init``: is memory pressure the cause, here?

A sacrificial *hog* child creates a context on the GPU and reserves device memory (with torch's
caching allocator off, so what it frees is really freed) until only ``--leave`` MiB remain; a
*probe* child then runs the cuBLAS (a GEMM) or cuDNN (a convolution) initialisation on the same
GPU. Without ``--leave`` the hog walks down a ladder (2048 … 0 MiB) and bisects between the last
level that passed and the first that failed, so the report says at which threshold the error
appears — or that it never does. A first probe with no memory held is the baseline.

Both children live in one ``ChildSet``: they are killed when the reproduction ends, times out,
or is interrupted (Ctrl-C, SIGTERM); the hog also exits by itself when its stdin closes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.record import record
from envdoctor.model.units import format_bytes as fmt_bytes
from envdoctor.platform.processes import ChildProcess, ChildSet, Eof, Timeout, sigterm_raises
from envdoctor.smoke.attribute import child_findings, gpu_of, memory_picture
from envdoctor.smoke.classify import classify
from envdoctor.smoke.codes import CODES, DOCS
from envdoctor.smoke.model import FAILED, ChildRun, Target
from envdoctor.smoke.runner import (
    BACKSTOP_S,
    SmokeOptions,
    monitor,
    not_started,
    parse_line,
    plan,
    smoke_config,
    start_child,
)

MiB = 1 << 20
LADDER_MIB = (2048, 1024, 512, 256, 128, 64, 0)
REFINE_ROUNDS = 4
REFINE_GRAIN_MIB = 16


@record
class Kind:
    step: str
    codes: frozenset[str]
    status: str
    what: str


KINDS = {
    "cublas-alloc": Kind(
        "gemm-fp32",
        frozenset({"smoke.cublas-alloc-failed", "smoke.cublas-not-initialized"}),
        "CUBLAS_STATUS_ALLOC_FAILED",
        "cuBLAS initialisation (first GEMM)",
    ),
    "cudnn-init": Kind(
        "conv-forward",
        frozenset({"smoke.cudnn-not-initialized"}),
        "CUDNN_STATUS_NOT_INITIALIZED",
        "cuDNN initialisation (first convolution)",
    ),
}


@dataclass(frozen=True)
class ReproduceOptions:
    """``timeout`` bounds each child (the hog's set-up, each probe, each hog command)."""

    python: str
    kind: str
    gpu: int | None = None
    leave_mib: int | None = None
    timeout: float = 60.0
    env: Mapping[str, str | None] = field(default_factory=dict)
    ladder: tuple[int, ...] = LADDER_MIB
    refine: int = REFINE_ROUNDS

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EnvdoctorError(
                f"--reproduce takes {' or '.join(KINDS)}, not {self.kind!r}",
            )
        if self.leave_mib is not None and self.leave_mib < 0:
            raise EnvdoctorError("--leave must be zero or a positive number of MiB")
        if self.timeout <= 0:
            raise EnvdoctorError("--timeout must be a positive number of seconds")


@record
class Probe:
    """One probe run: how much the hog left free (None: no pressure), and what happened."""

    leave_mib: int | None
    free_before: int | None
    run: ChildRun
    code: str = ""

    @property
    def passed(self) -> bool:
        return self.run.ok

    @property
    def free_in_probe(self) -> int | None:
        """Free memory the probe itself measured right after creating its context."""
        value = self.run.info("free")
        return int(value) if value and value.isdigit() else None

    def first_error(self) -> str:
        for step in self.run.steps:
            if step.status == FAILED:
                return step.first_line
        return ""


@dataclass(frozen=True)
class ReproduceRun:
    kind: str
    target: Target | None
    probes: tuple[Probe, ...] = ()
    problem: str = ""  # why the reproduction could not be carried out
    total: int | None = None
    seconds: float = 0.0
    hog_pid: int | None = None


class _HogError(Exception):
    pass


def reproduce(facts: Facts, options: ReproduceOptions) -> ReproduceRun:
    """Run the hog and the probes; always leaves no child behind."""
    started = time.monotonic()
    kind = KINDS[options.kind]
    smoke = SmokeOptions(
        python=options.python,
        timeout=options.timeout,
        step_timeout=options.timeout,
        gpus=(options.gpu,) if options.gpu is not None else (),
        env=options.env,
    )
    targets, not_run = plan(facts, smoke)
    if not targets:
        why = not_run[0].reason if not_run else "no GPU to test"
        return ReproduceRun(options.kind, None, problem=why)
    target = targets[0]
    steps = ("import", "context", kind.step)
    probes: list[Probe] = []
    problem = ""
    total: int | None = None
    hog_pid: int | None = None
    with sigterm_raises(), ChildSet() as children:
        rounds = 2 + len(options.ladder) + options.refine
        hog_config = {
            "mode": "hog",
            "device": target.device,
            "index": target.index,
            "budget": options.timeout * rounds * 2 + BACKSTOP_S,
        }
        hog_env = {**options.env, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        hog = start_child(children, target, options.python, hog_config, hog_env)
        if isinstance(hog, str):
            return ReproduceRun(options.kind, target, problem=f"cannot start the hog: {hog}")
        hog_pid = hog.pid
        setup = monitor(
            hog,
            target,
            options.python,
            ("import", "context"),
            step_timeout=options.timeout,
            budget=options.timeout,
            stop_after="ready",
        )
        if setup.failed:
            first = setup.failed[0]
            return ReproduceRun(
                options.kind,
                target,
                problem=f"the memory-holding child failed in `{first.step}`: {first.first_line}",
                hog_pid=hog_pid,
            )
        total = int(setup.info("total") or 0) or None

        def probe(leave: int | None) -> Probe:
            free = None
            if leave is not None:
                free = _hold(hog, leave, options.timeout)
            config = smoke_config(target, smoke, steps)
            child = start_child(children, target, options.python, config, options.env)
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
            code = classify(failed[0]).code if failed else ""
            result = Probe(leave, free, run, code)
            probes.append(result)
            return result

        try:
            baseline = probe(None)
            if baseline.passed:
                _search(probe, options, kind, baseline)
        except _HogError as exc:
            problem = str(exc)
        hog.close_stdin()
    return ReproduceRun(
        options.kind,
        target,
        tuple(probes),
        problem,
        total,
        round(time.monotonic() - started, 3),
        hog_pid,
    )


def _search(probe: Any, options: ReproduceOptions, kind: Kind, baseline: Probe) -> None:
    """Walk the ladder down to the first failure, then bisect towards the threshold."""
    if options.leave_mib is not None:
        probe(options.leave_mib)
        return
    ceiling = baseline.free_in_probe
    last_pass: int | None = None
    first_fail: Probe | None = None
    for level in options.ladder:
        if ceiling is not None and level * MiB >= ceiling:
            continue  # the GPU has less free than that already: the baseline covered it
        result = probe(level)
        if result.passed:
            last_pass = level
            continue
        first_fail = result
        break
    if first_fail is None or first_fail.leave_mib is None:
        return
    high = last_pass if last_pass is not None else (ceiling or 0) // MiB
    low = first_fail.leave_mib
    found = first_fail.code in kind.codes
    for _ in range(options.refine):
        if high - low <= REFINE_GRAIN_MIB:
            break
        middle = (high + low) // 2 // 8 * 8
        result = probe(middle)
        if result.passed:
            high = middle
        else:
            low = middle
            if result.code in kind.codes:
                found = True
            elif found:
                break  # a different failure between two hits: nothing finer to learn


def _hold(hog: ChildProcess, leave_mib: int, timeout: float) -> int | None:
    """Ask the hog to leave ``leave_mib`` MiB free; the free bytes it reports."""
    if not hog.send(json.dumps({"leave_mib": leave_mib})):
        raise _HogError(f"the memory-holding child is gone ({_exit_of(hog)})")
    end = time.monotonic() + timeout
    while True:
        event = hog.read(end - time.monotonic())
        if isinstance(event, Timeout):
            raise _HogError(f"the memory-holding child did not answer within {timeout:g} s")
        if isinstance(event, Eof):
            raise _HogError(f"the memory-holding child exited ({_exit_of(hog)})")
        message = parse_line(event.text)
        if message is None or message.get("event") != "holding":
            continue
        if message.get("error"):
            raise _HogError(
                f"the memory-holding child could not reserve memory: {message['error']}"
            )
        free = message.get("free")
        return int(free) if isinstance(free, int) else None


def _exit_of(hog: ChildProcess) -> str:
    code = hog.wait(1.0)
    return "still running" if code is None else f"exit status {code}"


# --- findings -------------------------------------------------------------------------------


def reproduce_findings(facts: Facts, run: ReproduceRun) -> tuple[Finding, ...]:
    kind = KINDS[run.kind]
    label = run.target.label if run.target else "GPU"
    if run.problem and not run.probes:
        return (_inconclusive(label, run.problem, _gpu_state(facts)),)
    if not run.probes:
        return (_inconclusive(label, "no probe ran", _gpu_state(facts)),)
    baseline, pressured = run.probes[0], run.probes[1:]
    # A level at or above what the GPU has free holds nothing: it is not pressure.
    idle = [p for p in pressured if not _applies_pressure(p, baseline)]
    if not baseline.passed:
        note = (
            "reproduce",
            f"fails with no memory held by envdoctor ({_free(baseline)} free in the probe): "
            "memory pressure is not needed to trigger it",
        )
        return tuple(
            dataclasses.replace(f, evidence=(*f.evidence, note))
            for f in child_findings(facts, baseline.run)
        )
    levels = ("levels tried", _levels(run.probes))
    hits = [p for p in pressured if p.code in kind.codes]
    findings: list[Finding] = []
    if run.problem:
        findings.append(_inconclusive(label, run.problem))
    if hits:
        findings.append(_reproduced(facts, run, kind, hits, levels))
    elif any(not p.passed for p in pressured):
        other = next(p for p in pressured if not p.passed)
        info = CODES["smoke.pressure-other-error"]
        findings.append(
            Finding(
                code="smoke.pressure-other-error",
                severity=info.severity,
                title=(
                    f"{label}: under memory pressure the {kind.what} fails with "
                    f"{other.code.split('.', 1)[1]} ({other.first_error()}), not {kind.status}"
                ),
                evidence=(levels, ("error under pressure", other.first_error())),
                remediation=Remediation(
                    summary=(
                        f"Memory pressure does not produce {kind.status} with this torch; "
                        "look for another cause"
                    ),
                    steps=("envdoctor smoke   # the full smoke run attributes other causes",),
                    docs=DOCS,
                ),
                subject=label,
            )
        )
    elif applied := [p for p in pressured if p not in idle]:
        lowest = min(p.leave_mib or 0 for p in applied)
        info = CODES["smoke.pressure-ruled-out"]
        findings.append(
            Finding(
                code="smoke.pressure-ruled-out",
                severity=info.severity,
                title=(
                    f"{label}: the {kind.what} succeeds even with only {lowest} MiB left free: "
                    f"memory pressure does not produce {kind.status} here"
                ),
                evidence=(levels,),
                remediation=info.fix,
                subject=label,
            )
        )
    elif idle:
        why = (
            f"leaving {idle[0].leave_mib} MiB free holds nothing: the GPU has only "
            f"{_free(baseline)} free in the probe (choose a smaller --leave)"
        )
        findings.append(_inconclusive(label, why, (levels,)))
    else:
        findings.append(_inconclusive(label, "the GPU had too little free memory to vary it"))
    return tuple(findings)


def _applies_pressure(probe: Probe, baseline: Probe) -> bool:
    free = baseline.free_in_probe
    return probe.leave_mib is not None and (free is None or probe.leave_mib * MiB < free)


def _gpu_state(facts: Facts) -> tuple[tuple[str, str], ...]:
    """What NVML says of the GPUs: why none could be tested, when none could."""
    nvml = facts.nvml
    if isinstance(nvml, Found):
        return (("GPUs NVML reports", str(len(nvml.value.gpus))),)
    return (("NVML", why_missing(nvml)),)


def _reproduced(
    facts: Facts,
    run: ReproduceRun,
    kind: Kind,
    hits: list[Probe],
    levels: tuple[str, str],
) -> Finding:
    assert run.target is not None
    label = run.target.label
    worst = max(hits, key=lambda p: p.leave_mib or 0)
    above = [p for p in run.probes[1:] if p.passed and (p.leave_mib or 0) > (worst.leave_mib or 0)]
    best_pass = min(above, key=lambda p: p.leave_mib or 0) if above else None
    title = (
        f"{label}: {kind.status} reproduces under memory pressure — the {kind.what} fails "
        f"with {worst.leave_mib} MiB left free"
    )
    if best_pass is not None:
        title += f" and succeeds with {best_pass.leave_mib} MiB"
    evidence: list[tuple[str, str]] = [levels, ("error", worst.first_error())]
    if worst.free_in_probe is not None:
        evidence.append(("free in the probe after its own context", fmt_bytes(worst.free_in_probe)))
    gpu = gpu_of(facts, run.probes[0].run)
    picture = memory_picture(facts, None, gpu)
    if picture.free is not None:
        evidence.append(("memory before the reproduction (NVML)", picture.line(label)))
    need = best_pass.leave_mib if best_pass is not None else worst.leave_mib
    steps = [
        f"kill {pid}   # `{name}` holds {fmt_bytes(used or 0)}"
        for pid, name, used in picture.holders[:3]
        if used
    ]
    steps.append(
        f"keep more than {need} MiB free on {label} for each process that starts CUDA work"
    )
    steps.append("or give the job a GPU of its own: CUDA_VISIBLE_DEVICES=<idle GPU>")
    info = CODES["smoke.pressure-reproduces"]
    return Finding(
        code="smoke.pressure-reproduces",
        severity=info.severity,
        title=title,
        evidence=tuple(evidence),
        remediation=Remediation(
            summary=f"On this machine {kind.status} means GPU memory ran out: free memory first",
            steps=tuple(steps),
            docs=DOCS,
        ),
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


def _free(probe: Probe) -> str:
    return fmt_bytes(probe.free_in_probe) if probe.free_in_probe is not None else "unknown"


def _levels(probes: tuple[Probe, ...]) -> str:
    lines = []
    ordered = sorted(
        probes, key=lambda p: float("inf") if p.leave_mib is None else p.leave_mib, reverse=True
    )
    for p in ordered:
        level = "no pressure" if p.leave_mib is None else f"{p.leave_mib} MiB left"
        outcome = "passed" if p.passed else f"{p.code}: {p.first_error()}"
        lines.append(f"{level} ({_free(p)} free in the probe): {outcome}")
    return "\n".join(lines)


def reproduce_exit_code(findings: tuple[Finding, ...]) -> int:
    """1: the error reproduced (or fails even without pressure); 0: it did not; 2: unknown."""
    codes = {f.code for f in findings}
    if "smoke.pressure-reproduces" in codes or any(f.severity >= Severity.ERROR for f in findings):
        return 1
    if any(f.inconclusive for f in findings):
        return 2
    return 0
