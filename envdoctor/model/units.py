"""Quantities as people read them in findings."""

from __future__ import annotations

MiB = 1 << 20
GiB = 1 << 30


def format_bytes(n: int) -> str:
    """MiB below 1 GiB (where the difference matters: "210 MiB"), else GiB ("79.1 GiB")."""
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"
