"""The human report: sections, ✓ ! ✗ marks, and under each problem its evidence and the fix."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from envdoctor import __version__
from envdoctor.colour import Rule, paint
from envdoctor.engine import CheckResult, Report
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.outcome import Outcome
from envdoctor.model.units import plural
from envdoctor.render.summary import machine_lines, snapshot_origin
from envdoctor.terminal import safe_text

SECTIONS = (
    ("machine", "Machine"),
    ("container", "Container"),
    ("driver", "Driver"),
    ("device", "Device nodes"),
    ("gpu", "GPUs"),
    ("nvlink", "NVLink"),
    ("p2p", "Peer to peer"),
    ("pcie", "PCIe"),
    ("cuda", "CUDA toolkit"),
    ("cudnn", "cuDNN"),
    ("libs", "Libraries"),
    ("torch", "PyTorch"),
    ("env", "Environment"),
    ("smoke", "Smoke tests"),
    ("spec", "Baseline"),
    ("envdoctor", "envdoctor"),
)


@dataclass(frozen=True, slots=True)
class Marks:
    ok: str
    info: str
    warning: str
    error: str
    not_applicable: str
    unknown: str

    def of(self, severity: Severity) -> str:
        return {
            Severity.OK: self.ok,
            Severity.INFO: self.info,
            Severity.WARNING: self.warning,
            Severity.ERROR: self.error,
        }[severity]

    def outcome(self, outcome: Outcome) -> str:
        return {
            Outcome.PASSED: self.ok,
            Outcome.FAILED: self.error,
            Outcome.NOT_APPLICABLE: self.not_applicable,
            Outcome.UNKNOWN: self.unknown,
        }[outcome]


UNICODE = Marks("✓", "i", "!", "✗", "–", "?")
ASCII = Marks("ok", "i", "!", "x", "-", "?")

COLOURS: tuple[Rule, ...] = (
    # the verdict, in the header and the result line
    (
        r"(?:envdoctor \S+ — |Result: )(?:(healthy)|(UNHEALTHY)|(could not determine))\b",
        ("ok", "error", "warning"),
    ),
    # a mark (either set) at the start of a finding, a check or a smoke step
    (
        r"  (?:(✓|ok)|(✗|x)|(!)|(i)|(–|-)|(\?)) ",
        ("ok", "error", "warning", "info", "dim", "unknown"),
    ),
    (r"    (fix:) ", ("bold",)),
    (r"([A-Z][A-Za-z ]*|envdoctor)$", ("bold",)),  # a section's title
)
"""Where the check report (and smoke's, which shares its marks) takes colour."""


def colour_report(text: str) -> str:
    """The report ``render_text`` made, coloured for a terminal."""
    return paint(text, COLOURS)


def render_text(
    report: Report,
    *,
    width: int = 100,
    marks: Marks = UNICODE,
    verbose: bool = False,
    snapshot: str | None = None,
) -> str:
    """The full report as plain text (no colour), wrapped at ``width``; ``snapshot``: the file
    the facts were read from, which the header then names with where and when it was taken."""
    if snapshot is None:
        out: list[str] = [f"envdoctor {__version__} — {_verdict(report)}", ""]
        machine = machine_lines(report.facts)
    else:
        origin = snapshot_origin(report.facts, snapshot)
        head = f"envdoctor {__version__} — {_verdict(report)} — snapshot of {origin.host} taken "
        out = [*_wrap(head + origin.taken, width, "  "), ""]
        source = f"{origin.path} ({origin.notes})" if origin.notes else origin.path
        machine = [("file", source), *machine_lines(report.facts)]
    for label, value in machine:
        out.extend(_wrap(f"{label:<7} {value}", width, "        "))
    by_section: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_section.setdefault(finding.code.split(".", 1)[0], []).append(finding)
    checks: dict[str, list[CheckResult]] = {}
    for check in report.checks:
        checks.setdefault(check.rule.name.split(".", 1)[0], []).append(check)
    known = [key for key, _ in SECTIONS]
    extra = [(k, k.capitalize()) for k in {*by_section, *checks} if k not in known]
    for key, title in (*SECTIONS, *sorted(extra)):
        findings, results = by_section.get(key, []), checks.get(key, [])
        body = [line for f in findings for line in _finding(f, width, marks)]
        body.extend(_checks(results, bool(findings), width, marks, verbose=verbose))
        if body:
            out.extend(["", title, *body])
    out.extend(["", _summary_line(report)])
    return safe_text("\n".join(out) + "\n")  # the choke point: facts and evidence are untrusted


def _checks(
    results: list[CheckResult], has_findings: bool, width: int, marks: Marks, *, verbose: bool
) -> list[str]:
    """Each check as what it is: passed (on what), not applicable (why), unknown (why).

    Without ``-v``: the passed checks' names (or their count beside findings), and a count
    of the checks that could not decide; checks that do not apply are left out.
    """
    if verbose:
        lines: list[str] = []
        for check in results:
            if check.findings and check.outcome is not Outcome.UNKNOWN:
                continue  # shown above as findings
            text = f"  {marks.outcome(check.outcome)} {check.rule.summary}: {_clause(check.reason)}"
            lines.extend(_wrap(text, width, "    "))
        return lines
    passed = [c for c in results if c.outcome is Outcome.PASSED and not c.findings]
    undecided = [c for c in results if c.outcome is Outcome.UNKNOWN and not c.findings]
    lines = []
    if passed and not has_findings:
        lines.extend(
            _wrap(f"  {marks.ok} {'; '.join(c.rule.summary for c in passed)}", width, "    ")
        )
    elif passed:
        n = len(passed)
        lines.append(f"  {marks.ok} {plural(n, 'other check')} passed")
    if undecided:
        n = len(undecided)
        lines.extend(
            _wrap(
                f"  {marks.unknown} {plural(n, 'check')} could not decide "
                f"({undecided[0].reason}{'; …' if n > 1 else ''}): `envdoctor check -v` lists "
                f"{'them' if n > 1 else 'it'}",
                width,
                "    ",
            )
        )
    return lines


def _clause(reason: str) -> str:
    """A reason after a colon: a finding's title used as one starts in lower case there
    ("could not determine …"), an acronym stays ("NVML lists no GPU")."""
    return reason[0].lower() + reason[1:] if reason[1:2].islower() else reason


def _finding(finding: Finding, width: int, marks: Marks) -> list[str]:
    lines = _wrap(
        f"  {marks.of(finding.severity)} {finding.title}  [{finding.code}]", width, "    "
    )
    for label, value in finding.evidence:
        value_lines = value.splitlines() or [""]
        lines.extend(_wrap(f"      {label}: {value_lines[0]}", width, "        "))
        for extra in value_lines[1:]:
            lines.extend(_wrap(f"        {extra}", width, "        "))
    fix = finding.remediation
    if fix is not None:
        flags = [
            f
            for f, on in (("needs root", fix.needs_root), ("needs a reboot", fix.needs_reboot))
            if on
        ]
        suffix = f"  ({', '.join(flags)})" if flags else ""
        lines.extend(_wrap(f"    fix: {fix.summary}{suffix}", width, "         "))
        for number, step in enumerate(fix.steps, 1):
            lines.extend(_wrap(f"      {number}. {step}", width, "         "))
    return lines


def _wrap(text: str, width: int, indent: str) -> list[str]:
    stripped = text.lstrip(" ")
    lead = text[: len(text) - len(stripped)]
    return textwrap.wrap(
        stripped,
        width=width,
        initial_indent=lead,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [lead]


def _counts(report: Report) -> str:
    parts = []
    for severity, noun in (
        (Severity.ERROR, "error"),
        (Severity.WARNING, "warning"),
        (Severity.INFO, "note"),
    ):
        n = sum(1 for f in report.findings if f.severity == severity)
        if n:
            parts.append(plural(n, noun))
    return ", ".join(parts) or "no problems found"


def _verdict(report: Report) -> str:
    return {
        "healthy": "healthy",
        "unhealthy": "UNHEALTHY",
        "unknown": "could not determine",
    }[report.status]


def _summary_line(report: Report) -> str:
    return f"Result: {_verdict(report)} — {_counts(report)} (exit {report.exit_code})"
