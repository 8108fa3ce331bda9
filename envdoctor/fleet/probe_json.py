"""``probe --json`` (docs/schema/probe.schema.json): the verdict line, the gates, the findings
and the facts, in the JSON envelope; also the document the watchdog prints when time runs out.

Imported only for ``--format json``, and before the watchdog starts: it must not import anything
once the main thread may be stuck.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envdoctor.engine import Report
from envdoctor.envelope import envelope
from envdoctor.fleet.requirements import Requirement, evaluate_requirement
from envdoctor.model import codec
from envdoctor.model.finding import finding_to_json


def probe_json(
    report: Report,
    verdict: str,
    *,
    duration: float,
    budget: float,
    requirements: Sequence[Requirement],
) -> dict[str, Any]:
    """The probe's verdict on ``report``; its exit code is the report's."""
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


def probe_unknown_json(
    verdict: str, *, reason: str, duration: float, budget: float
) -> dict[str, Any]:
    """No verdict within the budget: ``reason`` says where it was stuck; no facts, no findings."""
    payload = {
        "verdict": verdict,
        "reason": reason,
        "duration_s": round(duration, 4),
        "budget_s": budget,
        "requirements": [],
        "findings": [],
    }
    return envelope("probe", payload, exit_code=2)  # could not determine
