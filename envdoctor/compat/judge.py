"""Judgements over the tables: can this driver run CUDA X.Y, can this arch list run on sm_XY.

Shared by the rules (which judge the installed torch) and ``recommend`` (which judges every
official wheel), so both always agree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from envdoctor.compat.tables import CompatTables
from envdoctor.compat.versions import (
    ArchTarget,
    Cc,
    Cuda,
    coverage,
    cuda_text,
    driver_at_least,
    parse_cuda,
    sm_name,
)


class DriverFit(enum.Enum):
    NATIVE = "native"  # the driver's CUDA version is at least the toolkit's
    MINOR_VERSION = "minor-version"  # same major, driver ≥ the family floor: runs, with limits
    TOO_OLD = "too-old"
    UNKNOWN = "unknown"  # not enough facts or table rows to say


@dataclass(frozen=True, slots=True)
class DriverVerdict:
    """Whether a driver runs code built with CUDA ``cuda``, and which driver would."""

    fit: DriverFit
    cuda: Cuda
    driver: str
    driver_cuda: Cuda | None
    floor: str | None  # the minor-version-compatibility floor of cuda's major (CUDA 11+)
    full: str | None  # the driver that supports every feature of cuda major.minor
    full_label: str = ""

    @property
    def needed(self) -> str | None:
        """The lowest driver that runs it at all: the MVC floor, else the full-feature driver."""
        return self.floor or self.full

    def driver_cuda_text(self) -> str:
        return cuda_text(self.driver_cuda) if self.driver_cuda else "unknown"

    def needed_text(self) -> str:
        """``"≥ 525.60.13 (CUDA 12.x minor-version compatibility; ≥ 570.26 for every CUDA 12.8
        feature)"`` and the like."""
        cuda = cuda_text(self.cuda)
        if self.floor and self.full and self.floor != self.full:
            return (
                f"≥ {self.floor} (the CUDA {self.cuda[0]}.x minor-version-compatibility floor); "
                f"≥ {self.full} for every CUDA {cuda} feature"
            )
        if self.needed:
            return f"≥ {self.needed} (CUDA {cuda})"
        return f"one that supports CUDA {cuda}"


def driver_cuda_of(tables: CompatTables, driver: str, reported: str | None) -> Cuda | None:
    """The CUDA version a driver supports: NVML's own report, else the driver-branch table."""
    if reported:
        parsed = parse_cuda(reported)
        if parsed:
            return parsed
    row = tables.branch_row(driver)
    return parse_cuda(row.cuda) if row else None


def judge_driver(
    tables: CompatTables,
    *,
    driver: str,
    driver_cuda: Cuda | None,
    cuda: Cuda,
    windows: bool = False,
) -> DriverVerdict:
    """Can ``driver`` (supporting up to ``driver_cuda``) run code built with CUDA ``cuda``?"""
    floor_row = tables.minor_version_floor(cuda[0]) if cuda[0] >= 11 else None
    floor = (floor_row.windows_driver if windows else floor_row.linux_driver) if floor_row else None
    full_row = tables.full_feature_driver(cuda, windows=windows)
    full = (full_row.windows_driver if windows else full_row.linux_driver) if full_row else None
    base = DriverVerdict(
        fit=DriverFit.UNKNOWN,
        cuda=cuda,
        driver=driver,
        driver_cuda=driver_cuda,
        floor=floor,
        full=full,
        full_label=full_row.label if full_row else "",
    )
    if driver_cuda is not None and driver_cuda >= cuda:
        return _with(base, DriverFit.NATIVE)
    if full is not None and driver_at_least(driver, full):
        return _with(base, DriverFit.NATIVE)
    if floor is not None:
        meets = driver_at_least(driver, floor)
        if meets is None:
            return base
        return _with(base, DriverFit.MINOR_VERSION if meets else DriverFit.TOO_OLD)
    if driver_cuda is not None and cuda[0] < 11:
        return _with(base, DriverFit.TOO_OLD)  # no minor-version compatibility before CUDA 11
    if driver_cuda is not None and driver_cuda[0] < cuda[0]:
        return _with(base, DriverFit.TOO_OLD)  # a major version is never bridged
    return base


def _with(verdict: DriverVerdict, fit: DriverFit) -> DriverVerdict:
    return DriverVerdict(
        fit=fit,
        cuda=verdict.cuda,
        driver=verdict.driver,
        driver_cuda=verdict.driver_cuda,
        floor=verdict.floor,
        full=verdict.full,
        full_label=verdict.full_label,
    )


class ArchFit(enum.Enum):
    SASS = "sass"  # native kernels for this GPU
    PTX = "ptx"  # only PTX the driver can JIT-compile
    PTX_BLOCKED = "ptx-blocked"  # only PTX, and the driver is too old to JIT it
    NONE = "none"  # no kernel image for this GPU


@dataclass(frozen=True, slots=True)
class ArchVerdict:
    fit: ArchFit
    cc: Cc
    target: ArchTarget | None

    @property
    def works(self) -> bool:
        return self.fit in (ArchFit.SASS, ArchFit.PTX)

    def explain(self, arch_text: str) -> str:
        sm = sm_name(self.cc)
        if self.fit is ArchFit.SASS and self.target is not None:
            if self.target.cc == self.cc:
                return f"includes {sm}"
            return f"includes {self.target.name}, which runs on {sm} (same major version)"
        if self.fit is ArchFit.PTX and self.target is not None:
            return (
                f"has no {sm} kernels, but its {self.target.name} PTX is JIT-compiled by the driver"
            )
        if self.fit is ArchFit.PTX_BLOCKED and self.target is not None:
            return (
                f"has no {sm} kernels, and its {self.target.name} PTX cannot be JIT-compiled by "
                "a driver older than the wheel's CUDA"
            )
        return f"has no kernels for {sm} ({arch_text})"


def judge_arch(targets: tuple[ArchTarget, ...], cc: Cc, *, ptx_jit_ok: bool = True) -> ArchVerdict:
    """Whether code compiled for ``targets`` can run on compute capability ``cc``."""
    cov = coverage(targets, cc)
    if cov.sass is not None:
        return ArchVerdict(ArchFit.SASS, cc, cov.sass)
    if cov.ptx is not None:
        return ArchVerdict(ArchFit.PTX if ptx_jit_ok else ArchFit.PTX_BLOCKED, cc, cov.ptx)
    return ArchVerdict(ArchFit.NONE, cc, None)
