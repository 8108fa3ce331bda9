"""NVIDIA's Xid catalog (``envdoctor/kb/xid.yaml``) as the check rules read it.

``explain`` reads the same file through ``envdoctor.kb.loader``, which validates it strictly;
importing ``envdoctor.kb`` loads every error signature too (about 0.2 s), which the 1 s probe
tier cannot pay. This reader takes the five fields it needs, only when a kernel log has Xid
events (a test keeps the two readings equal).
"""

from __future__ import annotations

import functools

from envdoctor.model.record import record

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

    from envdoctor.yamlsource import compose

    text = (resources.files("envdoctor") / "kb" / "xid.yaml").read_text(encoding="utf-8")
    root = _fields(compose(text, WHERE))
    catalog: dict[int, XidMeaning] = {}
    for node in getattr(root.get("codes"), "value", ()):
        entry = {key: str(getattr(value, "value", "")) for key, value in _fields(node).items()}
        code = int(entry["code"])
        catalog[code] = XidMeaning(
            code=code,
            name=entry["name"].strip(),
            meaning=entry["meaning"].strip(),
            action=entry["action"].strip(),
            severity=entry["severity"].strip(),
        )
    return catalog


def _fields(node: object) -> dict[str, object]:
    """A YAML mapping node as {key: value node} (anything else as an empty mapping)."""
    pairs = getattr(node, "value", ())
    if not isinstance(pairs, list):
        return {}
    return {str(key.value): value for key, value in pairs if hasattr(key, "value")}
