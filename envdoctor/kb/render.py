"""Print an Explanation: text for a terminal, JSON for tools, Markdown for a bug report."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from envdoctor import __version__
from envdoctor.envelope import HEALTHY, UNHEALTHY, envelope
from envdoctor.kb.model import CONFIDENT, Cause, Explanation, Verdict
from envdoctor.model.units import binary_size, plural
from envdoctor.terminal import json_document, safe_text

WIDTH = 100
MAX_EXCERPTS = 3
TAIL_LINES = 8


def render(
    explanation: Explanation,
    fmt: str,
    *,
    stderr_tail: str = "",
    verbose: bool = False,
    with_host: bool = False,
) -> str:
    """``verbose`` adds each cause's generic explanation to the text; ``with_host``: the live
    checks ran, so the conclusion says what they found for this machine (also when none
    applied)."""
    if fmt == "json":
        return render_json(explanation, stderr_tail=stderr_tail, with_host=with_host)
    if fmt == "markdown":
        return render_markdown(explanation, stderr_tail=stderr_tail)
    return render_text(explanation, stderr_tail=stderr_tail, verbose=verbose, with_host=with_host)


# --- text ---------------------------------------------------------------------------------


def _wrap(text: str, indent: str, width: int = WIDTH, hang: int = 0) -> list[str]:
    """Wrap ``text`` at ``width``; continuation lines are indented ``hang`` more."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + " " * hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


# The first word of a shell command in a fix step's backticks; anything else there is code or a
# value (`torch.no_grad()`, `--ipc=host`, `cuda:0`), which the step's text already shows.
_PROGRAMS = frozenset(
    [
        "apptainer",
        "apt",
        "apt-get",
        "apt-mark",
        "cat",
        "conda",
        "dkms",
        "df",
        "docker",
        "dpkg",
        "echo",
        "envdoctor",
        "export",
        "grep",
        "ip",
        "journalctl",
        "kubectl",
        "ldconfig",
        "ls",
        "lsmod",
        "lsof",
        "lspci",
        "modinfo",
        "modprobe",
        "nvcc",
        "nvidia-bug-report.sh",
        "nvidia-ctk",
        "nvidia-modprobe",
        "nvidia-smi",
        "nvidia-container-cli",
        "pgrep",
        "pip",
        "pip3",
        "podman",
        "printf",
        "python",
        "python3",
        "rmmod",
        "set",
        "singularity",
        "sudo",
        "systemctl",
        "tegrastats",
        "torchrun",
        "uname",
        "wsl",
        "compute-sanitizer",
        "nvidia-persistenced",
        "dnf",
        "yum",
        "update-initramfs",
        "mokutil",
        "dmesg",
    ]
)
_TICKS = re.compile(r"`([^`]+)`")
_ASSIGN = re.compile(r"[A-Z][A-Z0-9_]*=\S+$")


def commands(step: str) -> list[str]:
    """The shell commands a fix step names in backticks, in order (an environment setting such
    as `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` counts: it is exported)."""
    out: list[str] = []
    for span in _TICKS.findall(step):
        words = span.split()
        if not words:
            continue
        if words[0] in _PROGRAMS:
            out.append(span)
        elif len(words) == 1 and _ASSIGN.match(span):
            out.append(f"export {span}")
    return out


def _percent(value: float) -> str:
    return f"{round(value * 100)}%"


def _where(cause: Cause) -> str:
    hit = cause.hit
    more = f" (+{hit.count - 1} more, last line {hit.last_line})" if hit.count > 1 else ""
    return f"line {hit.first_line}{more}"


def _headline(explanation: Explanation) -> str:
    scan = explanation.scan
    size = f"{plural(scan.lines, 'line')}, {binary_size(scan.bytes)}"
    status = explanation.status
    if status == "no-signature":
        verdict = "no known signature"
    elif status == "possible":
        verdict = "no confident cause; possible causes below"
    else:
        roots = [c for c in explanation.causes if c.is_root and c.confidence >= CONFIDENT]
        verdict = f"{plural(len(roots), 'cause')} found"
    return f"envdoctor explain: {explanation.source} ({size}) — {verdict}"


def _host_line(cause: Cause) -> str:
    """What ``--with-host`` found for the top cause on this machine, in one line."""
    checks = cause.host_checks
    for verdict, word in (
        (Verdict.RULES_OUT, "ruled out now"),
        (Verdict.CONFIRMS, "confirmed"),
    ):
        hit = next((c for c in checks if c.verdict is verdict), None)
        if hit is not None:
            return f"on this machine: {word} — {hit.note}"
    if checks:
        return f"on this machine: not decided — {checks[0].note}"
    return "on this machine: nothing envdoctor can check decides this cause"


def conclusion(explanation: Explanation, *, with_host: bool = False) -> list[str]:
    """The answer in one or two lines: the top cause for this log and where it is, and with the
    live checks, what they say of this machine. Empty when nothing is known."""
    top = explanation.top
    if top is None:
        return []
    where = f"line {top.hit.first_line}"
    if explanation.status == "explained":
        first = f"✗ {top.summary} ({where})"
    else:
        first = f"? possibly: {top.summary} ({where}; confidence {_percent(top.confidence)})"
    lines = [first]
    if with_host:
        lines.append(_host_line(top))
    return lines


def _harmless_text(explanation: Explanation) -> list[str]:
    """The lines a benign signature read, said to be harmless (and what would make them not)."""
    if not explanation.harmless:
        return []
    out = ["", "Harmless here (the program printed it and went on):"]
    for cause in explanation.harmless:
        out.extend(_wrap(f"· {cause.summary} ({_where(cause)})", "  ", hang=2))
        if cause.hit.occurrences:
            out.extend(_wrap(f"│ {cause.hit.occurrences[0].text}", "    ", hang=2))
        for note in cause.notes:
            out.extend(_wrap(note, "    ", hang=0))
        for step in cause.signature.fix[:1]:
            out.extend(_wrap(step, "    ", hang=0))
    return out


def render_text(
    explanation: Explanation,
    *,
    stderr_tail: str = "",
    verbose: bool = False,
    with_host: bool = False,
) -> str:
    out: list[str] = []
    for i, line in enumerate(conclusion(explanation, with_host=with_host)):
        out.extend(_wrap(line, "  " if i else "", hang=2))
    if out:
        out.append("")
    out.append(_headline(explanation))
    scan = explanation.scan
    if scan.binary:
        out.append("  note: the input looks binary (NUL bytes); it was scanned as text anyway")
    elif scan.undecodable:
        out.append("  note: some bytes are not UTF-8; they were replaced, not skipped")
    if scan.incomplete:
        out.append(f"  note: read only up to line {scan.lines:,}: {scan.incomplete}")
    if scan.truncated_lines:
        n = scan.truncated_lines
        out.append(
            f"  note: {plural(n, 'line')} longer than 1 MiB (binary data or output "
            "without newlines) scanned in 1 MiB pieces; a match across a cut may be missed"
        )
    if not explanation.causes:
        out.append("")
        out.extend(
            _wrap(
                "None of envdoctor's error signatures occurs in this log, so it cannot name a "
                "cause. If a run failed, its error may be cut off or printed elsewhere (stdout "
                "vs stderr, another rank's log, the kernel log: `sudo dmesg`).",
                "  ",
            )
        )
        out.extend(_harmless_text(explanation))
        out.extend(_tail_text(stderr_tail))
        return safe_text("\n".join(out) + "\n")  # log lines and file names are untrusted
    roots = [c for c in explanation.causes if c.is_root]
    consequences = [c for c in explanation.causes if not c.is_root]
    for cause in roots:
        out.append("")
        out.extend(_cause_text(cause, explanation, verbose=verbose))
    if consequences:
        out.append("")
        out.append("Consequences (explained by a cause above):")
        for cause in consequences:
            first = cause.hit.occurrences[0].text if cause.hit.occurrences else ""
            out.extend(
                _wrap(f"· {cause.id} ({_where(cause)}) ← {cause.consequence_of}", "  ", hang=2)
            )
            if first:
                out.extend(_wrap(f"│ {first}", "    ", hang=2))
    out.extend(_harmless_text(explanation))
    if explanation.status != "explained":
        out.extend(_tail_text(stderr_tail))
    if not verbose:
        out.append("")
        out.append("(why each cause happens: the same command with -v)")
    return safe_text("\n".join(out) + "\n")


def _fix_text(fix: tuple[str, ...]) -> list[str]:
    """The fix steps, each followed by the commands it names, one per line, ready to copy."""
    lines = ["  fix:"]
    for number, step in enumerate(fix, start=1):
        lines.extend(_wrap(f"{number}. {step}", "    ", hang=3))
        lines.extend(f"       $ {command}" for command in commands(step))
    return lines


def _cause_text(cause: Cause, explanation: Explanation, *, verbose: bool = False) -> list[str]:
    mark = "✗" if cause.confidence >= CONFIDENT else "?"
    sig = cause.signature
    lines = _wrap(
        f"{mark} {cause.summary}  [{cause.id}, confidence {_percent(cause.confidence)}]", "", hang=2
    )
    lines.extend(_wrap(f"seen at {_where(cause)}:", "  "))
    for occurrence in cause.hit.occurrences[:MAX_EXCERPTS]:
        lines.extend(_wrap(f"{occurrence.line:>7} │ {occurrence.text}", "  ", hang=10))
    if cause.alternatives:
        lines.extend(
            _wrap(f"other possible cause on the same line: {', '.join(cause.alternatives)}", "  ")
        )
    explained = [c.id for c in explanation.causes if c.consequence_of == cause.id]
    if explained:
        lines.extend(_wrap(f"explains: {', '.join(explained)}", "  "))
    for note in cause.notes:
        lines.extend(_wrap(f"note: {note}", "  ", hang=2))
    for check in cause.host_checks:
        lines.extend(
            _wrap(f"host ({check.name}, {check.verdict.value}): {check.note}", "  ", hang=2)
        )
        for label, value in check.evidence:
            lines.extend(_wrap(f"{label}: {value}", "    "))
    lines.extend(_fix_text(sig.fix))
    if verbose:
        lines.append("  why:")
        for paragraph in sig.explanation.split("\n\n"):
            lines.extend(_wrap(" ".join(paragraph.split()), "    "))
    if sig.see_also:
        lines.extend(_wrap(f"see also (envdoctor check): {', '.join(sig.see_also)}", "  "))
    return lines


def _tail_text(stderr_tail: str) -> list[str]:
    tail = [line for line in stderr_tail.splitlines() if line.strip()][-TAIL_LINES:]
    if not tail:
        return []
    return ["", "Last lines of stderr:", *(f"  │ {line}" for line in tail)]


COLOURS = (
    (
        r"envdoctor explain: .* — (?:(\d[\d,]* causes? found)|(no known signature)|(no confident "
        r"cause; possible causes below))$",
        ("error", "ok", "warning"),
    ),
    (r"(?:(✗)|(\?)) ", ("error", "warning")),  # a cause, confident or possible
    (r"  (why:|fix:)$", ("bold",)),
    (r"(Consequences \(explained by a cause above\):|Last lines of stderr:)$", ("bold",)),
    (r"  (note:) ", ("dim",)),
)
"""Where an explanation's text takes colour (``explain``, and ``run`` on stderr)."""


def colour_text(text: str) -> str:
    """The text ``render_text`` made, coloured for a terminal."""
    from envdoctor.colour import paint

    return paint(text, COLOURS)


# --- json ---------------------------------------------------------------------------------


def explain_payload(
    explanation: Explanation, *, stderr_tail: str = "", with_host: bool = False
) -> dict[str, Any]:
    """What explain and run both say of a log: the scan, its causes (``outcome`` is
    ``explanation.status``: explained, possible or no-signature)."""
    scan = explanation.scan
    data: dict[str, Any] = {
        "source": explanation.source,
        "outcome": explanation.status,
        "conclusion": conclusion(explanation, with_host=with_host),
        "lines": scan.lines,
        "bytes": scan.bytes,
        "binary": scan.binary,
        "undecodable": scan.undecodable,
        "truncated_lines": scan.truncated_lines,
        "causes": [_cause_data(c) for c in explanation.causes],
        "harmless": [_harmless_data(c) for c in explanation.harmless],
    }
    if stderr_tail:
        data["stderr_tail"] = stderr_tail
    return data


def to_data(
    explanation: Explanation, *, stderr_tail: str = "", with_host: bool = False
) -> dict[str, Any]:
    """``explain --format json`` (docs/schema/explain.schema.json)."""
    payload = explain_payload(explanation, stderr_tail=stderr_tail, with_host=with_host)
    return envelope("explain", payload, exit_code=explanation.exit_code)


def run_data(
    explanation: Explanation,
    *,
    command: list[str],
    returncode: int,
    signal: str | None,
    blocking: bool,
    stderr_tail: str,
    with_host: bool = False,
) -> dict[str, Any]:
    """``run --format json`` (docs/schema/run.schema.json): the process exits with the
    command's own code, so that is ``exit_code``; ``status`` is healthy when it succeeded."""
    payload = {
        **explain_payload(explanation, stderr_tail=stderr_tail, with_host=with_host),
        "command": command,
        "returncode": returncode,
        "signal": signal,
        "blocking": blocking,
    }
    status = HEALTHY if returncode == 0 else UNHEALTHY
    return envelope("run", payload, exit_code=returncode, status=status)


def _harmless_data(cause: Cause) -> dict[str, Any]:
    return {
        "id": cause.id,
        "summary": cause.summary,
        "notes": list(cause.notes),
        "count": cause.hit.count,
        "first_line": cause.hit.first_line,
        "occurrences": [{"line": o.line, "text": o.text} for o in cause.hit.occurrences],
        "fix": list(cause.signature.fix),
    }


def _cause_data(cause: Cause) -> dict[str, Any]:
    sig = cause.signature
    captures: dict[str, str] = {}
    for occurrence in cause.hit.occurrences:
        for key, value in occurrence.captures:
            captures.setdefault(key, value)
    return {
        "id": cause.id,
        "title": sig.title,
        "summary": cause.summary,
        "role": "root" if cause.is_root else "consequence",
        "consequence_of": cause.consequence_of,
        "confidence": cause.confidence,
        "count": cause.hit.count,
        "first_line": cause.hit.first_line,
        "last_line": cause.hit.last_line,
        "occurrences": [{"line": o.line, "text": o.text} for o in cause.hit.occurrences],
        "captures": captures,
        "alternatives": list(cause.alternatives),
        "explanation": " ".join(sig.explanation.split()),
        "fix": list(sig.fix),
        "commands": [command for step in sig.fix for command in commands(step)],
        "notes": list(cause.notes),
        "see_also": list(sig.see_also),
        "docs": list(sig.docs),
        "host_checks": [
            {
                "name": check.name,
                "verdict": check.verdict.value,
                "note": check.note,
                "evidence": [[label, value] for label, value in check.evidence],
            }
            for check in cause.host_checks
        ],
    }


def render_json(explanation: Explanation, *, stderr_tail: str = "", with_host: bool = False) -> str:
    return json_document(to_data(explanation, stderr_tail=stderr_tail, with_host=with_host))


# --- markdown -----------------------------------------------------------------------------

_HOME = re.compile(r"(/home/|/Users/|C:\\Users\\)([^/\\\s]+)")
_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")


def redact(text: str) -> str:
    """Hide user names in home paths and GPU UUIDs (for pasting into a public issue)."""
    text = _HOME.sub(lambda m: m.group(1) + "<user>", text)
    return _UUID.sub(lambda m: f"{m.group(1)}-<redacted>", text)


def render_markdown(explanation: Explanation, *, stderr_tail: str = "") -> str:
    out = [f"### {redact(_headline(explanation))}", ""]
    if not explanation.causes:
        out.append("No known error signature occurs in this log.")
    for cause in explanation.causes:
        sig = cause.signature
        role = "" if cause.is_root else f" — consequence of `{cause.consequence_of}`"
        out.append(
            f"#### `{cause.id}` ({_percent(cause.confidence)}){role}: {redact(cause.summary)}"
        )
        out.append("")
        out.append("```")
        out.extend(f"{o.line}: {redact(o.text)}" for o in cause.hit.occurrences[:MAX_EXCERPTS])
        out.append("```")
        if not cause.is_root:
            out.append("")
            continue
        out.append("")
        out.append(" ".join(sig.explanation.split()))
        out.extend(f"\n> {redact(note)}" for note in cause.notes)
        out.extend(
            f"\n- host `{check.name}` ({check.verdict.value}): {redact(check.note)}"
            for check in cause.host_checks
        )
        out.append("")
        out.append("**Fix:**")
        out.append("")
        out.extend(f"{n}. {step}" for n, step in enumerate(sig.fix, start=1))
        out.append("")
    tail = [line for line in stderr_tail.splitlines() if line.strip()][-TAIL_LINES:]
    if tail and explanation.status != "explained":
        out.extend(["Last lines of stderr:", "", "```", *(redact(t) for t in tail), "```", ""])
    out.append(f"<sub>envdoctor {__version__}</sub>")
    return safe_text("\n".join(out) + "\n")
