"""The one JSON envelope: every JSON document a command prints starts with the same five keys.

``schema_version`` (of the document's kind), ``kind``, ``envdoctor_version``, ``status`` and
``exit_code``, then the kind's own fields. So a script reads any output the same way: ``kind``
says what the rest is, ``exit_code`` is the exit status of the process that printed it, and
``status`` is envdoctor's verdict in the same three words everywhere. Each kind has a JSON
Schema, ``docs/schema/<kind>.schema.json`` (listed in docs/schema/README.md), and
tests/contract/test_json_outputs.py validates every command's output against it.

Next to the leaves (it needs ``exitcodes`` alone): the JSON builders of render, compat, remedy,
kb and fleet all wrap their payload here, and those packages may not all import one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from envdoctor import __version__, exitcodes

# kind -> the schema_version of its documents. A kind's number goes up when one of its fields
# is renamed or removed (adding one is no bump); docs/schema/<kind>.schema.json pins it too.
KINDS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "check": 2,  # 1: a `tool` block instead of `kind` and `envdoctor_version`
        "probe": 2,  # 1: kind "envdoctor-probe"
        "recommend": 2,  # 1: kind "envdoctor-recommendation"; `status` was today's `outcome`
        "fix-plan": 1,  # 1 had no kind, status or exit_code; nothing renamed
        "smoke": 2,  # 1: `command: "smoke"` instead of `kind`
        "reproduce": 2,  # 1: `command: "smoke --reproduce"`; `kind` was today's `reproduce`
        "explain": 2,  # 1: `status` was today's `outcome`
        "run": 2,  # 1: an explain document (on stderr) with command, returncode, blocking
        "diff": 2,  # 1: kind "envdoctor-diff", no status or exit_code
        "tables": 1,  # 1 had no envelope at all; nothing renamed
    }
)

HEALTHY: Final = "healthy"
UNHEALTHY: Final = "unhealthy"
# The word for exit codes 0, 1 and 2, everywhere (envdoctor/exitcodes.py).
STATUS_OF_EXIT: Final[Mapping[int, str]] = MappingProxyType(
    {code: status for status, code in exitcodes.BY_STATUS.items()}
)
KEYS: Final = ("schema_version", "kind", "envdoctor_version", "status", "exit_code")


def envelope(
    kind: str, payload: Mapping[str, Any], *, exit_code: int, status: str | None = None
) -> dict[str, Any]:
    """``payload`` behind the envelope of ``kind``.

    ``status`` is the one ``exit_code`` stands for unless given: only a kind whose process does
    not exit with its verdict (``fix-plan`` exits 0 once the plan is written, ``run`` with the
    command's own code) gives its own. A mistake here is a bug, never a user's input: it raises.
    """
    if kind not in KINDS:
        raise ValueError(f"no JSON kind {kind!r} (known: {', '.join(KINDS)})")
    verdict = STATUS_OF_EXIT[exit_code] if status is None else status
    if verdict not in STATUS_OF_EXIT.values():
        raise ValueError(f"status {verdict!r} is not healthy, unhealthy or unknown")
    clash = set(KEYS) & payload.keys()
    if clash:
        raise ValueError(f"the {kind} payload has envelope keys: {', '.join(sorted(clash))}")
    return {
        "schema_version": KINDS[kind],
        "kind": kind,
        "envdoctor_version": __version__,
        "status": verdict,
        "exit_code": exit_code,
        **payload,
    }
