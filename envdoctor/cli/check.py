"""`envdoctor check`: probe, judge, report, and exit 0 / 1 / 2."""

from __future__ import annotations

import dataclasses
import enum
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import Expect, app_context, expect_option, facts_for, intent_for
from envdoctor.errors import EnvdoctorError

if TYPE_CHECKING:
    from envdoctor.engine import Report

# Typer needs the runtime Optional[...] spelling on Python 3.9-compatible signatures.
# ruff: noqa: UP045


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    prometheus = "prometheus"


def check(
    ctx: typer.Context,
    output_format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    as_json: bool = typer.Option(False, "--json", help="Shortcut for --format json."),
    python: Optional[str] = typer.Option(
        None,
        "--python",
        help="Interpreter whose torch to inspect (default: this one; not with --snapshot).",
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Global time budget in seconds."),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    snapshot: Optional[Path] = typer.Option(
        None,
        "--snapshot",
        help="Diagnose a snapshot from `envdoctor collect` instead of this machine.",
    ),
    list_checks: bool = typer.Option(
        False, "--list-checks", help="List every check and its codes."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also list every check that passed."
    ),
    tables: Optional[Path] = typer.Option(
        None,
        "--tables",
        help="Extra compatibility tables (extend/override; also ENVDOCTOR_TABLES).",
    ),
    deep: bool = typer.Option(
        False,
        "--deep",
        help="Also run the smoke kernels (CUDA, cuBLAS, cuDNN) on every GPU (not with --snapshot).",
    ),
    spec: Optional[Path] = typer.Option(
        None, "--spec", help="Baseline from `envdoctor spec init`: every drift is a finding."
    ),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the report here (atomically) instead of stdout."
    ),
    expect: Optional[Expect] = expect_option(),
) -> None:
    """Diagnose this machine (or a snapshot): driver, GPUs, CUDA libraries, torch, environment."""
    with boundary():
        from envdoctor.compat import load_tables
        from envdoctor.engine import evaluate
        from envdoctor.rules import ALL_RULES

        if list_checks:
            for rule in ALL_RULES:
                typer.echo(f"{rule.name:<28} {rule.summary}  [{', '.join(rule.codes)}]")
            raise typer.Exit(0)
        if snapshot is not None:
            _snapshot_only(deep=deep, python=python)
        start = time.monotonic()
        fmt = Format.json if as_json else output_format
        rules = tuple(ALL_RULES)
        spec_gpus = False
        if spec is not None:
            from envdoctor.fleet.spec import load_spec, spec_lists_gpus, spec_rule

            node_spec = load_spec(spec)
            rules = (*rules, spec_rule(node_spec))
            spec_gpus = spec_lists_gpus(node_spec)
        intent = intent_for(ctx, expect, spec_gpus=spec_gpus)
        facts = facts_for(ctx, snapshot=snapshot, python=python, timeout=timeout)
        env = app_context(ctx).get_host().env()
        compat = load_tables(extra_dir=str(tables) if tables else None, env=env)
        report = evaluate(facts, rules, compat, strict=strict, intent=intent)
        if deep:
            report = _with_smoke(report, python or app_context(ctx).python, timeout)
        if fmt is Format.prometheus:
            from envdoctor.render.prometheus import render_prometheus

            text = render_prometheus(report, time.monotonic() - start)
        else:
            text = _render(report, fmt, verbose=verbose)
        _emit(text, output)
        raise typer.Exit(report.exit_code)


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
    """The report plus the smoke kernels' findings (run in child processes, per GPU)."""
    from envdoctor.smoke import deep_findings

    findings = (*report.findings, *deep_findings(report.facts, python=python, timeout=timeout))
    ordered = tuple(sorted(findings, key=lambda f: (-f.severity, f.code, f.subject)))
    return dataclasses.replace(report, findings=ordered)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    from envdoctor.render.files import write_atomic

    write_atomic(output, text)


def _render(report: Report, fmt: Format, *, verbose: bool = False) -> str:
    if fmt is Format.json:
        from envdoctor.render.report_json import report_to_json
        from envdoctor.terminal import json_document

        return json_document(report_to_json(report))
    if fmt is Format.markdown:
        from envdoctor.render.markdown import render_markdown

        return render_markdown(report)
    from envdoctor.render.text import ASCII, UNICODE, render_text

    encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
    marks = UNICODE if "utf" in encoding else ASCII
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    return render_text(report, width=width, marks=marks, verbose=verbose)


def register(app: typer.Typer) -> None:
    app.command("check")(check)
