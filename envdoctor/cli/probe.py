"""``envdoctor probe``: the fast tier, for container startup probes and node-problem-detector.

- Never imports torch or creates a CUDA context: NVML, ``/proc`` and ``/dev`` only.
- A watchdog enforces the budget (``--timeout``, default 1 s): a hung NVML call or file read
  ends in exit 2 with an "unknown" verdict within the budget, never a hang.
- The first line of output is the verdict, at most 80 bytes (node-problem-detector cuts there).
- Exit 0 healthy, 1 unhealthy, 2 could not determine (or a usage error).
- ``--require EXPR`` gates (``gpus>=8``, ``memory_free>=70GiB``, see envdoctor.fleet.requirements).

Start-up is the product here: the options are parsed by hand (``cli.probe_options``), the
probe tier starts neither torch nor nvcc, and everything a plain run does not need (the tables,
the requirement parser, json, the renderers) is imported only when asked for.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

from envdoctor.cli.boundary import OutputError, report_error, say, stdout_failure
from envdoctor.cli.probe_options import EXPECTS, HELP, ProbeOptions, UsageError, parse_options
from envdoctor.cli.watchdog import EXIT_UNKNOWN, Watchdog
from envdoctor.engine import Report, evaluate
from envdoctor.errors import EnvdoctorError
from envdoctor.fleet.verdict import MAX_VERDICT_BYTES, fit_line, one_line, verdict_line
from envdoctor.model.probed import Probed
from envdoctor.model.views import EXPECT_ENV, Intent
from envdoctor.platform.host import (
    MAX_KMSG_BYTES,
    MAX_READ_BYTES,
    Deadline,
    FileInfo,
    Host,
    Identity,
)
from envdoctor.terminal import json_document, safe_text

if TYPE_CHECKING:
    import typer

    from envdoctor.fleet.requirements import Requirement
    from envdoctor.platform.commands import CommandResult
    from envdoctor.platform.nvml import NvmlSession

# Of the budget, this share goes to reading the machine; the rest judges, prints and absorbs
# scheduling noise before the watchdog fires.
COLLECT_SHARE = 0.75


def run(
    argv: Sequence[str],
    *,
    host: Host | None = None,
    python: str | None = None,
    stdout: TextIO | None = None,
    hard_exit: Callable[[int], object] | None = None,
) -> int:
    """Run the probe; returns the exit code (the watchdog may end the process before)."""
    started = time.monotonic()
    out = stdout if stdout is not None else sys.stdout
    try:
        args = parse_options(argv)
        requirements = _requirements(args.require)
        if out is None:  # started with stdout closed (`>&-`): the verdict has nowhere to go
            raise OutputError("stdout is closed")
        if args.help:
            _write(out, HELP)
            return 0
    except EnvdoctorError as exc:
        return _error(exc)
    fmt = args.format
    # Loaded now, so that the watchdog never has to import while the main thread is stuck.
    if fmt == "json":
        import json  # noqa: F401  # terminal.json_document's, which imports it when called

        import envdoctor.fleet.probe_json
    if fmt == "prometheus" or args.output is not None:
        import envdoctor.render.prometheus  # noqa: F401
    traced = TracedHost(host if host is not None else _system_host())
    try:
        intent = _intent(args, traced)
    except EnvdoctorError as exc:
        return _error(exc)

    def expire() -> None:
        reason = f"no verdict within {args.timeout:g} s; stuck {traced.doing}"
        try:
            duration = time.monotonic() - started
            _emit(out, args.output, _unknown_output(fmt, reason, duration, args.timeout))
        except EnvdoctorError as exc:
            _error(exc)

    extra = {} if hard_exit is None else {"hard_exit": hard_exit}
    watchdog = Watchdog(args.timeout, expire, **extra).start()
    collect_until = started + args.timeout * COLLECT_SHARE
    try:
        report = _probe(traced, requirements, args, python or sys.executable, collect_until, intent)
        rendered = _render(report, fmt, time.monotonic() - started, requirements, args)
        if not watchdog.claim():
            return EXIT_UNKNOWN  # the watchdog spoke first and is ending the process
        _emit(out, args.output, rendered)
    except EnvdoctorError as exc:
        return _error(exc) if watchdog.claim() else EXIT_UNKNOWN
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """``envdoctor probe`` without Typer (the fast path of ``envdoctor.cli.entry``).

    Outside Typer there is no ``cli.boundary``: an unexpected error becomes the same one line
    and exit 2 here (``ENVDOCTOR_DEBUG=1`` shows the traceback).

    It ends with ``os._exit``, skipping the interpreter's teardown (about 8 ms, an eighth of the
    probe): by then the output is flushed, a ``-o`` file written and fsynced, NVML shut down,
    and no thread of ours is left that could lose work.
    """
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except Exception as exc:
        failed = stdout_failure(exc)
        if failed is not None:
            code = _error(failed)
        elif os.environ.get("ENVDOCTOR_DEBUG"):
            raise
        else:
            say(
                f"envdoctor: internal error: {type(exc).__name__}: {exc} "
                "(set ENVDOCTOR_DEBUG=1 for the traceback and report it)"
            )
            code = EXIT_UNKNOWN
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with it closed (`>&-`, `2>&-`)
            continue
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)


def _requirements(texts: Sequence[str]) -> tuple[Requirement, ...]:
    if not texts:
        return ()  # the requirement parser is not even imported
    from envdoctor.fleet.requirements import parse_requirements

    return tuple(parse_requirements(texts))


def _error(exc: EnvdoctorError) -> int:
    report_error(exc)
    return EXIT_UNKNOWN


def register(app: typer.Typer) -> None:
    """Register ``probe`` with the Typer app; Typer hands every argument to ``run``'s parser."""
    import typer  # Typer is loaded already when the app registers its commands

    from envdoctor.cli.boundary import boundary
    from envdoctor.cli.common import app_context

    def probe(ctx: typer.Context) -> None:
        """Fast health probe for startup probes and node-problem-detector (see --help)."""
        with boundary():
            context = app_context(ctx)
            code = run(ctx.args, host=context.get_host(), python=context.python)
        raise typer.Exit(code)

    # Typer resolves annotations in this module's globals, where typer is not imported (the
    # fast path must not load it): give it the resolved types.
    probe.__annotations__ = {"ctx": typer.Context, "return": None}
    app.command(
        "probe",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(probe)


# --- the work ---------------------------------------------------------------------------------


def _intent(args: ProbeOptions, host: Host) -> Intent:
    """``--expect``, else ``ENVDOCTOR_EXPECT``: checked before the watchdog starts."""
    expected = host.env().get(EXPECT_ENV)
    if args.expect is None and expected and expected.strip().lower() not in EXPECTS:
        raise UsageError(f"{EXPECT_ENV}={expected!r}: expected gpu or cpu")
    return Intent.of(args.expect, expected)


def _probe(
    host: TracedHost,
    requirements: Sequence[Requirement],
    args: ProbeOptions,
    python: str,
    collect_until: float,
    intent: Intent,
) -> Report:
    # The probes and rules are imported here, not at the top, to keep `envdoctor --help` fast.
    from envdoctor.probes import collect_facts
    from envdoctor.rules import CORE_RULES

    deadline = Deadline(max(0.05, collect_until - time.monotonic()))
    facts = collect_facts(host, python=python, deadline=deadline, fast=True)
    host.doing = "judging the facts"
    rules = CORE_RULES
    if requirements:
        from envdoctor.fleet.requirements import requirements_rule

        rules = (*CORE_RULES, requirements_rule(requirements))
    # The fast tier judges facts without compatibility tables (no torch facts to judge anyway).
    return evaluate(facts, rules, strict=args.strict, intent=intent)


def _render(
    report: Report,
    fmt: str,
    duration: float,
    requirements: Sequence[Requirement],
    args: ProbeOptions,
) -> tuple[str, str]:
    """(verdict line, full output in ``fmt``)."""
    verdict = verdict_line(report)
    if fmt == "prometheus":
        from envdoctor.render.prometheus import render_prometheus

        return verdict, render_prometheus(report, duration, command="probe")
    if fmt == "json":
        from envdoctor.fleet.probe_json import probe_json

        data = probe_json(
            report, verdict, duration=duration, budget=args.timeout, requirements=requirements
        )
        return verdict, json_document(data)
    lines = [verdict]
    if args.verbose:
        lines += [f"  {f.severity.label:<7} {f.code}: {one_line(f.title)}" for f in report.findings]
        lines += _requirement_lines(report, requirements)
    return verdict, safe_text("\n".join(lines) + "\n")


def _requirement_lines(report: Report, requirements: Sequence[Requirement]) -> list[str]:
    if not requirements:
        return []
    from envdoctor.fleet.requirements import evaluate_requirement

    outcomes = (evaluate_requirement(report.facts, r) for r in requirements)
    return [f"  require {o.requirement.text}: {o.verdict} ({o.actual})" for o in outcomes]


def _unknown_output(fmt: str, reason: str, duration: float, budget: float) -> tuple[str, str]:
    verdict = fit_line(f"unknown: {reason}", MAX_VERDICT_BYTES)
    if fmt == "prometheus":
        from envdoctor.render.prometheus import render_prometheus_unknown

        return verdict, render_prometheus_unknown(reason, duration, command="probe")
    if fmt == "json":
        from envdoctor.fleet.probe_json import probe_unknown_json

        data = probe_unknown_json(verdict, reason=reason, duration=duration, budget=budget)
        return verdict, json_document(data)
    return verdict, verdict + "\n"


def _emit(out: TextIO, path: str | None, rendered: tuple[str, str]) -> None:
    """The output to stdout, or to ``path`` (atomically) with only the verdict on stdout."""
    verdict, text = rendered
    if path is None:
        _write(out, text)
    else:
        from pathlib import Path

        from envdoctor.render.prometheus import write_textfile

        write_textfile(Path(path), text)
        _write(out, verdict + "\n")


def _write(out: TextIO, text: str) -> None:
    """Write and flush; a failure (``| head``, a full disk) is an ``OutputError``, not a crash."""
    try:
        out.write(text)
        out.flush()
    except OSError as exc:
        raise OutputError.from_os_error(exc) from None


# --- the traced host --------------------------------------------------------------------------


def _system_host() -> Host:
    from envdoctor.platform.system import SystemHost

    return SystemHost()


class TracedHost:
    """A Host that remembers what it is doing, so a watchdog timeout can say where it hung."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self.doing = "starting"

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        self.doing = f"reading {path}"
        return self._host.read_text(path, limit=limit)

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        self.doing = f"reading {path}"
        return self._host.read_bytes(path, limit=limit)

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        self.doing = "reading /dev/kmsg"
        return self._host.read_kmsg(limit=limit)

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        self.doing = f"listing {path}"
        return self._host.list_dir(path)

    def stat(self, path: str) -> Probed[FileInfo]:
        self.doing = f"checking {path}"
        return self._host.stat(path)

    def realpath(self, path: str) -> str:
        self.doing = f"resolving {path}"
        return self._host.realpath(path)

    def env(self) -> Mapping[str, str]:
        return self._host.env()

    def which(self, program: str) -> str | None:
        self.doing = f"looking for {program}"
        return self._host.which(program)

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        self.doing = f"running {' '.join(argv[:2])}"
        return self._host.run(argv, timeout=timeout, env=env)

    def open_nvml(self, *, timeout: float) -> NvmlSession:
        self.doing = "initialising NVML"
        session = self._host.open_nvml(timeout=timeout)
        self.doing = "querying NVML"
        return session

    def open_device(self, path: str, *, timeout: float) -> str:
        self.doing = f"opening {path}"
        return self._host.open_device(path, timeout=timeout)

    def identity(self) -> Identity:
        self.doing = "looking up the current user"  # NSS: LDAP or sssd can block
        return self._host.identity()
