"""evaluate(): facts → one result per check, each rule's failure contained, findings sorted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import Outcome, Verdict
from envdoctor.model.views import NO_INTENT, Intent, machine_view
from envdoctor.rules.base import Rule, RuleContext

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables

NO_VERDICT = "the check gave no verdict (an envdoctor bug: please report it)"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome, why, and the findings it produced (when it failed)."""

    rule: Rule
    outcome: Outcome
    reason: str
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    """Facts and the findings drawn from them; ``status`` and ``exit_code`` follow from both.

    ``checks`` holds every check's outcome; exit codes come from the findings alone (a check
    that is unknown because, say, NVML failed is explained by NVML's own finding).
    """

    facts: Facts
    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...] = ()
    strict: bool = False
    intent: Intent = NO_INTENT

    @property
    def passed(self) -> tuple[Rule, ...]:
        """The rules that passed on evidence (never one that did not run)."""
        return tuple(c.rule for c in self.checks if c.outcome is Outcome.PASSED)

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
        return exitcodes.for_status(self.status)


def evaluate(
    facts: Facts,
    rules: Sequence[Rule],
    tables: CompatTables | None = None,
    *,
    strict: bool = False,
    intent: Intent = NO_INTENT,
) -> Report:
    """Run every rule; a rule that raises becomes an ``envdoctor.rule-crashed`` finding.

    Without ``tables`` the table-driven rules judge against the empty set and say nothing.
    """
    context = RuleContext(
        facts=facts, given_tables=tables, intent=intent, given_view=machine_view(facts, intent)
    )
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    for rule in rules:
        try:
            produced = list(rule.evaluate(context))
        except Exception as exc:  # noqa: BLE001 (one broken rule must not hide the others)
            produced = [_crashed(rule, exc)]
        result = _result(rule, produced)
        findings.extend(result.findings)
        checks.append(result)
    findings.sort(key=lambda f: (-f.severity, f.code, f.subject))
    return Report(
        facts=facts,
        findings=tuple(findings),
        checks=tuple(checks),
        strict=strict,
        intent=intent,
    )


def _result(rule: Rule, produced: list[Finding | Verdict]) -> CheckResult:
    found = tuple(p for p in produced if isinstance(p, Finding))
    if found:
        if all(f.inconclusive for f in found):
            return CheckResult(rule, Outcome.UNKNOWN, found[0].title, found)
        if all(f.severity <= Severity.INFO for f in found):  # notes: nothing is wrong
            return CheckResult(rule, Outcome.PASSED, found[0].title, found)
        return CheckResult(rule, Outcome.FAILED, found[0].title, found)
    verdict = next((p for p in produced if isinstance(p, Verdict)), None)
    if verdict is None:
        return CheckResult(rule, Outcome.UNKNOWN, NO_VERDICT)
    return CheckResult(rule, verdict.outcome, verdict.reason)


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
