"""Install commands in the user's own installer: pip, uv or a conda environment's pip.

Every piece of advice that installs torch goes through here, so that a uv-made venv (no pip
inside) gets ``uv pip install --python …``, a conda environment whose torch conda installed is
told to remove conda's copy first, and torch, torchvision and torchaudio always travel together
as one set from one index. Which installer the environment uses is read from the environment
itself by the torch child (``InstallerFacts``); without those facts (an older snapshot) the
advice is the environment's pip, as before. docs/fix.md explains the choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from shlex import quote

from envdoctor.model.facts import InstallerFacts, TorchFacts
from envdoctor.model.probed import Found

PIP = "pip"
UV = "uv"
CONDA = "conda"


@dataclass(frozen=True, slots=True)
class InstallSet:
    """Packages to install together, all from one index: ``(name, version)`` pairs as pip
    writes them (``torch==2.13.0``; 1.x releases pin ``+cuXYZ`` and use an extra index)."""

    packages: tuple[tuple[str, str], ...]
    index_url: str
    variant: str = ""  # "cu130", "cpu": the PyTorch index the set comes from
    standard_index: bool = False  # index_url is PyTorch's own index for ``variant``
    extra_index: bool = False  # --extra-index-url (1.x wheels, pinned with +cuXYZ)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.packages)

    def pins(self) -> str:
        return " ".join(f"{name}=={version}" for name, version in self.packages)


@dataclass(frozen=True, slots=True)
class Installer:
    """How to install into the target environment. ``python`` is the target interpreter ("":
    not known, the bare ``pip`` is shown); ``kind`` is pip, uv or conda (a conda environment
    whose torch conda installed: remove conda's packages, then use the environment's pip);
    ``conda_packages`` are the conda packages to remove; ``why`` says what decided it."""

    kind: str
    python: str
    prefix: str = ""
    why: str = ""
    ensure_pip: bool = False  # the environment has no pip and is not uv's: ensurepip first
    conda_packages: tuple[str, ...] = ()


BARE = Installer(kind=PIP, python="", why="the installer of the environment is not known")


def installer_for(torch: TorchFacts) -> Installer:
    """The installer the target environment itself uses (see the module docstring)."""
    python = torch.python
    facts = torch.installer
    if not isinstance(facts, Found):
        return Installer(kind=PIP, python=python, why="the environment's pip (not probed)")
    env: InstallerFacts = facts.value
    if env.conda and env.torch_by_conda:
        conda_packages = ["pytorch"]
        for name in ("torchvision", "torchaudio"):
            companion = torch.companion(name)
            if companion is not None and companion.installer == "conda":
                conda_packages.append(name)
        return Installer(
            kind=CONDA,
            python=python,
            prefix=env.prefix,
            why=f"conda installed torch in the conda environment {env.prefix}",
            conda_packages=tuple(conda_packages),
        )
    if env.uv_venv:
        made = f"uv {env.uv_version}" if env.uv_version else "uv"
        return Installer(
            kind=UV, python=python, prefix=env.prefix, why=f"a venv made by {made} (pyvenv.cfg)"
        )
    if not env.pip and env.torch_installer == "uv":
        return Installer(
            kind=UV, python=python, prefix=env.prefix, why="no pip here, and uv installed torch"
        )
    if not env.pip:
        return Installer(
            kind=PIP,
            python=python,
            prefix=env.prefix,
            why="the environment has no pip: ensurepip installs it",
            ensure_pip=True,
        )
    where = "conda environment" if env.conda else "environment"
    return Installer(kind=PIP, python=python, prefix=env.prefix, why=f"the {where}'s pip")


def _pip(installer: Installer) -> str:
    return f"{quote(installer.python)} -m pip" if installer.python else "pip"


def _uv(installer: Installer) -> str:
    return (
        f"uv pip install --python {quote(installer.python)}"
        if installer.python
        else ("uv pip install")
    )


def install_command(installer: Installer, wanted: InstallSet, *, reinstall: bool = False) -> str:
    """The one command that installs ``wanted`` with ``installer`` (no removal before it)."""
    if installer.kind == UV:
        force = " --reinstall" if reinstall else ""
        if wanted.standard_index and wanted.variant and not wanted.extra_index:
            where = f"--torch-backend {quote(wanted.variant)}"  # uv's name for PyTorch's index
        else:
            flag = "--extra-index-url" if wanted.extra_index else "--index-url"
            where = f"{flag} {quote(wanted.index_url)}"
        return f"{_uv(installer)}{force} {wanted.pins()} {where}"
    force = " --force-reinstall" if reinstall else ""
    flag = "--extra-index-url" if wanted.extra_index else "--index-url"
    return f"{_pip(installer)} install{force} {wanted.pins()} {flag} {quote(wanted.index_url)}"


def removal_steps(installer: Installer, names: tuple[str, ...]) -> tuple[str, ...]:
    """What takes the installed ``names`` out first, in the same installer (conda: conda's own
    packages, by conda, then pip's copies by pip)."""
    if installer.kind == CONDA and "torch" in names:
        prefix = f" --prefix {quote(installer.prefix)}" if installer.prefix else ""
        packages = " ".join(installer.conda_packages)
        return (
            f"conda remove{prefix} --force -y {packages}   # conda's torch: pip's wheels replace it",
            f"{_pip(installer)} uninstall -y {' '.join(names)}",
        )
    if installer.kind == UV:
        target = f" --python {quote(installer.python)}" if installer.python else ""  # no -y
        return (f"uv pip uninstall{target} {' '.join(names)}",)
    return (f"{_pip(installer)} uninstall -y {' '.join(names)}",)


def install_steps(
    installer: Installer, wanted: InstallSet, *, replace: bool = False, reinstall: bool = False
) -> tuple[str, ...]:
    """The steps that install ``wanted``: ensurepip where the environment lacks pip, the removal
    of what is installed when ``replace`` (a CPU torch replaced by a CUDA one of the same
    version: pip would keep it) or when conda installed torch, then the install itself."""
    steps: list[str] = []
    if installer.ensure_pip:
        steps.append(
            f"{quote(installer.python)} -m ensurepip --upgrade   # this environment has no pip"
        )
    if replace or installer.kind == CONDA:
        steps.extend(removal_steps(installer, wanted.names))
    steps.append(install_command(installer, wanted, reinstall=reinstall))
    return tuple(steps)


def one_line(installer: Installer, wanted: InstallSet) -> str:
    """``install_steps`` as one shell line (``recommend``'s command)."""
    return " && ".join(step.split("   #", 1)[0] for step in install_steps(installer, wanted))
