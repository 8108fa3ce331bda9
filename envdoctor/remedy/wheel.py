"""Which torch wheel to reinstall: the CUDA variant whose index matches the driver and GPUs.

In order of preference:

1. the compatibility tables' recommendation (``envdoctor recommend``: the newest release with a
   variant the driver runs and whose arch list covers every GPU), pinned to that release;
2. install advice a finding carries: a remediation step or evidence value naming
   ``https://download.pytorch.org/whl/cuXYZ`` (and maybe ``torch==X.Y.Z``);
3. without tables: the newest official variant whose CUDA version the driver supports
   (``nvidia-smi``'s "CUDA Version"), torch unpinned so pip takes the newest release built for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from envdoctor.compat.tables import CompatTables
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding
from envdoctor.model.probed import Found
from envdoctor.model.views import NO_INTENT, Intent
from envdoctor.remedy.model import Action, ReinstallTorch, RunCommand

INDEX_BASE = "https://download.pytorch.org/whl/"
# The CUDA variants of the official wheels (pytorch/pytorch RELEASE.md; test-infra's
# generate_binary_build_matrix.py), 2.0 to 2.14. A variant's index serves the releases built for it.
KNOWN_VARIANTS = ("cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")

_INDEX = re.compile(r"https://download\.pytorch\.org/whl/(cu[0-9]{3})(?![0-9A-Za-z])")
_PIN = re.compile(r"\btorch==([0-9]+(?:\.[0-9]+)*)(?:\+[0-9A-Za-z.]+)?(?![0-9A-Za-z.+])")


@dataclass(frozen=True, slots=True)
class WheelChoice:
    requirement: str  # "torch" or "torch==2.11.0"
    variant: str  # "cu128"
    why: str
    index_url: str = ""

    def __post_init__(self) -> None:
        if not self.index_url:
            object.__setattr__(self, "index_url", INDEX_BASE + self.variant)


def choose(
    facts: Facts,
    findings: Iterable[Finding],
    tables: CompatTables | None = None,
    intent: Intent = NO_INTENT,
) -> tuple[WheelChoice | None, str]:
    """The tables' pick, else the findings' advice, else the newest variant the driver
    supports; with None, why no wheel can be chosen (one line for the plan's notes)."""
    blocked = ""
    if tables is not None:
        recommended, blocked = from_tables(facts, tables, intent)
        if recommended is not None:
            return recommended, ""
    if blocked:
        return None, blocked
    advised = from_findings(findings)
    if advised is not None:
        return advised, ""
    driver_cuda = driver_cuda_version(facts)
    variant = newest_variant_for(driver_cuda) if driver_cuda else None
    if variant is None:
        return None, (
            "no torch wheel could be chosen: envdoctor cannot tell which CUDA the driver runs "
            "(`envdoctor recommend` says more)"
        )
    return (
        WheelChoice(
            requirement="torch",
            variant=variant,
            why=f"the driver supports CUDA {driver_cuda}; {variant} is the newest official "
            "variant that does not need more",
        ),
        "",
    )


def from_tables(
    facts: Facts, tables: CompatTables, intent: Intent = NO_INTENT
) -> tuple[WheelChoice | None, str]:
    """What `envdoctor recommend` picks for this machine (torch 2.x releases only), or why it
    picks nothing: the driver must be fixed first ("" when the tables simply have no pick)."""
    from envdoctor.compat.recommend import machine_from_facts, recommend  # (only with tables)

    if not tables.torch_releases:
        return None, ""
    rec = recommend(tables, machine_from_facts(facts, tables, intent))
    choice = rec.choice
    if rec.blockers:
        return None, (
            "torch is left alone until the driver lists the GPUs ("
            + rec.blockers[0].split(";", 1)[0]
            + "): then `envdoctor fix` picks the wheel that fits"
        )
    if rec.status != "ok" or choice is None or choice.release.release_version.major < 2:
        return None, ""  # 1.x wheels need +cuXYZ pins and --extra-index-url: left to a person
    why = (
        f"torch {choice.version}, the installed version, in the variant that fits"
        if rec.kept_installed
        else f"torch {choice.version}: the newest official wheel for this driver and these GPUs"
    )
    return (
        WheelChoice(
            requirement=f"torch=={choice.version}",
            variant=choice.variant.name,
            why=f"{why}, as `envdoctor recommend` picks",
            index_url=choice.variant.index_url,
        ),
        "",
    )


def from_findings(findings: Iterable[Finding]) -> WheelChoice | None:
    """Install advice (index URL, optional pin) a finding's remediation or evidence carries."""
    for finding in findings:
        texts = list(finding.remediation.steps) if finding.remediation else []
        texts.extend(value for _, value in finding.evidence)
        for text in texts:
            index = _INDEX.search(text)
            if not index:
                continue
            pin = _PIN.search(text)
            return WheelChoice(
                requirement=f"torch=={pin.group(1)}" if pin else "torch",
                variant=index.group(1),
                why=f"as {finding.code} advises",
            )
    return None


def driver_cuda_version(facts: Facts) -> str:
    """The CUDA version the driver supports ("13.0"), or "" when NVML did not say."""
    if isinstance(facts.nvml, Found) and isinstance(facts.nvml.value.cuda_driver_version, Found):
        return facts.nvml.value.cuda_driver_version.value
    return ""


def newest_variant_for(cuda: str) -> str | None:
    """The newest known variant whose CUDA version is not above ``cuda`` ("12.4" → "cu124")."""
    want = _version(cuda)
    if want is None:
        return None
    fitting = [v for v in KNOWN_VARIANTS if _variant_version(v) <= want]
    return fitting[-1] if fitting else None


def _version(text: str) -> tuple[int, int] | None:
    match = re.match(r"^\s*([0-9]{1,9})\.([0-9]{1,9})", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _variant_version(variant: str) -> tuple[int, int]:
    digits = variant[2:]
    return (int(digits[:-1]), int(digits[-1]))


def set_actions(
    facts: Facts, choice: WheelChoice, python: str, tables: CompatTables | None
) -> list[tuple[str, Action]]:
    """The steps that install ``choice`` as a set, in the environment's own installer
    (docs/fix.md): pip keeps ``ReinstallTorch`` and reinstalls the installed torchvision and
    torchaudio after it from the same index; uv installs all of them in one ``uv pip install``;
    a conda environment whose torch conda installed removes conda's packages first. Each entry
    is (title, action)."""
    from envdoctor.model.install import CONDA, UV, installer_for

    installer = installer_for(facts.torch)
    pins = _companion_pins(facts, choice, tables)
    title = f"Reinstall torch from the {choice.variant} index ({choice.why})"
    where: tuple[str, ...] = ("--index-url", choice.index_url)
    if installer.kind == UV:
        if choice.index_url == INDEX_BASE + choice.variant:
            where = ("--torch-backend", choice.variant)
        names = ("torch", *(p.split("==", 1)[0] for p in pins))
        again = tuple(w for n in names for w in ("--reinstall-package", n))
        argv = ("uv", "pip", "install", "--python", python, *again, choice.requirement, *pins)
        return [(title + " with uv", RunCommand((*argv, *where), needs_root=False))]
    out: list[tuple[str, Action]] = []
    if installer.kind == CONDA:
        prefix = ("--prefix", installer.prefix) if installer.prefix else ()
        removal = ("conda", "remove", *prefix, "--force", "-y", *installer.conda_packages)
        out.append(
            (
                "Remove conda's torch (pip's wheels replace it)",
                RunCommand(removal, needs_root=False),
            )
        )
    out.append(
        (title, ReinstallTorch(python, choice.requirement, choice.index_url, choice.variant))
    )
    if pins:
        argv = (python, "-m", "pip", "install", "--force-reinstall", "--no-deps", *pins, *where)
        listed = " and ".join(p.split("==", 1)[0] for p in pins)
        out.append((f"Reinstall {listed} from the same index", RunCommand(argv, needs_root=False)))
    return out


def _companion_pins(facts: Facts, choice: WheelChoice, tables: CompatTables | None) -> list[str]:
    """The installed torchvision/torchaudio, pinned to the release of the chosen torch when the
    tables give it (else unpinned: the index's newest, which matches its newest torch)."""
    version = choice.requirement.partition("==")[2]
    release = tables.torch_release(version) if tables is not None and version else None
    row = release.companions_of(version) if release is not None else None
    pins = []
    for name in ("torchvision", "torchaudio"):
        companion = facts.torch.companion(name)
        if companion is None or not isinstance(companion.version, Found):
            continue
        pinned = row.version_of(name) if row is not None else None
        pins.append(f"{name}=={pinned}" if pinned else name)
    return pins
