"""Render a ``Plan`` as the bash script `envdoctor fix` prints.

The script is a static template (``script.sh.in``: the helper functions, dry run, --apply,
root and confirmation checks, logging, failure report) plus generated lines that only call
those helpers with quoted values. Nothing from the machine is ever spliced into the template
unquoted: every value passes through ``quoting.sh_quote``; comments and titles through
``quoting.display`` (no newline can leave a comment).
"""

from __future__ import annotations

from importlib import resources

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
    Step,
    StopContainer,
    StopService,
    Terminate,
    UnloadModule,
    Verify,
    WriteFile,
)
from envdoctor.remedy.quoting import display, sh_join, sh_quote

_INDENT = "    "

# What a failure of each kind of step most likely means; printed with the failure.
_HINTS = {
    "stop-service": 'see "systemctl status {unit}"; a unit that will not stop keeps the GPU open',
    "start-service": 'see "systemctl status {unit}" and "journalctl -u {unit}"',
    "stop-container": 'see "docker ps" / "podman ps"; stop it by hand, then run this again',
    "terminate": "a process stuck in the kernel (state D) cannot be killed: reboot",
    "require-no-holders": "stop the processes listed above, then run this script again",
    "unload-module": 'something still uses the module: "lsmod | grep nvidia" and '
    '"lsof /dev/nvidia*" show what; the console or a display on the GPU needs a reboot',
    "load-module": 'see "dmesg | tail": a module built for another kernel (dkms autoinstall) or '
    "Secure Boot refusing an unsigned module",
    "create-nodes": 'is nvidia-modprobe installed with the driver? see "dmesg | tail"',
    "run": "see the message of the command above",
    "write-file": "is the file system read-only?",
    "set-mode": "is /dev a read-only file system (a container)?",
    "reinstall-torch": "see the message from pip above; the index may lack it for your Python",
    "verify": "",
    "note": "",
    "reboot-required": "",
}


def render_script(plan: Plan) -> str:
    """The whole script, ready to save with mode 0755."""
    template = resources.files("envdoctor.remedy").joinpath("script.sh.in").read_text("utf-8")
    out: list[str] = []
    for line in template.splitlines():
        marker = line.strip()
        if marker == "# @HEADER@":
            out.extend(_header(plan))
        elif marker == "# @PLAN_DATA@":
            out.extend(_data(plan))
        elif marker == "# @PLAN_STEPS@":
            out.extend(_INDENT + line for line in _steps(plan))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def required_commands(plan: Plan) -> tuple[str, ...]:
    """The programs the plan's steps run, checked before anything changes."""
    needed: list[str] = []
    for step in plan.steps:
        needed.extend(_commands_of(step.action))
    if any(step.section for step in plan.steps):
        needed.append("modinfo")
    return tuple(dict.fromkeys(needed))


def _commands_of(action: Action) -> tuple[str, ...]:
    if isinstance(action, StopService | StartService):
        return ("systemctl",)
    if isinstance(action, StopContainer):
        return (action.runtime,)
    if isinstance(action, Terminate):
        return ("kill", "find", "sleep")
    if isinstance(action, RequireNoHolders):
        return ("find", "grep", "sort")
    if isinstance(action, UnloadModule):
        return ("rmmod",)
    if isinstance(action, LoadModule):
        return ("modprobe",)
    if isinstance(action, CreateNodes | RunCommand | Verify):
        return (action.argv[0],)
    if isinstance(action, SetMode):
        return ("chmod", "stat")
    if isinstance(action, ReinstallTorch):
        return (action.python,)
    return ()


def _header(plan: Plan) -> list[str]:
    lines = [
        f"# envdoctor fix{' ' + display(plan.envdoctor_version) if plan.envdoctor_version else ''}"
        ": a remediation script for "
        f"{display(plan.source or 'this machine')}.",
        "# Read every step before running it with --apply. Without --apply it only prints.",
        "#",
        f"# Findings it answers: {', '.join(plan.addressed) or 'none'}",
    ]
    if plan.snapshot:
        lines.append(
            f"# Made from the snapshot {display(plan.snapshot)}, not from the machine it runs on: "
            "for reading."
        )
        lines.append(
            "# --apply refuses it unless --on-this-machine says you checked it against this "
            "machine; `envdoctor fix` here plans from the machine itself."
        )
    if plan.unaddressed:
        lines.append(f"# Not fixed here (see `envdoctor check`): {', '.join(plan.unaddressed)}")
    if plan.reboot_required:
        lines.append("# Verdict: REBOOT REQUIRED; this script never reboots by itself:")
        lines.extend(f"#   - {display(reason)}" for reason in plan.reboot_reasons)
    if plan.holders:
        lines.append("#")
        lines.append("# Processes holding /dev/nvidia* when this script was generated:")
        lines.append("#   PID      USER         CONTAINER        COMMAND")
        for holder in plan.holders:
            box = holder.container
            where = display(box.name or box.id[:12]) if box else "-"
            if holder.unit:
                where = f"({display(holder.unit)})"
            lines.append(
                f"#   {holder.pid:<8} {display(holder.user):<12} {where:<16} "
                f"{display(holder.command)}"
            )
    lines.extend(f"# Note: {display(note)}" for note in plan.notes)
    lines.append("#")
    lines.append("# Steps:")
    lines.extend(f"#   {n}. {display(step.title)}" for n, step in enumerate(plan.steps, 1))
    return lines


def _data(plan: Plan) -> list[str]:
    titles = [f"{_INDENT}{sh_quote(display(step.title))}" for step in plan.steps]
    return [
        f"TOTAL={len(plan.steps)}",
        f"NEEDS_ROOT={1 if plan.needs_root else 0}",
        f"PLAN_FOR={sh_quote(display(plan.source or 'this machine'))}",
        f"FROM_SNAPSHOT={sh_quote(display(plan.snapshot))}",
        f"INDEX_HOSTS=({sh_join(plan.index_hosts)})",
        "PLAN_TITLES=(",
        *titles,
        ")",
        f"REQUIRED_COMMANDS=({sh_join(required_commands(plan))})",
    ]


def _steps(plan: Plan) -> list[str]:
    lines: list[str] = []
    section = ""
    for n, step in enumerate(plan.steps, 1):
        if step.section != section:
            if section:
                lines.append("end_section")
            if step.section:
                lines.append("begin_reload")
            section = step.section
        lines.append(_step_line(n, step))
        lines.append(_call(step.action))
    if section:
        lines.append("end_section")
    return lines


def _step_line(n: int, step: Step) -> str:
    hint = _HINTS.get(step.action.kind, "")
    if isinstance(step.action, StopService | StartService):
        hint = hint.replace("{unit}", display(step.action.unit))
    words = ["step", str(n), sh_quote(display(step.title))]
    if hint:
        words.append(sh_quote(hint))
    return " ".join(words)


def _call(action: Action) -> str:
    if isinstance(action, StopService):
        return f"stop_service {sh_join((action.unit, *_identities(action.holders)))}"
    if isinstance(action, StartService):
        return f"start_service {sh_quote(action.unit)}"
    if isinstance(action, StopContainer):
        box = (action.runtime, action.container_id, action.cgroup)
        return f"stop_container {sh_join((*box, *_identities(action.holders)))}"
    if isinstance(action, Terminate):
        who = _identities((HolderRef(action.pid, action.uid, action.start_time),))
        return f"terminate {sh_join((*who, *action.argv))}"
    if isinstance(action, RequireNoHolders):
        return "require_no_holders"
    if isinstance(action, UnloadModule):
        return f"unload_module {sh_quote(action.name)}"
    if isinstance(action, LoadModule):
        return f"load_module {sh_quote(action.name)}"
    if isinstance(action, CreateNodes | RunCommand):
        return f"run_cmd {sh_join(action.argv)}"
    if isinstance(action, WriteFile):
        return f"write_file {sh_join((action.path, action.content))}"
    if isinstance(action, SetMode):
        return f"set_mode {sh_join((action.path, action.mode))}"
    if isinstance(action, ReinstallTorch):
        words = (action.python, action.requirement, action.index_url, action.variant)
        return f"reinstall_torch {sh_join(words)}"
    if isinstance(action, Verify):
        return f"verify {sh_join(action.argv)}"
    if isinstance(action, Note):
        return f"note {sh_quote(display(action.text))}"
    if isinstance(action, RebootRequired):
        return f"reboot_required {sh_quote(display(action.reason))}"
    raise TypeError(f"no script for {type(action).__name__}")  # pragma: no cover


def _identities(holders: tuple[HolderRef, ...]) -> tuple[str, ...]:
    """PID UID START for each holder: what the script checks before it acts for them."""
    return tuple(str(n) for h in holders for n in (h.pid, h.uid, h.start_time))
