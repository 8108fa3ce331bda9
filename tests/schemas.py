"""The JSON Schemas of docs/schema, for tests: a document is checked against its kind's schema.

Every schema file is registered under its ``$id``, so the ``$ref``s between them (the envelope,
the finding, the facts) resolve from the checkout, never over the network.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schema"
SNAPSHOT = "snapshot"  # the one document without the envelope: a data file (docs/snapshot.md)


@functools.cache
def schemas() -> dict[str, dict[str, Any]]:
    """Every schema file by name: ``check`` for docs/schema/check.schema.json."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        out[path.name.removesuffix(".schema.json")] = json.loads(path.read_text("utf-8"))
    return out


@functools.cache
def _registry() -> Registry[Any]:
    resources = [(s["$id"], Resource.from_contents(s)) for s in schemas().values()]
    return Registry().with_resources(resources)


@functools.cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schemas()[name], registry=_registry())


def validate(document: Any, schema: str | None = None) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` fits the schema of its
    ``kind`` (or the schema named ``schema``)."""
    name = schema if schema is not None else document["kind"]
    validator(name).validate(document)
