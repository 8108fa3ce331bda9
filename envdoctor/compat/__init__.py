"""Compatibility knowledge as data: YAML tables in compat_tables/, loaded and validated here.

``load_tables()`` gives the shipped tables (extended by ``ENVDOCTOR_TABLES`` and ``--tables``);
``CompatTables()`` is the empty set, for callers that have no tables (rules then say nothing).
"""

from __future__ import annotations

from envdoctor.compat.loader import ENV_VAR, TABLE_NAMES, load_tables, shipped_dir, validate_dir
from envdoctor.compat.tables import (
    Architecture,
    CompatTables,
    CudaRelease,
    CudnnPackage,
    CudnnRelease,
    DriverBranch,
    ForwardCompatGpuClass,
    ForwardCompatPackage,
    MinorVersionFloor,
    MinorVersionLimitation,
    TorchRelease,
    TorchVariant,
)

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
    "MinorVersionFloor",
    "MinorVersionLimitation",
    "TorchRelease",
    "TorchVariant",
    "load_tables",
    "shipped_dir",
    "validate_dir",
]
