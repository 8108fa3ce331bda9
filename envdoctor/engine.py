"""diagnose(): facts → findings, each rule's failure contained, findings sorted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.record import record
from envdoctor.rules.base import Rule, RuleContext

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables


@record
class Report:
    """Facts and the findings drawn from them; ``status`` and ``exit_code`` follow from both."""

    facts: Facts
    findings: tuple[Finding, ...]
    passed: tuple[Rule, ...] = ()
    strict: bool = False

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)

    @property
    def status(self) -> str:
        """ "unhealthy", "unknown" (could not determine) or "healthy"."""
        if self.worst >= Severity.ERROR or (self.strict and self.worst >= Severity.WARNING):
            return "unhealthy"
        if any(f.inconclusive for f in self.findings):
            return "unknown"
        return "healthy"

    @property
    def exit_code(self) -> int:
        return {"healthy": 0, "unhealthy": 1, "unknown": 2}[self.status]


def evaluate(
    facts: Facts,
    rules: Sequence[Rule],
    tables: CompatTables | None = None,
    *,
    strict: bool = False,
) -> Report:
    """Run every rule; a rule that raises becomes an ``envdoctor.rule-crashed`` finding.

    Without ``tables`` the table-driven rules judge against the empty set and say nothing.
    """
    context = RuleContext(facts=facts, given_tables=tables)
    findings: list[Finding] = []
    passed: list[Rule] = []
    for rule in rules:
        try:
            if not rule.applies(context):
                continue
            produced = list(rule.evaluate(context))
        except Exception as exc:  # noqa: BLE001 (one broken rule must not hide the others)
            produced = [_crashed(rule, exc)]
        findings.extend(produced)
        if not produced:
            passed.append(rule)
    findings.sort(key=lambda f: (-f.severity, f.code, f.subject))
    return Report(facts=facts, findings=tuple(findings), passed=tuple(passed), strict=strict)


def _crashed(rule: Rule, exc: Exception) -> Finding:
    import traceback  # only a crashed rule pays for it

    where = traceback.extract_tb(exc.__traceback__)[-1:]
    location = f"{where[0].filename}:{where[0].lineno}" if where else "?"
    return Finding(
        code="envdoctor.rule-crashed",
        severity=Severity.ERROR,
        title=f"envdoctor's rule {rule.name!r} crashed; its verdict is missing from this report",
        evidence=(("error", f"{type(exc).__name__}: {exc}"), ("at", location)),
        remediation=Remediation(
            summary="Report this to the envdoctor maintainers with `envdoctor collect` attached",
            steps=("envdoctor collect -o snapshot.json", "attach snapshot.json to a bug report"),
        ),
        inconclusive=True,
    )
