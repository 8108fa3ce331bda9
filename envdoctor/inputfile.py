"""Reading an input file someone handed envdoctor (a table, a spec, a snapshot, a log), bounded.

Such a path may name anything: a FIFO nobody writes (reading blocks forever), ``/dev/zero``
(never ends), a file of gigabytes. ``read_input`` reads only a regular file, and at most
``limit`` bytes of it; anything else is one ``EnvdoctorError`` naming the path. ``open_stream``
opens a log to stream (a pipe too: ``explain <(journalctl -k)``), with the same messages.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, BinaryIO

from envdoctor.errors import EnvdoctorError

MAX_YAML_BYTES = 1 << 20
"""The largest YAML input envdoctor reads (a table, a node spec); ``yamlsource`` refuses more,
and the tables' cache keys no larger file."""

if TYPE_CHECKING:
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable


def read_input(path: Path | Traversable, *, limit: int) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, else an ``EnvdoctorError``.

    A file shipped inside the package (a ``Traversable`` that is not a file system path, such as
    a file in a zip) is read as it is: it is ours.
    """
    where = str(path)
    data: bytes
    if not isinstance(path, os.PathLike):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise EnvdoctorError(f"cannot read: {exc.strerror or exc}", where=where) from None
    else:
        data = read_bounded(path, limit)
    if len(data) > limit:
        raise EnvdoctorError(f"larger than {_size(limit)}: not a file envdoctor reads", where=where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvdoctorError(f"not UTF-8 text (byte {exc.start})", where=where) from None


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file; a FIFO or a device is refused unopened."""
    where = os.fspath(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise EnvdoctorError(f"cannot read: {kind}", where=where)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat above
                raise EnvdoctorError("cannot read: not a regular file", where=where)
            chunks: list[bytes] = []
            left = limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _unreadable(exc, where) from None


def open_stream(path: str) -> BinaryIO:
    """``path`` opened for reading in binary: a file or a pipe (the caller reads it in bounded
    pieces), else an ``EnvdoctorError`` naming the path. A device is refused unopened (and again
    if one was swapped in before the open): ``/dev/zero`` or ``/dev/urandom`` never end, and
    a terminal is where no log is (stdin from a terminal is refused the same way)."""
    try:
        if _is_device(os.stat(path).st_mode):
            raise _device(path)
        stream = open(path, "rb")  # noqa: SIM115 (returned open: the caller closes it)
    except IsADirectoryError:
        raise EnvdoctorError("cannot read: a directory", where=path) from None
    except OSError as exc:
        raise _unreadable(exc, path) from None
    try:
        refuse_device(stream, path)  # swapped in since the stat
    except EnvdoctorError:
        stream.close()
        raise
    return stream


def refuse_device(stream: object, where: str) -> None:
    """An ``EnvdoctorError`` when the open ``stream`` is a device (stdin from ``/dev/zero``)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode  # type: ignore[attr-defined]  # any stream: one without fileno() is caught
    except (AttributeError, OSError, ValueError):  # no descriptor (a test's in-memory stdin)
        return
    if _is_device(mode):
        raise _device(where)


def _is_device(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def _device(where: str) -> EnvdoctorError:
    return EnvdoctorError(
        "cannot read: a device, not a log (it may never end)",
        where=where,
        hint="give a log file, or pipe a command's output: python train.py 2>&1 | envdoctor explain",
    )


def _unreadable(exc: OSError, where: str) -> EnvdoctorError:
    if isinstance(exc, FileNotFoundError):
        return EnvdoctorError("no such file", where=where)
    if isinstance(exc, PermissionError):
        return EnvdoctorError("cannot read: permission denied", where=where)
    return EnvdoctorError(f"cannot read: {exc.strerror or exc}", where=where)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
