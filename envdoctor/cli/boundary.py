"""The one place that turns errors into messages and exit codes.

Exit codes: 0 healthy, 1 unhealthy, 2 could not determine or usage error. Set
``ENVDOCTOR_DEBUG=1`` to see the traceback of an internal error instead of one line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from envdoctor.errors import EnvdoctorError

EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_UNKNOWN = 2


@contextmanager
def boundary() -> Iterator[None]:
    """Wrap a command body: expected errors and crashes become one line on stderr and exit 2."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except EnvdoctorError as exc:
        typer.echo(f"envdoctor: error: {exc.one_line()}", err=True)
        raise typer.Exit(EXIT_UNKNOWN) from None
    except KeyboardInterrupt:
        typer.echo("envdoctor: interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:
        if os.environ.get("ENVDOCTOR_DEBUG"):
            raise
        typer.echo(
            f"envdoctor: internal error: {type(exc).__name__}: {exc} "
            "(set ENVDOCTOR_DEBUG=1 for the traceback and report it)",
            err=True,
        )
        raise typer.Exit(EXIT_UNKNOWN) from None
