"""Quantities as people read them in findings and reports: binary sizes, counted nouns; and
numbers read from text nobody vouches for."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def format_bytes(n: int) -> str:
    """MiB below 1 GiB (where the difference matters: "210 MiB"), else GiB ("79.1 GiB")."""
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def binary_size(n: int) -> str:
    """A size in the largest binary unit it reaches: "1 byte", "512 bytes", "976.6 KiB",
    "1.5 MiB", "2.0 GiB" (a log's size, where every size from bytes up occurs)."""
    return scaled(n, 1) or plural(n, "byte")


def scaled(n: int, digits: int) -> str | None:
    """``n`` bytes in the largest binary unit its size reaches, with ``digits`` decimals; None
    below 1 KiB (the caller says bytes its own way)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return None


def each(n: int, noun: str) -> str:
    """All ``n`` of something, as said: "the GPU", "both GPUs", "all 8 GPUs"."""
    if n == 1:
        return f"the {noun}"
    return f"both {noun}s" if n == 2 else f"all {n:,} {noun}s"


def plural(n: int, noun: str, many: str = "") -> str:
    """``n`` and its noun in the right number: "1 line", "0 lines", "1,024 lines" (``many``
    for a plural that is not noun + s: "1 copy", "2 copies")."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def whole(text: str | None, digits: int = 18) -> int | None:
    """``text`` as a whole number when it is one to a person and to C: ASCII digits only, at
    most ``digits`` of them; else None. ``str.isdigit()`` alone lets "²" and 5000-digit runs
    through, on which ``int()`` raises (Python refuses more than 4300 digits)."""
    if not text or len(text) > digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)
