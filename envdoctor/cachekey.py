"""The key under which a result read from files is kept in the user's cache.

The checked compatibility tables (``compat/store.py``) and the checked knowledge base
(``kb/store.py``) are stored so that a run can skip reading and checking YAML. What they hold
depends only on the files they were read from and on the code that read them, so the key is a
digest of exactly that: envdoctor's version, Python's (whose ``re`` checks the regexes), the
source of the reading modules, and each directory's name with every file's path, size and
bytes. A key that cannot be made is None, and the caller then reads the files itself (and says
what is wrong with them).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable, Sequence

from envdoctor import __version__
from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import read_bounded

PACKAGE = os.path.dirname(os.path.realpath(__file__))


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
