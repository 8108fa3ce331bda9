"""Render a ``Plan`` as numbered steps (``--format steps``) or JSON (``--format json``)."""

from __future__ import annotations

from typing import Any

from envdoctor.envelope import envelope
from envdoctor.model.units import plural
from envdoctor.remedy.model import (
    Action,
    CreateNodes,
    HolderRef,
    LoadModule,
    Note,
    Plan,
    RebootRequired,
    ReinstallTorch,
    RequireNoHolders,
    RunCommand,
    SetMode,
    StartService,
    StopContainer,
    StopService,
    Terminate,
    UnloadModule,
    Verify,
    WriteFile,
)
from envdoctor.remedy.quoting import display, sh_join


def commands(action: Action) -> tuple[tuple[str, ...], ...]:
    """The commands a step runs when it has to act (guards and re-checks aside)."""
    if isinstance(action, StopService):
        return (("systemctl", "stop", action.unit),)
    if isinstance(action, StartService):
        return (("systemctl", "start", action.unit),)
    if isinstance(action, StopContainer):
        return ((action.runtime, "stop", action.container_id),)
    if isinstance(action, Terminate):
        pid = str(action.pid)
        return (("kill", "-s", "TERM", pid), ("kill", "-s", "KILL", pid))
    if isinstance(action, UnloadModule):
        return (("rmmod", action.name),)
    if isinstance(action, LoadModule):
        return (("modprobe", action.name),)
    if isinstance(action, CreateNodes | RunCommand | Verify):
        return (action.argv,)
    if isinstance(action, SetMode):
        return (("chmod", action.mode, action.path),)
    if isinstance(action, ReinstallTorch):
        return (
            (
                action.python,
                "-m",
                "pip",
                "install",
                "--force-reinstall",
                action.requirement,
                "--index-url",
                action.index_url,
            ),
        )
    return ()


def _detail(action: Action) -> str:
    if isinstance(action, Terminate):
        who = f"user {action.user}" + (
            f", container {action.container}" if action.container else ""
        )
        return (
            f"each signal only if PID {action.pid} still holds /dev/nvidia* and is the same "
            f"process (uid {action.uid}, start time {action.start_time}, argv "
            f"{sh_join(action.argv)}; {who}); SIGKILL only if SIGTERM did not release it"
        )
    if isinstance(action, StopService) and action.holders:
        return (
            f"only if {_pids(action.holders)} is still the process seen and lies in the cgroup "
            f"systemd gives for {action.unit} (systemctl show -p ControlGroup)"
        )
    if isinstance(action, StopContainer):
        return (
            f"only if {action.runtime} inspect shows it running with its main PID in "
            f"{action.cgroup}, and {_pids(action.holders)} is still the process seen, in it"
        )
    if isinstance(action, ReinstallTorch):
        return (
            f"from /, with -P after {action.python} when it accepts it (Python 3.11+): no module "
            "is taken from the current directory; skipped when torch already is the "
            f"{action.variant} build"
        )
    if isinstance(action, RequireNoHolders):
        return "stops here, listing them, if any process still holds /dev/nvidia*"
    if isinstance(action, WriteFile):
        return f"writes {action.path}: " + display(action.content)
    if isinstance(action, Note | RebootRequired):
        return action.text if isinstance(action, Note) else action.reason
    return ""


def _pids(holders: tuple[HolderRef, ...]) -> str:
    return "PID " + " or ".join(str(h.pid) for h in holders)


def render_steps(plan: Plan) -> str:
    """The plan as numbered steps for people (every machine value display-escaped)."""
    lines = [
        f"envdoctor fix: {plural(len(plan.steps), 'step')} ({display(plan.source or 'this machine')})"
    ]
    if plan.addressed:
        lines.append(f"answers: {', '.join(plan.addressed)}")
    if plan.unaddressed:
        lines.append(f"not fixed here (see envdoctor check): {', '.join(plan.unaddressed)}")
    if plan.reboot_required:
        lines.append("verdict: REBOOT REQUIRED")
    lines.append("")
    for n, step in enumerate(plan.steps, 1):
        root = " [root]" if step.needs_root else ""
        lines.append(f"{n:>2}. {display(step.title)}{root}")
        lines.extend(f"      $ {display(sh_join(argv))}" for argv in commands(step.action))
        detail = _detail(step.action)
        if detail:
            lines.append(f"      {display(detail)}")
    if plan.notes:
        lines.append("")
        lines.extend(f"note: {display(note)}" for note in plan.notes)
    return "\n".join(lines) + "\n"


STEPS_COLOURS = (
    (r"(envdoctor fix: .*)$", ("bold",)),
    (r"(verdict: REBOOT REQUIRED)$", ("error",)),
    (r"(not fixed here) ", ("warning",)),
    (r"( ?\d+\.) .*?(?: (\[root\]))?$", ("bold", "warning")),
    (r"      (\$ .*)$", ("ok",)),  # a command the script runs
    (r"(note:) ", ("info",)),
)
"""Where ``render_steps``'s text takes colour on a terminal (``fix --format steps``)."""


def colour_steps(text: str) -> str:
    """The text ``render_steps`` made, coloured for a terminal."""
    from envdoctor.colour import paint

    return paint(text, STEPS_COLOURS)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """``fix --format json`` (docs/schema/fix-plan.schema.json). ``status`` is the diagnosis the
    plan answers; ``exit_code`` 0, as `fix` exits once the plan is written (docs/fix.md)."""
    payload = {
        "source": plan.source,
        "needs_root": plan.needs_root,
        "reboot_required": plan.reboot_required,
        "reboot_reasons": list(plan.reboot_reasons),
        "addressed": list(plan.addressed),
        "unaddressed": list(plan.unaddressed),
        "notes": list(plan.notes),
        "holders": [
            {
                "pid": h.pid,
                "user": h.user,
                "uid": h.uid,
                "name": h.name,
                "argv": list(h.argv),
                "start_time": h.start_time,
                "cgroup": h.cgroup,
                "devices": list(h.devices),
                "container": (
                    {
                        "runtime": h.container.runtime,
                        "id": h.container.id,
                        "name": h.container.name,
                        "cgroup": h.container.cgroup,
                    }
                    if h.container
                    else None
                ),
                "unit": h.unit,
                "seen_by": list(h.seen_by),
            }
            for h in plan.holders
        ],
        "steps": [
            {
                "number": n,
                "kind": step.action.kind,
                "title": step.title,
                "needs_root": step.needs_root,
                "because": list(step.because),
                "section": step.section,
                "commands": [list(argv) for argv in commands(step.action)],
                "detail": _detail(step.action),
            }
            for n, step in enumerate(plan.steps, 1)
        ],
    }
    return envelope("fix-plan", payload, exit_code=0, status=plan.status)
