"""``envdoctor slurm-healthcheck``: Slurm's ``HealthCheckProgram`` (or an NHC-style wrapper).

It probes the node (the probe tier; torch only with ``--python`` or a spec that pins torch),
prints the verdict line, and then:

- unhealthy → ``scontrol update NodeName=N State=DRAIN Reason="envdoctor: <code> …"``, unless
  someone else already drained the node (their reason stays);
- healthy → ``State=RESUME``, only when the drain reason is envdoctor's own;
- could not determine → nothing (``--drain-on-unknown`` treats it as unhealthy).

Exit 0 healthy, 1 unhealthy, 2 could not determine. The whole run is bounded by ``--timeout``
(default 45 s, inside Slurm's 60 s limit) with a watchdog, and every ``scontrol`` by 10 s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import Expect, app_context, expect_option, intent_for, resolve_python
from envdoctor.cli.watchdog import check_budget
from envdoctor.terminal import safe_line

# ruff: noqa: UP045  (Typer reads Optional[...] at runtime)

DEFAULT_TIMEOUT = 45.0
FACTS_SHARE = 0.6  # of the budget for probing; the rest is for scontrol (two calls at most)
EXIT_MARGIN = 0.5  # seconds kept back for printing before the watchdog's limit


def slurm_healthcheck(
    ctx: typer.Context,
    node: Annotated[
        Optional[str],
        typer.Option(
            metavar="NAME",
            help="Slurm node name (default: $SLURMD_NODENAME, else the short hostname).",
        ),
    ] = None,
    spec: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE", help="Also report drift from this node spec (envdoctor spec init)."
        ),
    ] = None,
    require: Annotated[
        Optional[list[str]],
        typer.Option(metavar="EXPR", help="A gate such as gpus>=8 (repeatable)."),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option(metavar="PYTHON", help="Also check the torch of this interpreter (slower)."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS", help="Budget for the whole run in seconds (Slurm kills at 60)."
        ),
    ] = DEFAULT_TIMEOUT,
    scontrol: Annotated[
        str, typer.Option(metavar="PATH", help="The scontrol program to run.")
    ] = "scontrol",
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (drain).")] = False,
    drain_on_unknown: Annotated[
        bool, typer.Option("--drain-on-unknown", help="Drain when the health cannot be determined.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Read the node's state but only print the scontrol update."),
    ] = False,
    expect: Optional[Expect] = expect_option(),
) -> None:
    """Drain this node when it is unhealthy; resume it when envdoctor drained it and it is
    healthy again. An operator's drain is never touched."""
    started = time.monotonic()
    with boundary():
        # Imported here, not at the top, so that `envdoctor --help` stays fast.
        from envdoctor.cli.probe import TracedHost
        from envdoctor.cli.watchdog import Watchdog
        from envdoctor.compat import CompatTables
        from envdoctor.engine import evaluate
        from envdoctor.fleet import slurm
        from envdoctor.fleet.requirements import parse_requirements, requirements_rule
        from envdoctor.fleet.spec import load_spec, spec_lists_gpus, spec_rule
        from envdoctor.fleet.verdict import (
            MAX_VERDICT_BYTES,
            fit_line,
            problem_summary,
            verdict_line,
        )
        from envdoctor.platform.host import Deadline
        from envdoctor.probes import collect_facts
        from envdoctor.rules import ALL_RULES

        # Every option is checked before the node is touched: a typo must not drain it.
        check_budget(timeout)
        requirements = parse_requirements(require or ())
        node_spec = load_spec(spec) if spec is not None else None
        intent = intent_for(ctx, expect, spec_gpus=bool(node_spec and spec_lists_gpus(node_spec)))
        context = app_context(ctx)
        host = TracedHost(context.get_host())
        if python is not None:
            python = resolve_python(host, python)

        def expire() -> None:
            reason = f"no verdict within {timeout:g} s; stuck {host.doing}"
            print(fit_line(f"unknown: {reason}", MAX_VERDICT_BYTES), flush=True)

        watchdog = Watchdog(timeout, expire).start()
        facts = collect_facts(
            host,
            python=python or context.python,
            deadline=Deadline(timeout * FACTS_SHARE),
            include_torch=python is not None or bool(node_spec and node_spec.needs_torch),
        )
        rules = [*ALL_RULES]
        if requirements:
            rules.append(requirements_rule(requirements))
        if node_spec is not None:
            rules.append(spec_rule(node_spec))
        report = evaluate(facts, rules, CompatTables(), strict=strict, intent=intent)
        verdict = verdict_line(report)

        host.doing = "waiting for scontrol"
        left = timeout - (time.monotonic() - started) - EXIT_MARGIN
        try:
            name = node or slurm.node_name(host.env(), facts.host.hostname)
            client = slurm.Scontrol(host, slurm.find_scontrol(host, scontrol), Deadline(left))
            action, argv = slurm.apply(
                client,
                name,
                report.status,
                problem_summary(report),
                drain_on_unknown=drain_on_unknown,
                dry_run=dry_run,
            )
        except slurm.SlurmError as exc:
            if watchdog.claim():
                typer.echo(verdict)
                typer.echo(f"envdoctor: error: slurm: {safe_line(exc.one_line())}", err=True)
            raise typer.Exit(report.exit_code) from None
        if not watchdog.claim():
            raise typer.Exit(2)
        typer.echo(verdict)
        typer.echo(safe_line(f"slurm: node {name}: {action.why}"))
        if argv is not None:
            typer.echo(safe_line(f"slurm: {'would run' if dry_run else 'ran'}: {_shell(argv)}"))
        raise typer.Exit(report.exit_code)


def _shell(argv: tuple[str, ...]) -> str:
    import shlex

    return shlex.join(argv)


def register(app: typer.Typer) -> None:
    app.command("slurm-healthcheck")(slurm_healthcheck)
