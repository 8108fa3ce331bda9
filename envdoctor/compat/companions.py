"""torch, torchvision and torchaudio as one set: the set to install, and how an installed set
differs from the one PyTorch released (``companions:`` of compat_tables/pytorch.yaml).

A torchvision or torchaudio built for another torch fails at import or at its first operator
(``operator torchvision::nms does not exist``); one built without CUDA beside a CUDA torch has
no CUDA kernels for its operators. So every install envdoctor advises names the whole set, from
the index of the torch variant it installs.
"""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.compat.tables import DEFAULT_INDEX_URL, CompatTables, TorchRelease, TorchVariant
from envdoctor.model.facts import Companion, TorchBuild
from envdoctor.model.finding import Severity
from envdoctor.model.install import InstallSet
from envdoctor.model.probed import Found

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
JUDGED = ("torchvision", "torchaudio")
"""The companions judged against the table; triton is pinned by torch's own wheel metadata
(pip installs the pin with torch), so it is reported, not judged."""


def matched_set(release: TorchRelease, variant: TorchVariant, version: str) -> InstallSet:
    """torch ``version`` of ``variant`` with the torchvision and torchaudio released with it,
    all from the variant's index (1.x: ``+cuXYZ`` pins and an extra index, as PyTorch wrote)."""
    one_x = release.release_version.major < 2
    tag = f"+{variant.name}" if one_x else ""
    return InstallSet(
        packages=_packages(release, version, tag),
        index_url=variant.index_url,
        variant=variant.name,
        standard_index=variant.index_url == DEFAULT_INDEX_URL.format(variant=variant.name),
        extra_index=one_x,
    )


def cpu_set(release: TorchRelease | None, version: str) -> InstallSet:
    """The CPU build of torch ``version`` and its companions, from PyTorch's CPU index."""
    one_x = release is not None and release.release_version.major < 2
    tag = "+cpu" if one_x else ""
    packages = _packages(release, version, tag) if release else (("torch", version),)
    return InstallSet(
        packages=packages,
        index_url=CPU_INDEX,
        variant="cpu",
        standard_index=True,
        extra_index=one_x,
    )


def _packages(release: TorchRelease, version: str, tag: str) -> tuple[tuple[str, str], ...]:
    found = release.companions_of(version)
    out = [("torch", version + tag)]
    if found is not None:
        out.append(("torchvision", found.torchvision + tag))
        out.append(("torchaudio", found.torchaudio))
    return tuple(out)


def local_tag(version: str) -> str:
    """``cu130`` of ``2.13.0+cu130``; "" for a version without a local tag."""
    return version.split("+", 1)[1] if "+" in version else ""


def build_variant(build: TorchBuild) -> str:
    """The variant of the installed torch: its tag, else ``cpu`` or ``cuXYZ`` from
    torch.version (a PyPI wheel has no tag); "" for ROCm or an unreadable CUDA."""
    tag = local_tag(build.version)
    if tag:
        return tag
    if build.is_cpu_build:
        return "cpu"
    parts = build.cuda.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"cu{parts[0]}{parts[1]}"
    return ""


def variant_kind(tag: str) -> str:
    """ "cpu", "cuda", "rocm" or "" (a tag that names no build, or none)."""
    if tag == "cpu":
        return "cpu"
    if tag.startswith("cu") and tag[2:].isdigit():
        return "cuda"
    if tag.startswith("rocm"):
        return "rocm"
    return ""


def _feature(version: str) -> tuple[str, ...]:
    return tuple(version.split("+", 1)[0].split(".")[:2])


@dataclass(frozen=True, slots=True)
class CompanionProblem:
    """One companion that does not belong with the installed torch."""

    name: str
    installed: str
    expected: str  # the version released with this torch, "" when the table has none
    problem: str  # what is wrong, in a sentence
    severity: Severity


def companion_problems(
    tables: CompatTables, build: TorchBuild, companions: tuple[Companion, ...]
) -> tuple[CompanionProblem, ...]:
    """How the installed torchvision/torchaudio differ from the set released with this torch:
    another release (the feature release differs: error; only the patch: warning), a CPU build
    beside a CUDA build (error) or the other way round (warning), or another CUDA (another
    major: error, torchvision refuses to load; another minor: warning)."""
    release = tables.torch_release(build.version)
    row = release.companions_of(build.version) if release else None
    torch_tag = build_variant(build)
    out = []
    for companion in companions:
        if companion.name not in JUDGED or not isinstance(companion.version, Found):
            continue
        installed = companion.version.value
        expected = (row.version_of(companion.name) or "") if row else ""
        public = installed.split("+", 1)[0]
        if expected and public != expected:
            feature = _feature(public) != _feature(expected)
            out.append(
                CompanionProblem(
                    name=companion.name,
                    installed=installed,
                    expected=expected,
                    problem=f"{companion.name} {public} was not released with torch "
                    f"{build.version.split('+', 1)[0]} (its {companion.name} is {expected})",
                    severity=Severity.ERROR if feature else Severity.WARNING,
                )
            )
            continue
        problem = _variant_problem(companion.name, installed, torch_tag, build.version)
        if problem is not None:
            text, severity = problem
            out.append(CompanionProblem(companion.name, installed, expected, text, severity))
    return tuple(out)


def _variant_problem(
    name: str, installed: str, torch_tag: str, torch_version: str
) -> tuple[str, Severity] | None:
    tag = local_tag(installed)
    mine, theirs = variant_kind(torch_tag), variant_kind(tag)
    if not mine or not theirs or tag == torch_tag:
        return None  # a wheel without a tag (PyPI's) or a build envdoctor cannot name
    if mine == "cuda" and theirs == "cpu":
        return (
            f"{name} {installed} is a CPU build beside the CUDA build torch {torch_version}: "
            "its operators have no CUDA kernels",
            Severity.ERROR,
        )
    if mine == "cpu" and theirs != "cpu":
        return (
            f"{name} {installed} is a {tag} build beside the CPU build torch {torch_version}",
            Severity.WARNING,
        )
    if mine == theirs == "cuda":
        major = torch_tag[2:-1] != tag[2:-1]
        return (
            f"{name} {installed} is built for another CUDA ({tag}) than torch {torch_version} "
            f"({torch_tag})"
            + (": torchvision refuses to load across CUDA majors" if major else ""),
            Severity.ERROR if major else Severity.WARNING,
        )
    return (f"{name} {installed} is a {tag} build beside torch {torch_version}", Severity.ERROR)
