"""``tables show NAME --json`` (docs/schema/tables.schema.json): one table's rows as loaded."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from envdoctor.compat.tables import CompatTables
from envdoctor.envelope import envelope


def table_json(name: str, tables: CompatTables, fields: Sequence[str]) -> dict[str, Any]:
    """The rows of ``fields`` (the CompatTables fields table ``name`` fills), each a plain
    object with the row's own field names; ``origins`` are the directories read, in order."""
    rows = {f: [_plain(row) for row in getattr(tables, f)] for f in fields}
    payload = {"table": name, "origins": list(tables.origins), **rows}
    return envelope("tables", payload, exit_code=0)  # showing a table that loaded is no verdict


def _plain(row: object) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(row):  # type: ignore[arg-type]  # every row is a record
        value = getattr(row, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = _plain(value)
        elif isinstance(value, tuple):
            value = [_plain(v) if dataclasses.is_dataclass(v) else v for v in value]
        out[f.name] = value
    return out
