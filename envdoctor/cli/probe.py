"""``envdoctor probe``: the fast tier, for container startup probes and node-problem-detector.

- Never imports torch or creates a CUDA context: NVML, ``/proc`` and ``/dev`` only.
- A watchdog enforces the budget (``--timeout``, default 1 s): a hung NVML call or file read
  ends in exit 2 with an "unknown" verdict within the budget, never a hang.
- The first line of output is the verdict, at most 80 bytes (node-problem-detector cuts there).
- Exit 0 healthy, 1 unhealthy, 2 could not determine (or a usage error).
- ``--require EXPR`` gates (``gpus>=8``, ``memory_free>=70GiB``, see envdoctor.fleet.requirements).

Start-up is the product here: the probe tier starts neither torch nor nvcc, and everything a
plain run does not need (the tables, the requirement parser, json, the renderers) is imported
only when asked for.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from envdoctor import exitcodes
from envdoctor.cli.boundary import OutputError, report_error, write_to
from envdoctor.cli.common import Invocation, intent_of
from envdoctor.cli.watchdog import Watchdog
from envdoctor.colour import wants_colour
from envdoctor.engine import Report, evaluate
from envdoctor.errors import EnvdoctorError
from envdoctor.model.views import Intent
from envdoctor.platform.host import Deadline, Host
from envdoctor.platform.traced import TracedHost

if TYPE_CHECKING:
    from envdoctor.cli.args import Args
    from envdoctor.fleet.requirements import Requirement

# Of the budget, this share goes to reading the machine; the rest judges, prints and absorbs
# scheduling noise before the watchdog fires.
COLLECT_SHARE = 0.75


def run(inv: Invocation) -> int:
    return probe(inv.args, host=inv.host, python=inv.app.python)


def probe(
    args: Args,
    *,
    host: Host,
    python: str | None = None,
    out: TextIO | None = None,
    hard_exit: Callable[[int], object] | None = None,
) -> int:
    """Run the probe; returns the exit code (the watchdog may end the process before)."""
    started = time.monotonic()
    stream = out if out is not None else sys.stdout
    requirements = _requirements(args.texts("require"))
    if stream is None:  # started with stdout closed (`>&-`): the verdict has nowhere to go
        raise OutputError("stdout is closed")
    fmt = "json" if args.flag("json") else args.text("format") or "text"
    output = args.text("output")
    timeout = args.number("timeout")
    # Loaded now, so that the watchdog never has to import while the main thread is stuck.
    if fmt == "json":
        import json  # noqa: F401

        import envdoctor.envelope
    if fmt == "prometheus" or output is not None:
        import envdoctor.render.prometheus
    import envdoctor.render.probe  # noqa: F401

    # What reaches the terminal as text (the output, or the verdict beside -o FILE) may take
    # colour (re, which colouring compiles patterns with, is loaded by then: the option parser).
    colour = (fmt == "text" or output is not None) and wants_colour(args.text("color"), stream)
    traced = TracedHost(host)
    intent = intent_of(args, traced)  # checked before the watchdog starts

    def expire() -> None:
        from envdoctor.render.probe import render_unknown

        reason = f"no verdict within {timeout:g} s; stuck {traced.doing}"
        try:
            duration = time.monotonic() - started
            _emit(stream, output, render_unknown(fmt, reason, duration, budget=timeout), colour)
        except EnvdoctorError as exc:
            report_error(exc)

    extra = {} if hard_exit is None else {"hard_exit": hard_exit}
    watchdog = Watchdog(timeout, expire, **extra).start()
    collect_until = started + timeout * COLLECT_SHARE
    try:
        from envdoctor.render.probe import render_probe

        report = _judge(traced, requirements, args, python or sys.executable, collect_until, intent)
        rendered = render_probe(
            report,
            fmt,
            time.monotonic() - started,
            requirements,
            budget=timeout,
            verbose=args.flag("verbose"),
        )
        if not watchdog.claim():
            return exitcodes.UNKNOWN  # the watchdog spoke first and is ending the process
        _emit(stream, output, rendered, colour)
    except EnvdoctorError as exc:
        if watchdog.claim():
            report_error(exc)
        return exitcodes.UNKNOWN
    return report.exit_code


def _requirements(texts: Sequence[str]) -> tuple[Requirement, ...]:
    if not texts:
        return ()  # the requirement parser is not even imported
    from envdoctor.fleet.requirements import parse_requirements

    return tuple(parse_requirements(texts))


def _judge(
    host: TracedHost,
    requirements: Sequence[Requirement],
    args: Args,
    python: str,
    collect_until: float,
    intent: Intent,
) -> Report:
    from envdoctor.probes import collect_facts
    from envdoctor.rules import core_rules

    deadline = Deadline(max(0.05, collect_until - time.monotonic()))
    facts = collect_facts(host, python=python, deadline=deadline, fast=True)
    host.doing = "judging the facts"
    rules = core_rules()
    if requirements:
        from envdoctor.fleet.requirements import requirements_rule

        rules = (*rules, requirements_rule(requirements))
    # The fast tier judges facts without compatibility tables (no torch facts to judge anyway).
    return evaluate(facts, rules, strict=args.flag("strict"), intent=intent)


def _emit(out: TextIO, path: str | None, rendered: tuple[str, str], colour: bool) -> None:
    """The output to stdout, or to ``path`` (atomically) with only the verdict on stdout;
    ``colour``: what reaches the terminal as text is coloured (never the file)."""
    from envdoctor.render.probe import colour_probe

    verdict, text = rendered
    if path is None:
        write_to(out, colour_probe(text) if colour else text)
    else:
        from pathlib import Path

        from envdoctor.render.prometheus import write_textfile

        write_textfile(Path(path), text)
        write_to(out, (colour_probe(verdict) if colour else verdict) + "\n")
