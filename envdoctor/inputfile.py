"""Reading an input file someone handed envdoctor (a table, a spec, a snapshot, a log), bounded.

Such a path may name anything: a FIFO nobody writes (reading blocks forever), ``/dev/zero``
(never ends), a file of gigabytes. ``read_input`` reads only a regular file, and at most
``limit`` bytes of it; anything else is one ``EnvdoctorError`` naming the path. ``open_stream``
opens a log to stream (a pipe too: ``explain <(journalctl -k)``), with the same messages.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from envdoctor.errors import EnvdoctorError, keep_private

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
    """At most ``limit + 1`` bytes of a regular file; a FIFO or a device is refused unopened.
    The path is looked up as ``resolve`` does: another user's symbolic link is not followed."""
    where = os.fspath(path)
    found = resolve(path, writing=False)
    try:
        info = found.info
        if info is None:
            raise EnvdoctorError("no such file", where=where)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise EnvdoctorError(f"cannot read: {kind}", where=where)
        fd = os.open(
            found.name,
            os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW,
            dir_fd=found.fd,
        )
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):  # swapped since the stat above
                raise EnvdoctorError("cannot read: not a regular file", where=where)
            if not opened.st_mode & stat.S_IROTH:
                keep_private(where)  # its values are never quoted in a message
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
        if exc.errno == errno.ELOOP:  # a link swapped in since the lookup
            raise EnvdoctorError(
                "cannot read: it changed while being opened", where=where
            ) from None
        raise _unreadable(exc, where) from None
    finally:
        os.close(found.fd)


FIFO_WAIT = 10.0
"""Seconds ``open_stream`` waits for a FIFO's first byte (or its writer's end): a FIFO no
process writes is an error, not a hang."""


def open_stream(path: str) -> BinaryIO:
    """``path`` opened for reading in binary: a file or a pipe (the caller reads it in bounded
    pieces), else an ``EnvdoctorError`` naming the path. A device is refused unopened (and again
    if one was swapped in before the open): ``/dev/zero`` or ``/dev/urandom`` never end, and
    a terminal is where no log is (stdin from a terminal is refused the same way). Another
    user's symbolic link is not followed (``resolve``); a named FIFO that no process writes
    within ``FIFO_WAIT`` seconds is an error."""
    found = resolve(path, writing=False)
    try:
        info = found.info
        if info is None:
            raise EnvdoctorError("no such file", where=path)
        if stat.S_ISDIR(info.st_mode):
            raise EnvdoctorError("cannot read: a directory", where=path)
        if _is_device(info.st_mode):
            raise _device(path)
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
        fd = os.open(found.name, flags | (0 if found.magic else os.O_NOFOLLOW), dir_fd=found.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvdoctorError("cannot read: it changed while being opened", where=path) from None
        raise _unreadable(exc, path) from None
    finally:
        os.close(found.fd)
    try:
        mode = os.fstat(fd).st_mode
        if _is_device(mode):  # swapped in since the lookup
            raise _device(path)
        if stat.S_ISFIFO(mode) and not found.magic:
            # a named FIFO (mkfifo): nothing says whether a writer will ever come. A pipe
            # (`explain <(cmd)`, /dev/stdin) has its writer already: it may stay silent.
            _await_writer(fd, path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return stream


def _await_writer(fd: int, where: str) -> None:
    """Wait, at most ``FIFO_WAIT`` seconds, until the FIFO has data or its writer is done."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if not poller.poll(int(FIFO_WAIT * 1000)):
        raise EnvdoctorError(
            f"cannot read: a FIFO that no process wrote to within {FIFO_WAIT:g} s",
            where=where,
            hint="start the writer first, or pipe a command's output: "
            "journalctl -k | envdoctor explain",
        )


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


# --- resolving a path without following what another user controls ----------------------------

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


class Resolved:
    """Where a path leads: ``fd`` (an ``O_PATH`` descriptor of the directory the last name is
    in; the caller closes it), ``name`` in it, and ``info``, what is there (``lstat``), or None
    when nothing is. ``magic``: the name is a link of /proc (``/proc/self/fd/1`` to a pipe)
    that only the kernel can follow, to the FIFO or device ``info`` then describes; open it
    following links, once."""

    __slots__ = ("fd", "info", "magic", "name")

    def __init__(self, fd: int, name: str, info: os.stat_result | None, magic: bool) -> None:
        self.fd, self.name, self.info, self.magic = fd, name, info, magic


def trusted_owner(uid: int) -> bool:
    """A file of this user or of root: a link of theirs is followed (the rule of the kernel's
    protected_symlinks, at every depth and in every directory)."""
    return uid in (os.geteuid(), 0)


def resolve(
    path: str | os.PathLike[str],
    *,
    writing: bool,
    follow_last: bool = True,
    what: str = "",
) -> Resolved:
    """``path`` looked up one name at a time from ``/`` (a relative path from the real current
    directory), with ``openat`` and ``O_NOFOLLOW``; every symbolic link on the way is read and
    followed by hand, and only when it belongs to this user or to root. When ``writing``, every
    directory on the way must belong to this user or root and be writable by nobody else
    unless sticky (``/tmp`` passes; a user's directory, or a shared group-writable one, does
    not: its owner could swap what is in it). ``follow_last=False`` leaves a link at the end
    unresolved (``info`` is the link's). Errors are ``EnvdoctorError``s naming ``path``."""
    where = os.fspath(path)
    prefix = f"cannot {'write' if writing else 'read'}{' ' + what if what else ''}"
    try:
        text = where if where.startswith("/") else os.path.join(os.getcwd(), where)
        root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:  # the current directory was removed
        raise EnvdoctorError(f"{prefix}: {exc.strerror or exc}", where=where) from None
    todo = [c for c in text.split("/") if c not in ("", ".")]
    stack = [root]
    seen = ["/"]
    links = 0
    expect: tuple[int, int] | None = None  # what a final link's kernel lookup reached

    def fail(why: str) -> EnvdoctorError:
        return EnvdoctorError(f"{prefix}: {why}", where=where)

    try:
        if writing:
            _check_directory(os.fstat(root), "/", fail)
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    seen.pop()
                continue
            last = not todo
            here = _joined(seen, name)
            try:
                info: os.stat_result | None = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if not last:
                    raise fail(f"{here} does not exist") from None
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode) and (follow_last or not last):
                if not trusted_owner(info.st_uid):
                    raise fail(
                        f"{here} is a symbolic link that belongs to another user "
                        f"(uid {info.st_uid}); not followed"
                    )
                links += 1
                if links > _MAX_LINKS:
                    raise fail("too many levels of symbolic links")
                if last:
                    try:
                        reached = os.stat(name, dir_fd=stack[-1])
                    except FileNotFoundError:
                        raise fail("a symbolic link to a file that does not exist") from None
                    target = os.readlink(name, dir_fd=stack[-1])
                    if (
                        not target.startswith("/")
                        and (
                            stat.S_ISFIFO(reached.st_mode)
                            or stat.S_ISCHR(reached.st_mode)
                            or stat.S_ISSOCK(reached.st_mode)
                        )
                        and ":" in target
                    ):
                        # /proc/PID/fd/N to "pipe:[123]": no name to walk; the kernel's own
                        return Resolved(os.dup(stack[-1]), name, reached, magic=True)
                    expect = (reached.st_dev, reached.st_ino)
                else:
                    target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                        seen.pop()
                todo = [c for c in target.split("/") if c not in ("", ".")] + todo
                continue
            if last:
                if expect is not None and (info is None or (info.st_dev, info.st_ino) != expect):
                    raise fail(
                        "the symbolic link leads to a file without a name to replace"
                        if writing
                        else "the symbolic link leads to a file without a name"
                    )
                return Resolved(os.dup(stack[-1]), name, info, magic=False)
            assert info is not None
            if not stat.S_ISDIR(info.st_mode):
                raise fail(f"{here} is not a directory")
            if writing:
                _check_directory(info, here, fail)
            fd = os.open(
                name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1]
            )
            now = os.fstat(fd)
            stack.append(fd)
            seen.append(name)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                raise fail(f"{here} changed while it was looked up")
        # the path named a directory ("/", "a/..")
        raise fail("it is a directory")
    except OSError as exc:
        raise fail(exc.strerror or str(exc)) from None
    finally:
        for fd in stack:
            os.close(fd)


def _joined(seen: list[str], name: str) -> str:
    return "/" + "/".join([*seen[1:], name])


def _check_directory(
    info: os.stat_result, here: str, fail: Callable[[str], EnvdoctorError]
) -> None:
    if not trusted_owner(info.st_uid):
        raise fail(
            f"the directory {here} belongs to another user (uid {info.st_uid}): envdoctor does "
            "not write where another user can replace what it wrote"
        )
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise fail(
            f"the directory {here} is writable by "
            f"{'everyone' if info.st_mode & 0o002 else 'its group'} and not sticky: envdoctor "
            "does not write where another user can replace what it wrote"
        )
