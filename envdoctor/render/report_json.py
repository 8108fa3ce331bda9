"""The versioned JSON envelope (schema: docs/schema/report.schema.json)."""

from __future__ import annotations

from typing import Any

from envdoctor import __version__
from envdoctor.engine import Report
from envdoctor.model import codec
from envdoctor.model.finding import Finding, Severity

REPORT_SCHEMA_VERSION = 1


def finding_to_json(finding: Finding) -> dict[str, Any]:
    fix = finding.remediation
    return {
        "code": finding.code,
        "severity": finding.severity.label,
        "title": finding.title,
        "subject": finding.subject,
        "inconclusive": finding.inconclusive,
        "evidence": [{"label": label, "value": value} for label, value in finding.evidence],
        "remediation": None
        if fix is None
        else {
            "summary": fix.summary,
            "steps": list(fix.steps),
            "needs_root": fix.needs_root,
            "needs_reboot": fix.needs_reboot,
            "docs": fix.docs,
        },
    }


def report_to_json(report: Report) -> dict[str, Any]:
    """Stable keys; add fields freely, rename or remove only with a schema_version bump."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool": {"name": "envdoctor", "version": __version__},
        "status": report.status,
        "exit_code": report.exit_code,
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
