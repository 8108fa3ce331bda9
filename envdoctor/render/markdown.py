"""Markdown for pasting into a bug report: redacted (hostname, user, GPU UUIDs)."""

from __future__ import annotations

from envdoctor import __version__
from envdoctor.engine import Report
from envdoctor.model.outcome import Outcome
from envdoctor.render.redact import Redactor
from envdoctor.render.summary import machine_lines, snapshot_origin
from envdoctor.terminal import safe_text

_ICON = {0: "✅", 1: "ℹ️", 2: "⚠️", 3: "❌"}
_OUTCOMES = (
    (Outcome.PASSED, "Passed checks"),
    (Outcome.UNKNOWN, "Checks that could not decide"),
    (Outcome.FAILED, "Failed checks explained by another finding"),
    (Outcome.NOT_APPLICABLE, "Checks that do not apply here"),
)


def render_markdown(report: Report, *, snapshot: str | None = None) -> str:
    """The report for a bug report (``snapshot``: the file its facts come from)."""
    out = [f"### envdoctor {__version__}: {report.status} (exit {report.exit_code})", ""]
    if snapshot is not None:
        origin = snapshot_origin(report.facts, snapshot)
        notes = f" ({origin.notes})" if origin.notes else ""
        head = f"Snapshot of `{_code(origin.host)}` taken {origin.taken}: `{_code(origin.path)}`"
        out.extend([head + notes, ""])
    out.extend(["| | |", "|---|---|"])
    out.extend(f"| {label} | {_cell(value)} |" for label, value in machine_lines(report.facts))
    out.append("")
    if not report.findings:
        out.append("No problems found.")
    for finding in report.findings:
        out.append(f"#### {_ICON[int(finding.severity)]} `{finding.code}` — {finding.title}")
        out.append("")
        for label, value in finding.evidence:
            out.append(
                f"- **{label}**: `{_code(value)}`" if "\n" not in value else f"- **{label}**:"
            )
            if "\n" in value:
                out.extend(["  ```", *(f"  {line}" for line in value.splitlines()), "  ```"])
        if finding.remediation is not None:
            out.append(f"- **fix**: {finding.remediation.summary}")
            out.extend(
                f"  {i}. {_step(step)}" for i, step in enumerate(finding.remediation.steps, 1)
            )
        out.append("")
    for outcome, title in _OUTCOMES:
        listed = [c for c in report.checks if c.outcome is outcome and not c.findings]
        if not listed:
            continue
        out.append(f"<details><summary>{title} ({len(listed)})</summary>")
        out.append("")
        out.extend(f"- {c.rule.summary}: {_code(c.reason)}" for c in listed)
        out.extend(["", "</details>"])
    return safe_text(Redactor(report.facts).text("\n".join(out)) + "\n")


def _step(step: str) -> str:
    """A fix step: a command as code; a sentence that marks its own code (`envdoctor fix`
    writes…) as it is, since a code span round it would nest backticks."""
    return step if "`" in step else f"`{step}`"


def _code(value: str) -> str:
    return value.replace("`", "'")


def _cell(value: str) -> str:
    return value.replace("|", "\\|")
