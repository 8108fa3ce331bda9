"""The drain budget of ``slurm-healthcheck``: a false alarm must not empty a partition.

A health check that drains on a bad reading (a new driver's Xid the catalog does not know, a
rule that misfires on a firmware update) would drain every node it runs on, one after the
other. So before it drains, the health check counts the nodes of the node's partitions that
envdoctor drained within the window (``--drain-window``, default 1 h), as slurmctld reports
them (``scontrol -o show node``: each drain reason carries Slurm's ``[user@time]`` stamp), and
refuses to drain when that would take more than ``--drain-max-share`` (default 10 %, and never
fewer than one node) of any of them. A refused drain leaves the node as it is and says what a
person runs to drain it by hand; the refusal is counted in a state file on the node.

slurmctld is the record the budget is judged on (it sees every node); the state file
(``$ENVDOCTOR_STATE_DIR``, else systemd's ``$STATE_DIRECTORY``, else ``/var/lib/envdoctor``;
0700, written atomically, never through a symlink: ``platform.cache.CacheDir``) keeps this
node's own drains (a drain whose Slurm reason has no time stamp counts from its time here) and
the refusals. A state file that cannot be read (corrupt, hostile, another owner's) is started
afresh, and it can only add drains to the count, never remove one. Two runs on one node take the
file's lock in turn, so the second counts the first's drain. Runs on different nodes are not
serialised: slurmctld's count is read just before the drain, so at most the nodes that drain in
the same second can exceed the share together.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envdoctor.platform.cache import CacheDir

DEFAULT_MAX_SHARE = 0.10
DEFAULT_WINDOW = 3600.0
STATE_FILE = "slurm-drains.json"
LOCK_FILE = "slurm-drains.lock"
DEFAULT_STATE_DIR = "/var/lib/envdoctor"
KEEP_REFUSALS = 20
KEEP_DRAINS = 50
_STAMP_TIME = re.compile(r"\[[^\]@]*@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*$")
_PREFIX = "envdoctor:"


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``max_share`` of a partition drained by envdoctor within ``window`` seconds."""

    max_share: float = DEFAULT_MAX_SHARE
    window: float = DEFAULT_WINDOW

    def allowed(self, total: int) -> int:
        """How many of ``total`` nodes envdoctor may drain within the window (at least one)."""
        return max(1, math.floor(self.max_share * total + 1e-9))


@dataclass(frozen=True, slots=True)
class ListedNode:
    """One node of ``scontrol -o show node``: what the budget needs of it."""

    name: str
    partitions: tuple[str, ...]
    drained: bool
    ours: bool
    since: float | None
    """When its drain reason was set (seconds since the epoch, local time), None: no stamp."""


def budget_from(args_get: Any, env: Mapping[str, str]) -> Budget:
    """The budget from the options (``args.get(name, default)``), else the environment
    (``ENVDOCTOR_DRAIN_MAX_SHARE``, ``ENVDOCTOR_DRAIN_WINDOW``), else the defaults; a value
    that is not a number in range is a usage error (raised as ``ValueError``)."""
    share = _number(
        args_get("drain_max_share", None), env.get("ENVDOCTOR_DRAIN_MAX_SHARE"), DEFAULT_MAX_SHARE
    )
    window = _number(
        args_get("drain_window", None), env.get("ENVDOCTOR_DRAIN_WINDOW"), DEFAULT_WINDOW
    )
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the drain share must be between 0 and 1, not {share:g}")
    if window < 0:
        raise ValueError(f"the drain window must be 0 s or more, not {window:g}")
    return Budget(max_share=share, window=window)


def _number(given: object, env_value: str | None, default: float) -> float:
    text = given if given is not None else env_value
    if text is None or text == "":
        return default
    try:
        value = float(str(text).strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if str(text).strip().endswith("%"):
        value /= 100
    return value


def state_dir(env: Mapping[str, str]) -> str:
    """Where the node keeps the state (see the module docstring)."""
    for key in ("ENVDOCTOR_STATE_DIR", "STATE_DIRECTORY"):
        value = env.get(key, "").split(":")[0]
        if value.startswith("/"):
            return value.rstrip("/") or "/"
    return DEFAULT_STATE_DIR


def parse_node_list(text: str) -> tuple[ListedNode, ...]:
    """``scontrol -o show node``: one node a line (the reason, when set, is its last field)."""
    nodes = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        head, _, reason = line.partition(" Reason=")
        fields = dict(token.split("=", 1) for token in head.split() if "=" in token)
        state = fields.get("State", "")
        base, *flags = state.split("+")
        drained = "DRAIN" in flags or base.upper() in ("DOWN", "FAIL", "DRAINED", "DRAINING")
        stamp = _STAMP_TIME.search(reason)
        nodes.append(
            ListedNode(
                name=fields.get("NodeName", ""),
                partitions=tuple(p for p in fields.get("Partitions", "").split(",") if p),
                drained=drained,
                ours=reason.strip().startswith(_PREFIX),
                since=_local_epoch(stamp.group(1)) if stamp else None,
            )
        )
    return tuple(nodes)


def _local_epoch(stamp: str) -> float | None:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True, slots=True)
class Judgement:
    """Whether the drain may go ahead, and the count behind it, per partition."""

    refused: bool
    why: str
    counts: tuple[tuple[str, int, int, int], ...]
    """(partition, drained by envdoctor within the window, nodes, allowed)."""


def judge(
    nodes: tuple[ListedNode, ...],
    me: str,
    budget: Budget,
    now: float,
    *,
    own_drains: Mapping[str, float] | None = None,
) -> Judgement:
    """May ``me`` be drained now? ``own_drains``: node → when this node's state file says
    envdoctor drained it (for a reason without Slurm's stamp)."""
    own_drains = own_drains or {}
    mine = next((n for n in nodes if n.name == me), None)
    if mine is None:
        return Judgement(True, f"node {me} is not in slurmctld's node list", ())
    if not mine.partitions:
        return Judgement(True, f"slurmctld lists no partition for node {me}", ())
    counts = []
    over = []
    for partition in mine.partitions:
        members = [n for n in nodes if partition in n.partitions]
        recent = [
            n
            for n in members
            if n.name != me and n.drained and n.ours and _within(n, budget, now, own_drains)
        ]
        allowed = budget.allowed(len(members))
        counts.append((partition, len(recent), len(members), allowed))
        if len(recent) + 1 > allowed:
            over.append((partition, len(recent), len(members), allowed))
    if over:
        partition, drained, total, allowed = over[0]
        return Judgement(
            True,
            f"envdoctor drained {drained} of the {total} nodes of partition {partition} within "
            f"{_span(budget.window)}; the limit is {allowed} "
            f"({budget.max_share * 100:g} % of {total}, at least 1)",
            tuple(counts),
        )
    return Judgement(False, "within the drain budget", tuple(counts))


def _within(node: ListedNode, budget: Budget, now: float, own: Mapping[str, float]) -> bool:
    since = node.since if node.since is not None else own.get(node.name)
    return since is None or now - since <= budget.window  # no time known: counted


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


# --- the state file ---------------------------------------------------------------------------


def empty_state() -> dict[str, Any]:
    return {"version": 1, "refusals": 0, "recent_refusals": [], "drains": []}


def load_state(cache: CacheDir) -> tuple[dict[str, Any], str]:
    """The state, checked field by field, and a note when it had to be started afresh."""
    data = cache.read(STATE_FILE)
    if data is None:
        return empty_state(), ""
    state = empty_state()
    note = ""
    refusals = data.get("refusals")
    if isinstance(refusals, int) and not isinstance(refusals, bool) and 0 <= refusals < 2**53:
        state["refusals"] = refusals
    else:
        note = "the state file's refusal count was not a count: started afresh"
    for key, keep in (("recent_refusals", KEEP_REFUSALS), ("drains", KEEP_DRAINS)):
        items = data.get(key)
        if not isinstance(items, list):
            note = note or f"the state file's {key} was not a list: started afresh"
            continue
        good = [item for item in items if _entry_ok(item)]
        if len(good) != len(items):
            note = note or f"the state file had malformed {key} entries: they were dropped"
        state[key] = good[-keep:]
    return state, note


def _entry_ok(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    when = item.get("time")
    return (
        isinstance(when, int | float)
        and not isinstance(when, bool)
        and math.isfinite(when)
        and isinstance(item.get("node"), str)
        and isinstance(item.get("reason"), str)
    )


def own_drains(state: Mapping[str, Any]) -> dict[str, float]:
    """node → the latest time this node's state says envdoctor drained it."""
    out: dict[str, float] = {}
    for item in state.get("drains", []):
        out[item["node"]] = max(out.get(item["node"], 0.0), float(item["time"]))
    return out


def record_drain(state: dict[str, Any], node: str, reason: str, now: float) -> None:
    state["drains"] = [*state["drains"], {"time": now, "node": node, "reason": reason}][
        -KEEP_DRAINS:
    ]


def record_refusal(state: dict[str, Any], node: str, reason: str, why: str, now: float) -> None:
    state["refusals"] = int(state["refusals"]) + 1
    entry = {"time": now, "node": node, "reason": reason, "why": why}
    state["recent_refusals"] = [*state["recent_refusals"], entry][-KEEP_REFUSALS:]
