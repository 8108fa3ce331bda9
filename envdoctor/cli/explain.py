"""`envdoctor explain`: a log in, the cause and the fix out."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import (
    Invocation,
    facts_for,
    kb_of,
    output_format,
    verbose_for,
    write_report,
)
from envdoctor.cli.progress import Progress
from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import open_stream, refuse_device
from envdoctor.model.units import binary_size, plural
from envdoctor.terminal import safe_line

if TYPE_CHECKING:
    from envdoctor.kb.matcher import ByteSource


def run(inv: Invocation) -> int:
    from envdoctor.kb import assess, explain, scan_stream
    from envdoctor.kb.render import colour_text, render
    from envdoctor.kb.sources import LogStream

    args = inv.args
    kb = kb_of(inv)
    if args.flag("list_signatures"):
        emit("".join(f"{s.id:<34} {s.title}\n" for s in kb.signatures))
        return exitcodes.HEALTHY
    fmt = output_format(inv)
    source = args.text("source") or "-"
    name, raw, owned = _open_source(source)
    try:
        size = _file_size(raw)
        counted = _Counted(raw)
        with Progress(lambda: _reading(name, counted.count, size)):
            log = LogStream(counted, name)
            scan = replace(scan_stream(log, kb), incomplete=log.damage)
    finally:
        if owned:
            raw.close()
    explanation = explain(scan, kb, source=name)
    if args.flag("with_host"):
        facts = facts_for(inv, include_torch=False, timeout=args.number("timeout"))
        explanation = assess(explanation, facts)
    text = render(explanation, fmt, verbose=verbose_for(inv), with_host=args.flag("with_host"))
    write_report(inv, text, paint=colour_text if fmt == "text" else None)
    if source.endswith(".gz") and not log.gzip and scan.bytes:
        # Read as text rather than refused: the scanner takes any bytes, and a misnamed log
        # (`tee train.log.gz`, a rotation that renames without compressing) still holds the
        # traceback the user wants explained. Other compressions are refused by LogStream.
        _warn(f"{name}: not gzip-compressed despite its name; read it as plain text")
    if scan.truncated_lines:
        n = scan.truncated_lines
        _warn(
            f"{name}: {plural(n, 'line')} longer than 1 MiB, scanned in 1 MiB "
            "pieces (binary data, or output without newlines)"
        )
    if log.damage:
        lines = plural(scan.lines, "line")
        done = f"explained the first {lines}" if scan.lines else "nothing before it was readable"
        _warn(f"{name}: {log.damage}; {done}")
    # what was found stands; nothing found in part of a log is 2 (see Explanation.exit_code)
    return explanation.exit_code


class _Counted:
    """The log's stream, counting the bytes read from it (of a gzip log: compressed bytes, as
    its file's size counts them), for the progress line, which reads ``count`` on its thread."""

    def __init__(self, raw: ByteSource) -> None:
        self._raw = raw
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._raw.read(size)
        self.count += len(data)
        return data

    def close(self) -> None:
        self._raw.close()


def _file_size(raw: ByteSource) -> int | None:
    """The size of a log that is a regular file (stdin redirected from one too), else None."""
    import os
    import stat

    fileno = getattr(raw, "fileno", None)  # a file's stream has one; a ByteSource need not
    try:
        info = os.fstat(fileno()) if fileno is not None else None
    except (OSError, ValueError):  # not a real file (io.BytesIO), or closed
        return None
    if info is None:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) and info.st_size else None


def _reading(name: str, done: int, size: int | None) -> str:
    """``read 1.2 GiB of 4.0 GiB (30%) of train.log``, or without a size (a pipe): ``read 1.2 GiB
    of train.log``; the name last, where a narrow terminal cuts the line."""
    if size is None:
        return f"read {binary_size(done)} of {name}"
    return f"read {binary_size(done)} of {binary_size(size)} ({done * 100 // size}%) of {name}"


def _warn(message: str) -> None:
    emit(f"envdoctor: warning: {safe_line(message)}\n", err=True)


def _open_source(source: str) -> tuple[str, ByteSource, bool]:
    """(name, stream, whether we opened it and must close it)."""
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise EnvdoctorError(
                "no log given",
                hint="envdoctor explain train.log, or: python train.py 2>&1 | envdoctor explain",
            )
        refuse_device(sys.stdin, "<stdin>")
        return "<stdin>", sys.stdin.buffer, False
    return source, open_stream(source), True
