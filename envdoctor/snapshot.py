"""Snapshots: all facts of one machine as a versioned, redacted JSON file (docs/snapshot.md).

``envdoctor collect -o snap.json`` writes one; ``envdoctor check --snapshot snap.json`` judges
it offline with the same rules, so it gives the same findings as the live run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envdoctor.errors import EnvdoctorError, values_hidden
from envdoctor.inputfile import read_input
from envdoctor.model import codec
from envdoctor.model.facts import SNAPSHOT_SCHEMA_VERSION, Facts
from envdoctor.render.redact import Redactor
from envdoctor.terminal import cut, json_document, quoted

KIND = "envdoctor-snapshot"
MAX_SNAPSHOT_BYTES = 64 << 20  # a real one is well under 1 MiB, even with thousands of processes
MAX_SNAPSHOT_VALUES = 2_000_000  # JSON values (commas and brackets): memory stays under ~200 MB


def snapshot_data(facts: Facts, *, redact: bool = True) -> dict[str, Any]:
    encoded = codec.encode(facts)
    if redact:
        encoded = Redactor(facts).tree(encoded)
    return {
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "kind": KIND,
        "redacted": redact,
        "facts": encoded,
    }


def dump_snapshot(facts: Facts, *, redact: bool = True) -> str:
    return json_document(snapshot_data(facts, redact=redact))


def parse_snapshot(text: str, *, where: str) -> Facts:
    """Facts from snapshot text; a malformed snapshot is an ``EnvdoctorError`` naming the spot."""
    # Counted before any tree is built: 64 MiB of `[],` made 21 million lists (1.7 GB) before
    # the decoder's type checks could refuse them. A comma or bracket inside a string counts
    # too: an over-count, far from a real snapshot's few thousand.
    values = text.count(",") + text.count("[") + text.count("{")
    if values > MAX_SNAPSHOT_VALUES:
        raise EnvdoctorError(
            f"not a snapshot: more than {MAX_SNAPSHOT_VALUES:,} values "
            "(a real one holds a few thousand)",
            where=where,
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EnvdoctorError(f"not valid JSON: {exc.msg}", where=f"{where}:{exc.lineno}") from None
    except ValueError as exc:  # a number of thousands of digits (int() refuses it)
        raise EnvdoctorError(f"not a snapshot: {exc}", where=where) from None
    except RecursionError:  # [[[[… far deeper than any snapshot
        raise EnvdoctorError("not a snapshot: nested far too deeply", where=where) from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise EnvdoctorError(
            f'not an envdoctor snapshot (expected "kind": "{KIND}")',
            where=where,
            hint="write one with `envdoctor collect -o FILE`",
        )
    version = data.get("schema_version")
    if version != SNAPSHOT_SCHEMA_VERSION:
        raise EnvdoctorError(
            f"snapshot schema_version {_shown(version)} is not supported "
            f"(this envdoctor reads {SNAPSHOT_SCHEMA_VERSION})",
            where=where,
        )
    try:
        return codec.decode(Facts, data.get("facts"))
    except codec.DecodeError as exc:
        # the path and the problem may quote the file's own keys and values
        detail = f"({values_hidden()})" if values_hidden() else str(exc)
        raise EnvdoctorError(f"malformed snapshot: {detail}", where=where) from None


def _shown(value: object) -> str:
    """A value of the snapshot for a message: a number as written, text quoted; neither when
    the file is not readable by everyone (``errors.keep_private``)."""
    if isinstance(value, str) or values_hidden():
        return quoted(str(value))
    return cut(repr(value))


def load_snapshot(path: Path) -> Facts:
    """A snapshot file: a regular file of at most ``MAX_SNAPSHOT_BYTES`` (see ``read_input``)."""
    return parse_snapshot(read_input(path, limit=MAX_SNAPSHOT_BYTES), where=str(path))
