"""Device-node rules: every /dev/nvidia* node CUDA needs exists and the user may open it."""

from __future__ import annotations

from envdoctor.model.facts import DeviceNode
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.units import each, plural
from envdoctor.model.views import MODESET_NODE, MachineKind, denied_nodes, group_only, module_state
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.driver import kernel_loaded

REQUIRED = ("/dev/nvidiactl", "/dev/nvidia-uvm")
UVM_TOOLS = "/dev/nvidia-uvm-tools"  # CUPTI / Nsight need it; CUDA itself does not


def _missing_nodes(ctx: RuleContext, present: set[str]) -> list[str]:
    """Required nodes that are absent. Per-GPU nodes are counted, not named: in a container
    given GPU 3 the node is /dev/nvidia3 while NVML calls it index 0."""
    missing = [p for p in REQUIRED if p not in present]
    want = ctx.machine.presence.count
    have = len(ctx.machine.presence.gpu_nodes)
    if have < want:
        missing.append(f"/dev/nvidiaN ({plural(have, 'node')} for {plural(want, 'GPU')})")
    return missing


def _scope(ctx: RuleContext) -> str:
    """Why the device nodes are not this check's business here ("" when they are)."""
    if ctx.facts.host.wsl:
        return "WSL serves the GPU through /dev/dxg, not /dev/nvidia*"
    if ctx.machine.kind is not MachineKind.GPU:
        return ctx.machine.why_no_gpu()
    if not kernel_loaded(ctx):
        return "the nvidia kernel module is not loaded (the driver checks say why)"
    return ""


def _node_missing(ctx: RuleContext) -> Evaluation:
    facts = ctx.facts
    nodes = facts.kernel.device_nodes
    scope = _scope(ctx)
    if scope:
        yield not_applicable(scope)
        return
    if not isinstance(nodes, Found):
        yield unknown(f"/dev could not be listed: {why_missing(nodes)}")
        return
    present = {n.path for n in nodes.value}
    missing = _missing_nodes(ctx, present)
    tools_missing = UVM_TOOLS not in present
    in_container = bool(facts.host.containers)
    if not missing and (not tools_missing or in_container):
        gpus = len(ctx.machine.presence.gpu_nodes)
        yield passed(
            f"{', '.join(p for p in (*REQUIRED, UVM_TOOLS) if p in present)} and "
            f"{plural(gpus, 'GPU node')} exist"
        )
        return
    if tools_missing:
        missing.append(UVM_TOOLS)
    uvm_loaded = module_state(facts, "nvidia_uvm")
    if in_container:
        steps: tuple[str, ...] = (
            "restart the container with the GPUs passed in: docker run --gpus all … "
            "(Kubernetes: request nvidia.com/gpu)",
            "check on the host that the node exists: ls -l /dev/nvidia*",
        )
    else:
        steps = (
            "sudo nvidia-modprobe -u -c 0   # creates /dev/nvidia-uvm, /dev/nvidia-uvm-tools "
            "and the per-GPU nodes",
            f"or: sudo modprobe nvidia-uvm  (nvidia_uvm loaded: {uvm_loaded.describe()})",
            "make it permanent: enable nvidia-persistenced or add nvidia-uvm to /etc/modules-load.d/",
        )
    uvm = "/dev/nvidia-uvm" in missing
    only_tools = missing == [UVM_TOOLS]
    if uvm:
        title = "/dev/nvidia-uvm is missing: CUDA cannot initialise (cudaErrorUnknown / 'CUDA unknown error')"
    elif only_tools:
        title = f"{UVM_TOOLS} is missing: profilers (CUPTI, Nsight) cannot attach"
    else:
        title = f"NVIDIA device nodes are missing: {', '.join(missing)}"
    yield Finding(
        code="device.node-missing",
        severity=Severity.WARNING if only_tools else Severity.ERROR,
        title=title,
        evidence=(
            ("missing", ", ".join(missing)),
            ("present", ", ".join(sorted(present)) or "none"),
            ("nvidia_uvm loaded", uvm_loaded.describe()),
        ),
        remediation=Remediation(
            summary="Create the missing device nodes"
            if not in_container
            else "Pass the GPU device nodes into the container",
            steps=steps,
            needs_root=not in_container,
        ),
    )


def _permission(ctx: RuleContext) -> Evaluation:
    facts = ctx.facts
    nodes = facts.kernel.device_nodes
    if not isinstance(nodes, Found):
        yield unknown(f"/dev could not be listed: {why_missing(nodes)}")
        return
    chars = [n for n in nodes.value if n.is_char_device and n.path != MODESET_NODE]
    if not chars:
        yield not_applicable("there are no /dev/nvidia* nodes to open")
        return
    denied = denied_nodes(nodes.value)
    user = f"{facts.host.user} (uid {facts.host.uid})"
    if not denied:
        yield passed(f"{user} may read and write {each(len(chars), 'NVIDIA device node')}")
        return
    yield Finding(
        code="device.permission-denied",
        severity=Severity.ERROR,
        title=f"{user} cannot open {', '.join(n.path for n in denied)}: CUDA will see no GPU",
        evidence=(
            ("user", user),
            *((n.path, _describe_node(n)) for n in denied),
        ),
        remediation=Remediation(
            summary="Give the user read/write access to the NVIDIA device nodes",
            steps=permission_steps(denied, facts.host.user),
            needs_root=True,
        ),
    )


def _describe_node(node: DeviceNode) -> str:
    owner = f", owner {node.uid}:{node.gid}" if node.uid >= 0 else ""
    return (
        f"mode {node.mode}{owner}, read {'yes' if node.readable else 'no'}, "
        f"write {'yes' if node.writable else 'no'}"
    )


def permission_steps(nodes: list[DeviceNode], user: str) -> tuple[str, ...]:
    """What grants access: the group the nodes already give to, else the driver's parameters."""
    gid = group_only(nodes)
    if gid is not None:
        return (
            "ls -l /dev/nvidia*   # the nodes are read/write for their group",
            f'sudo usermod -aG "$(getent group {gid} | cut -d: -f1)" {user}   # then log out and in',
        )
    return (
        "ls -l /dev/nvidia*   # no group may use them: the driver creates them this way",
        "set the driver's device-file parameters, e.g. for everyone: echo 'options nvidia "
        "NVreg_DeviceFileMode=0666' | sudo tee /etc/modprobe.d/nvidia-device-files.conf "
        "(or for one group, here video: NVreg_DeviceFileUID=0 "
        "NVreg_DeviceFileGID=$(getent group video | cut -d: -f3) NVreg_DeviceFileMode=0660)",
        "reload the driver (or reboot) so the nodes are created again; "
        'a udev rule (MODE/GROUP on KERNEL=="nvidia*") works too where udev creates them',
    )


RULES = (
    Rule(
        "device.nodes-present",
        "/dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm exist",
        ("device.node-missing",),
        _node_missing,
    ),
    Rule(
        "device.nodes-accessible",
        "The current user can read and write the NVIDIA device nodes",
        ("device.permission-denied",),
        _permission,
    ),
)
