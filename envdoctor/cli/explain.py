"""`envdoctor explain` (a log in, the cause and the fix out) and `envdoctor run` (run a command,
pass its output through, explain it when it fails)."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import facts_for
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import json_document, safe_line

if TYPE_CHECKING:
    from envdoctor.kb.matcher import ByteSource, Scanner

# Typer needs the runtime Optional[...] spelling on Python 3.9-compatible signatures.
# ruff: noqa: UP045

TAIL_BYTES = 64 << 10
MAX_PARTIAL = 1 << 20


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def explain_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(
        "-", metavar="[FILE|-]", help="The log to explain (a file, .gz too; - or nothing: stdin)."
    ),
    output_format: Format = typer.Option(Format.text, "--format", "-f", help="Output format."),
    as_json: bool = typer.Option(False, "--json", help="Shortcut for --format json."),
    with_host: bool = typer.Option(
        False, "--with-host", help="Confirm or rule out each cause with this machine's live facts."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Time budget for --with-host probes."),
    list_signatures: bool = typer.Option(
        False, "--list-signatures", help="List every known error signature and exit."
    ),
) -> None:
    """Explain an error log: which known failures it contains, the root cause, and the fix.

    Exit 0 when no known signature occurs, 1 when a cause is found, 2 when only possible
    causes are, when nothing is found in a log that could be read only in part (a damaged or
    cut-off .gz: one warning line says so), or on a usage error."""
    with boundary():
        from envdoctor.kb import assess, explain, load_default_kb, scan_stream
        from envdoctor.kb.render import render

        kb = load_default_kb()
        if list_signatures:
            for signature in kb.signatures:
                typer.echo(f"{signature.id:<34} {signature.title}")
            raise typer.Exit(0)
        from envdoctor.kb.sources import LogStream

        fmt = Format.json if as_json else output_format
        name, raw, owned = _open_source(source)
        try:
            log = LogStream(raw, name)
            scan = dataclasses.replace(scan_stream(log, kb), incomplete=log.damage)
        finally:
            if owned:
                raw.close()
        explanation = explain(scan, kb, source=name)
        if with_host:
            explanation = assess(explanation, facts_for(ctx, include_torch=False, timeout=timeout))
        typer.echo(render(explanation, fmt.value), nl=False)
        if source.endswith(".gz") and not log.gzip and scan.bytes:
            # Read as text rather than refused: the scanner takes any bytes, and a misnamed log
            # (`tee train.log.gz`, a rotation that renames without compressing) still holds the
            # traceback the user wants explained. Other compressions are refused by LogStream.
            _warn(f"{name}: not gzip-compressed despite its name; read it as plain text")
        if log.damage:
            lines = f"{scan.lines:,} line{'s' if scan.lines != 1 else ''}"
            done = (
                f"explained the first {lines}" if scan.lines else "nothing before it was readable"
            )
            _warn(f"{name}: {log.damage}; {done}")
        # what was found stands; nothing found in part of a log is 2 (see Explanation.exit_code)
        raise typer.Exit(explanation.exit_code)


def _warn(message: str) -> None:
    typer.echo(f"envdoctor: warning: {safe_line(message)}", err=True)


def _open_source(source: str) -> tuple[str, ByteSource, bool]:
    """(name, stream, whether we opened it and must close it)."""
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise EnvdoctorError(
                "no log given",
                hint="envdoctor explain train.log, or: python train.py 2>&1 | envdoctor explain",
            )
        return "<stdin>", sys.stdin.buffer, False
    path = Path(source)
    try:
        return source, path.open("rb"), True
    except FileNotFoundError:
        raise EnvdoctorError("no such file", where=source) from None
    except IsADirectoryError:
        raise EnvdoctorError("is a directory, not a log file", where=source) from None
    except PermissionError:
        raise EnvdoctorError("permission denied", where=source) from None
    except OSError as exc:
        raise EnvdoctorError(f"cannot read: {exc.strerror or exc}", where=source) from None


# --- envdoctor run ------------------------------------------------------------------------


class _SaveLog:
    """The ``--save`` copy of the output. It is a side product: when writing it fails (a full
    disk, a quota, a vanished mount) saving stops with one warning, and the command, its output
    and its exit code go on as if ``--save`` had not been given."""

    def __init__(self, path: Path, file: IO[bytes]) -> None:
        self.path = path
        self.failed = False
        self._file: IO[bytes] | None = file

    def write(self, data: bytes, warn: Callable[[str], None]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(data)
        except OSError as exc:
            self._fail(exc, warn)

    def close(self, warn: Callable[[str], None]) -> None:
        if self._file is None:
            return
        try:
            self._file.close()  # flushes the last buffered lines: may fail the same way
        except OSError as exc:
            self._fail(exc, warn)
        self._file = None

    def _fail(self, exc: OSError, warn: Callable[[str], None]) -> None:
        file, self._file = self._file, None
        self.failed = True
        if file is not None:
            # the buffer still holds what failed: closing retries it, fails again, and still
            # releases the descriptor; that second error is the one already reported
            with contextlib.suppress(OSError):
                file.close()
        warn(
            f"{self.path}: cannot write ({exc.strerror or exc}); stopped saving the log, "
            "the command goes on"
        )


class _Tee:
    """Receives the child's output: passes it on unchanged, saves it, scans it, keeps the tail
    of stderr. Lines are assembled per stream, so interleaved partial lines of stdout and
    stderr never merge into one line of the scan (or of the saved log). With
    ``stdout_to_stderr`` the command's stdout is passed on to stderr: envdoctor's stdout then
    carries one JSON document alone."""

    def __init__(
        self, scanner: Scanner, save: _SaveLog | None, *, stdout_to_stderr: bool = False
    ) -> None:
        self._scanner = scanner
        self._save = save
        self._partial = {"stdout": b"", "stderr": b""}
        self._tail = bytearray()
        self._closed: set[str] = set()
        self._stdout_to_stderr = stdout_to_stderr

    def __call__(self, stream: str, data: bytes) -> None:
        self._passthrough(stream, data)
        if stream == "stderr":
            self._tail += data
            del self._tail[: max(0, len(self._tail) - TAIL_BYTES)]
        buf = self._partial[stream] + data
        cut = buf.rfind(b"\n") + 1
        if len(buf) - cut > MAX_PARTIAL:
            cut = len(buf)
        self._partial[stream] = buf[cut:]
        if cut:
            self._lines(buf[:cut])

    def _passthrough(self, stream: str, data: bytes) -> None:
        if self._stdout_to_stderr:
            stream = "stderr"
        if stream in self._closed:
            return
        target = sys.stdout if stream == "stdout" else sys.stderr
        try:
            buffer = getattr(target, "buffer", None)
            if buffer is not None:
                buffer.write(data)
            else:
                target.write(data.decode("utf-8", errors="replace"))
            target.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._closed.add(stream)  # e.g. `envdoctor run … | head`: keep scanning, stop writing

    def _lines(self, data: bytes) -> None:
        self._scanner.feed(data)
        if self._save is not None:
            self._save.write(data, self.warn)

    def warn(self, message: str) -> None:
        """One line of envdoctor's own on stderr, between the command's lines (not inside one
        it has only begun), and not at all once stderr is gone."""
        if "stderr" in self._closed:
            return
        begun = self._partial["stderr"] or (self._stdout_to_stderr and self._partial["stdout"])
        lead = "\n" if begun else ""
        try:
            typer.echo(f"{lead}envdoctor: warning: {safe_line(message)}", err=True)
        except (ValueError, OSError):
            self._closed.add("stderr")

    def finish(self) -> str:
        for stream in ("stdout", "stderr"):
            rest = self._partial[stream]
            if rest:
                self._lines(rest + b"\n")
                self._partial[stream] = b""
        return bytes(self._tail).decode("utf-8", errors="replace")


def run_cmd(
    ctx: typer.Context,
    command: list[str] = typer.Argument(
        ..., metavar="-- CMD [ARGS]...", help="The command to run."
    ),
    blocking: bool = typer.Option(
        False, "--blocking", help="Set CUDA_LAUNCH_BLOCKING=1 so CUDA errors get a true stack."
    ),
    save: Optional[Path] = typer.Option(None, "--save", help="Also write the full log here."),
    output_format: Format = typer.Option(
        Format.text,
        "--format",
        "-f",
        help="Format of the explanation (on stderr; json: on stdout, the command's output on "
        "stderr).",
    ),
    with_host: bool = typer.Option(
        False, "--with-host", help="On failure, also confirm causes with live facts."
    ),
) -> None:
    """Run a command, pass its output through unchanged, and explain it if it fails.

    The exit code is the command's own (128+N when a signal killed it). The explanation goes
    to stderr, so the command's stdout stays clean. With --format json a JSON document is the
    only thing on stdout, whether the command failed or not; the command's stdout goes to
    stderr with its stderr."""
    with boundary():
        from envdoctor.kb import Scanner, assess, explain, load_default_kb
        from envdoctor.kb.model import Role
        from envdoctor.kb.render import render, run_data
        from envdoctor.platform.passthrough import run_passthrough, signal_name

        kb = load_default_kb()
        scanner = Scanner(kb)
        save_log = _open_save(save)
        as_json = output_format is Format.json
        tee = _Tee(scanner, save_log, stdout_to_stderr=as_json)
        overrides = {"CUDA_LAUNCH_BLOCKING": "1"} if blocking else {}
        try:
            result = run_passthrough(
                command,
                tee,
                env_overrides=overrides,
                env_defaults={"PYTHONUNBUFFERED": "1"},
            )
            tail = tee.finish()
        finally:
            if save_log is not None:
                save_log.close(tee.warn)
        if not result.started:
            typer.echo(f"envdoctor: {safe_line(result.error)}", err=True)
            raise typer.Exit(result.returncode)
        if result.returncode == 0 and not as_json:
            raise typer.Exit(0)
        explanation = explain(scanner.finish(), kb, source=" ".join(command[:3]))
        if with_host and result.returncode != 0:
            explanation = assess(explanation, facts_for(ctx, include_torch=False))
        how = (
            f"was killed by {signal_name(result.signal)}"
            if result.signal is not None
            else f"exited with {result.returncode}"
        )
        if as_json:
            signal = None if result.signal is None else signal_name(result.signal)
            data = run_data(
                explanation,
                command=command,
                returncode=result.returncode,
                signal=signal,
                blocking=blocking,
                stderr_tail=tail,
            )
            typer.echo(json_document(data), nl=False)
        else:
            typer.echo(f"\nenvdoctor: the command {how}.", err=True)
            typer.echo(
                render(explanation, output_format.value, stderr_tail=tail), err=True, nl=False
            )
            asynchronous = any(
                c.signature.role in (Role.ASYNC, Role.KERNEL_ASSERT) for c in explanation.causes
            )
            if asynchronous and not blocking:
                typer.echo(
                    "hint: CUDA reports kernel errors late; re-run with "
                    "`envdoctor run --blocking -- …` for the stack of the failing call.",
                    err=True,
                )
            if save_log is not None and not save_log.failed:
                typer.echo(
                    safe_line(f"full log: {save} (line numbers above refer to it)"), err=True
                )
        raise typer.Exit(result.returncode)


def _open_save(save: Path | None) -> _SaveLog | None:
    if save is None:
        return None
    from envdoctor.render.files import open_log

    return _SaveLog(save, open_log(save))


def register(app: typer.Typer) -> None:
    app.command("explain")(explain_cmd)
    app.command(
        "run",
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(run_cmd)
