"""`envdoctor fix`: the findings of `check` as one reviewable remediation script (or plan).

The script is a dry run unless started with ``--apply``; see docs/fix.md.
"""

from __future__ import annotations

import sys

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import (
    Invocation,
    facts_for,
    intent_for,
    tables_of,
    target_python,
    write_report,
)
from envdoctor.compat.index import host_problem
from envdoctor.errors import EnvdoctorError


def run(inv: Invocation) -> int:
    from envdoctor import __version__
    from envdoctor.engine import evaluate
    from envdoctor.model.probed import value_or
    from envdoctor.model.units import plural
    from envdoctor.platform.host import Deadline
    from envdoctor.probes.holders import absent_fix_facts, probe_fix_facts
    from envdoctor.remedy import PlanOptions, build_plan, plan_to_json, render_script, render_steps
    from envdoctor.remedy.planner import MODULE_NOT_LOADED
    from envdoctor.remedy.render import colour_steps
    from envdoctor.rules import all_rules
    from envdoctor.terminal import json_document, safe_line

    args = inv.args
    snapshot = args.path("snapshot")
    timeout = args.number("timeout")
    python = args.text("python")
    index_hosts = args.texts("index_host")
    for host in index_hosts:
        problem = host_problem(host)
        if problem:
            raise EnvdoctorError(f"--index-host {host!r}: expected {problem}")
    tables = tables_of(inv)
    intent = intent_for(inv)
    facts = facts_for(inv, snapshot=snapshot, timeout=timeout)
    report = evaluate(facts, all_rules(), tables, intent=intent)
    if snapshot is not None:
        live = absent_fix_facts(f"not scanned: planning from the snapshot {snapshot}")
        source = f"the machine in {snapshot}"
    else:
        live = probe_fix_facts(
            inv.host,
            deadline=Deadline(timeout),
            # modinfo and dkms answer only the module-not-loaded step (remedy/planner.py _load)
            loads_module=any(f.code == MODULE_NOT_LOADED for f in report.findings),
        )
        source = value_or(facts.host.hostname, "") or "this machine"
    plan = build_plan(
        report,
        live,
        PlanOptions(
            verify_argv=verify_command(
                live=snapshot is None, python=facts.torch.python if python else None
            ),
            # From a snapshot, only the interpreter named here is repaired: never the one
            # the snapshot names (its author chose that path), nor this one unasked.
            python=target_python(inv) if snapshot is None or python else "",
            prefer=args.text("prefer") or "wheel",
            source=source,
            envdoctor_version=__version__,
            tables=tables,
            snapshot=str(snapshot) if snapshot is not None else "",
            index_hosts=tuple(h.lower() for h in index_hosts),
        ),
    )
    fmt = args.text("format")
    output = args.path("output")
    # A person at a terminal who asked for nothing in particular reads the steps, not the
    # script's hundreds of lines; a pipe or a file still gets the script (`fix > fix.sh`).
    for_person = output is None and not args.given("format") and sys.stdout.isatty()
    if for_person:
        fmt = "steps"
    if fmt == "json":
        text = json_document(plan_to_json(plan))
    elif for_person and not plan.addressed:
        text = _nothing_to_fix(source, plan.unaddressed)
    elif fmt == "steps":
        text = render_steps(plan)
    else:
        text = render_script(plan)
    # steps are for people: coloured on a terminal, as check's report is
    write_report(
        inv,
        text,
        paint=colour_steps if fmt == "steps" else None,
        mode=0o755 if fmt == "script" else 0o644,
    )
    if output is not None:
        # A bare name would be looked up on PATH, not in the current directory.
        runnable = output if output.is_absolute() or "/" in str(output) else f"./{output}"
        how = (
            f"review it, then run: {'sudo ' if plan.needs_root else ''}{runnable} --apply"
            if fmt == "script"
            else "review it"
        )
        steps = plural(len(plan.steps), "step")
        emit(safe_line(f"envdoctor fix: wrote {output} ({steps}); {how}") + "\n", err=True)
    elif for_person and plan.addressed:
        emit(
            "the script of these steps (a dry run unless started with --apply): "
            "envdoctor fix -o fix.sh, or --format script to print it\n",
            err=True,
        )
    return exitcodes.HEALTHY


def _nothing_to_fix(source: str, unaddressed: tuple[str, ...]) -> str:
    from envdoctor.terminal import safe_line

    lines = [f"envdoctor fix: nothing to fix on {source}: no finding a script would change"]
    if unaddressed:
        lines.append(f"not fixed here (see envdoctor check): {', '.join(unaddressed)}")
    return "".join(safe_line(line) + "\n" for line in lines)


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
