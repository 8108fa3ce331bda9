"""NVIDIA's Xid catalog (``envdoctor/catalogs/xid.yaml``): the one reading of it.

``explain`` (the ``kernel.xid`` signature's notes) and ``envdoctor check`` (the ``gpu.xid`` rule
over the kernel log) both look codes up here, so a code means the same in both. The file is
read, and PyYAML imported, only when an Xid was seen, once per process: the 1 s probe tier of
``check`` pays for it only on a node that logged one.

Each code keeps NVIDIA's columns as published (mnemonic, description, the products it applies
to, the immediate and investigatory resolution buckets, the Xid 154 linkage) beside
envdoctor's reading of them: a title, what it means, what to do, and a severity class the
rules turn into a finding's severity.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envdoctor.catalogs import catalog_path, read_catalog, read_root, where

if TYPE_CHECKING:  # check's probe tier goes without pathlib and importlib.resources
    from pathlib import Path

    from envdoctor.yamlsource import Map, Reader

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:  # pragma: no cover (Python 3.10)
        from importlib.abc import Traversable

SEVERITIES = frozenset({"app", "driver", "hardware", "info"})
PRODUCTS = ("A100", "H100", "B100", "GB200")  # the catalog's "Applies to" columns
XID_ENTRY_KEYS = (
    "mnemonic",
    "description",
    "applies_to",
    "immediate",
    "investigatory",
    "xid154",
    "title",
    "meaning",
    "action",
    "severity",
    "legacy_description",
    "legacy_causes",
)
# The causes NVIDIA's earlier (Volta and older) Xid listing ticks for a code.
LEGACY_CAUSES = frozenset(
    {"hardware", "driver", "application", "system-memory", "bus", "thermal", "framebuffer"}
)
# Where an investigatory bucket says nothing beyond the code being unused, the action is the
# immediate one alone.
_NOTHING_MORE = frozenset({"N/A; Unused"})


@dataclass(frozen=True, slots=True)
class XidCode:
    """One code of the catalog."""

    code: int
    mnemonic: str  # NVIDIA's, e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
    description: str  # NVIDIA's; "Unused": only Volta or older GPUs log it
    applies_to: tuple[str, ...]  # of PRODUCTS; () for an unused code
    immediate: str  # NVIDIA's resolution bucket, "" where the catalog gives none
    investigatory: str
    xid154: str  # NVIDIA's "Xid 154 linkage" column ("CUDA 12.7; GPU driver R565"), or ""
    name: str  # envdoctor's title (the description where none is written)
    meaning: str
    action: str
    severity: str  # of SEVERITIES
    source: str
    legacy_description: str = ""  # NVIDIA's earlier listing (Volta and older), or ""
    legacy_causes: tuple[str, ...] = ()  # of LEGACY_CAUSES

    @property
    def unused(self) -> bool:
        """Whether NVIDIA lists the code as unused on Ampere and newer GPUs."""
        return self.description == "Unused"


@functools.cache
def xid_catalog() -> dict[int, XidCode]:
    """The shipped catalog by code (read once per process)."""
    return read_xid_catalog(catalog_path("xid"))


def read_xid_catalog(path: Traversable | Path) -> dict[int, XidCode]:
    """Read and check an Xid catalog; every problem is an ``EnvdoctorError`` at ``file:line``."""
    from envdoctor.yamlsource import Reader

    generic = read_catalog(path, extra_keys=XID_ENTRY_KEYS)  # the common keys, checked
    reader = Reader(where(path))
    top = read_root(path, reader, extra=("buckets",))
    buckets = _buckets(top, reader)
    codes: dict[int, XidCode] = {}
    for node, common in zip(
        reader.sequence(top.items["entries"], "entries"), generic.entries, strict=True
    ):
        item = reader.mapping(node, "entries")
        code = reader.integer(item.items["code"], "entries.code", low=1, high=65535)
        codes[code] = _code(code, item, reader, buckets, common.source)
    return codes


def _buckets(top: Map, reader: Reader) -> dict[str, str]:
    if "buckets" not in top.items:
        raise reader.missing(top, "buckets", "the file")
    node = reader.mapping(top.items["buckets"], "buckets")
    return {key: reader.text(value, f"buckets.{key}") for key, value in node.items.items()}


def _code(code: int, item: Map, reader: Reader, buckets: dict[str, str], source: str) -> XidCode:
    def text(key: str) -> str:
        return reader.optional_text(item, key, "entries") or ""

    for key in ("mnemonic", "description", "severity", "applies_to"):
        reader.required(item, key, "entries")
    severity = text("severity")
    if severity not in SEVERITIES:
        raise reader.error(
            item.items["severity"], f"entries.severity: one of {', '.join(sorted(SEVERITIES))}"
        )
    applies = reader.text_list(item.items["applies_to"], "entries.applies_to")
    for product in applies:
        if product not in PRODUCTS:
            raise reader.error(
                item.items["applies_to"],
                f"entries.applies_to: {product!r} is not one of {', '.join(PRODUCTS)}",
            )
    for key in ("immediate", "investigatory"):
        bucket = text(key)
        if bucket and bucket not in buckets:
            raise reader.error(
                item.items[key], f"entries.{key}: {bucket!r} is not a bucket under `buckets:`"
            )
    mnemonic, description = text("mnemonic"), text("description")
    immediate, investigatory = text("immediate"), text("investigatory")
    legacy = text("legacy_description")
    causes = (
        reader.text_list(item.items["legacy_causes"], "entries.legacy_causes")
        if "legacy_causes" in item.items
        else ()
    )
    for cause in causes:
        if cause not in LEGACY_CAUSES:
            raise reader.error(
                item.items["legacy_causes"],
                f"entries.legacy_causes: {cause!r} is not one of {', '.join(sorted(LEGACY_CAUSES))}",
            )
    unused_name = legacy or f"{mnemonic} (unused)"
    return XidCode(
        code=code,
        mnemonic=mnemonic,
        description=description,
        applies_to=applies,
        immediate=immediate,
        investigatory=investigatory,
        xid154=text("xid154"),
        name=text("title") or (unused_name if description == "Unused" else description),
        meaning=text("meaning") or _meaning(description, mnemonic, legacy),
        action=text("action") or _action(immediate, investigatory, buckets),
        severity=severity,
        source=source,
        legacy_description=legacy,
        legacy_causes=causes,
    )


def _meaning(description: str, mnemonic: str, legacy: str) -> str:
    if description == "Unused" and legacy:
        return (
            f"on Volta and older GPUs: {legacy} ({mnemonic}); NVIDIA lists the code as unused "
            "on Ampere and newer"
        )
    if description == "Unused":
        return (
            f"{mnemonic}: NVIDIA lists the code as unused on Ampere and newer GPUs "
            "(deprecated, or logged by Volta and older GPUs only)"
        )
    return description


def _action(immediate: str, investigatory: str, buckets: dict[str, str]) -> str:
    if not immediate:
        return buckets.get(investigatory, "contact support if it recurs")
    first = buckets[immediate]
    if not investigatory or investigatory in _NOTHING_MORE or investigatory == immediate:
        return first
    return f"{first}; if it recurs: {buckets[investigatory]}"
