"""Install commands in the user's installer (model/install.py), from the facts of the environment."""

from __future__ import annotations

import pytest

from envdoctor.model.facts import Companion, InstallerFacts, TorchFacts
from envdoctor.model.install import (
    BARE,
    CONDA,
    PIP,
    UV,
    InstallSet,
    install_steps,
    installer_for,
    one_line,
)
from envdoctor.model.probed import Absent, Found

CU130 = InstallSet(
    packages=(("torch", "2.13.0"), ("torchvision", "0.28.0"), ("torchaudio", "2.11.0")),
    index_url="https://download.pytorch.org/whl/cu130",
    variant="cu130",
    standard_index=True,
)
PY = "/env/bin/python"


def torch_facts(env: InstallerFacts | None, *companions: Companion) -> TorchFacts:
    return TorchFacts(
        python=PY,
        torch=Absent("not read here"),
        companions=Found(companions),
        installer=Found(env) if env else Absent("not reported"),
    )


def env(**over: object) -> InstallerFacts:
    base: dict[str, object] = {"prefix": "/env", "pip": True, "uv_venv": False, "conda": False}
    return InstallerFacts(**{**base, **over})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("facts", "kind", "steps"),
    [
        pytest.param(
            env(),
            PIP,
            (
                f"{PY} -m pip uninstall -y torch torchvision torchaudio",
                f"{PY} -m pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
                "--index-url https://download.pytorch.org/whl/cu130",
            ),
            id="pip",
        ),
        pytest.param(
            env(pip=False, uv_venv=True, uv_version="0.9.2", torch_installer="uv"),
            UV,
            (
                f"uv pip uninstall --python {PY} torch torchvision torchaudio",
                f"uv pip install --python {PY} torch==2.13.0 torchvision==0.28.0 "
                "torchaudio==2.11.0 --torch-backend cu130",
            ),
            id="uv venv",
        ),
        pytest.param(
            env(pip=False),
            PIP,
            (
                f"{PY} -m ensurepip --upgrade   # this environment has no pip",
                f"{PY} -m pip uninstall -y torch torchvision torchaudio",
                f"{PY} -m pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
                "--index-url https://download.pytorch.org/whl/cu130",
            ),
            id="no pip, not uv's",
        ),
        pytest.param(
            env(conda=True, torch_by_conda=True, torch_installer="conda"),
            CONDA,
            (
                "conda remove --prefix /env --force -y pytorch torchvision   # conda's torch: "
                "pip's wheels replace it",
                f"{PY} -m pip uninstall -y torch torchvision torchaudio",
                f"{PY} -m pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
                "--index-url https://download.pytorch.org/whl/cu130",
            ),
            id="conda's torch",
        ),
        pytest.param(
            env(conda=True, torch_installer="pip"),
            PIP,
            (
                f"{PY} -m pip uninstall -y torch torchvision torchaudio",
                f"{PY} -m pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
                "--index-url https://download.pytorch.org/whl/cu130",
            ),
            id="conda env, pip's torch",
        ),
    ],
)
def test_each_environment_gets_its_own_installer(
    facts: InstallerFacts, kind: str, steps: tuple[str, ...]
) -> None:
    companions = (
        Companion("torchvision", Found("0.28.0+cpu"), "conda"),
        Companion("torchaudio", Found("2.11.0+cpu"), "pip"),
    )
    installer = installer_for(torch_facts(facts, *companions))
    assert installer.kind == kind
    assert install_steps(installer, CU130, replace=True) == steps


def test_without_installer_facts_the_interpreters_pip_or_the_bare_pip() -> None:
    installer = installer_for(torch_facts(None))
    assert installer.kind == PIP and not installer.ensure_pip
    assert one_line(installer, CU130).startswith(f"{PY} -m pip install torch==2.13.0 ")
    assert one_line(BARE, CU130) == (
        "pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cu130"
    )


def test_uv_takes_a_sites_own_index_and_1x_wheels_by_url() -> None:
    uv = installer_for(torch_facts(env(uv_venv=True)))
    site = InstallSet((("torch", "2.11.0"),), "https://wheels.example.org/cu130", "cu130")
    assert one_line(uv, site) == (
        f"uv pip install --python {PY} torch==2.11.0 --index-url https://wheels.example.org/cu130"
    )
    old = InstallSet(
        (("torch", "1.13.1+cu116"), ("torchvision", "0.14.1+cu116"), ("torchaudio", "0.13.1")),
        "https://download.pytorch.org/whl/cu116",
        "cu116",
        standard_index=True,
        extra_index=True,
    )
    assert one_line(uv, old).endswith("--extra-index-url https://download.pytorch.org/whl/cu116")


def test_paths_from_the_machine_are_quoted_for_the_shell() -> None:
    odd = TorchFacts(
        python="/home/a b/env/bin/python",
        torch=Absent("not read here"),
        installer=Found(env(prefix="/home/a b/env", conda=True, torch_by_conda=True)),
    )
    steps = install_steps(installer_for(odd), CU130)
    assert steps[0].startswith("conda remove --prefix '/home/a b/env' --force -y pytorch")
    assert steps[-1].startswith("'/home/a b/env/bin/python' -m pip install torch==2.13.0")
