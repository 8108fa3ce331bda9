"""The validated compatibility tables, kept in the user's cache between runs.

Reading the tables means importing the YAML parser and ``packaging``, parsing every file and
checking the rows against each other: ~70 ms, a third of a ``check``. The result depends only on
the table files and on the code that reads them, so it is stored (``platform/cache.py``: per
user, JSON) under a digest of exactly that (``cachekey.py``): envdoctor's and Python's versions,
the source of the modules that turn YAML into tables, and every table file's path and bytes
(the shipped ones, then ``ENVDOCTOR_TABLES`` and ``--tables``, in the order they apply). Any
change to any of them, or an entry that no longer decodes, is a miss: the tables are read and
checked again, then stored (unless a file changed while they were read). Each install keeps
its own entry (named after its directory).
Where the tables are is ``compat/locations.py``'s, which the loader reads too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envdoctor.cachekey import files_digest, install_entry, through_cache
from envdoctor.compat.locations import extra_dirs, shipped_dir, table_files
from envdoctor.inputfile import MAX_YAML_BYTES

if TYPE_CHECKING:
    from pathlib import Path

    from envdoctor.compat.tables import CompatTables
    from envdoctor.platform.cache import CacheDir

ENTRY = install_entry("compat-tables")
FORMAT = 1
READER_CODE = (
    "compat/loader.py",
    "compat/tables.py",
    "compat/versions.py",
    "model/codec.py",
    "yamlsource.py",
    "inputfile.py",
)
"""The modules whose behaviour shapes the stored tables (relative to the package)."""


def cached_tables(
    extra_dir: str | None, env: Mapping[str, str] | None, cache: CacheDir | None
) -> CompatTables:
    """What ``loader.load_tables(extra_dir, env)`` gives, from ``cache`` when it holds the very
    same tables (no cache: read them)."""
    dirs = (shipped_dir(), *extra_dirs(extra_dir, env))
    return through_cache(
        cache,
        (ENTRY, FORMAT, "tables"),
        lambda: _digest(dirs),
        lambda: _read(dirs),
        _encode,
        _decode,
    )


def _read(dirs: tuple[Path, ...]) -> CompatTables:
    from envdoctor.compat.loader import load_dirs

    return load_dirs(dirs[0], dirs[1:])


def _encode(tables: CompatTables) -> Any:
    from envdoctor.model.codec import encode

    return encode(tables)


def _decode(data: Any) -> CompatTables:
    from envdoctor.compat.tables import CompatTables
    from envdoctor.model.codec import decode

    return decode(CompatTables, data)  # DecodeError is a ValueError: a miss


def _digest(dirs: tuple[Path, ...]) -> str | None:
    """The key of the tables ``dirs`` make (each directory named too: an empty ``--tables``
    directory is an error, not a hit); None when a file cannot be read or is not a regular file
    of a sane size (the loader then reads them and says what is wrong)."""
    groups = [
        (os.fspath(directory), [os.fspath(f) for f in table_files(directory)]) for directory in dirs
    ]
    return files_digest(READER_CODE, groups, limit=MAX_YAML_BYTES)
