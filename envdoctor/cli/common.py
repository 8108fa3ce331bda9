"""What every command needs: the Host (real or injected by tests), the machine's facts and
what the machine is expected to be (``--expect``)."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from pathlib import Path

import typer

from envdoctor.cli.watchdog import check_budget
from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts
from envdoctor.model.views import EXPECT_ENV, Intent
from envdoctor.platform.host import Deadline, Host


class Expect(str, enum.Enum):
    """``--expect``: what the machine is for."""

    gpu = "gpu"
    cpu = "cpu"


EXPECT_HELP = (
    "What this machine is for: gpu (no usable NVIDIA GPU is an error) or cpu (no GPU is "
    f"right). Default: ${EXPECT_ENV}, else a node spec that lists GPUs, else what is here."
)


def expect_option() -> Expect | None:
    """The ``--expect`` option, one definition for every command that judges a machine."""
    return typer.Option(None, "--expect", help=EXPECT_HELP, case_sensitive=False)  # type: ignore[no-any-return]  # Typer's OptionInfo stands in for the value


def intent_for(ctx: typer.Context, expect: Expect | None, *, spec_gpus: bool = False) -> Intent:
    """``--expect``, else ``ENVDOCTOR_EXPECT`` (of the environment envdoctor runs in), else a
    node spec's GPUs: what the machine is expected to be."""
    value = app_context(ctx).get_host().env().get(EXPECT_ENV)
    if expect is None and value and value.strip().lower() not in ("gpu", "cpu"):
        raise EnvdoctorError(f"{EXPECT_ENV}={value!r}: expected gpu or cpu")
    return Intent.of(expect.value if expect else None, value, spec_gpus=spec_gpus)


@dataclass
class AppContext:
    """Injected through ``ctx.obj`` (tests pass ``obj=AppContext(host=FakeHost(...))``)."""

    host: Host | None = None
    python: str = field(default_factory=lambda: sys.executable)

    def get_host(self) -> Host:
        if self.host is None:
            from envdoctor.platform.system import SystemHost

            self.host = SystemHost()
        return self.host


def app_context(ctx: typer.Context) -> AppContext:
    """The AppContext of this invocation, created on first use."""
    root = ctx.find_root()
    if not isinstance(root.obj, AppContext):
        root.obj = AppContext()
    return root.obj


def check_budgets(ctx: typer.Context) -> None:
    """Refuse a command's bad time budgets (``--timeout``, ``--step-timeout``) before any work.

    By option name, so that a command that hands its budget elsewhere (``smoke``'s goes to the
    kernels, not to ``facts_for``) is checked all the same.
    """
    for param in ctx.command.params:
        name = param.name or ""
        value = ctx.params.get(name)
        if (name == "timeout" or name.endswith("_timeout")) and isinstance(value, float):
            check_budget(value, param.opts[0] if param.opts else f"--{name}")


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
    given, python = python, str(Path(python).absolute())
    info = host.stat(python)
    if not isinstance(info, Found):
        raise EnvdoctorError(f"--python {given}: no such interpreter")
    if info.value.is_dir:
        raise EnvdoctorError(f"--python {given}: not an interpreter (a directory)")
    if not info.value.mode & 0o111:  # no execute bit at all: nobody, root included, can run it
        raise EnvdoctorError(f"--python {given}: not executable")
    return python


def facts_for(
    ctx: typer.Context,
    *,
    snapshot: Path | None = None,
    python: str | None = None,
    timeout: float = 30.0,
    include_torch: bool = True,
    torch_version_only: bool = False,
) -> Facts:
    """Facts from a snapshot file when given, else probed live through the Host seam.

    Every command that reads the machine comes through here: its options are checked first.
    """
    check_budgets(ctx)
    check_budget(timeout)
    if snapshot is not None:
        from envdoctor.snapshot import load_snapshot

        return load_snapshot(snapshot)
    from envdoctor.probes import collect_facts

    app = app_context(ctx)
    host = app.get_host()
    return collect_facts(
        host,
        python=resolve_python(host, python) if python is not None else app.python,
        deadline=Deadline(timeout),
        include_torch=include_torch,
        torch_version_only=torch_version_only,
    )
