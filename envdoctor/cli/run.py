"""`envdoctor run -- CMD ARGS`: run a command, pass its output through unchanged, and explain
it when it fails."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from envdoctor.cli.boundary import emit
from envdoctor.cli.common import (
    Invocation,
    colour_for,
    facts_for,
    kb_of,
    verbose_for,
    write_output,
    write_report,
)
from envdoctor.terminal import json_document, safe_line

if TYPE_CHECKING:
    from envdoctor.kb.matcher import Scanner

TAIL_BYTES = 64 << 10
MAX_PARTIAL = 1 << 20


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
        self._partial = {"stdout": bytearray(), "stderr": bytearray()}
        self._tail = bytearray()
        self._closed: set[str] = set()
        self._stdout_to_stderr = stdout_to_stderr

    def __call__(self, stream: str, data: bytes) -> bool:
        """Pass ``data`` on; True when its reader is gone (the command then gets SIGPIPE)."""
        gone = self._passthrough(stream, data)
        if stream == "stderr":
            self._tail += data
            del self._tail[: max(0, len(self._tail) - TAIL_BYTES)]
        partial = self._partial[stream]  # appended to, never rebuilt: output a byte at a time
        cut = data.rfind(b"\n") + 1  # (a progress bar's updates) stays linear
        if cut:
            lines = bytes(partial) + data[:cut] if partial else data[:cut]
            partial.clear()
            partial += memoryview(data)[cut:]
            self._lines(lines)
        else:
            partial += data
        if len(partial) > MAX_PARTIAL:
            rest = bytes(partial)
            partial.clear()
            self._lines(rest)
        return gone

    def _passthrough(self, stream: str, data: bytes) -> bool:
        if self._stdout_to_stderr:
            stream = "stderr"
        if stream in self._closed:
            return True
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
            return True
        return False

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
        stream = sys.stderr
        try:
            stream.write(f"{lead}envdoctor: warning: {safe_line(message)}\n")
            stream.flush()
        except (ValueError, OSError, AttributeError):
            self._closed.add("stderr")

    def finish(self) -> str:
        for stream in ("stdout", "stderr"):
            rest = self._partial[stream]
            if rest:
                self._lines(bytes(rest) + b"\n")
                rest.clear()
        return bytes(self._tail).decode("utf-8", errors="replace")


def run(inv: Invocation) -> int:
    from envdoctor.kb import Scanner, assess, explain
    from envdoctor.kb.model import Role
    from envdoctor.kb.render import colour_text, render, run_data
    from envdoctor.platform.passthrough import run_passthrough, signal_name

    args = inv.args
    command = list(args.texts("command"))
    blocking = args.flag("blocking")
    save = args.path("save")
    fmt = args.text("format") or "text"
    kb = kb_of(inv)
    scanner = Scanner(kb)
    save_log = _open_save(save)
    as_json = fmt == "json"
    output = args.path("output")
    # JSON on stdout must be alone there; in a file (-o) it leaves the command's stdout be
    tee = _Tee(scanner, save_log, stdout_to_stderr=as_json and output is None)
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
        emit(f"envdoctor: {safe_line(result.error)}\n", err=True)
        return result.returncode
    if result.returncode == 0 and not as_json and output is None:
        return 0  # nothing to explain, and no file asked for
    explanation = explain(scanner.finish(), kb, source=" ".join(command[:3]))
    with_host = args.flag("with_host") and result.returncode != 0
    if with_host:
        explanation = assess(explanation, facts_for(inv, include_torch=False))
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
            with_host=with_host,
        )
        write_report(inv, json_document(data))
    else:
        text = render(
            explanation, fmt, stderr_tail=tail, verbose=verbose_for(inv), with_host=with_host
        )
        if output is not None:
            write_output(text, output)
            if result.returncode != 0:
                emit(
                    safe_line(f"envdoctor: the command {how}; explained in {output}") + "\n",
                    err=True,
                )
        else:
            if fmt == "text" and colour_for(inv, err=True):
                text = colour_text(text)
            emit(f"\nenvdoctor: the command {how}.\n", err=True)
            emit(text, err=True)
        asynchronous = any(
            c.signature.role in (Role.ASYNC, Role.KERNEL_ASSERT) for c in explanation.causes
        )
        if asynchronous and not blocking:
            emit(
                "hint: CUDA reports kernel errors late; re-run with "
                "`envdoctor run --blocking -- …` for the stack of the failing call.\n",
                err=True,
            )
        if save_log is not None and not save_log.failed:
            emit(
                safe_line(f"full log: {save} (the explanation's line numbers refer to it)") + "\n",
                err=True,
            )
    return result.returncode


def _open_save(save: Path | None) -> _SaveLog | None:
    if save is None:
        return None
    from envdoctor.render.files import open_log

    return _SaveLog(save, open_log(save))
