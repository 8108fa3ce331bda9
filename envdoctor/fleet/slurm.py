"""Slurm node state through ``scontrol``: read it, and drain or resume the node envdoctor judged.

The rules follow LBNL NHC's ``node-mark-offline``/``node-mark-online`` helpers, which Slurm sites
already trust: a drain's reason starts with ``envdoctor:``; a node is resumed only when the
reason on it is envdoctor's own, so an operator's drain (any other reason) is never undone, and
a node whose reboot is pending is never resumed (that would cancel the reboot).

Every ``scontrol`` call goes through ``Host.run`` with a timeout: at slurmd start the health check
runs before the node registers and ``scontrol`` can hang until Slurm's 60 s limit (mej/nhc #159);
here it gives up after a few seconds and says so, and the next run acts.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envdoctor.errors import EnvdoctorError
from envdoctor.fleet import drain_guard
from envdoctor.fleet.verdict import fit_line, one_line
from envdoctor.model.probed import Found, Probed
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import CommandResult, Deadline, Host

REASON_PREFIX = "envdoctor:"
MAX_REASON_BYTES = 160
SCONTROL_TIMEOUT = 10.0
_STAMP = re.compile(r"\s*\[[^\]]*@[^\]]*\]\s*$")  # Slurm appends " [user@2024-05-01T12:00:00]"


class SlurmError(EnvdoctorError):
    """``scontrol`` is missing, failed, or said something unexpected."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node as ``scontrol show node`` reports it."""

    name: str
    base: str  # IDLE, ALLOCATED, MIXED, DOWN, …
    flags: frozenset[str]  # DRAIN, NOT_RESPONDING, REBOOT_REQUESTED, …
    reason: str  # without Slurm's " [user@time]" suffix; "" when there is none

    @property
    def state(self) -> str:
        return "+".join([self.base, *sorted(self.flags)])

    @property
    def offline(self) -> bool:
        """Drained, draining or down: not taking new jobs."""
        return "DRAIN" in self.flags or self.base in ("DOWN", "FAIL")

    @property
    def ours(self) -> bool:
        return self.reason.startswith(REASON_PREFIX)

    @property
    def reboot_pending(self) -> bool:
        return any(flag.startswith("REBOOT") for flag in self.flags) or self.base == "REBOOT"


@dataclass(frozen=True, slots=True)
class Action:
    """What the health check does to the node: "drain", "resume", "none" or "refused" (a drain
    the drain budget did not allow: fleet/drain_guard.py), and why."""

    kind: str
    why: str
    reason: str = ""


def parse_show_node(text: str, name: str) -> NodeState:
    """Parse ``scontrol show node NAME`` (multi-line or ``-o``) output."""
    state = ""
    reason = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Reason="):
            reason = stripped[len("Reason=") :]
            continue
        if " Reason=" in stripped:  # one-line output: the reason is the last field
            stripped, reason = stripped.split(" Reason=", 1)
        for token in stripped.split():
            if token.startswith("State="):
                state = token[len("State=") :]
    if not state:
        raise SlurmError(f"`scontrol show node {name}` printed no State= field")
    base, *flags = state.split("+")
    reason = _STAMP.sub("", reason).strip()
    return NodeState(
        name=name,
        base=re.sub(r"[^A-Z_]", "", base.upper()),
        flags=frozenset(flags),
        reason="" if reason in ("none", "(null)") else reason,
    )


def decide(status: str, node: NodeState, reason: str, *, drain_on_unknown: bool = False) -> Action:
    """The action for a verdict ("healthy", "unhealthy", "unknown") on this node."""
    reason = clip_reason(reason)
    if status == "unknown" and not drain_on_unknown:
        return Action("none", "the health could not be determined; the node is left as it is")
    if status in ("unhealthy", "unknown"):
        if node.reason and not node.ours and (node.offline or node.reboot_pending):
            return Action(
                "none", f"offline by someone else ({node.state}: {node.reason}); their drain stays"
            )
        if "DRAIN" in node.flags and node.reason == reason:
            return Action("none", "already drained by envdoctor for the same reason")
        return Action("drain", f"draining ({node.state} before)", reason)
    if node.offline and node.ours:
        if node.reboot_pending:
            return Action("none", "drained by envdoctor, but a reboot is pending; not resuming")
        return Action("resume", f"resuming: healthy now (drained by envdoctor: {node.reason})")
    if node.offline:
        why = f"{node.state}: {node.reason}" if node.reason else node.state
        return Action("none", f"healthy, but offline for another reason ({why}); left as it is")
    return Action("none", f"healthy and {node.state}")


def clip_reason(reason: str) -> str:
    """One line starting with ``envdoctor:``, at most ``MAX_REASON_BYTES`` bytes."""
    text = one_line(reason)
    if not text.startswith(REASON_PREFIX):
        text = f"{REASON_PREFIX} {text}"
    return fit_line(text, MAX_REASON_BYTES)


class Scontrol:
    """``scontrol`` through the Host seam; every call bounded by the deadline and a timeout."""

    def __init__(self, host: Host, program: str, deadline: Deadline) -> None:
        self._host = host
        self._program = program
        self._deadline = deadline

    def show_node(self, name: str) -> NodeState:
        result = self.run((self._program, "show", "node", name))
        return parse_show_node(result.stdout, name)

    def list_nodes(self) -> str:
        """``scontrol -o show node``: every node, one a line (for the drain budget)."""
        return self.run((self._program, "-o", "show", "node")).stdout

    def drain_argv(self, name: str, reason: str) -> tuple[str, ...]:
        return (self._program, "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume_argv(self, name: str) -> tuple[str, ...]:
        return (self._program, "update", f"NodeName={name}", "State=RESUME")

    def run(self, argv: tuple[str, ...]) -> CommandResult:
        """Run one scontrol command; a timeout or a failure raises ``SlurmError``."""
        if self._deadline.expired():
            raise SlurmError(f"no time left for `{' '.join(argv[:3])}`")
        result = self._host.run(argv, timeout=self._deadline.cap(SCONTROL_TIMEOUT))
        if result.status == "timeout":
            raise SlurmError(
                result.describe(),
                hint="slurmctld did not answer; at slurmd start the node may not be registered "
                "yet, and the next run will act",
            )
        if not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise SlurmError(result.describe() + (f" ({detail[-1]})" if detail else ""))
        return result


def apply(
    client: Scontrol,
    name: str,
    status: str,
    reason: str,
    *,
    drain_on_unknown: bool = False,
    dry_run: bool = False,
    budget: drain_guard.Budget | None = None,
    state: CacheDir | None = None,
    lock_timeout: float = 2.0,
    now: Callable[[], float] = time.time,
) -> tuple[Action, tuple[str, ...] | None]:
    """Read the node, decide, and drain or resume it; returns the action and the command run
    (or, with ``dry_run``, the command that would have run). With a ``budget``, a drain goes
    ahead only within it (``drain_guard``); ``state`` is the node's state directory."""
    node = client.show_node(name)
    action = decide(status, node, reason, drain_on_unknown=drain_on_unknown)
    if action.kind == "drain" and budget is not None and budget.max_share < 1.0:
        return _budgeted_drain(client, name, action, budget, state, dry_run, lock_timeout, now)
    if action.kind == "drain":
        argv = client.drain_argv(name, action.reason)
    elif action.kind == "resume":
        argv = client.resume_argv(name)
    else:
        return action, None
    if not dry_run:
        client.run(argv)
    return action, argv


def _budgeted_drain(
    client: Scontrol,
    name: str,
    action: Action,
    budget: drain_guard.Budget,
    state: CacheDir | None,
    dry_run: bool,
    lock_timeout: float,
    now: Callable[[], float],
) -> tuple[Action, tuple[str, ...] | None]:
    """Drain within the budget, holding the state file's lock from the count to the record, so
    that a second run on this node counts the first one's drain."""
    argv = client.drain_argv(name, action.reason)
    lock = state.locked(drain_guard.LOCK_FILE, lock_timeout) if state is not None else None
    with lock if lock is not None else contextlib.nullcontext(False) as held:
        ledger, note = drain_guard.load_state(state) if held and state else ({}, "")
        if not held:
            ledger = drain_guard.empty_state()
            note = (
                "no state directory"
                if state is None
                else f"the state file in {state.path} could not be locked or used"
            )
        try:
            nodes = drain_guard.parse_node_list(client.list_nodes())
        except SlurmError as exc:
            judgement = drain_guard.Judgement(
                True, f"the partition's drains could not be counted ({exc.one_line()})", ()
            )
        else:
            judgement = drain_guard.judge(
                nodes, name, budget, now(), own_drains=drain_guard.own_drains(ledger)
            )
        if judgement.refused:
            if not dry_run:
                drain_guard.record_refusal(ledger, name, action.reason, judgement.why, now())
                if held and state is not None:
                    state.write(drain_guard.STATE_FILE, ledger)
            count = f"; refusal {ledger['refusals']} on this node" if not dry_run else ""
            extra = f" ({note})" if note else ""
            why = (
                f"refused to drain: {judgement.why}{count}{extra}; a false alarm must not empty "
                f"the partition: if it is real, a person drains it: {shlex.join(argv)}"
            )
            return Action("refused", why, action.reason), None
        if not dry_run:
            client.run(argv)
            drain_guard.record_drain(ledger, name, action.reason, now())
            if held and state is not None:
                state.write(drain_guard.STATE_FILE, ledger)
        return action, argv


def node_name(env: Mapping[str, str], hostname: Probed[str]) -> str:
    """The Slurm node name: ``$SLURMD_NODENAME`` when slurmd set it, else the short hostname."""
    if env.get("SLURMD_NODENAME"):
        return env["SLURMD_NODENAME"]
    if isinstance(hostname, Found) and hostname.value:
        return hostname.value.split(".", 1)[0]
    raise SlurmError("cannot tell this node's Slurm name", hint="pass --node NAME")


def find_scontrol(host: Host, program: str) -> str:
    """The scontrol to run: a path as given, else looked up on PATH."""
    if "/" in program:
        return program
    found = host.which(program)
    if found is None:
        raise SlurmError(
            f"{program} is not on PATH", hint="install the Slurm client or pass --scontrol PATH"
        )
    return found
