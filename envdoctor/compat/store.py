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
Finding where the tables are stays here too, so that a hit imports neither yaml nor the loader;
the hit works on path strings (``pathlib``, with ``urllib.parse``, is ~2 ms of a check), and the
functions the loader calls hand it ``Path`` objects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envdoctor.cachekey import PACKAGE as _PACKAGE
from envdoctor.cachekey import files_digest, install_entry, through_cache
from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import MAX_YAML_BYTES

if TYPE_CHECKING:
    from pathlib import Path

    from envdoctor.compat.tables import CompatTables
    from envdoctor.platform.cache import CacheDir

ENV_VAR = "ENVDOCTOR_TABLES"
ENTRY = install_entry("compat-tables")
FORMAT = 1
READER_CODE = (
    "compat/loader.py",
    "compat/tables.py",
    "compat/versions.py",
    "model/codec.py",
    "model/record.py",
    "yamlsource.py",
    "inputfile.py",
)
"""The modules whose behaviour shapes the stored tables (relative to the package)."""


def shipped_dir() -> Path:
    """``envdoctor/compat_tables`` in an installed wheel, else ``<repo>/compat_tables``."""
    from pathlib import Path

    return Path(_shipped())


def extra_dirs(extra_dir: str | None, env: Mapping[str, str] | None) -> tuple[Path, ...]:
    """User table directories in the order they apply: ``ENVDOCTOR_TABLES``, then ``--tables``."""
    from pathlib import Path

    return tuple(Path(d) for d in _extras(extra_dir, env))


def table_files(directory: Path) -> list[Path]:
    """The table files of one directory (``*.yaml``, ``*.yml``), in the order they are read."""
    from pathlib import Path

    return [Path(f) for f in _files(os.fspath(directory))]


def _shipped() -> str:
    for candidate in (
        os.path.join(_PACKAGE, "compat_tables"),
        os.path.join(os.path.dirname(_PACKAGE), "compat_tables"),
    ):
        if os.path.isdir(candidate):
            return candidate
    raise EnvdoctorError(
        "the shipped compatibility tables are missing",
        where=os.path.join(os.path.dirname(_PACKAGE), "compat_tables"),
        hint="reinstall envdoctor",
    )


def _extras(extra_dir: str | None, env: Mapping[str, str] | None) -> tuple[str, ...]:
    dirs: list[tuple[str, str]] = []
    if env and env.get(ENV_VAR):
        dirs.extend((ENV_VAR, part) for part in env[ENV_VAR].split(":") if part)
    if extra_dir:
        dirs.append(("--tables", extra_dir))
    out = []
    for origin, raw in dirs:
        path = os.path.expanduser(raw)  # no normpath: "link/.." is not always "."
        if not os.path.isdir(path):
            raise EnvdoctorError(f"{origin}: no such directory", where=raw)
        out.append(path)
    return tuple(out)


def _files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names if n.endswith((".yaml", ".yml")))


def cached_tables(
    extra_dir: str | None, env: Mapping[str, str] | None, cache: CacheDir | None
) -> CompatTables:
    """What ``loader.load_tables(extra_dir, env)`` gives, from ``cache`` when it holds the very
    same tables (no cache: read them)."""
    dirs = (_shipped(), *_extras(extra_dir, env))
    return through_cache(
        cache,
        (ENTRY, FORMAT, "tables"),
        lambda: _digest(dirs),
        lambda: _read(dirs),
        _encode,
        _decode,
    )


def _read(dirs: tuple[str, ...]) -> CompatTables:
    from pathlib import Path

    from envdoctor.compat.loader import load_dirs

    return load_dirs(Path(dirs[0]), tuple(Path(d) for d in dirs[1:]))


def _encode(tables: CompatTables) -> Any:
    from envdoctor.model.codec import encode

    return encode(tables)


def _decode(data: Any) -> CompatTables:
    from envdoctor.compat.tables import CompatTables
    from envdoctor.model.codec import decode

    return decode(CompatTables, data)  # DecodeError is a ValueError: a miss


def _digest(dirs: tuple[str, ...]) -> str | None:
    """The key of the tables ``dirs`` make (each directory named too: an empty ``--tables``
    directory is an error, not a hit); None when a file cannot be read or is not a regular file
    of a sane size (the loader then reads them and says what is wrong)."""
    groups = [(directory, _files(directory)) for directory in dirs]
    return files_digest(READER_CODE, groups, limit=MAX_YAML_BYTES)
