"""What every command needs: the Host (real or injected by tests) and the machine's facts."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import typer

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts
from envdoctor.platform.host import Deadline, Host


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


def facts_for(
    ctx: typer.Context,
    *,
    snapshot: Path | None = None,
    python: str | None = None,
    timeout: float = 30.0,
    include_torch: bool = True,
) -> Facts:
    """Facts from a snapshot file when given, else probed live through the Host seam."""
    if snapshot is not None:
        from envdoctor.snapshot import load_snapshot

        return load_snapshot(snapshot)
    from envdoctor.probes import collect_facts

    app = app_context(ctx)
    if timeout <= 0:
        raise EnvdoctorError("--timeout must be a positive number of seconds")
    host = app.get_host()
    if python is not None:
        from envdoctor.model.probed import Found

        resolved = python if isinstance(host.stat(python), Found) else host.which(python)
        if resolved is None:
            raise EnvdoctorError(f"--python {python}: no such interpreter")
        python = resolved
    return collect_facts(
        host,
        python=python or app.python,
        deadline=Deadline(timeout),
        include_torch=include_torch,
    )
