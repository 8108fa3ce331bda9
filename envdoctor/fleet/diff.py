"""Two snapshots side by side, only what differs: "it works on node A and fails on node B".

Facts are flattened to dotted paths (``nvml.gpus[0].name``, ``kernel.modules[nvidia_uvm]``,
``env.variables[CUDA_VISIBLE_DEVICES]``): lists of records are keyed by what identifies a record
(GPU index, module name, file path, PID) rather than by position, so one extra module does not
make every later line differ. Values that change from minute to minute (free memory, processes,
timestamps) are left out unless asked for.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from envdoctor.envelope import envelope
from envdoctor.fleet.requirements import format_bytes
from envdoctor.model import codec
from envdoctor.model.facts import Facts

MISSING = "(none)"

# Paths that differ between any two runs, even on one healthy node.
VOLATILE = re.compile(
    r"(^collected_at$|^host\.hostname$|\.uuid$|\.memory\.(used|free)$|\.processes\b"
    r"|\.throttle_reasons$|\.pcie\.gen$|^kernel\.modules\[[^]]+\]\.(refcount|used_by)$"
    r"|\.temperature$|\.power_draw$|\.utilization\.|^torch\.torch\.from_cache$"
    r"|\.sm_clock\.current$|^persistenced\.pid$|^nvml\.interconnect\.seconds$)"
)
_IDENTITY_KEYS = ("index", "name", "path", "pid", "address")
_BYTES = re.compile(r"(\.memory\.(total|used|free)|\.used_memory)$")


@dataclass(frozen=True, slots=True)
class Difference:
    """One fact that differs: its dotted path and each side's value (``MISSING`` if none)."""

    path: str
    a: str
    b: str
    volatile: bool


def diff_facts(a: Facts, b: Facts) -> tuple[Difference, ...]:
    """Every differing fact, in path order, each marked volatile or not.

    Where a whole part differs (a GPU only one node has, NVML that failed on one node) the part
    is one line, not one line per field under it.
    """
    left, right = flatten_facts(a), flatten_facts(b)
    paths = sorted(set(left) | set(right), key=_path_order(left, right))
    differing = {
        p: (_value(left, p), _value(right, p)) for p in paths if _value(left, p) != _value(right, p)
    }
    return tuple(
        Difference(p, _shown(left, p, va), _shown(right, p, vb), bool(VOLATILE.search(p)))
        for p, (va, vb) in differing.items()
        if not any(ancestor in differing for ancestor in _ancestors(p))
    )


def diff_json(
    a: str, b: str, differences: Sequence[Difference], *, exit_code: int
) -> dict[str, Any]:
    """``diff --json`` (docs/schema/diff.schema.json): every difference, volatile ones marked;
    ``exit_code`` is the command's (volatile differences count only with ``--all``)."""
    payload = {
        "a": a,
        "b": b,
        "differences": [
            {"path": d.path, "a": d.a, "b": d.b, "volatile": d.volatile} for d in differences
        ],
    }
    return envelope("diff", payload, exit_code=exit_code)


SUMMARY_FIELDS = 4


def _shown(flat: dict[str, str], path: str, value: str) -> str:
    """A part that only one side has, summed up: what is in it, not just that it is there."""
    if value != "present":
        return value
    starts = (path + ".", path + "[")
    under = [(p[len(path) :].lstrip("."), v) for p, v in flat.items() if p.startswith(starts)]
    leaves = [(name, v) for name, v in under if v != "present"]
    if not leaves:
        return value
    reasons = Counter(v for _name, v in leaves if v.startswith(("probe failed:", "absent:")))
    head = "present: "
    if reasons:
        reason, count = reasons.most_common(1)[0]
        if count > 1 and 2 * count > len(leaves):  # e.g. a lost GPU: nearly every fact failed
            head = f"present; {count} of {len(leaves)} facts {reason}; others: "
            leaves = [(name, v) for name, v in leaves if v != reason]
            if not leaves:
                return f"present; every fact {reason}"
    shown = ", ".join(f"{name}={v}" for name, v in leaves[:SUMMARY_FIELDS])
    more = f", … {len(leaves) - SUMMARY_FIELDS} more" if len(leaves) > SUMMARY_FIELDS else ""
    return head + shown + more


def _value(flat: dict[str, str], path: str) -> str:
    """The value at ``path``: a leaf, ``present`` for a part with facts under it, or ``MISSING``."""
    if path in flat:
        return flat[path]
    under = (path + ".", path + "[")
    return "present" if any(p.startswith(under) for p in flat) else MISSING


def _ancestors(path: str) -> list[str]:
    """``nvml.gpus[0].name`` → ``nvml``, ``nvml.gpus``, ``nvml.gpus[0]``."""
    return [path[: m.start()] for m in re.finditer(r"[.\[]", path) if m.start() > 0]


def flatten_facts(facts: Facts) -> dict[str, str]:
    """``{dotted path: value as text}`` for every leaf fact."""
    return dict(_flatten(codec.encode(facts), ""))


def _path_order(left: dict[str, str], right: dict[str, str]) -> Any:
    """Keep the facts' own order (host, kernel, nvml …) rather than sorting alphabetically."""
    order = {p: i for i, p in enumerate([*left, *(p for p in right if p not in left)])}
    return order.__getitem__


def _flatten(data: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(data, dict):
        if set(data) == {"found"}:
            yield from _flatten(data["found"], path)
        elif set(data) == {"absent"}:
            yield path, f"absent: {data['absent']}"
        elif "failed" in data and set(data) <= {"failed", "detail"}:
            yield path, f"probe failed: {data['failed']}"
        else:
            for key, value in data.items():
                yield from _flatten(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        yield from _flatten_list(data, path)
    elif isinstance(data, int) and not isinstance(data, bool) and _BYTES.search(path):
        yield path, f"{data} ({format_bytes(data)})"
    else:
        yield path, data if isinstance(data, str) else json.dumps(data)


def _flatten_list(items: list[Any], path: str) -> Iterator[tuple[str, str]]:
    if not items:
        return
    if all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in items):
        for key, value in items:  # (name, value) pairs: env variables, wheels, libraries
            yield from _flatten(value, f"{path}[{key}]")
        return
    if all(not isinstance(i, dict | list) for i in items):
        yield path, ", ".join(i if isinstance(i, str) else json.dumps(i) for i in items)
        return
    key = _identity(items)
    for position, item in enumerate(items):
        if not key:
            yield from _flatten(item, f"{path}[{position}]")
            continue
        record = f"{path}[{_label(item, key)}]"
        yield record, "present"
        for name, value in item.items():
            if name != key:
                yield from _flatten(value, f"{record}.{name}")


def _identity(items: list[Any]) -> str | None:
    """The field that names each record uniquely (a GPU's index, a module's name …), if any."""
    if not all(isinstance(i, dict) for i in items):
        return None
    for key in _IDENTITY_KEYS:
        labels = [_label(i, key) for i in items]
        if all(labels) and len(set(labels)) == len(labels):
            return key
    return None


def _label(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if isinstance(value, dict) and set(value) == {"found"}:
        value = value["found"]
    return "" if value is None or isinstance(value, dict | list) else str(value)
