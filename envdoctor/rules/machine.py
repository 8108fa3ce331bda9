"""The machine itself: a GPU machine, a CPU machine, or a container given no GPU, judged
against what its owner expects (``--expect gpu``, ``ENVDOCTOR_EXPECT``, a node spec)."""

from __future__ import annotations

from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed
from envdoctor.model.units import plural
from envdoctor.model.views import MachineKind, show
from envdoctor.rules.base import Evaluation, Rule, RuleContext

EXPECT_HINT = (
    "if this machine should have a GPU: envdoctor check --expect gpu (or ENVDOCTOR_EXPECT=gpu)"
)


NO_GPU_VALUES = frozenset({"void", "none", ""})


def no_gpu_cause(visible: str | None) -> str:
    """What NVIDIA_VISIBLE_DEVICES says about a container that got no GPU (the one cause the
    container.no-gpu-access finding names; env.nvidia-visible-devices folded into it)."""
    if visible is None:
        return "the NVIDIA runtime was not asked for a GPU (no --gpus, no nvidia.com/gpu request)"
    if visible.strip().lower() in NO_GPU_VALUES:
        return f"NVIDIA_VISIBLE_DEVICES={visible!r} asks the NVIDIA runtime for no GPU"
    return (
        f"NVIDIA_VISIBLE_DEVICES={visible!r} asks for GPUs but no NVIDIA hook ran: the "
        "container was started without --gpus / the nvidia runtime (the image's variable alone "
        "does nothing)"
    )


def _kind(ctx: RuleContext) -> Evaluation:
    machine = ctx.machine
    presence = machine.presence
    if machine.kind is MachineKind.GPU:
        seen = []
        if presence.nvml:
            seen.append(f"NVML lists {plural(len(presence.nvml), 'GPU')}")
        if presence.pci:
            seen.append(f"{len(presence.pci)} on the PCI bus")
        if presence.gpu_nodes:
            seen.append(plural(len(presence.gpu_nodes), "/dev/nvidiaN node"))
        if not seen:
            seen.append(f"the NVIDIA driver is installed ({machine.driver.describe()})")
        yield passed("an NVIDIA GPU machine: " + ", ".join(seen))
        return
    evidence = [
        ("NVIDIA PCI devices", presence.describe_pci()),
        ("/dev/nvidiaN nodes", ", ".join(presence.gpu_nodes) or "none"),
        ("NVML", show(ctx.facts.nvml)),
    ]
    intent = machine.intent
    if machine.kind is MachineKind.CPU:
        if intent.expect_gpu:
            yield not_applicable(
                f"a GPU is expected ({intent.source}): driver.not-installed says what is missing"
            )
            return
        yield Finding(
            code="machine.cpu-only",
            severity=Severity.INFO,
            title="No NVIDIA GPU here: a CPU machine, for which the CPU build of torch is right",
            evidence=(*evidence, ("a GPU is expected", "no (nothing says so)")),
            remediation=Remediation(
                summary="Nothing to fix on a CPU machine",
                steps=(EXPECT_HINT, "lspci | grep -i nvidia   # what the PCI bus shows"),
            ),
        )
        return
    runtime = ", ".join(machine.containers)
    visible = ctx.facts.env.get("NVIDIA_VISIBLE_DEVICES")
    evidence.insert(0, ("container", runtime))
    evidence.append(("NVIDIA_VISIBLE_DEVICES", "(unset)" if visible is None else repr(visible)))
    evidence.append(("why", no_gpu_cause(visible)))
    if intent.expect_gpu:
        evidence.append(("a GPU is expected", intent.source))
    yield Finding(
        code="container.no-gpu-access",
        severity=Severity.ERROR if intent.expect_gpu else Severity.WARNING,
        title="This container sees no NVIDIA GPU: it may have been started without GPU access",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Start the container with GPU access (NVIDIA Container Toolkit)",
            steps=(
                "docker run --gpus all …   (or --runtime=nvidia; podman: --device nvidia.com/gpu=all)",
                "Kubernetes: request `nvidia.com/gpu` in the pod's resources and install the "
                "NVIDIA device plugin / GPU Operator on the node",
                "on the host: nvidia-smi must work before any container can see the GPU",
                "a CPU-only container is fine: then this warning is expected",
            ),
        ),
    )


RULES = (
    Rule(
        "machine.kind",
        "The machine has the NVIDIA GPU it is expected to have",
        ("machine.cpu-only", "container.no-gpu-access"),
        _kind,
    ),
)
