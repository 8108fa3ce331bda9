"""What every command needs: its parsed options, the Host (real or injected by tests), the
machine's facts, and what the machine is expected to be (``--expect``)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from envdoctor.errors import EnvdoctorError

if TYPE_CHECKING:  # the facts model and the seam load with the first command that reads them:
    # explain, diff, tables and help do not
    from collections.abc import Callable
    from pathlib import Path

    from envdoctor.cli.args import Args
    from envdoctor.compat.tables import CompatTables
    from envdoctor.kb.model import KnowledgeBase
    from envdoctor.model.facts import Facts
    from envdoctor.model.views import Intent
    from envdoctor.platform.cache import CacheDir
    from envdoctor.platform.host import Host


class AppContext:
    """The machine a command reads and the interpreter it runs (tests inject a FakeHost).

    ``python`` given here (tests, embedders) is taken as ``--python`` is; without it each
    command finds the user's interpreter (``default_python``).
    Plain classes here, not dataclasses: every command (the 1 s probe too) builds them, and a
    dataclass costs about 1 ms of start-up to generate.
    """

    __slots__ = ("given_python", "host")

    def __init__(self, host: Host | None = None, python: str | None = None) -> None:
        self.host = host
        self.given_python = python

    @property
    def python(self) -> str:
        """An interpreter for what needs one but judges no torch (slurm without --python, the
        probe tier): the given one, else envdoctor's own."""
        return self.given_python if self.given_python is not None else sys.executable

    def get_host(self) -> Host:
        if self.host is None:
            from envdoctor.platform.system import SystemHost

            self.host = SystemHost()
        return self.host


class Invocation:
    """One command's run: its options and the machine it runs on."""

    __slots__ = ("app", "args")

    def __init__(self, args: Args, app: AppContext) -> None:
        self.args = args
        self.app = app

    @property
    def host(self) -> Host:
        return self.app.get_host()


def intent_for(inv: Invocation, *, spec_gpus: bool = False) -> Intent:
    """``--expect``, else ``ENVDOCTOR_EXPECT`` (of the environment envdoctor runs in), else a
    node spec's GPUs: what the machine is expected to be."""
    return intent_of(inv.args, inv.host, spec_gpus=spec_gpus)


def intent_of(args: Args, host: Host, *, spec_gpus: bool = False) -> Intent:
    """``intent_for`` with the host given (the probe reads it through its traced host)."""
    expect = args.text("expect")
    from envdoctor.model.views import EXPECT_ENV, Intent

    value = host.env().get(EXPECT_ENV)
    if expect is None and value and value.strip().lower() not in ("gpu", "cpu"):
        raise EnvdoctorError(f"{EXPECT_ENV}={value!r}: expected gpu or cpu")
    return Intent.of(expect, value, spec_gpus=spec_gpus)


def from_here(path: str) -> str:
    """A path the user typed, made absolute as ``Path.absolute()`` does (joined to the working
    directory, ".." kept): the host runs no relative path, its children start in ``/``."""
    return os.path.join(os.getcwd(), path)


def resolve_python(host: Host, python: str) -> str:
    """The interpreter ``--python`` names: a path made absolute, a bare name looked up on PATH.

    A bare name is never taken from the current directory (``--python python3`` in a directory
    where someone left an executable ``python3`` runs the one on PATH), and the absolute path is
    what children, the plan and the fix script use, all of which run from ``/``.
    A path that is there but cannot be run is the user's mistake (a usage error), not a fact
    about the machine; an executable that is not Python stays a ``torch.probe-failed`` finding.
    """
    from envdoctor.model.probed import Found

    if "/" not in python:
        resolved = host.which(python)
        if resolved is None:
            raise EnvdoctorError(f"--python {python}: no such interpreter on PATH")
        return resolved
    given, python = python, from_here(python)
    info = host.stat(python)
    if not isinstance(info, Found):
        raise EnvdoctorError(f"--python {given}: no such interpreter")
    if info.value.is_dir:
        raise EnvdoctorError(f"--python {given}: not an interpreter (a directory)")
    if not info.value.mode & 0o111:  # no execute bit at all: nobody, root included, can run it
        raise EnvdoctorError(f"--python {given}: not executable")
    return python


def target_python(inv: Invocation) -> str:
    """The interpreter whose torch a command reads (see ``target_interpreter``)."""
    return target_interpreter(inv)[0]


def target_interpreter(inv: Invocation) -> tuple[str, str]:
    """The interpreter whose torch a command reads, and why that one: ``--python``, else the
    user's (``default_python``)."""
    python = inv.args.text("python") if _has(inv, "python") else None
    if python is not None:
        return resolve_python(inv.host, python), "named with --python"
    if inv.app.given_python is not None:
        return inv.app.given_python, "named by the caller"
    return default_python(inv.host)


def default_python(host: Host) -> tuple[str, str]:
    """The interpreter a user means when naming none: the active virtual environment's, else the
    active conda environment's, else ``python3`` on PATH, else envdoctor's own.

    envdoctor is often installed apart (pipx, a venv of its own): its own interpreter is the
    wrong one to judge, and installing torch into it would fix nothing the user runs.
    """
    from envdoctor.model.facts import OWN_INTERPRETER
    from envdoctor.model.probed import Found

    env = host.env()
    for variable, what in (
        ("VIRTUAL_ENV", "the active virtual environment"),
        ("CONDA_PREFIX", "the active conda environment"),
    ):
        prefix = env.get(variable, "")
        if prefix.startswith("/"):
            python = os.path.join(prefix, "bin", "python")
            info = host.stat(python)
            if isinstance(info, Found) and not info.value.is_dir and info.value.mode & 0o111:
                return python, f"{what} ({variable}={prefix})"
    on_path = host.which("python3")
    if on_path is not None:
        return on_path, "python3 on PATH (no active environment)"
    return sys.executable, OWN_INTERPRETER


def facts_for(
    inv: Invocation,
    *,
    snapshot: Path | None = None,
    timeout: float = 30.0,
    include_torch: bool = True,
    torch_version_only: bool = False,
    meanwhile: Callable[[], object] | None = None,
) -> Facts:
    """Facts from a snapshot file when given, else probed live through the Host seam.

    Every command that reads the machine comes through here (its options were checked by the
    parser: budgets are finite, positive and at most a day). ``meanwhile`` runs while the torch
    child starts (``collect_facts``); with a snapshot, once it is read.
    """
    if snapshot is not None:
        from envdoctor.snapshot import load_snapshot

        facts = load_snapshot(snapshot)  # its errors first, as before the overlap
        if meanwhile is not None:
            meanwhile()
        return facts
    import time

    from envdoctor.cli.progress import Progress, elapsed
    from envdoctor.platform.host import Deadline
    from envdoctor.platform.system import children_end_with_sigterm
    from envdoctor.platform.traced import TracedHost
    from envdoctor.probes import collect_facts

    python, chosen_by = target_interpreter(inv)
    started = time.monotonic()
    traced = TracedHost(inv.host)

    def status() -> str:
        doing = "; ".join(traced.busy()) or traced.doing
        return f"reading this machine ({elapsed(started)}): {doing}"

    progress = Progress(status)
    # SIGTERM (systemd stopping a job, a timeout's kill) must not leave the torch child behind
    with progress, children_end_with_sigterm():
        facts = collect_facts(
            traced if progress.enabled else inv.host,
            python=python,
            deadline=Deadline(timeout),
            include_torch=include_torch,
            torch_version_only=torch_version_only,
            torch_cache=user_cache_of(inv),
            meanwhile=meanwhile,
        )
    from dataclasses import replace

    return replace(facts, torch=replace(facts.torch, chosen_by=chosen_by))


def user_cache_of(inv: Invocation) -> CacheDir | None:
    """The user's cache (the torch child's facts, ``probes/torch_cache.py``; the checked tables,
    ``compat/store.py``; the checked error signatures, ``kb/store.py``), unless ``--no-cache``
    or there is no home to keep it in."""
    if _has(inv, "no_cache") and inv.args.flag("no_cache"):
        return None
    from envdoctor.platform.cache import user_cache

    return user_cache(inv.host.env())


def tables_of(inv: Invocation) -> CompatTables:
    """The compatibility tables (with ``ENVDOCTOR_TABLES`` and, where the command has it,
    ``--tables``), from the cache when nothing they are made of changed."""
    from envdoctor.compat.store import cached_tables

    extra = inv.args.path("tables") if _has(inv, "tables") else None
    return cached_tables(str(extra) if extra else None, inv.host.env(), user_cache_of(inv))


def kb_of(inv: Invocation) -> KnowledgeBase:
    """The error knowledge base, from the user's cache when nothing it is made of changed."""
    from envdoctor.kb.store import cached_kb

    return cached_kb(user_cache_of(inv))


def _has(inv: Invocation, dest: str) -> bool:
    return dest in inv.args


def write_output(
    text: str, output: Path | None, *, mode: int = 0o644, private: bool = False
) -> None:
    """``text`` to stdout, or to ``-o FILE`` through the one file writer (render/files.py)."""
    from envdoctor.cli.boundary import emit

    if output is None:
        emit(text)
        return
    from envdoctor.render.files import write_atomic

    write_atomic(output, text, mode=mode, private=private)


def output_format(inv: Invocation) -> str:
    """``--format``, or ``json`` when ``--json`` (its shortcut) is given."""
    return "json" if inv.args.flag("json") else inv.args.text("format") or "text"


def colour_for(inv: Invocation, *, err: bool = False) -> bool:
    """Whether a text report written to stdout (``err``: stderr) gets colour: ``--color``,
    ``NO_COLOR``, ``TERM`` and whether that stream is a terminal decide (envdoctor/colour.py)."""
    from envdoctor.colour import wants_colour

    choice = inv.args.text("color") if _has(inv, "color") else "never"
    return wants_colour(choice, sys.stderr if err else sys.stdout)


def write_report(
    inv: Invocation, text: str, *, paint: Callable[[str], str] | None = None, mode: int = 0o644
) -> None:
    """A report to ``-o FILE`` (with ``mode``) exactly as rendered, or to stdout, coloured by
    ``paint`` (the renderer's colouring of its own safe text) when ``colour_for`` says so."""
    output = inv.args.path("output") if _has(inv, "output") else None
    if output is None and paint is not None and colour_for(inv):
        text = paint(text)
    write_output(text, output, mode=mode)


def text_width() -> int:
    """The width text reports wrap at: ``COLUMNS``, else the terminal's, else 100; at most 120.
    (``shutil.get_terminal_size``'s rules, without importing shutil.)"""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]  # None only without a stdout: caught below
        except (AttributeError, ValueError, OSError):
            columns = 0
    return min(columns or 100, 120)


def unicode_out() -> bool:
    """Whether stdout takes the Unicode marks (a UTF-8 encoding): else the ASCII ones."""
    return "utf" in (getattr(sys.stdout, "encoding", None) or "").lower()


def verbose_for(inv: Invocation) -> bool:
    """``-v`` of explain and run: each cause's generic explanation after the answer (a command
    that declares no ``verbose`` reads as not verbose)."""
    return bool(inv.args.get("verbose", False))
