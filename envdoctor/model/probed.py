"""A value read from the machine, or the reason it could not be read.

A doctor needs the *why* of a missing value more than the value itself, so nothing is ever
collapsed to ``None``: it is either ``Found``, ``Absent`` (a fact about the host: the thing is
not there) or ``ProbeFailed`` (envdoctor could not decide: no permission, timeout, crash).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, Union

T = TypeVar("T")
U = TypeVar("U")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Found(Generic[T_co]):
    """The probe read a value. Covariant: a ``Found[str]`` is a ``Found[object]``."""

    value: T_co


@dataclass(frozen=True, slots=True)
class Absent:
    """The thing is not there; ``reason`` says how we know (e.g. "no such file /dev/nvidia-uvm")."""

    reason: str


@dataclass(frozen=True, slots=True)
class ProbeFailed:
    """The probe could not decide; ``error`` is one line, ``detail`` may hold more."""

    error: str
    detail: str = ""


Probed = Union[Found[T], Absent, ProbeFailed]  # noqa: UP007 (a generic alias needs Union on 3.10)


def value_or(probed: Probed[T], default: U) -> T | U:
    """The found value, or ``default`` when the value is absent or the probe failed."""
    return probed.value if isinstance(probed, Found) else default


def missing_because(name: str, probed: Probed[object]) -> str:
    """Why ``name`` is missing, naming it once: "nvcc is not on PATH …" as it is, a failure as
    "nvcc: probe failed: …" ("" when it was found)."""
    reason = why_missing(probed)
    return reason if not reason or name in reason else f"{name}: {reason}"


def why_missing(probed: Probed[object]) -> str:
    """One line saying why a value is missing ("" when it was found)."""
    if isinstance(probed, Absent):
        return probed.reason
    if isinstance(probed, ProbeFailed):
        return f"probe failed: {probed.error}"
    return ""
