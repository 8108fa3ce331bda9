"""Analyzers: turn a signature's captured values into specific notes.

A signature names one with ``analyzer:``. Each is a pure function
``(captures, knowledge base) -> notes``; it never raises on odd values, it just says less.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from envdoctor.kb.model import KnowledgeBase

Analyzer = Callable[[Mapping[str, str], KnowledgeBase], tuple[str, ...]]

_UNITS = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1 << 10,
    "kb": 1000,
    "mib": 1 << 20,
    "mb": 1000**2,
    "gib": 1 << 30,
    "gb": 1000**3,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")
GiB = 1 << 30


def parse_size(text: str | None) -> int | None:
    """``"2.00 GiB"`` → bytes; None when the text is not a size."""
    if not text:
        return None
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = _UNITS.get(m.group(2).lower())
    if unit is None:
        return None
    return int(float(m.group(1)) * unit)


def human(n: int) -> str:
    """Bytes for a person: 1.50 GiB, 210.00 MiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


def analyze_oom(captures: Mapping[str, str], kb: KnowledgeBase) -> tuple[str, ...]:
    """Read the caching allocator's numbers and say which kind of out-of-memory this is."""
    del kb
    requested = parse_size(captures.get("requested"))
    total = parse_size(captures.get("total"))
    free = parse_size(captures.get("free"))
    allocated = parse_size(captures.get("allocated"))
    reserved = parse_size(captures.get("reserved"))
    unallocated = parse_size(captures.get("unallocated"))
    in_use = parse_size(captures.get("in_use_self") or captures.get("in_use"))
    gpu = captures.get("gpu")
    notes: list[str] = []
    where = f"GPU {gpu}" if gpu is not None else "the GPU"
    numbers = [
        f"asked for {human(requested)}" if requested is not None else "",
        f"{human(free)} free of {human(total)}" if free is not None and total is not None else "",
        f"PyTorch holds {human(allocated)} allocated" if allocated is not None else "",
        f"{human(reserved)} reserved" if reserved is not None else "",
    ]
    summary = "; ".join(n for n in numbers if n)
    if summary:
        notes.append(f"Allocator numbers on {where}: {summary}.")
    if requested is not None and total is not None and requested > total:
        notes.append(
            f"One allocation of {human(requested)} is larger than the whole GPU "
            f"({human(total)}): a tensor shape is far too big (batch × sequence × features), "
            "not a fragmentation or sharing problem."
        )
        return tuple(notes)
    if unallocated is None and reserved is not None and allocated is not None:
        unallocated = max(0, reserved - allocated)
    if (
        unallocated is not None
        and requested is not None
        and unallocated >= max(requested, GiB // 2)
    ):
        notes.append(
            f"{human(unallocated)} is reserved by PyTorch but unallocated (fragmentation): set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before starting the process."
        )
    if total is not None and free is not None:
        ours = in_use if in_use is not None else reserved
        if ours is not None:
            others = total - free - ours
            if others > max(total // 5, GiB // 2):
                notes.append(
                    f"About {human(others)} of {where} is used outside this process: another "
                    "process holds GPU memory (see nvidia-smi, or envdoctor explain --with-host)."
                )
            elif free < max(total // 20, 256 << 20):
                notes.append(
                    "This process itself filled the GPU: lower the batch size or sequence "
                    "length, use mixed precision or activation checkpointing."
                )
    return tuple(notes)


def analyze_xid(captures: Mapping[str, str], kb: KnowledgeBase) -> tuple[str, ...]:
    """Look the Xid code up in NVIDIA's catalog: what it means, what to do."""
    raw = captures.get("xid")
    if raw is None or not raw.isdigit():
        return ()
    entry = kb.xid.get(int(raw))
    if entry is None:
        return (
            f"Xid {raw} is not in envdoctor's catalog; look it up in NVIDIA's Xid catalog "
            "(docs.nvidia.com/deploy/xid-errors).",
        )
    return (
        f"Xid {entry.code} ({entry.name}): {entry.meaning}",
        f"Action: {entry.action}",
    )


def analyze_driver_too_old(captures: Mapping[str, str], kb: KnowledgeBase) -> tuple[str, ...]:
    """torch prints the driver's CUDA version times 1000 (11040 = CUDA 11.4)."""
    del kb
    raw = captures.get("found")
    if raw is None or not raw.isdigit():
        return ()
    version = int(raw)
    cuda = f"{version // 1000}.{version % 1000 // 10}"
    return (
        f"The driver supports CUDA up to {cuda} (found version {raw}); install a torch built for "
        f"CUDA {cuda} or older, or upgrade the driver.",
    )


ANALYZERS: dict[str, Analyzer] = {
    "oom": analyze_oom,
    "xid": analyze_xid,
    "driver-too-old": analyze_driver_too_old,
}
