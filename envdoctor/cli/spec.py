"""``envdoctor spec init``: write this machine's expected state as a node spec (YAML).

Like NHC's ``nhc-genconf``, but for the whole stack: GPU count and model, persistence mode, ECC,
MIG layout, driver branch, the CUDA version it supports, and the torch and cuDNN versions.
``envdoctor check --spec node.yaml`` then reports every drift as a ``spec.*`` finding.
``envdoctor spec validate node.yaml`` checks a hand-edited spec without probing anything.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import facts_for
from envdoctor.terminal import safe_line

# ruff: noqa: UP045  (Typer reads Optional[...] at runtime)

spec_app = typer.Typer(
    name="spec",
    help="Node specs (baselines): write one from this machine, or validate one.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@spec_app.command("init")
def init(
    ctx: typer.Context,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", metavar="FILE", help="Write here (default: stdout)."),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option(
            metavar="PYTHON", help="Interpreter whose torch to record (default: this one)."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Global time budget in seconds.")
    ] = 30.0,
    snapshot: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE", help="Write the spec of a snapshot (envdoctor collect) instead."
        ),
    ] = None,
    no_torch: Annotated[
        bool, typer.Option("--no-torch", help="Do not record (or probe) torch and cuDNN.")
    ] = False,
) -> None:
    """Write the spec this machine meets now (review it, then use it with check --spec)."""
    with boundary():
        from envdoctor.fleet.spec import dump_spec, spec_from_facts  # imported late: fast --help
        from envdoctor.model.probed import Found

        facts = facts_for(
            ctx, snapshot=snapshot, python=python, timeout=timeout, include_torch=not no_torch
        )
        spec, notes = spec_from_facts(facts)
        if no_torch:
            spec = dataclasses.replace(spec, torch_version=None, cudnn=None)
            notes = tuple(n for n in notes if not n.startswith("torch"))
        hostname = facts.host.hostname.value if isinstance(facts.host.hostname, Found) else ""
        text = dump_spec(spec, hostname=hostname, created=facts.collected_at, notes=notes)
        for note in notes:
            typer.echo(safe_line(f"envdoctor: not recorded: {note}"), err=True)
        if output is None:
            typer.echo(text, nl=False)
            return
        from envdoctor.render.files import write_atomic

        write_atomic(output, text)
        typer.echo(safe_line(f"wrote {output}"), err=True)


@spec_app.command("validate")
def validate(
    path: Annotated[Path, typer.Argument(help="The spec file to read.")],
) -> None:
    """Check that a spec file is well formed (exit 0), or say what is wrong and where (exit 2)."""
    with boundary():
        from envdoctor.fleet.spec import load_spec

        spec = load_spec(path)
        checked = [
            f.name
            for f in dataclasses.fields(spec)
            if f.name != "source" and getattr(spec, f.name) is not None
        ]
        typer.echo(safe_line(f"{path}: valid; checks {', '.join(checked) or 'nothing'}"))


def register(app: typer.Typer) -> None:
    app.add_typer(spec_app, name="spec")
