"""The local CUDA toolkit against torch: what building a CUDA extension will run into.

``torch.utils.cpp_extension`` (flash-attn, DeepSpeed ops, vLLM and apex built from source) finds
nvcc as ``$CUDA_HOME`` (or ``$CUDA_PATH``), else nvcc on PATH, else ``/usr/local/cuda``, and
compares its release with ``torch.version.cuda``: another major version is a RuntimeError ("The
detected CUDA version (X) mismatches the version that was used to compile PyTorch (Y)"),
another minor version a warning (torch/utils/cpp_extension.py, ``_check_cuda_version``).
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.compat.versions import parse_cuda
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import Verdict, not_applicable
from envdoctor.model.probed import Absent, Found, why_missing
from envdoctor.model.views import cuda_torch
from envdoctor.rules.base import Rule, RuleContext, judged

CUDA_DOWNLOADS = "https://developer.nvidia.com/cuda-toolkit-archive"


def _nvcc_vs_torch(ctx: RuleContext) -> Iterator[Finding]:
    torch = cuda_torch(ctx.facts)
    nvcc = ctx.facts.env.build_nvcc
    if torch is None or not isinstance(nvcc, Found):
        return
    built, local = parse_cuda(torch.cuda), parse_cuda(nvcc.value.version)
    if built is None or local is None or built == local:
        return
    major = built[0] != local[0]
    want = f"{built[0]}.{built[1]}"
    yield Finding(
        code="cuda.nvcc-torch-mismatch",
        severity=Severity.ERROR if major else Severity.WARNING,
        title=f"nvcc is CUDA {nvcc.value.version} but torch {torch.version} was built with CUDA "
        f"{torch.cuda}: "
        + (
            "building CUDA extensions (flash-attn, DeepSpeed ops, vLLM from source) will fail"
            if major
            else "torch warns when building CUDA extensions, and some packages refuse to build"
        ),
        evidence=(
            (
                "nvcc torch.utils.cpp_extension uses",
                f"{nvcc.value.path} (CUDA {nvcc.value.version})",
            ),
            ("found through", _found_through(ctx)),
            ("torch", f"{torch.version} (torch.version.cuda = {torch.cuda})"),
            (
                "torch.utils.cpp_extension says",
                f"The detected CUDA version ({nvcc.value.version}) "
                + (
                    f"mismatches the version that was used to compile PyTorch ({torch.cuda})"
                    if major
                    else f"has a minor version mismatch with the version that was used to "
                    f"compile PyTorch ({torch.cuda})"
                ),
            ),
        ),
        remediation=Remediation(
            summary=f"Build with a CUDA {want} toolkit (point CUDA_HOME at it), or use a torch "
            f"built for CUDA {nvcc.value.version}",
            steps=(
                f"install the CUDA {want} toolkit ({CUDA_DOWNLOADS}), or in a conda env: "
                f"conda install -c nvidia cuda-nvcc={want}",
                f"export CUDA_HOME=/usr/local/cuda-{want}; export PATH=$CUDA_HOME/bin:$PATH",
                f"or: envdoctor recommend   # a torch for CUDA {nvcc.value.version} if the "
                "driver supports it",
            ),
        ),
    )


def _cuda_home_invalid(ctx: RuleContext) -> Iterator[Finding]:
    nvcc = ctx.facts.env.build_nvcc
    if cuda_torch(ctx.facts) is None or not isinstance(nvcc, Absent):
        return
    through = _found_through(ctx)
    if not through.startswith("$"):
        return  # no toolkit at all: nothing to build with is not a fault until someone builds
    var = through[1:].split("=", 1)[0]
    build = cuda_torch(ctx.facts)
    wanted = build.cuda if build is not None and build.cuda else ""
    yield Finding(
        code="cuda.cuda-home-invalid",
        severity=Severity.WARNING,
        title=f"{var} points to no CUDA toolkit: building CUDA extensions will fail "
        "(nvcc not found)",
        evidence=(("CUDA toolkit", nvcc.reason),),
        remediation=Remediation(
            summary=f"Point {var} at a CUDA toolkit's root (the directory holding bin/nvcc)",
            steps=(
                "ls -d /usr/local/cuda-*   # installed toolkits",
                f"export {var}=/usr/local/cuda-{wanted}   # the toolkit of torch's CUDA {wanted}",
                f"or unset {var} to let torch find nvcc on PATH",
            ),
        ),
    )


def _found_through(ctx: RuleContext) -> str:
    env = ctx.facts.env
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = env.get(var)
        if value:
            return f"${var}={value}"
    return "PATH (no $CUDA_HOME set)"


def _needs_cuda_torch_and_nvcc(ctx: RuleContext) -> Verdict | None:
    if cuda_torch(ctx.facts) is None:
        return not_applicable("no CUDA build of torch to build extensions for")
    nvcc = ctx.facts.env.build_nvcc
    if not isinstance(nvcc, Found):
        reason = why_missing(nvcc)  # often "no CUDA toolkit: …" itself
        return not_applicable(
            reason if reason.startswith("no CUDA toolkit") else f"no CUDA toolkit: {reason}"
        )
    return None


def _needs_cuda_home(ctx: RuleContext) -> Verdict | None:
    if cuda_torch(ctx.facts) is None:
        return not_applicable("no CUDA build of torch to build extensions for")
    if not _found_through(ctx).startswith("$"):
        return not_applicable("CUDA_HOME and CUDA_PATH are not set")
    return None


def _same_cuda(ctx: RuleContext) -> str:
    nvcc = ctx.facts.env.build_nvcc
    version = nvcc.value.version if isinstance(nvcc, Found) else "?"
    torch = cuda_torch(ctx.facts)
    return f"nvcc {version} ({_found_through(ctx)}) matches torch's CUDA {torch.cuda if torch else '?'}"


RULES = (
    Rule(
        "cuda.nvcc-torch",
        "nvcc's CUDA is the one torch was built with (CUDA extensions build)",
        ("cuda.nvcc-torch-mismatch",),
        judged(_nvcc_vs_torch, _needs_cuda_torch_and_nvcc, ok=_same_cuda),
    ),
    Rule(
        "cuda.cuda-home",
        "CUDA_HOME, when set, holds a CUDA toolkit",
        ("cuda.cuda-home-invalid",),
        judged(
            _cuda_home_invalid,
            _needs_cuda_home,
            ok=lambda ctx: f"{_found_through(ctx)} holds bin/nvcc",
        ),
    ),
)
