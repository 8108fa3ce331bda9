"""``check --format json``: the report in the JSON envelope (docs/schema/check.schema.json)."""

from __future__ import annotations

from typing import Any

from envdoctor.engine import Report
from envdoctor.envelope import envelope
from envdoctor.model import codec
from envdoctor.model.finding import Severity, finding_to_json


def report_to_json(report: Report) -> dict[str, Any]:
    """Stable keys; add fields freely, rename or remove only with a schema_version bump
    (``envelope.KINDS``)."""
    payload = {
        "summary": {
            s.label: sum(1 for f in report.findings if f.severity == s)
            for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)
        },
        "findings": [finding_to_json(f) for f in report.findings],
        "passed": [rule.name for rule in report.passed],
        "checks": [
            {
                "name": check.rule.name,
                "summary": check.rule.summary,
                "outcome": check.outcome.value,
                "reason": check.reason,
                "codes": [f.code for f in check.findings],
            }
            for check in report.checks
        ],
        "intent": {"expect_gpu": report.intent.expect_gpu, "source": report.intent.source},
        "facts": codec.encode(report.facts),
    }
    return envelope("check", payload, exit_code=report.exit_code)
