"""torch rules: installed, importable, a CUDA build (where a GPU is here), and able to use it."""

from __future__ import annotations

from envdoctor.model.facts import OWN_INTERPRETER
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.install import install_steps as set_steps
from envdoctor.model.install import installer_for, removal_steps
from envdoctor.model.outcome import Verdict, failed_elsewhere, not_applicable, passed, unknown
from envdoctor.model.probed import Absent, ProbeFailed
from envdoctor.model.views import show, torch_broken, torch_build, torch_not_probed
from envdoctor.rules.base import Evaluation, Rule, RuleContext


def install_steps(ctx: RuleContext, *, replace: bool = False) -> tuple[str, ...]:
    """The install `envdoctor recommend` picks for this machine, from the tables: torch with
    its torchvision and torchaudio, from one index, in the environment's own installer
    (model/install.py); ``replace`` removes the installed set first."""
    from envdoctor.compat.recommend import (  # lazy: the probe tier never needs the tables
        machine_from_facts,
        recommend,
    )

    python = ctx.facts.torch.python
    installer = installer_for(ctx.facts.torch)
    rec = recommend(ctx.tables, machine_from_facts(ctx.facts, ctx.tables, ctx.intent))
    if rec.choice is not None:
        why = ", ".join(rec.choice.reasons[:1]) or "best match"
        steps = set_steps(installer, rec.choice.install_set, replace=replace)
        return (*steps[:-1], f"{steps[-1]}   # {why}")
    if rec.cpu_install is not None:
        steps = set_steps(installer, rec.cpu_install, replace=replace)
        return (*steps[:-1], f"{steps[-1]}   # no NVIDIA GPU here: the CPU build")
    removal = removal_steps(installer, ("torch",)) if replace else ()
    if rec.blockers:
        return (
            f"first: {rec.blockers[0]}",
            "then: envdoctor recommend   # the wheel that fits once the GPUs are usable",
        )
    return (
        *removal,
        f"envdoctor recommend --python {python}   # the torch wheel and index URL that match",
    )


def _installed(ctx: RuleContext) -> Evaluation:
    probed = ctx.facts.torch.torch
    python = ctx.facts.torch.python
    skipped = torch_not_probed(ctx.facts)
    if skipped:
        yield not_applicable(skipped)
    elif isinstance(probed, Absent):
        chosen_by = ctx.facts.torch.chosen_by
        own = chosen_by == OWN_INTERPRETER
        yield Finding(
            code="torch.not-installed",
            severity=Severity.WARNING,
            title=f"torch is not installed for {python}",
            evidence=(
                ("python", python),
                *((("chosen because", chosen_by),) if chosen_by else ()),
                ("import torch", probed.reason),
            ),
            remediation=Remediation(
                summary="Point envdoctor at the environment you train in"
                if own
                else "Install the torch wheel that matches this machine",
                steps=(
                    "activate that environment and run envdoctor again, or name its "
                    "interpreter: envdoctor check --python /path/to/env/bin/python",
                )
                if own
                else install_steps(ctx),
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
            remediation=_probe_failed_fix(python, probed.error),
            inconclusive=True,
        )
    else:
        build = torch_build(ctx.facts)
        version = build.version if build else show(torch_broken(ctx.facts).version)  # type: ignore[union-attr]  # one of the two is set
        yield passed(f"torch {version} is installed for {python}")


def _probe_failed_fix(python: str, error: str) -> Remediation:
    """What to do depends on how the child failed: only a probe that ran out of time is helped
    by a larger budget; an interpreter that cannot start (missing, exit 126/127 from a wrapper
    whose target is gone) is the thing to repair."""
    by_hand = f"{python} -X importtime -c 'import torch; print(torch.cuda.is_available())'"
    if "does not exist" in error or error.startswith("cannot run") or "(exit 12" in error:
        return Remediation(
            summary=f"Make {python} an interpreter that starts, or name another with --python",
            steps=(
                f"ls -l {python}   # a link or wrapper whose target is gone exits 126/127",
                f"{python} -c 'import sys; print(sys.executable)'   # its own error",
                "envdoctor check --python /path/to/env/bin/python",
            ),
        )
    if "did not finish within" in error:
        return Remediation(
            summary="Run the import by hand to see where it hangs",
            steps=(
                by_hand,
                "a hang in CUDA init: check `dmesg | grep -i xid` and the GPU's state",
                "a slow file system (an NFS home, a cold conda env): envdoctor check --timeout 120",
            ),
        )
    return Remediation(
        summary="Run the import by hand to see where it crashes",
        steps=(by_hand, "a crash in CUDA init: check `dmesg | grep -i xid` and the GPU's state"),
    )


def _import_failed(ctx: RuleContext) -> Evaluation:
    broken = torch_broken(ctx.facts)
    build = torch_build(ctx.facts)
    if broken is None:
        if build is not None and build.from_cache:
            yield passed(
                f"`import torch` ran in a child of {ctx.facts.torch.python} at "
                f"{build.from_cache} (envdoctor's cache: nothing it read has changed since; "
                "--no-cache imports it again)"
            )
        elif build is not None and build.imported:
            yield passed(f"`import torch` ran in a child of {ctx.facts.torch.python}")
        elif build is not None:
            yield not_applicable(
                "a CPU-only build, read from torch/version.py without importing it "
                "(a CPU build cannot use a GPU whatever its import does)"
            )
        else:
            yield _no_build(ctx)
        return
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
                *install_steps(ctx, replace=True),
            ),
        ),
    )


def _cpu_build(ctx: RuleContext) -> Evaluation:
    build = torch_build(ctx.facts)
    if build is None:
        yield _no_build(ctx)
        return
    if not build.is_cpu_build:
        variant = f"CUDA {build.cuda}" if build.cuda else f"ROCm {build.hip}"
        yield passed(f"torch {build.version} is a {variant} build (torch.version)")
        return
    machine = ctx.machine
    if machine.cpu_is_right:
        yield not_applicable(f"{machine.why_no_gpu()}: the CPU build of torch is the right one")
        return
    evidence = [
        ("torch", f"{build.version} at {build.location}"),
        ("torch.version.cuda", "None (built without CUDA)"),
    ]
    if machine.presence.seen or machine.driver.present:
        evidence.append(("NVIDIA GPU or driver on this machine", "yes"))
    if machine.intent.expect_gpu:
        evidence.append(("a GPU is expected", machine.intent.source))
    yield Finding(
        code="torch.cpu-build",
        severity=Severity.ERROR,
        title=f"torch {build.version} is a CPU-only build: it cannot use a GPU",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Replace it with a CUDA build of torch",
            steps=install_steps(ctx, replace=True),
        ),
    )


def _cuda_unavailable(ctx: RuleContext) -> Evaluation:
    build = torch_build(ctx.facts)
    if build is None:
        yield _no_build(ctx)
        return
    if build.is_cpu_build:
        machine = ctx.machine
        if machine.cpu_is_right:
            yield not_applicable(f"{machine.why_no_gpu()}: a CPU build needs no CUDA")
        else:
            yield failed_elsewhere("a CPU-only build never has CUDA (torch.cpu-build)")
        return
    machine = ctx.machine
    if not build.cuda_available and machine.cpu_is_right:
        yield not_applicable(f"{machine.why_no_gpu()}: CUDA cannot be available to torch here")
        return
    if not build.imported:
        yield not_applicable("torch was read from its version file, not imported")
        return
    if build.cuda_available:
        yield passed(
            f"CUDA is usable now (the CUDA driver API: cuInit, {show(build.device_count)} "
            f"device(s)); torch's import is from envdoctor's cache of {build.from_cache}"
            if build.from_cache
            else f"torch.cuda.is_available() returned True in a child of {ctx.facts.torch.python}"
        )
        return
    reason = build.unavailable_reason or "torch gave no reason"
    why = "why (the CUDA driver API, now)" if build.from_cache else "torch's reason"
    yield Finding(
        code="torch.cuda-unavailable",
        severity=Severity.ERROR,
        title="torch.cuda.is_available() is False",
        evidence=(
            ("torch", f"{build.version} (CUDA {build.cuda or build.hip})"),
            (why, reason),
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


def _no_build(ctx: RuleContext) -> Verdict:
    """Why a check of the torch build cannot run: not probed, not installed, broken, unknown."""
    probed = ctx.facts.torch.torch
    if torch_broken(ctx.facts) is not None:
        return failed_elsewhere("`import torch` fails (torch.import-failed)")
    if isinstance(probed, ProbeFailed):
        return unknown(f"the torch probe failed: {probed.error}")
    return not_applicable(show(probed) or "no torch build was read")


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
