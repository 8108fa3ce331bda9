"""Library rules: several copies of a CUDA library where the loader picks a surprising one."""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.probed import Found
from envdoctor.rules.base import Rule, RuleContext


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
        _shadowed,
    ),
)
