"""The checked knowledge base, kept in the user's cache between runs.

Reading the signatures means importing the YAML reader (with ``importlib.resources`` and
``pathlib``), parsing ten files and checking every pattern against its examples: ~0.1 s, half of
an ``explain`` of a short log and of every ``envdoctor run``. What that yields depends only on
the knowledge-base files and on the code that reads them, so it is stored as the compatibility
tables are (``compat/store.py``): JSON in the user's cache (``platform/cache.py``), under a
digest of envdoctor's and Python's versions, the reader's source and every file's path and
bytes (``cachekey.py``). Any change to any of them, or an entry that no longer decodes, is a
miss: the files are read and checked again, then stored (unless a file changed while they were
read). A hit imports neither yaml nor the loader, and compiles no regex with Python's ``re``
when RE2 does the matching. Each install keeps one entry, named after its directory, so two
installs sharing a cache directory do not replace each other's (as with the tables).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from envdoctor.cachekey import files_digest, install_entry, through_cache
from envdoctor.inputfile import MAX_YAML_BYTES

if TYPE_CHECKING:
    from envdoctor.kb.model import KnowledgeBase
    from envdoctor.platform.cache import CacheDir

ENTRY = install_entry("knowledge-base")
FORMAT = 1
SHIPPED = os.path.dirname(os.path.realpath(__file__))
READER_CODE = (
    "kb/loader.py",
    "kb/model.py",
    "kb/anchor.py",
    "kb/ere.py",
    "kb/analyzers.py",
    "model/codec.py",
    "model/finding.py",
    "yamlsource.py",
    "inputfile.py",
)
"""The modules whose behaviour shapes the stored knowledge base (relative to the package)."""


def cached_kb(cache: CacheDir | None, root: str = SHIPPED) -> KnowledgeBase:
    """The knowledge base under ``root`` (by default the shipped one), from ``cache`` when it
    holds the very same one; read and checked otherwise (no cache: always)."""
    return through_cache(
        cache, (ENTRY, FORMAT, "kb"), lambda: _digest(root), lambda: _read(root), _encode, _decode
    )


def _read(root: str) -> KnowledgeBase:
    from envdoctor.kb import loader

    if root == SHIPPED:
        return loader.load_default_kb()  # kept for the process: other callers share it
    from pathlib import Path

    return loader.load_kb(Path(root))


def _files(root: str) -> list[str] | None:
    """What the loader reads under ``root``, in a fixed order; None when ``root`` is not a
    directory here (a zipped install: read without the cache)."""
    signatures = os.path.join(root, "signatures")
    try:
        names = sorted(n for n in os.listdir(signatures) if n.endswith(".yaml"))
    except OSError:
        return None
    extra = [os.path.join(root, "prefilter.yaml")]
    return [os.path.join(signatures, n) for n in names] + [p for p in extra if os.path.exists(p)]


def _digest(root: str) -> str | None:
    files = _files(root)
    if files is None:
        return None
    return files_digest(READER_CODE, [(root, files)], limit=MAX_YAML_BYTES)


def _encode(kb: KnowledgeBase) -> dict[str, Any]:
    from envdoctor.model.codec import encode

    return {
        "signatures": encode(kb.signatures),
        "triggers": list(kb.triggers),
    }


def _decode(data: Any) -> KnowledgeBase:
    """``_encode``'s output back; a ``ValueError`` (``DecodeError``) or ``TypeError``: a miss."""
    from envdoctor.kb.model import KnowledgeBase, Signature
    from envdoctor.model.codec import decode

    if not isinstance(data, dict):
        raise TypeError("not a stored knowledge base")
    signatures = decode(tuple[Signature, ...], data.get("signatures"))
    triggers = decode(tuple[str, ...], data.get("triggers"))
    return KnowledgeBase(signatures=signatures, triggers=triggers)
