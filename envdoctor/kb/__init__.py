"""The error knowledge base behind ``envdoctor explain`` and ``envdoctor run``.

Signatures are data (``signatures/*.yaml``, one entry per cause); ``loader`` validates them,
``matcher`` streams a log through them in bounded memory and linear time (``engines``: RE2 when
installed, else Python's re; ``sources`` reads plain and gzip logs), ``ranking`` orders what it found,
``hostcheck`` confirms or rules out a cause with live facts, ``render`` prints the result.
``store`` keeps the checked signatures in the user's cache, so that a command imports the loader
(and the YAML reader) only when a signature file or envdoctor changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from envdoctor.kb.matcher import Scanner, scan_bytes, scan_stream
from envdoctor.kb.model import (
    Cause,
    Explanation,
    HostCheck,
    KnowledgeBase,
    ScanResult,
    Signature,
    Verdict,
)
from envdoctor.kb.ranking import explain, with_host

if TYPE_CHECKING:
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:  # pragma: no cover (Python 3.10)
        from importlib.abc import Traversable
    from envdoctor.model.facts import Facts

__all__ = [
    "Cause",
    "Explanation",
    "HostCheck",
    "KnowledgeBase",
    "ScanResult",
    "Scanner",
    "Signature",
    "Verdict",
    "assess",
    "explain",
    "load_default_kb",
    "load_kb",
    "scan_bytes",
    "scan_stream",
]


def load_default_kb() -> KnowledgeBase:
    """The shipped knowledge base, read and checked once per process (``kb/loader.py``; the
    commands take it from the user's cache when it is there: ``kb/store.py``)."""
    from envdoctor.kb.loader import load_default_kb as load  # yaml: not on a cache hit's path

    return load()


def load_kb(root: Traversable | Path) -> KnowledgeBase:
    """The knowledge base under ``root``, read and checked (``kb/loader.py``)."""
    from envdoctor.kb.loader import load_kb as load

    return load(root)


def host_checks_for(cause: Cause, facts: Facts) -> tuple[HostCheck, ...]:
    """Run the live checks a cause's signature lists; a crashing check becomes a neutral note."""
    captures: dict[str, str] = {}
    for occurrence in cause.hit.occurrences:
        for key, value in occurrence.captures:
            captures.setdefault(key, value)
    return tuple(_run_check(name, captures, facts) for name in cause.signature.facts)


def _run_check(name: str, captures: Mapping[str, str], facts: Facts) -> HostCheck:
    from envdoctor.kb.hostcheck import HOST_CHECKS  # the facts model: only for --with-host

    try:
        return HOST_CHECKS[name](captures, facts)
    except Exception as exc:  # noqa: BLE001 (one broken check must not hide the explanation)
        return HostCheck(name, Verdict.NEUTRAL, f"check crashed: {type(exc).__name__}: {exc}")


def assess(explanation: Explanation, facts: Facts) -> Explanation:
    """Confirm or rule out each cause with the machine's live facts (``--with-host``)."""
    checks: Mapping[str, tuple[HostCheck, ...]] = {
        cause.id: host_checks_for(cause, facts) for cause in explanation.causes
    }
    return with_host(explanation, checks)
