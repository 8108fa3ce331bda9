"""Findings: what a rule concluded, why (evidence) and what to do (remediation)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

# Compiled on first use, through re's cache: a healthy probe creates no finding.
_CODE = r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+$"


def is_valid_code(code: str) -> bool:
    """Codes are dotted kebab-case ("driver.version-mismatch"): stable, greppable, documented."""
    return bool(re.match(_CODE, code))


class Severity(enum.IntEnum):
    """Ordered so that ``max()`` over findings gives the overall verdict."""

    OK = 0
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Remediation:
    """How to fix it: one imperative summary and the ordered steps a person can follow."""

    summary: str
    steps: tuple[str, ...] = ()
    needs_root: bool = False
    needs_reboot: bool = False
    docs: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One conclusion about the machine.

    ``inconclusive`` marks findings that say "could not determine" (a probe timed out or
    crashed): without an error they make the overall status *unknown* (exit 2), not healthy.
    """

    code: str
    severity: Severity
    title: str
    evidence: tuple[tuple[str, str], ...] = ()
    remediation: Remediation | None = None
    inconclusive: bool = False
    subject: str = field(default="")

    def __post_init__(self) -> None:
        if not is_valid_code(self.code):
            raise ValueError(f"finding code {self.code!r} is not dotted kebab-case")


def finding_to_json(finding: Finding) -> dict[str, Any]:
    """A finding as every JSON document carries it (docs/schema/finding.schema.json): here, in
    the model, so that each area's JSON builder (check, probe, smoke) gives it one shape."""
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
