"""What ``envdoctor probe`` prints: the verdict line first (node-problem-detector keeps 80
bytes of it), then the chosen format; and the "unknown" output its watchdog prints when the
budget runs out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from envdoctor import exitcodes
from envdoctor.fleet.verdict import MAX_VERDICT_BYTES, fit_line, one_line, verdict_line
from envdoctor.terminal import json_document, safe_text

if TYPE_CHECKING:
    from envdoctor.engine import Report
    from envdoctor.fleet.requirements import Requirement


def render_probe(
    report: Report,
    fmt: str,
    duration: float,
    requirements: Sequence[Requirement],
    *,
    budget: float,
    verbose: bool,
) -> tuple[str, str]:
    """(verdict line, full output in ``fmt``: "text", "json" or "prometheus")."""
    verdict = verdict_line(report)
    if fmt == "prometheus":
        from envdoctor.render.prometheus import render_prometheus

        return verdict, render_prometheus(report, duration, command="probe")
    if fmt == "json":
        return verdict, json_document(_json(report, verdict, duration, requirements, budget))
    lines = [verdict]
    if verbose:
        lines += [f"  {f.severity.label:<7} {f.code}: {one_line(f.title)}" for f in report.findings]
        lines += _requirement_lines(report, requirements)
    return verdict, safe_text("\n".join(lines) + "\n")


COLOURS = (
    (r"(?:(healthy)|(unhealthy)|(unknown))\b", ("ok", "error", "warning")),
    (r"  (?:(error)|(warning)|(info)) ", ("error", "warning", "info")),
    (r"  require .*: (?:(met)|(unmet)|(unknown)) \(", ("ok", "error", "warning")),
)
"""Where the probe's text takes colour: the verdict's first word, each finding's severity and
each gate's verdict."""


def colour_probe(text: str) -> str:
    """The probe's text (or its verdict line alone) coloured for a terminal."""
    from envdoctor.colour import paint

    return paint(text, COLOURS)


def _json(
    report: Report,
    verdict: str,
    duration: float,
    requirements: Sequence[Requirement],
    budget: float,
) -> dict[str, Any]:
    """``probe --json`` (docs/schema/probe.schema.json)."""
    from envdoctor.envelope import envelope  # not at the top: the text verdict never needs it
    from envdoctor.fleet.requirements import evaluate_requirement
    from envdoctor.model import codec
    from envdoctor.model.finding import finding_to_json

    payload = {
        "verdict": verdict,
        "duration_s": round(duration, 4),
        "budget_s": budget,
        "requirements": [
            {"requirement": o.requirement.text, "verdict": o.verdict, "actual": o.actual}
            for o in (evaluate_requirement(report.facts, r) for r in requirements)
        ],
        "findings": [finding_to_json(f) for f in report.findings],
        "facts": codec.encode(report.facts),
    }
    return envelope("probe", payload, exit_code=report.exit_code)


def _requirement_lines(report: Report, requirements: Sequence[Requirement]) -> list[str]:
    if not requirements:
        return []
    from envdoctor.fleet.requirements import evaluate_requirement

    outcomes = (evaluate_requirement(report.facts, r) for r in requirements)
    return [f"  require {o.requirement.text}: {o.verdict} ({o.actual})" for o in outcomes]


def render_unknown(fmt: str, reason: str, duration: float, *, budget: float) -> tuple[str, str]:
    """The watchdog's output: the budget ran out before a verdict (JSON: a ``reason``, no
    facts)."""
    verdict = fit_line(f"unknown: {reason}", MAX_VERDICT_BYTES)
    if fmt == "prometheus":
        from envdoctor.render.prometheus import render_prometheus_unknown

        return verdict, render_prometheus_unknown(reason, duration, command="probe")
    if fmt == "json":
        from envdoctor.envelope import envelope  # loaded before the watchdog started

        payload = {
            "verdict": verdict,
            "reason": reason,
            "duration_s": round(duration, 4),
            "budget_s": budget,
            "requirements": [],
            "findings": [],
        }
        return verdict, json_document(envelope("probe", payload, exit_code=exitcodes.UNKNOWN))
    return verdict, verdict + "\n"
