"""Device-node rules: every /dev/nvidia* node CUDA needs exists and the user may open it."""

from __future__ import annotations

import re
from collections.abc import Iterator

from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Found
from envdoctor.rules.base import Rule, RuleContext
from envdoctor.rules.facts_view import gpus, module_names, nvidia_pci_count


def _missing_nodes(ctx: RuleContext, present: set[str]) -> list[str]:
    """Required nodes that are absent. Per-GPU nodes are counted, not named: in a container
    given GPU 3 the node is /dev/nvidia3 while NVML calls it index 0."""
    facts = ctx.facts
    missing = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm") if p not in present]
    want = len(gpus(facts)) or (nvidia_pci_count(facts) or 0)
    have = sum(1 for p in present if re.fullmatch(r"/dev/nvidia\d+", p))
    if have < want:
        missing.append(f"/dev/nvidiaN ({have} node{'s' if have != 1 else ''} for {want} GPUs)")
    return missing


def _driver_loaded(ctx: RuleContext) -> bool:
    mods = module_names(ctx.facts)
    return (mods is not None and "nvidia" in mods) or isinstance(ctx.facts.kernel.driver, Found)


def _node_missing(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    nodes = facts.kernel.device_nodes
    if facts.host.wsl or not _driver_loaded(ctx) or not isinstance(nodes, Found):
        return
    present = {n.path for n in nodes.value}
    missing = _missing_nodes(ctx, present)
    if not missing:
        return
    mods = module_names(facts) or frozenset()
    in_container = bool(facts.host.containers)
    if in_container:
        steps: tuple[str, ...] = (
            "restart the container with the GPUs passed in: docker run --gpus all … "
            "(Kubernetes: request nvidia.com/gpu)",
            "check on the host that the node exists: ls -l /dev/nvidia*",
        )
    else:
        steps = (
            "sudo nvidia-modprobe -u -c 0   # creates /dev/nvidia-uvm and the per-GPU nodes",
            "or: sudo modprobe nvidia-uvm  (nvidia_uvm loaded: "
            + ("yes" if "nvidia_uvm" in mods else "no")
            + ")",
            "make it permanent: enable nvidia-persistenced or add nvidia-uvm to /etc/modules-load.d/",
        )
    uvm = "/dev/nvidia-uvm" in missing
    yield Finding(
        code="device.node-missing",
        severity=Severity.ERROR,
        title=(
            "/dev/nvidia-uvm is missing: CUDA cannot initialise (cudaErrorUnknown / "
            "'CUDA unknown error')"
            if uvm
            else f"NVIDIA device nodes are missing: {', '.join(missing)}"
        ),
        evidence=(
            ("missing", ", ".join(missing)),
            ("present", ", ".join(sorted(present)) or "none"),
            ("nvidia_uvm module loaded", "yes" if "nvidia_uvm" in mods else "no"),
        ),
        remediation=Remediation(
            summary="Create the missing device nodes"
            if not in_container
            else "Pass the GPU device nodes into the container",
            steps=steps,
            needs_root=not in_container,
        ),
    )


def _permission(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    nodes = facts.kernel.device_nodes
    if not isinstance(nodes, Found):
        return
    denied = [
        n
        for n in nodes.value
        if n.is_char_device and not (n.readable and n.writable) and n.path != "/dev/nvidia-modeset"
    ]
    if not denied:
        return
    user = f"{facts.host.user} (uid {facts.host.uid})"
    yield Finding(
        code="device.permission-denied",
        severity=Severity.ERROR,
        title=f"{user} cannot open {', '.join(n.path for n in denied)}: CUDA will see no GPU",
        evidence=(
            ("user", user),
            *(
                (n.path, f"mode {n.mode}, read {_yn(n.readable)}, write {_yn(n.writable)}")
                for n in denied
            ),
        ),
        remediation=Remediation(
            summary="Give the user read/write access to the NVIDIA device nodes",
            steps=(
                "ls -l /dev/nvidia*   # see the owning group (often root:video or root:root)",
                f"sudo usermod -aG video {facts.host.user}   # then log out and in",
                "or set the driver's mode: echo 'options nvidia NVreg_DeviceFileMode=0666' | "
                "sudo tee /etc/modprobe.d/nvidia-perms.conf, then reload the driver",
            ),
            needs_root=True,
        ),
    )


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


RULES = (
    Rule(
        "device.nodes-present",
        "/dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm exist",
        ("device.node-missing",),
        _node_missing,
        applies=_driver_loaded,
    ),
    Rule(
        "device.nodes-accessible",
        "The current user can read and write the NVIDIA device nodes",
        ("device.permission-denied",),
        _permission,
        applies=lambda ctx: (
            isinstance(ctx.facts.kernel.device_nodes, Found)
            and bool(ctx.facts.kernel.device_nodes.value)
        ),
    ),
)
