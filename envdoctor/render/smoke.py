"""Smoke output: a step table per GPU above the usual report, or a versioned JSON document."""

from __future__ import annotations

from typing import Any

from envdoctor.engine import Report
from envdoctor.envelope import envelope
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, finding_to_json
from envdoctor.render.text import UNICODE, Marks, render_text
from envdoctor.smoke.model import FAILED, PASSED, ChildRun, SmokeRun, StepResult
from envdoctor.smoke.reproduce import TORCH_CACHE, Probe, ReproduceRun
from envdoctor.terminal import safe_text


def step_line(step: StepResult, marks: Marks) -> str:
    if step.status == PASSED:
        mark, text = marks.ok, step.detail
    elif step.status == FAILED:
        mark, text = marks.error, step.first_line or step.kind
    else:
        mark, text = "-", f"skipped: {step.reason}"
    seconds = f"{step.seconds:6.2f} s" if step.status != "skipped" else " " * 8
    return f"  {mark} {step.step:<15}{seconds}  {text}"


def run_lines(child: ChildRun, marks: Marks) -> list[str]:
    name = child.info("name")
    head = f"{child.target.label}" + (f"  {name}" if name else "")
    lines = [f"{head}  ({child.seconds:.1f} s, {child.ending})"]
    lines.extend(step_line(step, marks) for step in child.steps)
    return lines


def render_smoke_text(
    facts: Facts,
    run: SmokeRun,
    findings: tuple[Finding, ...],
    *,
    width: int,
    marks: Marks = UNICODE,
) -> str:
    out = [f"envdoctor smoke — {run.python}  ({run.seconds:.1f} s, GPUs in parallel)", ""]
    out.extend([*(f"note: {note}" for note in run.notes), *([""] if run.notes else [])])
    for child in run.runs:
        out.extend(run_lines(child, marks))
        out.append("")
    for skipped in run.not_run:
        out.extend([f"{skipped.label}  not run: {skipped.reason}", ""])
    text = "\n".join(out) + "\n"
    return safe_text(text) + render_text(Report(facts, findings), width=width, marks=marks)


def render_reproduce_text(
    facts: Facts,
    run: ReproduceRun,
    findings: tuple[Finding, ...],
    *,
    width: int,
    marks: Marks = UNICODE,
) -> str:
    label = run.target.label if run.target else "GPU"
    how = (
        "torch's cache holds the memory, a new thread runs the step"
        if run.hold == TORCH_CACHE
        else "memory held outside torch"
    )
    out = [f"envdoctor smoke --reproduce {run.kind} — {label}, {how}  ({run.seconds:.1f} s)", ""]
    out.extend(f"note: {note}" for note in run.notes)
    for probe in run.probes:
        level = (
            "nothing held"
            if probe.leave_mib is None
            else f"asked to leave {probe.leave_mib} MiB free after the context"
        )
        out.append(f"{level}:")
        out.extend(step_line(step, marks) for step in probe.run.steps)
    if run.problem:
        out.append(f"problem: {run.problem}")
    out.append("")
    text = "\n".join(out) + "\n"
    return safe_text(text) + render_text(Report(facts, findings), width=width, marks=marks)


def step_json(step: StepResult) -> dict[str, Any]:
    return {
        "step": step.step,
        "status": step.status,
        "seconds": step.seconds,
        "detail": step.detail,
        "error": step.error,
        "error_type": step.error_type,
        "kind": step.kind,
        "reason": step.reason,
        "info": dict(step.info),
    }


def child_json(child: ChildRun) -> dict[str, Any]:
    return {
        "label": child.target.label,
        "nvml_indices": list(child.target.nvml_indices),
        "cuda_visible_devices": child.target.visible,
        "ending": child.ending,
        "seconds": child.seconds,
        "returncode": child.returncode,
        "steps": [step_json(s) for s in child.steps],
        "stderr_tail": child.stderr_tail,
        "survivors": [{"pid": pid, "state": state} for pid, state in child.survivors],
    }


def smoke_json(facts: Facts, run: SmokeRun, findings: tuple[Finding, ...]) -> dict[str, Any]:
    """``smoke --json`` (docs/schema/smoke.schema.json)."""
    payload = {
        "python": run.python,
        "seconds": run.seconds,
        "runs": [child_json(c) for c in run.runs],
        "not_run": [{"label": n.label, "reason": n.reason} for n in run.not_run],
        "notes": list(run.notes),
        "findings": [finding_to_json(f) for f in findings],
    }
    return envelope("smoke", payload, exit_code=Report(facts, findings).exit_code)


def _probe_json(probe: Probe) -> dict[str, Any]:
    return {
        "leave_mib": probe.leave_mib,
        "free_in_probe": probe.free_in_probe,
        "held": probe.held,
        "free_at_step": probe.free_at_step,
        "free_after": probe.free_after,
        "passed": probe.passed,
        "code": probe.code,
        "memory": bool(probe.found and probe.found.memory),
        "error": probe.failed_step.error if probe.failed_step else "",
        "run": child_json(probe.run),
    }


def reproduce_json(
    run: ReproduceRun, findings: tuple[Finding, ...], exit_code: int
) -> dict[str, Any]:
    """``smoke --reproduce KIND --json`` (docs/schema/reproduce.schema.json)."""
    payload = {
        "reproduce": run.kind,
        "target": run.target.label if run.target else None,
        "problem": run.problem,
        "seconds": run.seconds,
        "hold": run.hold,
        "refused": run.refused,
        "nvml_free_before": run.nvml_free,
        "context_cost": run.context_cost,
        "first_use_cost": run.first_use_cost,
        "notes": list(run.notes),
        "probes": [_probe_json(p) for p in run.probes],
        "findings": [finding_to_json(f) for f in findings],
    }
    return envelope("reproduce", payload, exit_code=exit_code)
