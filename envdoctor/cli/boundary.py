"""The one place that turns errors into messages and exit codes, for every command.

``guarded(body)`` runs a command: an ``EnvdoctorError`` (a bad option, an unreadable file) is
one line on stderr and exit 2; Ctrl-C is exit 130; anything else is an internal error, one line
and exit 2 (``ENVDOCTOR_DEBUG=1`` shows the traceback instead). ``emit`` is the one way output
reaches stdout: a failed write is no internal error, but an ``OutputError``: a reader that went
away (``| head``) ends the command quietly, a full disk is one line; both exit 2.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import safe_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO


class OutputError(EnvdoctorError):
    """The output could not be written to stdout; ``quiet`` when its reader went away."""

    def __init__(self, reason: str, *, quiet: bool = False) -> None:
        super().__init__(f"cannot write the output: {reason}")
        self.quiet = quiet

    @classmethod
    def from_os_error(cls, exc: OSError) -> OutputError:
        return cls(exc.strerror or str(exc), quiet=isinstance(exc, BrokenPipeError))


def guarded(body: Callable[[], int]) -> int:
    """``body()``'s exit code, or the exit code of what went wrong, said in one line."""
    try:
        return body()
    except EnvdoctorError as exc:
        report_error(exc)
        return exitcodes.UNKNOWN
    except KeyboardInterrupt:
        say("envdoctor: interrupted")
        return exitcodes.INTERRUPTED
    except Exception as exc:
        if os.environ.get("ENVDOCTOR_DEBUG"):
            raise
        say(
            f"envdoctor: internal error: {type(exc).__name__}: {safe_line(str(exc))} "
            "(set ENVDOCTOR_DEBUG=1 for the traceback and report it)"
        )
        return exitcodes.UNKNOWN


def emit(text: str, *, err: bool = False) -> None:
    """Write ``text`` to stdout (``err``: stderr) and flush.

    A failed write to stdout raises ``OutputError``; one to stderr is dropped (there is nobody
    left to tell).
    """
    if err:
        say_text(text)
    else:
        write_to(sys.stdout, text)


def write_to(stream: TextIO | None, text: str) -> None:
    """Write ``text`` to ``stream`` (stdout or the probe's) and flush; a failure (``| head``, a
    full disk, ``>&-``) is an ``OutputError``, not a crash."""
    if stream is None:
        raise OutputError("stdout is closed")
    try:
        stream.write(text)
        stream.flush()
    except OSError as exc:
        raise OutputError.from_os_error(exc) from None
    except ValueError:  # I/O on a closed file
        raise OutputError("stdout is closed") from None


def report_error(exc: EnvdoctorError) -> None:
    """The error's one line on stderr; after a failed write to stdout, also silence stdout."""
    if isinstance(exc, OutputError):
        silence_stdout()
        if exc.quiet:
            return  # the reader went away (`| head`): nobody is left to tell
    say(f"envdoctor: error: {safe_line(exc.one_line())}")


def say(line: str) -> None:
    """One line on stderr, if there is a stderr that still takes it (``2>&-`` leaves none)."""
    say_text(line + "\n")


def say_text(text: str) -> None:
    """``text`` on stderr and flushed; dropped when stderr is missing or broken (there is
    nobody left to tell)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def flush_std_streams() -> None:
    """Flush stdout and stderr before a hard exit (``os._exit`` flushes nothing). A stream the
    process was started without (``>&-``: None) or that is closed or broken is skipped: it must
    not keep the process alive."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        with contextlib.suppress(OSError, ValueError):  # closed or broken: nothing to flush
            stream.flush()


def silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null.

    What the failed write left in stdout's buffer is flushed again when the interpreter exits;
    on the broken descriptor that prints "Exception ignored … BrokenPipeError" (or ENOSPC) after
    our one line. The usual cure (see the Python docs on SIGPIPE) is to give it a harmless target.
    """
    stream = sys.stdout
    if stream is None:
        return
    # A stream without a descriptor (a test's capture) cannot fail at exit: leave it be.
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


# --- the command line ---------------------------------------------------------------------------


def run_click(command: Any, argv: list[str], app: object, *, completing: bool = False) -> int:
    """Run the click ``command`` (built by Typer from ``cli/app.py``) on ``argv``: the command's
    exit code; 0 after ``--help``/``--version``; a usage error is a line that says what is
    wrong, a line that says where help is, and exit 2; a group given no command (``envdoctor``
    alone) prints its help on stderr and exits 2. ``completing``: a completion script is asking
    (Typer answers and exits)."""
    from typer import Abort, Exit
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    from envdoctor.cli.usage import usage_error_text

    prog = command.name or "envdoctor"
    if completing:  # a completion script asking: Typer answers and exits
        try:
            command.main(argv, prog_name=prog, obj=app)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else exitcodes.HEALTHY
        return exitcodes.HEALTHY
    try:
        with command.make_context(prog, argv, obj=app) as ctx:
            code = command.invoke(ctx)
    except NoArgsIsHelpError as exc:
        say_text(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return exitcodes.UNKNOWN
    except UsageError as exc:
        say_text(usage_error_text(exc))
        return exitcodes.UNKNOWN
    except Exit as exc:
        return exc.exit_code
    except Abort:  # click's word for Ctrl-C at a prompt (envdoctor has none)
        raise KeyboardInterrupt from None
    except SystemExit as exc:  # Typer's completion options end with sys.exit
        return exc.code if isinstance(exc.code, int) else exitcodes.HEALTHY
    return code if isinstance(code, int) else exitcodes.HEALTHY
