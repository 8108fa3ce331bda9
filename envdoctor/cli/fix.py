"""`envdoctor fix`: the findings of `check` as one reviewable remediation script (or plan).

The script is a dry run unless started with ``--apply``; see docs/fix.md.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import Expect, app_context, expect_option, facts_for, intent_for
from envdoctor.cli.watchdog import check_budget


class FixFormat(str, enum.Enum):
    script = "script"
    steps = "steps"
    json = "json"


class Prefer(str, enum.Enum):
    wheel = "wheel"
    driver = "driver"


def fix_command(
    ctx: typer.Context,
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot", help="Plan for a snapshot (envdoctor collect) instead of this machine."
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to FILE (a script gets mode 0755) instead of stdout."
        ),
    ] = None,
    fmt: Annotated[
        FixFormat,
        typer.Option("--format", "-f", help="script (bash), steps (numbered plan) or json."),
    ] = FixFormat.script,
    python: Annotated[
        str | None,
        typer.Option(
            "--python", help="Interpreter whose torch to inspect and repair (default: this one)."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Time budget for probing, in seconds.")
    ] = 30.0,
    prefer: Annotated[
        Prefer,
        typer.Option(
            "--prefer",
            help="torch.driver-too-old: reinstall a torch that fits the driver (wheel) or upgrade "
            "the driver (driver).",
        ),
    ] = Prefer.wheel,
    expect: Expect | None = expect_option(),
) -> None:
    """Write a script that fixes what `envdoctor check` finds: dry run by default, --apply acts."""
    with boundary():
        from envdoctor import __version__  # imported here: keeps --help fast
        from envdoctor.compat import load_tables
        from envdoctor.engine import evaluate
        from envdoctor.platform.host import Deadline
        from envdoctor.probes.holders import absent_fix_facts, probe_fix_facts
        from envdoctor.remedy import (
            PlanOptions,
            build_plan,
            plan_to_json,
            render_script,
            render_steps,
        )
        from envdoctor.rules import ALL_RULES
        from envdoctor.terminal import json_document, safe_line

        check_budget(timeout)  # before anything reads the machine: also bounds probe_fix_facts
        app = app_context(ctx)
        host = app.get_host()
        tables = load_tables(None, host.env())
        intent = intent_for(ctx, expect)
        facts = facts_for(ctx, snapshot=snapshot, python=python, timeout=timeout)
        report = evaluate(facts, ALL_RULES, tables, intent=intent)
        if snapshot is not None:
            live = absent_fix_facts(f"not scanned: planning from the snapshot {snapshot}")
            source = f"the machine in {snapshot}"
        else:
            live = probe_fix_facts(host, deadline=Deadline(timeout))
            hostname = facts.host.hostname
            source = getattr(hostname, "value", "") or "this machine"
        plan = build_plan(
            report,
            live,
            PlanOptions(
                verify_argv=verify_command(
                    live=snapshot is None, python=facts.torch.python if python else None
                ),
                python=python or app.python,
                prefer=prefer.value,
                source=source,
                envdoctor_version=__version__,
                tables=tables,
            ),
        )
        if fmt is FixFormat.json:
            text = json_document(plan_to_json(plan))
        elif fmt is FixFormat.steps:
            text = render_steps(plan)
        else:
            text = render_script(plan)
        if output is None:
            typer.echo(text, nl=False)
        else:
            _write(output, text, executable=fmt is FixFormat.script)
            # A bare name would be looked up on PATH, not in the current directory.
            runnable = output if output.is_absolute() or "/" in str(output) else f"./{output}"
            how = (
                f"review it, then run: {'sudo ' if plan.needs_root else ''}{runnable} --apply"
                if fmt is FixFormat.script
                else "review it"
            )
            steps = f"{len(plan.steps)} step{'' if len(plan.steps) == 1 else 's'}"
            typer.echo(safe_line(f"envdoctor fix: wrote {output} ({steps}); {how}"), err=True)


def verify_command(*, live: bool, python: str | None) -> tuple[str, ...]:
    """The script's last step: `envdoctor check` by this interpreter (``--python``'s too).

    The script runs it from / (its first command is `cd /`), and with -P where this
    interpreter has it (3.11+), so not even / is put on its sys.path. A plan made from a
    snapshot runs on another machine: there it is the `envdoctor` on PATH.
    """
    if not live:
        return ("envdoctor", "check")
    safe = ("-P",) if sys.version_info >= (3, 11) else ()
    return (
        sys.executable,
        *safe,
        "-m",
        "envdoctor",
        "check",
        *(("--python", python) if python else ()),
    )


def _write(path: Path, text: str, *, executable: bool) -> None:
    from envdoctor.render.files import write_atomic

    write_atomic(path, text, mode=0o755 if executable else 0o644)


def register(app: typer.Typer) -> None:
    app.command("fix")(fix_command)
