"""`envdoctor check`: probe, judge, report, and exit 0 / 1 / 2."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import (
    Invocation,
    facts_for,
    intent_for,
    output_format,
    tables_of,
    target_python,
    text_width,
    unicode_out,
    write_report,
)
from envdoctor.errors import EnvdoctorError

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables
    from envdoctor.engine import Report
    from envdoctor.rules.base import Rule


def run(inv: Invocation) -> int:
    from envdoctor.rules import all_rules

    args = inv.args
    if args.flag("list_checks"):
        emit(
            "".join(
                f"{rule.name:<28} {rule.summary}  [{', '.join(rule.codes)}]\n"
                for rule in all_rules()
            )
        )
        return exitcodes.HEALTHY
    snapshot = args.path("snapshot")
    if snapshot is not None:
        _snapshot_only(deep=args.flag("deep"), python=args.text("python"))
    start = time.monotonic()
    fmt = output_format(inv)
    spec_rules: tuple[Rule, ...] = ()
    spec_gpus = False
    spec = args.path("spec")
    if spec is not None:
        from envdoctor.fleet.spec import load_spec, spec_lists_gpus, spec_rule

        node_spec = load_spec(spec)
        spec_rules = (spec_rule(node_spec),)
        spec_gpus = spec_lists_gpus(node_spec)
    intent = intent_for(inv, spec_gpus=spec_gpus)
    timeout = args.number("timeout")
    tables: list[CompatTables] = []

    def load() -> None:
        """The rules, the judge and the tables: read while the torch child starts."""
        import envdoctor.engine  # noqa: F401 (its import is the work: evaluate comes below)

        all_rules()  # cached: the call below is free
        tables.append(tables_of(inv))

    facts = facts_for(inv, snapshot=snapshot, timeout=timeout, meanwhile=load)
    from envdoctor.engine import evaluate

    if not tables:  # a tier that has no torch child to overlap never calls it
        load()
    rules = (*all_rules(), *spec_rules)
    report = evaluate(facts, rules, tables[0], strict=args.flag("strict"), intent=intent)
    if args.flag("deep"):
        report = _with_smoke(report, target_python(inv), timeout)
    if fmt == "prometheus":
        from envdoctor.render.prometheus import render_prometheus

        text = render_prometheus(report, time.monotonic() - start)
    else:
        origin = str(snapshot) if snapshot is not None else None
        text = render(report, fmt, verbose=args.flag("verbose"), snapshot=origin)
    write_report(inv, text, paint=_colour if fmt == "text" else None)
    return report.exit_code


def _snapshot_only(*, deep: bool, python: str | None) -> None:
    """A snapshot is another machine's facts: options that act on this machine would mix them in
    (``--deep`` ran this machine's GPUs into the snapshot's report; ``--python`` was ignored)."""
    if deep:
        raise EnvdoctorError(
            "--deep cannot be used with --snapshot: the smoke tests need the live machine",
            hint="run `envdoctor check --deep` on the machine itself",
        )
    if python is not None:
        raise EnvdoctorError(
            "--python cannot be used with --snapshot: the snapshot already holds the torch "
            "of the interpreter it was collected for",
            hint="choose it when collecting: `envdoctor collect --python PATH`",
        )


def _with_smoke(report: Report, python: str, timeout: float) -> Report:
    """The report plus the smoke kernels' findings (run in child processes, per GPU). On a
    machine that needs no GPU (no NVIDIA device or driver, none expected) they do not apply: a
    note, and the exit code stays what `check` gives (it was 2, "could not determine")."""
    from envdoctor.cli.progress import Progress, SmokeSteps
    from envdoctor.model.views import machine_view
    from envdoctor.smoke import deep_findings, not_applicable_finding

    machine = machine_view(report.facts, report.intent)
    if not machine.gpu_required:
        note = not_applicable_finding(machine.why_no_gpu())
        return replace(report, findings=(*report.findings, note))

    steps = SmokeSteps()  # which GPU is at which step, on a terminal's stderr
    with Progress(steps.describe):
        deep = deep_findings(report.facts, python=python, timeout=timeout, on_step=steps)
    findings = (*report.findings, *deep)
    ordered = tuple(sorted(findings, key=lambda f: (-f.severity, f.code, f.subject)))
    return replace(report, findings=ordered)


def _colour(text: str) -> str:
    from envdoctor.render.text import colour_report

    return colour_report(text)


def render(report: Report, fmt: str, *, verbose: bool = False, snapshot: str | None = None) -> str:
    """The report in ``fmt`` ("text", "json", "markdown"); ``snapshot``: the file the facts
    were read from (the text and Markdown headers name it)."""
    if fmt == "json":
        from envdoctor.render.report_json import report_to_json
        from envdoctor.terminal import json_document

        return json_document(report_to_json(report))
    if fmt == "markdown":
        from envdoctor.render.markdown import render_markdown

        return render_markdown(report, snapshot=snapshot)
    from envdoctor.render.text import ASCII, UNICODE, render_text

    marks = UNICODE if unicode_out() else ASCII
    return render_text(report, width=text_width(), marks=marks, verbose=verbose, snapshot=snapshot)
