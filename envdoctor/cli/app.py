"""The Typer application. Each command lives in its own module with a ``register(app)``."""

from __future__ import annotations

import importlib

import typer

from envdoctor import __version__

app = typer.Typer(
    name="envdoctor",
    help="The doctor for GPU machines that run PyTorch: why it is broken and what to run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Command modules, in the order `--help` lists them. Each defines register(app).
COMMAND_MODULES = (
    "envdoctor.cli.check",
    "envdoctor.cli.collect",
    "envdoctor.cli.recommend",
    "envdoctor.cli.tables",
    "envdoctor.cli.fix",
    "envdoctor.cli.probe",
    "envdoctor.cli.spec",
    "envdoctor.cli.diff",
    "envdoctor.cli.slurm",
    "envdoctor.cli.smoke",
    "envdoctor.cli.explain",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envdoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """The doctor for GPU machines that run PyTorch."""


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    """Console-script entry point.

    ``--help``, ``--version`` and Typer's usage errors write outside every command's
    ``boundary()``: a failed write there gets the same treatment (one line or silence, exit 2).
    """
    import sys

    from envdoctor.cli.boundary import EXIT_UNKNOWN, report_error, stdout_failure

    stdout = sys.stdout
    try:
        app(prog_name="envdoctor")
    except OSError as exc:
        failed = stdout_failure(exc)
        if failed is None:
            raise
        report_error(failed)
        sys.exit(EXIT_UNKNOWN)
    except SystemExit as done:
        # Typer answers a broken pipe itself: it wraps sys.stdout (so that the exit's flush
        # stays quiet) and exits 1, which here would read "unhealthy".
        if done.code == 1 and sys.stdout is not stdout:
            sys.exit(EXIT_UNKNOWN)
        raise
