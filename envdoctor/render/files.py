"""The one file writer: every ``-o`` (reports, snapshots, specs, scripts, metrics) and ``run --save``.

The path is looked up one name at a time (``inputfile.resolve``): a symbolic link is followed
only when it belongs to the user running envdoctor or to root, at any depth, and every
directory on the way must belong to that user or root and be writable by no one else unless
it is sticky (``/tmp``). Otherwise the write is refused: another user could swap what is there.

``-o PATH`` (``write_atomic``) by what is at PATH:

- nothing, or a regular file: a new file, written beside it under a temporary name, fsynced,
  then renamed into place, so no reader (node_exporter's textfile collector, a provisioning
  script) ever sees a part of it. It is the invoking user's, with a mode from its umask (0666
  less the umask, as a shell's ``>`` gives, 0777 less it for a script; 0600 for ``private``
  output such as an unredacted snapshot): never the owner or mode of a file it replaces.
- a FIFO or a character device (``/dev/null``, ``/dev/full``, a terminal, a pipe behind
  ``/proc/self/fd/1``): written through, never replaced, opened without following a link. A
  FIFO nobody reads is an error at once, not a hang.
- a directory, a block device (a disk) or a socket: refused.

``run --save PATH`` (``open_log``): a log written while the command runs, so not atomic. A link
at PATH is refused, never followed; it never writes into an existing file that belongs to
another user or that has other names (hard links); a new one gets 0666 less the umask.

Every failure is an ``EnvdoctorError`` naming the path: one line, exit 2, and no temporary
file left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import Resolved, resolve

NEW_MODE = 0o666  # less the umask
SCRIPT_MODE = 0o777  # less the umask
PRIVATE_MODE = 0o600
PUBLISHED_MODE = 0o644  # exactly: read by node_exporter, another user


def write_atomic(
    path: Path,
    text: str,
    *,
    mode: int = NEW_MODE,
    what: str = "the output file",
    private: bool = False,
    published: bool = False,
) -> None:
    """Write ``text`` to ``path`` as the module docstring describes.

    ``mode`` with an execute bit (0o755) asks for a script: 0777 less the umask; else 0666 less
    the umask. ``private`` output is readable by its owner only; ``published`` output (the
    Prometheus textfile, which node_exporter reads as another user and publishes anyway) is
    0644 whatever the umask.
    """
    data = text.encode("utf-8")
    try:
        if private:
            final = PRIVATE_MODE
        elif published:
            final = PUBLISHED_MODE
        else:
            final = new_mode(SCRIPT_MODE if mode & 0o111 else NEW_MODE)
        _write(path, data, mode=final, what=what)
    except OSError as exc:
        raise EnvdoctorError(
            f"cannot write {what}: {exc.strerror or exc}", where=str(path)
        ) from None


def open_log(path: Path) -> BinaryIO:
    """``path`` opened for a log written as it comes (``run --save``): see the docstring."""
    where = str(path)
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
    found = resolve(path, writing=True, follow_last=False)
    try:
        try:
            fd = os.open(found.name, flags | os.O_CREAT | os.O_EXCL, PRIVATE_MODE, dir_fd=found.fd)
        except FileExistsError:
            fd = _open_existing_log(found, flags, where)
        else:
            os.fchmod(fd, new_mode(NEW_MODE))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvdoctorError(
                "is a symbolic link: --save does not follow links (name the file itself)",
                where=where,
            ) from None
        if exc.errno == errno.ENXIO:
            raise EnvdoctorError("is a FIFO that no process reads", where=where) from None
        raise EnvdoctorError(f"cannot write: {exc.strerror or exc}", where=where) from None
    finally:
        os.close(found.fd)
    return os.fdopen(fd, "wb")


def _open_existing_log(found: Resolved, flags: int, where: str) -> int:
    fd = os.open(found.name, flags | os.O_NONBLOCK, dir_fd=found.fd)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise EnvdoctorError(
                f"belongs to another user (uid {info.st_uid}): --save does not write into it",
                where=where,
            )
        if stat.S_ISREG(info.st_mode):
            if info.st_nlink > 1:  # a hard link another user made to a file of ours
                raise EnvdoctorError(
                    f"has {info.st_nlink} names (hard links): --save does not write into a "
                    "file that may be another one (name a new file)",
                    where=where,
                )
            os.ftruncate(fd, 0)
        elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            _blocking(fd)
        else:
            raise EnvdoctorError(f"cannot write: {_kind(info.st_mode)}", where=where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_mode(mode: int) -> int:
    """``mode`` less the process's umask: the mode of a file envdoctor creates or replaces."""
    mask = os.umask(0o077)  # read it: set a strict one for the instant it takes
    os.umask(mask)
    return mode & ~mask


# --- -o -----------------------------------------------------------------------------------------


def _write(path: Path, data: bytes, *, mode: int, what: str) -> None:
    where = str(path)
    found = resolve(path, writing=True, what=what)
    try:
        info = found.info
        if info is None or stat.S_ISREG(info.st_mode):
            # A new file, or one replaced by a new one: ours, with a mode from the umask (never
            # the old file's owner or mode: another user's 0777 file stays no one's to rewrite).
            _replace(found, data, mode=mode)
        elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            _write_through(found, data, what, where)
        else:
            raise EnvdoctorError(f"cannot write {what}: {_kind(info.st_mode)}", where=where)
    finally:
        os.close(found.fd)


def _replace(found: Resolved, data: bytes, *, mode: int) -> None:
    directory, name = found.fd, found.name
    # The temporary name must fit in NAME_MAX (255) beside a long final name.
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        PRIVATE_MODE,
        dir_fd=directory,
    )
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash: best effort
        dir_fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=directory)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _write_through(found: Resolved, data: bytes, what: str, where: str) -> None:
    """Write into a FIFO or character device as it is: never replaced, never created, and
    opened without following a link (but a /proc link to a pipe, which only the kernel
    follows)."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(found.name, flags | (0 if found.magic else os.O_NOFOLLOW), dir_fd=found.fd)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise EnvdoctorError(
                f"cannot write {what}: a FIFO that no process reads", where=where
            ) from None
        if exc.errno == errno.ELOOP:
            raise EnvdoctorError(
                f"cannot write {what}: it changed while being opened", where=where
            ) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # it changed since we looked
            raise EnvdoctorError(f"cannot write {what}: it changed while being opened", where=where)
        _blocking(fd)
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _blocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISBLK(mode):
        return "it is a block device (a disk); envdoctor does not write to disks"
    if stat.S_ISSOCK(mode):
        return "it is a socket"
    return "it is not a regular file"
