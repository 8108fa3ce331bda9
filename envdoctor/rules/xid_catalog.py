"""NVIDIA's Xid catalog (``envdoctor/kb/xid.yaml``) as the check rules read it.

``explain`` reads the same file through ``envdoctor.kb.loader``, which validates it strictly;
importing ``envdoctor.kb`` loads every error signature too (about 0.2 s), which the 1 s probe
tier cannot pay. This reader takes the five fields it needs, only when a kernel log has Xid
events (a test keeps the two readings equal).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from envdoctor.model.record import record

if TYPE_CHECKING:
    from envdoctor.yamlsource import Map

WHERE = "envdoctor/kb/xid.yaml"


@record
class XidMeaning:
    """One catalog entry; ``severity`` is "app", "driver", "hardware" or "info"."""

    code: int
    name: str
    meaning: str
    action: str
    severity: str


@functools.cache
def xid_catalog() -> dict[int, XidMeaning]:
    """Every catalog entry by Xid code (read once per process)."""
    # Imported here: yaml and importlib.resources (which loads shutil) only when an Xid was logged.
    from importlib import resources

    from envdoctor.yamlsource import Reader, load

    read = Reader(WHERE)
    root = read.mapping(load(resources.files("envdoctor") / "kb" / "xid.yaml", where=WHERE), WHERE)
    catalog: dict[int, XidMeaning] = {}
    for node in read.sequence(read.required(root, "codes", WHERE), "codes"):
        entry = read.mapping(node, "codes")

        def field(key: str, entry: Map = entry) -> str:
            return read.text(read.required(entry, key, "codes"), key)

        code = read.integer(read.required(entry, "code", "codes"), "code", low=1)
        catalog[code] = XidMeaning(
            code=code,
            name=field("name"),
            meaning=field("meaning"),
            action=field("action"),
            severity=field("severity"),
        )
    return catalog
