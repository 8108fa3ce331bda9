"""`envdoctor recommend`: the torch install command that fits this machine's driver and GPUs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import Expect, app_context, expect_option, facts_for, intent_for
from envdoctor.compat import load_tables
from envdoctor.compat.recommend import machine_from_facts, recommend, render_text, to_json
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import json_document, safe_text


def recommend_command(
    ctx: typer.Context,
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot", help="Recommend for the machine in a snapshot (envdoctor collect)."
        ),
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option("--torch", help="Pin a torch release: 2.11, 2.11.0 or 2.11.0+cu128."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
    tables_dir: Annotated[
        Path | None,
        typer.Option("--tables", help="Extra tables that extend or override the shipped ones."),
    ] = None,
    expect: Expect | None = expect_option(),
) -> None:
    """The best official torch wheel for this driver and these GPUs, why, and what would not work.

    Exit 0 when a wheel fits (the CPU build only on a machine without NVIDIA GPUs), 1 when none
    does or the driver must be fixed first (NVML cannot list the GPUs), 2 on errors.
    """
    with boundary():
        if torch is not None:
            _check_pin(torch)
        env = app_context(ctx).get_host().env()
        tables = load_tables(str(tables_dir) if tables_dir else None, env)
        intent = intent_for(ctx, expect)
        facts = facts_for(ctx, snapshot=snapshot, torch_version_only=True)
        rec = recommend(tables, machine_from_facts(facts, tables, intent), pin=torch)
        if as_json:
            typer.echo(json_document(to_json(tables, rec)), nl=False)
        else:
            typer.echo(safe_text(render_text(tables, rec)), nl=False)
    raise typer.Exit(rec.exit_code)


# 2.11, 2.11.0, 2.11.0+cu128, 2.12.0rc1: a torch release as pip spells it, with numbers of a
# sane size (a 5000-digit "release" is a usage error, not an internal one).
_PIN = re.compile(
    r"[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?((a|b|rc)[0-9]{1,6})?(\+[A-Za-z0-9.]{1,32})?"
)


def _check_pin(pin: str) -> None:
    if not _PIN.fullmatch(pin):
        shown = pin if len(pin) <= 40 else pin[:40] + "…"
        raise EnvdoctorError(
            f"--torch {shown!r} is not a torch release",
            hint="write 2.11, 2.11.0 or 2.11.0+cu128",
        )


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_command)
