"""``envdoctor slurm-healthcheck``: Slurm's ``HealthCheckProgram`` (or an NHC-style wrapper).

It probes the node as ``check`` does, but for torch and the CUDA toolkit (nvcc), which it reads
only with ``--python`` or a spec that pins torch; it prints the verdict line, and then:

- unhealthy → ``scontrol update NodeName=N State=DRAIN Reason="envdoctor: <code> …"``, unless
  someone else already drained the node (their reason stays);
- healthy → ``State=RESUME``, only when the drain reason is envdoctor's own;
- could not determine → nothing (``--drain-on-unknown`` treats it as unhealthy).

Exit 0 healthy, 1 unhealthy, 2 could not determine. The whole run is bounded by ``--timeout``
(default 45 s, inside Slurm's 60 s limit) with a watchdog, and every ``scontrol`` by 10 s.
"""

from __future__ import annotations

import time
from typing import Any

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import (
    Invocation,
    from_here,
    intent_for,
    resolve_python,
    user_cache_of,
)
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import safe_line

FACTS_SHARE = 0.6  # of the budget for probing; the rest is for scontrol (two calls at most)
EXIT_MARGIN = 0.5  # seconds kept back for printing before the watchdog's limit


def run(inv: Invocation) -> int:
    started = time.monotonic()
    from envdoctor.cli.watchdog import Watchdog
    from envdoctor.compat.tables import CompatTables
    from envdoctor.engine import evaluate
    from envdoctor.fleet import drain_guard, slurm
    from envdoctor.fleet.requirements import parse_requirements, requirements_rule
    from envdoctor.fleet.spec import load_spec, spec_lists_gpus, spec_rule
    from envdoctor.fleet.verdict import MAX_VERDICT_BYTES, fit_line, problem_summary, verdict_line
    from envdoctor.platform.cache import CacheDir
    from envdoctor.platform.host import Deadline
    from envdoctor.platform.traced import TracedHost
    from envdoctor.probes import collect_facts
    from envdoctor.rules import all_rules

    args = inv.args
    timeout = args.number("timeout")
    dry_run = args.flag("dry_run")
    # Every option is checked before the node is touched: a typo must not drain it.
    requirements = parse_requirements(args.texts("require"))
    spec = args.path("spec")
    node_spec = load_spec(spec) if spec is not None else None
    intent = intent_for(inv, spec_gpus=bool(node_spec and spec_lists_gpus(node_spec)))
    host = TracedHost(inv.host)
    python = args.text("python")
    if python is not None:
        python = resolve_python(host, python)

    def expire() -> None:
        reason = f"no verdict within {timeout:g} s; stuck {host.doing}"
        print(fit_line(f"unknown: {reason}", MAX_VERDICT_BYTES), flush=True)

    watchdog = Watchdog(timeout, expire).start()
    with_torch = python is not None or bool(node_spec and node_spec.needs_torch)
    facts = collect_facts(
        host,
        python=python or inv.app.python,
        deadline=Deadline(timeout * FACTS_SHARE),
        include_torch=with_torch,
        toolkit=with_torch,  # nvcc matters next to torch only (its CUDA against torch's)
        torch_cache=user_cache_of(inv),
    )
    rules = [*all_rules()]
    if requirements:
        rules.append(requirements_rule(requirements))
    if node_spec is not None:
        rules.append(spec_rule(node_spec))
    report = evaluate(facts, rules, CompatTables(), strict=args.flag("strict"), intent=intent)
    verdict = verdict_line(report)

    try:
        budget = drain_guard.budget_from(lambda dest, default: _optional(args, dest), host.env())
    except ValueError as exc:
        raise EnvdoctorError(f"slurm-healthcheck: drain budget: {exc}") from None
    state_dir = _optional(args, "state_dir") or drain_guard.state_dir(host.env())

    host.doing = "waiting for scontrol"
    scontrol = args.text("scontrol") or "scontrol"
    if "/" in scontrol:
        scontrol = from_here(scontrol)  # a path as typed, from where it was typed
    left = timeout - (time.monotonic() - started) - EXIT_MARGIN
    try:
        name = args.text("node") or slurm.node_name(host.env(), facts.host.hostname)
        client = slurm.Scontrol(host, slurm.find_scontrol(host, scontrol), Deadline(left))
        action, argv = slurm.apply(
            client,
            name,
            report.status,
            problem_summary(report),
            drain_on_unknown=args.flag("drain_on_unknown"),
            dry_run=dry_run,
            budget=budget,
            state=CacheDir(str(from_here(state_dir))),
        )
    except slurm.SlurmError as exc:
        if watchdog.claim():
            emit(verdict + "\n")
            emit(safe_line(f"envdoctor: error: slurm: {exc.one_line()}") + "\n", err=True)
        return report.exit_code
    if not watchdog.claim():
        return exitcodes.UNKNOWN
    lines = [verdict, safe_line(f"slurm: node {name}: {action.why}")]
    if argv is not None:
        lines.append(safe_line(f"slurm: {'would run' if dry_run else 'ran'}: {_shell(argv)}"))
    emit("\n".join(lines) + "\n")
    return report.exit_code


def _optional(args: Any, dest: str) -> str | None:
    """A drain-budget option as given, or None (the environment or the default then decides)."""
    value = args.get(dest, None)
    return None if value is None else str(value)


def _shell(argv: tuple[str, ...]) -> str:
    import shlex

    return shlex.join(argv)
