"""torch rules: installed, importable, a CUDA build, and able to use the GPU."""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.facts import TorchBroken, TorchBuild
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.rules.base import Rule, RuleContext
from envdoctor.rules.facts_view import driver_present, gpus, nvidia_pci_count, show

RECOMMEND = "envdoctor recommend   # prints the torch wheel and index URL that match this driver"


def install_steps(ctx: RuleContext) -> tuple[str, ...]:
    """The exact pip command for the best wheel for this driver and GPUs, from the tables."""
    from envdoctor.compat.recommend import (  # lazy: the probe tier never needs the tables
        install_command,
        machine_from_facts,
        recommend,
    )

    python = ctx.facts.torch.python
    choice = recommend(ctx.tables, machine_from_facts(ctx.facts, ctx.tables)).choice
    if choice is None:
        return (RECOMMEND, f"{python} -m pip install torch --index-url <the URL it prints>")
    command = install_command(choice.release, choice.variant, choice.version)
    return (f"{python} -m {command}   # {', '.join(choice.reasons[:1]) or 'best match'}",)


def _installed(ctx: RuleContext) -> Iterator[Finding]:
    probed = ctx.facts.torch.torch
    python = ctx.facts.torch.python
    if isinstance(probed, Absent) and not probed.reason.startswith("not probed"):
        yield Finding(
            code="torch.not-installed",
            severity=Severity.WARNING,
            title=f"torch is not installed for {python}",
            evidence=(("python", python), ("import torch", probed.reason)),
            remediation=Remediation(
                summary="Install the torch wheel that matches this machine's driver",
                steps=install_steps(ctx),
            ),
        )
    elif isinstance(probed, ProbeFailed):
        yield Finding(
            code="torch.probe-failed",
            severity=Severity.WARNING,
            title=f"Could not determine the torch of {python}: {probed.error}",
            evidence=(
                ("python", python),
                ("error", probed.error),
                ("stderr", probed.detail or "(empty)"),
            ),
            remediation=Remediation(
                summary="Run the import by hand to see where it hangs or crashes",
                steps=(
                    f"{python} -X importtime -c 'import torch; print(torch.cuda.is_available())'",
                    "a hang in CUDA init: check `dmesg | grep -i xid` and the GPU's state",
                    "raise the budget: envdoctor check --timeout 120",
                ),
            ),
            inconclusive=True,
        )


def _import_failed(ctx: RuleContext) -> Iterator[Finding]:
    probed = ctx.facts.torch.torch
    if not (isinstance(probed, Found) and isinstance(probed.value, TorchBroken)):
        return
    broken = probed.value
    python = ctx.facts.torch.python
    lib_error = ".so" in broken.error or "undefined symbol" in broken.error
    steps = (
        (
            "a shared library is missing or mismatched: do not point LD_LIBRARY_PATH at "
            "another CUDA/cuDNN; unset it and retry",
        )
        if lib_error
        else ()
    )
    yield Finding(
        code="torch.import-failed",
        severity=Severity.ERROR,
        title=f"`import torch` fails: {broken.error}",
        evidence=(
            ("python", python),
            ("torch version (metadata)", show(broken.version)),
            ("error", broken.error),
            ("traceback (end)", "\n".join(broken.traceback.strip().splitlines()[-4:])),
        ),
        remediation=Remediation(
            summary="Reinstall torch cleanly in this environment",
            steps=(
                *steps,
                f"{python} -m pip uninstall -y torch",
                *install_steps(ctx),
            ),
        ),
    )


def _build(ctx: RuleContext) -> TorchBuild | None:
    probed = ctx.facts.torch.torch
    if isinstance(probed, Found) and isinstance(probed.value, TorchBuild):
        return probed.value
    return None


def _cpu_build(ctx: RuleContext) -> Iterator[Finding]:
    build = _build(ctx)
    if build is None or not build.is_cpu_build:
        return
    facts = ctx.facts
    gpu_here = bool(gpus(facts)) or bool(nvidia_pci_count(facts)) or driver_present(facts)
    yield Finding(
        code="torch.cpu-build",
        severity=Severity.ERROR if gpu_here else Severity.WARNING,
        title=f"torch {build.version} is a CPU-only build: it cannot use a GPU",
        evidence=(
            ("torch", f"{build.version} at {build.location}"),
            ("torch.version.cuda", "None (built without CUDA)"),
            ("NVIDIA GPU or driver on this machine", "yes" if gpu_here else "no"),
        ),
        remediation=Remediation(
            summary="Replace it with a CUDA build of torch",
            steps=(
                f"{ctx.facts.torch.python} -m pip uninstall -y torch",
                *install_steps(ctx),
            ),
        ),
    )


def _cuda_unavailable(ctx: RuleContext) -> Iterator[Finding]:
    build = _build(ctx)
    if build is None or build.is_cpu_build or build.cuda_available:
        return
    reason = build.unavailable_reason or "torch gave no reason"
    yield Finding(
        code="torch.cuda-unavailable",
        severity=Severity.ERROR,
        title="torch.cuda.is_available() is False",
        evidence=(
            ("torch", f"{build.version} (CUDA {build.cuda or build.hip})"),
            ("torch's reason", reason),
            ("CUDA_VISIBLE_DEVICES", ctx.facts.env.get("CUDA_VISIBLE_DEVICES") or "(unset)"),
        ),
        remediation=Remediation(
            summary="Fix the cause the other findings name (driver, device nodes, visibility)",
            steps=(
                "read the driver.*, device.* and env.* findings above: they say why",
                f"{ctx.facts.torch.python} -c 'import torch; torch.cuda.init()'   # torch's own error",
            ),
        ),
    )


RULES = (
    Rule(
        "torch.installed",
        "torch is installed and the probe completes",
        ("torch.not-installed", "torch.probe-failed"),
        _installed,
    ),
    Rule("torch.importable", "`import torch` works", ("torch.import-failed",), _import_failed),
    Rule("torch.cuda-build", "torch is a CUDA build", ("torch.cpu-build",), _cpu_build),
    Rule(
        "torch.cuda-available",
        "torch.cuda.is_available() is True",
        ("torch.cuda-unavailable",),
        _cuda_unavailable,
    ),
)
