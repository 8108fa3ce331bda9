"""Where the compatibility tables are: the shipped directory, then the user's, in the order
they apply. The loader reads them from here and the table cache (``compat/store.py``) keys on
them, so neither imports the other for it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from envdoctor.cachekey import PACKAGE
from envdoctor.errors import EnvdoctorError

ENV_VAR = "ENVDOCTOR_TABLES"


def shipped_dir() -> Path:
    """``envdoctor/compat_tables`` in an installed wheel, else ``<repo>/compat_tables``."""
    return Path(_shipped())


def extra_dirs(extra_dir: str | None, env: Mapping[str, str] | None) -> tuple[Path, ...]:
    """User table directories in the order they apply: ``ENVDOCTOR_TABLES``, then ``--tables``."""
    return tuple(Path(d) for d in _extras(extra_dir, env))


def table_files(directory: Path) -> list[Path]:
    """The table files of one directory (``*.yaml``, ``*.yml``), in the order they are read."""
    return [Path(f) for f in _files(os.fspath(directory))]


def _shipped() -> str:
    for candidate in (
        os.path.join(PACKAGE, "compat_tables"),
        os.path.join(os.path.dirname(PACKAGE), "compat_tables"),
    ):
        if os.path.isdir(candidate):
            return candidate
    raise EnvdoctorError(
        "the shipped compatibility tables are missing",
        where=os.path.join(os.path.dirname(PACKAGE), "compat_tables"),
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
