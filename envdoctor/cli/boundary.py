"""The one place that turns errors into messages and exit codes.

Exit codes: 0 healthy, 1 unhealthy, 2 could not determine or usage error. Set
``ENVDOCTOR_DEBUG=1`` to see the traceback of an internal error instead of one line.

A failed write to stdout is no internal error: a reader that went away (``| head``) ends the
command quietly, a full disk is one line; both exit 2. Typer is imported only inside
``boundary()``: ``envdoctor probe`` shares the helpers below and must start without it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator

from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import safe_line

EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_UNKNOWN = 2


class OutputError(EnvdoctorError):
    """The output could not be written to stdout; ``quiet`` when its reader went away."""

    def __init__(self, reason: str, *, quiet: bool = False) -> None:
        super().__init__(f"cannot write the output: {reason}")
        self.quiet = quiet

    @classmethod
    def from_os_error(cls, exc: OSError) -> OutputError:
        return cls(exc.strerror or str(exc), quiet=isinstance(exc, BrokenPipeError))


@contextlib.contextmanager
def boundary() -> Iterator[None]:
    """Wrap a command body: expected errors and crashes become one line on stderr and exit 2."""
    import typer  # loaded already: every caller is a Typer command

    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except EnvdoctorError as exc:
        report_error(exc)
        raise typer.Exit(EXIT_UNKNOWN) from None
    except KeyboardInterrupt:
        say("envdoctor: interrupted")
        raise typer.Exit(130) from None
    except Exception as exc:
        failed = stdout_failure(exc)
        if failed is not None:
            report_error(failed)
            raise typer.Exit(EXIT_UNKNOWN) from None
        if os.environ.get("ENVDOCTOR_DEBUG"):
            raise
        say(
            f"envdoctor: internal error: {type(exc).__name__}: {exc} "
            "(set ENVDOCTOR_DEBUG=1 for the traceback and report it)"
        )
        raise typer.Exit(EXIT_UNKNOWN) from None


def report_error(exc: EnvdoctorError) -> None:
    """The error's one line on stderr; after a failed write to stdout, also silence stdout."""
    if isinstance(exc, OutputError):
        silence_stdout()
        if exc.quiet:
            return  # the reader went away (`| head`): nobody is left to tell
    say(f"envdoctor: error: {exc.one_line()}")


def say(line: str) -> None:
    """One line on stderr, if there is a stderr that still takes it (``2>&-`` leaves none).

    Terminal-safe: error messages name files, commands and values that anyone may have written.
    """
    stream = sys.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a broken stderr: nothing left to tell
        stream.write(safe_line(line) + "\n")
        stream.flush()


def stdout_failure(exc: BaseException) -> OutputError | None:
    """``exc`` as an ``OutputError`` when it is a failed write to stdout, else None.

    A failed write raises no file name (``open`` and ``stat`` do), and the code that wrote
    holds the stream: ``click.echo``'s ``file``, ``json.dump``'s ``fp``. So: an ``OSError``
    without a file name, raised where a frame of its traceback holds stdout, or a text wrapper
    over stdout's buffer (click makes one when stdout's encoding is misconfigured).
    """
    stdout = sys.stdout
    if not isinstance(exc, OSError) or exc.filename is not None or stdout is None:
        return None
    buffer = getattr(stdout, "buffer", None)
    tb = exc.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if value is stdout or (
                buffer is not None
                and isinstance(value, io.TextIOWrapper)
                and value.buffer is buffer
            ):
                return OutputError.from_os_error(exc)
        tb = tb.tb_next
    return None


def silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null.

    What the failed write left in stdout's buffer is flushed again when the interpreter exits;
    on the broken descriptor that prints "Exception ignored … BrokenPipeError" (or ENOSPC) after
    our one line. The usual cure (see the Python docs on SIGPIPE) is to give it a harmless target.
    """
    stream = sys.stdout
    if stream is None:
        return
    # A stream without a descriptor (a test runner's buffer) cannot fail at exit: leave it be.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
