"""Compatibility knowledge as data: YAML tables in compat_tables/, loaded and validated here.

``load_tables()`` gives the shipped tables (extended by ``ENVDOCTOR_TABLES`` and ``--tables``);
``CompatTables()`` is the empty set, for callers that have no tables (rules then say nothing).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envdoctor.compat.loader import (
        ENV_VAR,
        TABLE_NAMES,
        load_tables,
        shipped_dir,
        validate_dir,
    )
    from envdoctor.compat.tables import (
        Architecture,
        CompatTables,
        CudaRelease,
        CudnnPackage,
        CudnnRelease,
        DriverBranch,
        ForwardCompatGpuClass,
        ForwardCompatPackage,
        GpuProduct,
        MinorVersionFloor,
        MinorVersionLimitation,
        TorchRelease,
        TorchVariant,
    )

# Loaded on first use (PEP 562): the YAML loader and packaging cost ~70 ms, which the 1 s
# startup probe does not pay.
_LOADER_NAMES = {"ENV_VAR", "TABLE_NAMES", "load_tables", "shipped_dir", "validate_dir"}


def __getattr__(name: str) -> Any:
    if name in _LOADER_NAMES:
        return getattr(importlib.import_module("envdoctor.compat.loader"), name)
    if name in __all__:
        return getattr(importlib.import_module("envdoctor.compat.tables"), name)
    raise AttributeError(f"module 'envdoctor.compat' has no attribute {name!r}")


__all__ = [
    "ENV_VAR",
    "TABLE_NAMES",
    "Architecture",
    "CompatTables",
    "CudaRelease",
    "CudnnPackage",
    "CudnnRelease",
    "DriverBranch",
    "ForwardCompatGpuClass",
    "ForwardCompatPackage",
    "GpuProduct",
    "MinorVersionFloor",
    "MinorVersionLimitation",
    "TorchRelease",
    "TorchVariant",
    "load_tables",
    "shipped_dir",
    "validate_dir",
]
