"""torch.companions-mismatched: torchvision/torchaudio that do not belong with the installed torch.

Judged against the ``companions:`` of compat_tables/pytorch.yaml (PyTorch's published version
pairs) and the builds' local tags: another release, a CPU build beside a CUDA build, or another
CUDA. The fix is the whole matched set, from the index of the torch that is installed, in the
environment's own installer (model/install.py).
"""

from __future__ import annotations

from envdoctor.compat.companions import (
    build_variant,
    companion_problems,
    cpu_set,
    matched_set,
)
from envdoctor.model.facts import OWN_INTERPRETER, Facts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.install import InstallSet, install_steps, installer_for
from envdoctor.model.outcome import Verdict, not_applicable, unknown
from envdoctor.model.probed import Found, ProbeFailed
from envdoctor.model.views import show, torch_build
from envdoctor.rules.base import Evaluation, Rule, RuleContext, judged

CODE = "torch.companions-mismatched"


def _needs_companions(ctx: RuleContext) -> Verdict | None:
    if ctx.given_tables is None:
        return not_applicable("the fast tier judges without the compatibility tables")
    build = torch_build(ctx.facts)
    if build is None:
        return not_applicable("no torch build was read: torch.installed says why")
    companions = ctx.facts.torch.companions
    if isinstance(companions, ProbeFailed):
        return unknown(f"torchvision/torchaudio: {show(companions)}")
    if not isinstance(companions, Found):
        return not_applicable(f"torchvision/torchaudio: {show(companions)}")
    return None


def _mismatched(ctx: RuleContext) -> Evaluation:
    build = torch_build(ctx.facts)
    companions = ctx.facts.torch.companions
    if build is None or not isinstance(companions, Found):
        return
    problems = companion_problems(ctx.tables, build, companions.value)
    if not problems:
        return
    errors = any(p.severity is Severity.ERROR for p in problems)
    severity = Severity.ERROR if errors else Severity.WARNING
    evidence: list[tuple[str, str]] = [("torch", f"{build.version} at {build.location}")]
    for companion in companions.value:
        shown = show(companion.version)
        if companion.installer and isinstance(companion.version, Found):
            shown += f" (installed by {companion.installer})"
        evidence.append((companion.name, shown))
    release = ctx.tables.torch_release(build.version)
    row = release.companions_of(build.version) if release else None
    if row is not None:
        evidence.append(
            (
                f"released with torch {row.torch}",
                f"torchvision {row.torchvision}, torchaudio {row.torchaudio}",
            )
        )
    evidence.extend(("problem", p.problem) for p in problems)
    wanted = _set_for(ctx, build.version, build_variant(build))
    names = ", ".join(p.name for p in problems)
    yield Finding(
        code=CODE,
        severity=severity,
        title=problems[0].problem
        if len(problems) == 1
        else f"{names} do not match torch {build.version}",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary=f"Install torch {build.version.split('+', 1)[0]} with its torchvision and "
            "torchaudio as one set, from one index",
            steps=_steps(ctx.facts, wanted),
        ),
    )


def _steps(facts: Facts, wanted: InstallSet | None) -> tuple[str, ...]:
    if wanted is None:
        return (
            "envdoctor recommend   # the torch wheel and index that fit: install the set it names",
        )
    if facts.torch.chosen_by == OWN_INTERPRETER:
        return ("run envdoctor with --python PATH: the interpreter your code runs with",)
    return install_steps(installer_for(facts.torch), wanted, replace=True)


def _ok(ctx: RuleContext) -> str:
    build = torch_build(ctx.facts)
    companions = ctx.facts.torch.companions
    installed = (
        [f"{c.name} {c.version.value}" for c in companions.value if isinstance(c.version, Found)]
        if isinstance(companions, Found)
        else []
    )
    if not installed:
        return "neither torchvision nor torchaudio is installed: nothing to match"
    return f"{', '.join(installed)} match torch {build.version if build else '?'}"


def _set_for(ctx: RuleContext, version: str, variant: str) -> InstallSet | None:
    release = ctx.tables.torch_release(version)
    public = version.split("+", 1)[0]
    if variant == "cpu":
        return cpu_set(release, public)
    if release is None:
        return None
    row = release.variant(variant)
    return matched_set(release, row, public) if row is not None else None


RULES: tuple[Rule, ...] = (
    Rule(
        "torch.companions",
        "torchvision and torchaudio were released with the installed torch, for its build",
        (CODE,),
        judged(_mismatched, _needs_companions, ok=_ok),
    ),
)
