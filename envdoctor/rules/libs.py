"""Library rules: several copies of a CUDA library where the loader picks a surprising one."""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Found, why_missing
from envdoctor.rules.base import Evaluation, Rule, RuleContext


def _single_copy(ctx: RuleContext) -> Evaluation:
    libs = ctx.facts.libraries
    if not isinstance(libs, Found):
        yield unknown(f"the loader's view could not be read: {why_missing(libs)}")
        return
    found = [f for f in libs.value if f.copies]
    if not found:
        yield not_applicable("no CUDA library is on the loader path")
        return
    findings = list(_shadowed(ctx))
    if findings:
        yield from findings
    else:
        yield passed(
            "one copy wins for each of " + ", ".join(f.name for f in found) + " (loader order)"
        )


def _shadowed(ctx: RuleContext) -> Iterator[Finding]:
    libs = ctx.facts.libraries
    if not isinstance(libs, Found):
        return
    for family in libs.value:
        distinct: dict[str, str] = {}
        for copy in family.copies:
            distinct.setdefault(copy.realpath, copy.version)
        if len(set(distinct.values())) < 2:
            continue
        winner = family.copies[0]
        stub = "/stubs/" in winner.realpath
        yield Finding(
            code="libs.shadowed",
            severity=Severity.ERROR if stub else Severity.WARNING,
            title=(
                f"The CUDA stub {winner.path} comes first on the loader path and shadows the "
                "driver's libcuda ('CUDA driver version is insufficient')"
                if stub
                else f"{len(distinct)} different copies of {family.name} are on the loader path; "
                f"{winner.path} ({winner.version}) wins"
            ),
            evidence=tuple(
                (f"{i + 1}. {c.origin}", f"{c.path} → {c.realpath} ({c.version or 'unversioned'})")
                for i, c in enumerate(family.copies)
            ),
            remediation=Remediation(
                summary="Keep one copy on the loader path: usually, remove the extra directory "
                "from LD_LIBRARY_PATH",
                steps=(
                    "echo $LD_LIBRARY_PATH   # drop directories holding old CUDA/cuDNN copies",
                    "pip wheels of torch bring their own cuDNN/cuBLAS: do not override them",
                    "sudo ldconfig   # after removing stale files from /etc/ld.so.conf.d paths",
                ),
            ),
            subject=family.name,
        )


RULES = (
    Rule(
        "libs.single-copy",
        "One copy of each CUDA library wins on the loader path",
        ("libs.shadowed",),
        _single_copy,
    ),
)
