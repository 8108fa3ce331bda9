"""`envdoctor collect`: write every fact of this machine to a redacted, versioned snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import facts_for

# ruff: noqa: UP045  (Typer reads Optional[...] at runtime)


def collect(
    ctx: typer.Context,
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write here (default: stdout)."
    ),
    python: Optional[str] = typer.Option(
        None, "--python", help="Interpreter whose torch to inspect."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Global time budget in seconds."),
    no_redact: bool = typer.Option(
        False, "--no-redact", help="Keep hostname, user name and GPU UUIDs."
    ),
) -> None:
    """Probe this machine and write all facts as JSON (see docs/snapshot.md)."""
    with boundary():
        from envdoctor.snapshot import dump_snapshot
        from envdoctor.terminal import safe_line

        facts = facts_for(ctx, python=python, timeout=timeout)
        text = dump_snapshot(facts, redact=not no_redact)
        if output is None:
            typer.echo(text, nl=False)
            return
        from envdoctor.render.files import write_atomic

        write_atomic(output, text, private=no_redact)  # unredacted: 0600
        typer.echo(safe_line(f"wrote {output}"), err=True)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect)
