"""The key under which a result read from files is kept in the user's cache.

The checked compatibility tables (``compat/store.py``) and the checked knowledge base
(``kb/store.py``) are stored so that a run can skip reading and checking YAML. What they hold
depends only on the files they were read from and on the code that read them, so the key is a
digest of exactly that: envdoctor's version, Python's (whose ``re`` checks the regexes), the
source of the reading modules, and each directory's name with every file's path, size and
bytes. A key that cannot be made is None, and the caller then reads the files itself (and says
what is wrong with them). ``through_cache`` is the one way such a result is looked up, read and
stored; each install keeps its own entry (``install_entry``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from envdoctor import __version__
from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import read_bounded

PACKAGE = os.path.dirname(os.path.realpath(__file__))
T = TypeVar("T")


def install_entry(stem: str) -> str:
    """The cache file named ``stem`` for this install (its package directory): two installs
    that share a cache directory (pipx's and a venv's, two versions) each keep their own entry,
    where one name made them replace each other's at every run."""
    return f"{stem}-{hashlib.sha256(os.fsencode(PACKAGE)).hexdigest()[:16]}.json"


class Cache(Protocol):
    """What ``through_cache`` uses of ``platform.cache.CacheDir``."""

    def read(self, name: str) -> dict[str, Any] | None: ...

    def write(self, name: str, data: dict[str, Any]) -> bool: ...


def through_cache(
    cache: Cache | None,
    entry: tuple[str, int, str],
    key: Callable[[], str | None],
    read: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
) -> T:
    """``read()``, or what ``cache`` keeps under ``entry`` (file name, format, the payload's
    field) for the same ``key()``. An entry of another format or key, or one that ``decode``
    refuses (``ValueError``/``TypeError``: a shape this code no longer reads), is a miss; a miss
    is read and stored, unless ``key()`` changed while it was read (the old key would then name
    new content). No cache, or no key: ``read()`` alone."""
    name, version, field = entry
    digest = key() if cache is not None else None
    if cache is None or digest is None:
        return read()
    stored = cache.read(name)
    if stored is not None and stored.get("format") == version and stored.get("key") == digest:
        try:
            return decode(stored.get(field))
        except (TypeError, ValueError):
            pass
    value = read()
    if key() == digest:
        cache.write(name, {"format": version, "key": digest, field: encode(value)})
    return value


def files_digest(
    reader_code: Iterable[str], groups: Iterable[tuple[str, Sequence[str]]], *, limit: int
) -> str | None:
    """sha256 over the version, ``reader_code`` (paths relative to the package) and, for each
    ``(directory, files)`` group, the directory and its files; None when a file cannot be read,
    is not a regular file, or is larger than ``limit`` bytes."""
    digest = hashlib.sha256(f"envdoctor {__version__}\0python {sys.version}\0".encode())
    try:
        for name in reader_code:
            digest.update(f"{name}\0".encode())
            with open(os.path.join(PACKAGE, name), "rb") as code:
                digest.update(code.read())
        for directory, files in groups:
            digest.update(f"\0dir\0{os.fsencode(directory).hex()}\0".encode())
            for path in files:
                data = read_bounded(path, limit)
                if len(data) > limit:
                    return None
                digest.update(f"\0{os.fsencode(path).hex()}\0{len(data)}\0".encode())
                digest.update(data)
    except (OSError, EnvdoctorError):
        return None
    return digest.hexdigest()
