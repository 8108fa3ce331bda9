"""`envdoctor check`: probe, judge, report, and exit 0 / 1 / 2."""

from __future__ import annotations

import enum
import json
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import app_context, facts_for

# Typer needs the runtime Optional[...] spelling on Python 3.9-compatible signatures.
# ruff: noqa: UP045


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def check(
    ctx: typer.Context,
    output_format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    as_json: bool = typer.Option(False, "--json", help="Shortcut for --format json."),
    python: Optional[str] = typer.Option(
        None, "--python", help="Interpreter whose torch to inspect (default: this one)."
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
        None, "--tables", help="Extra compatibility tables (extend/override; also ENVDOCTOR_TABLES)."
    ),
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
        fmt = Format.json if as_json else output_format
        facts = facts_for(ctx, snapshot=snapshot, python=python, timeout=timeout)
        env = app_context(ctx).get_host().env()
        compat = load_tables(extra_dir=str(tables) if tables else None, env=env)
        report = evaluate(facts, ALL_RULES, compat, strict=strict)
        typer.echo(_render(report, fmt, verbose=verbose), nl=False)
        raise typer.Exit(report.exit_code)


def _render(report: object, fmt: Format, *, verbose: bool = False) -> str:
    from envdoctor.engine import Report

    assert isinstance(report, Report)
    if fmt is Format.json:
        from envdoctor.render.report_json import report_to_json

        return json.dumps(report_to_json(report), indent=2, ensure_ascii=False) + "\n"
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
