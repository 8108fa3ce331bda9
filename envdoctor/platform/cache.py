"""envdoctor's per-user cache: small JSON files in ``$XDG_CACHE_HOME/envdoctor`` (by default
``~/.cache/envdoctor``), for facts that cost seconds to gather (``import torch``).

A cache must never serve a wrong answer, and never one that another user wrote. So:

- the directory is used only when it is a real directory (not a symlink) owned by the effective
  user and closed to everyone else (mode 0700; created so when missing, and only beneath a
  directory that user owns: root running with another user's ``$HOME`` neither reads nor
  writes there);
- every file is opened through that directory's descriptor with ``O_NOFOLLOW`` and read only
  when it is a regular file of that user, mode 0600, of a sane size, holding a JSON object;
- files are written to a fresh temporary name (``O_EXCL``, mode 0600) and renamed over the
  old one, so a reader never sees half a file.

Anything else (a corrupt file, a foreign owner, wider permissions, an I/O error) is a miss;
nothing here raises. What an entry means and when it is stale is the caller's business
(``probes/torch_cache.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Iterator, Mapping
from typing import Any

MAX_ENTRY_BYTES = 4 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def cache_location(env: Mapping[str, str]) -> str | None:
    """``$XDG_CACHE_HOME/envdoctor``, else ``$HOME/.cache/envdoctor`` (absolute paths only, as
    the XDG base directory specification asks), else None: no cache."""
    base = env.get("XDG_CACHE_HOME", "")
    if not base.startswith("/"):
        home = env.get("HOME", "")
        if not home.startswith("/"):
            return None
        base = home.rstrip("/") + "/.cache"
    return base.rstrip("/") + "/envdoctor"


def user_cache(env: Mapping[str, str]) -> CacheDir | None:
    """The cache at ``cache_location(env)``, or None where there is no home for one."""
    location = cache_location(env)
    return CacheDir(location) if location is not None else None


class CacheDir:
    """One user's cache directory; ``read`` and ``write`` never raise."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.uid = os.geteuid()
        """The only user whose entries are read, and for whom the directory is created."""

    def read(self, name: str) -> dict[str, Any] | None:
        """The JSON object stored under ``name``, or None (missing, foreign, unsafe, corrupt)."""
        dir_fd = self._open_dir(create=False)
        if dir_fd is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return None
        finally:
            os.close(dir_fd)
        try:
            info = os.fstat(fd)
            if not (
                stat.S_ISREG(info.st_mode)
                and info.st_uid == self.uid
                and stat.S_IMODE(info.st_mode) & 0o077 == 0
                and info.st_size <= MAX_ENTRY_BYTES
            ):
                return None
            with os.fdopen(fd, "rb") as handle:
                fd = -1
                data = json.loads(handle.read(MAX_ENTRY_BYTES + 1))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
            return None
        finally:
            if fd >= 0:
                os.close(fd)
        return data if isinstance(data, dict) else None

    def write(self, name: str, data: dict[str, Any]) -> bool:
        """Store ``data`` under ``name`` atomically; False when the cache cannot be used."""
        raw = json.dumps(data, separators=(",", ":")).encode("utf-8")
        if len(raw) > MAX_ENTRY_BYTES:
            return False
        dir_fd = self._open_dir(create=True)
        if dir_fd is None:
            return False
        tmp = f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            try:
                os.write(fd, raw)  # one small write; a short write fails the JSON read: a miss
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            return False
        finally:
            os.close(dir_fd)
        return True

    @contextlib.contextmanager
    def locked(self, name: str, timeout: float) -> Iterator[bool]:
        """Hold an exclusive lock on the file ``name`` (created 0600 when missing) for a
        read-modify-write; yields False when the lock was not had within ``timeout`` seconds or
        the directory cannot be used (the caller then decides without the state)."""
        import fcntl  # lazily: only the fleet's drain budget locks

        dir_fd = self._open_dir(create=True)
        if dir_fd is None:
            yield False
            return
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError:
            os.close(dir_fd)
            yield False
            return
        os.close(dir_fd)
        try:
            end = time.monotonic() + max(0.0, timeout)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= end:
                        yield False
                        return
                    time.sleep(0.02)
                except OSError:
                    yield False
                    return
            yield True
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def remove(self, name: str) -> None:
        """Forget ``name`` (when the facts it holds may no longer be true)."""
        dir_fd = self._open_dir(create=False)
        if dir_fd is None:
            return
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass  # not there (or not removable): a later read checks it all the same
        finally:
            os.close(dir_fd)

    def _open_dir(self, *, create: bool) -> int | None:
        """A descriptor of the directory when it is safe to use (see the module docstring)."""
        if create and not os.path.lexists(self.path) and not self._create():
            return None
        try:
            fd = os.open(self.path, _DIR_FLAGS)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if info.st_uid != self.uid or stat.S_IMODE(info.st_mode) & 0o077:
            os.close(fd)
            return None
        return fd

    def _create(self) -> bool:
        """Create the directory (and missing parents, 0700) beneath one this user owns."""
        missing = []
        path = self.path
        while not os.path.lexists(path):
            missing.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                return False
            path = parent
        try:
            if os.stat(path).st_uid != self.uid:
                return False
            for directory in reversed(missing):
                with contextlib.suppress(FileExistsError):  # another envdoctor was quicker
                    os.mkdir(directory, 0o700)
        except OSError:
            return False
        return True
