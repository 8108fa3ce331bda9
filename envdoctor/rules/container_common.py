"""What the host-side container rules share: where they apply, and how a step is shown."""

from __future__ import annotations

import shlex

from envdoctor.model.containers import ContainerHostFacts
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.views import MachineKind
from envdoctor.rules.base import RuleContext


def host_side(ctx: RuleContext) -> tuple[ContainerHostFacts | None, str]:
    """The host-side facts where they apply, else why not."""
    if ctx.machine.containers:
        return None, "in a container: the host's engines are judged on the host"
    if ctx.facts.host.wsl:
        return None, "WSL: Docker Desktop gives containers the GPU"
    if ctx.machine.kind is not MachineKind.GPU:
        return None, f"{ctx.machine.why_no_gpu()}: no GPU to give containers"
    facts = ctx.facts.containers.host
    if not isinstance(facts, Found):
        return None, f"the container layer was not read ({why_missing(facts)})"
    if not facts.value.engines:
        return None, "no container engine (Docker, containerd, CRI-O, Podman) is installed"
    return facts.value, ""


def sudo(argv: tuple[str, ...]) -> str:
    """A command for a person to run as root, quoted for a POSIX shell (paths come from the
    machine: a spec named "a b.yaml" stays one argument)."""
    return "sudo " + shlex.join(argv)
