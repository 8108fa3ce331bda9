"""The one file writer: every ``-o`` (reports, snapshots, specs, scripts, metrics) and ``run --save``.

``-o PATH`` (``write_atomic``) by what is at PATH:

- nothing: a new file, written beside it under a temporary name, fsynced, then renamed into
  place, so no reader (node_exporter's textfile collector, a provisioning script) ever sees a
  part of it. Mode 0644 (0600 for ``private`` output such as an unredacted snapshot, 0755 for
  a script), whatever the umask.
- a regular file: replaced the same way, keeping its mode (a private output drops group and
  other access; a script gains execute where it was readable) and, when root writes it, its
  owner and group (not for private output: that stays root's).
- a FIFO or a character device (``/dev/null``, ``/dev/full``, a terminal, a pipe behind
  ``/proc/self/fd/1``): written through, never replaced. A FIFO nobody reads is an error at
  once, not a hang.
- a symbolic link: followed only when it belongs to the user running envdoctor or to root (as
  the kernel's protected_symlinks rule does in sticky directories), and then treated as what
  it points to; the link itself stays.
- a directory, a block device (a disk) or a socket: refused.

``run --save PATH`` (``open_log``): a log written while the command runs, so not atomic. It is
opened with ``O_NOFOLLOW`` (a symbolic link is refused, never followed) and never writes into
an existing file that belongs to another user; a new one gets 0644.

Every failure is an ``EnvdoctorError`` naming the path: one line, exit 2, and no temporary
file left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from envdoctor.errors import EnvdoctorError

NEW_MODE = 0o644
PRIVATE_MODE = 0o600


def write_atomic(
    path: Path,
    text: str,
    *,
    mode: int = NEW_MODE,
    what: str = "the output file",
    private: bool = False,
) -> None:
    """Write ``text`` to ``path`` as the module docstring describes.

    ``mode`` is a new file's mode; its execute bits also make an existing file executable
    (for whoever may read it). ``private`` output is readable by its owner only.
    """
    data = text.encode("utf-8")
    try:
        _write(path, data, mode=PRIVATE_MODE if private else mode, private=private, what=what)
    except OSError as exc:
        raise EnvdoctorError(
            f"cannot write {what}: {exc.strerror or exc}", where=str(path)
        ) from None


def open_log(path: Path) -> BinaryIO:
    """``path`` opened for a log written as it comes (``run --save``): see the docstring."""
    where = str(path)
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, NEW_MODE)
        except FileExistsError:
            fd = _open_existing_log(path, flags)
        else:
            os.fchmod(fd, NEW_MODE)  # whatever the umask
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EnvdoctorError(
                "is a symbolic link: --save does not follow links (name the file itself)",
                where=where,
            ) from None
        if exc.errno == errno.ENXIO:
            raise EnvdoctorError("is a FIFO that no process reads", where=where) from None
        raise EnvdoctorError(f"cannot write: {exc.strerror or exc}", where=where) from None
    return os.fdopen(fd, "wb")


def _open_existing_log(path: Path, flags: int) -> int:
    fd = os.open(path, flags | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise EnvdoctorError(
                f"belongs to another user (uid {info.st_uid}): --save does not write into it",
                where=str(path),
            )
        if stat.S_ISREG(info.st_mode):
            os.ftruncate(fd, 0)
        elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            _blocking(fd)
        else:
            raise EnvdoctorError(f"cannot write: {_kind(info.st_mode)}", where=str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


# --- -o -----------------------------------------------------------------------------------------


def _write(path: Path, data: bytes, *, mode: int, private: bool, what: str) -> None:
    where = str(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        _replace(path, data, mode=mode, owner=None)
        return
    if stat.S_ISLNK(info.st_mode):
        if info.st_uid not in (os.geteuid(), 0):
            raise EnvdoctorError(
                f"cannot write {what}: a symbolic link that belongs to another user "
                f"(uid {info.st_uid}); not followed",
                where=where,
            )
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise EnvdoctorError(
                f"cannot write {what}: a symbolic link to a file that does not exist",
                where=where,
            ) from None
        if stat.S_ISREG(info.st_mode):
            path = _link_target(path, info, what)
    if stat.S_ISREG(info.st_mode):
        _replace(
            path, data, mode=_kept_mode(info.st_mode, mode, private), owner=_owner(info, private)
        )
    elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
        _write_through(path, data, what)
    else:
        raise EnvdoctorError(f"cannot write {what}: {_kind(info.st_mode)}", where=where)


def _link_target(link: Path, info: os.stat_result, what: str) -> Path:
    """The file a symbolic link leads to, by a name that is that same file (not "… (deleted)")."""
    real = Path(os.path.realpath(link))
    try:
        same = os.stat(real)
    except OSError:
        same = None
    if same is None or (same.st_dev, same.st_ino) != (info.st_dev, info.st_ino):
        raise EnvdoctorError(
            f"cannot write {what}: the symbolic link leads to a file without a name to replace",
            where=str(link),
        )
    return real


def _kept_mode(current: int, mode: int, private: bool) -> int:
    kept = stat.S_IMODE(current)
    if private:
        kept &= 0o700
    if mode & 0o111:  # a script: executable by whoever may read it
        kept |= (kept & 0o444) >> 2
    return kept


def _owner(info: os.stat_result, private: bool) -> tuple[int, int] | None:
    """The owner and group to give the replacement: root keeps them (not for private output)."""
    if private or os.geteuid() != 0:
        return None
    return info.st_uid, info.st_gid


def _replace(path: Path, data: bytes, *, mode: int, owner: tuple[int, int] | None) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    # The temporary name must fit in NAME_MAX (255) beside a long final name.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        if owner is not None:
            os.fchown(fd, *owner)
        _write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash: best effort
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _write_through(path: Path, data: bytes, what: str) -> None:
    """Write into a FIFO or character device as it is: never replaced, never created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise EnvdoctorError(
                f"cannot write {what}: a FIFO that no process reads", where=str(path)
            ) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # it changed since we looked
            raise EnvdoctorError(
                f"cannot write {what}: it changed while being opened", where=str(path)
            )
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
