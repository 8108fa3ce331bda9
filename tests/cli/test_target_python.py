"""Issue 37 item 1: without --python, envdoctor judges the user's interpreter, not its own.

Installed the admin way (pipx), envdoctor's own interpreter is pipx's venv: judging it, `check`
advised installing torch into pipx's environment. The interpreter a user means is the active
venv's, else the active conda env's, else python3 on PATH; the report says which and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import default_python
from envdoctor.model.facts import OWN_INTERPRETER
from envdoctor.model.probed import Absent
from tests import factories
from tests.conftest import report_of
from tests.fakes.host import FakeHost
from tests.runner import invoke

ROOT = Path(__file__).resolve().parents[2]
EXECUTABLE = {"char": False, "mode": "0755"}


def _host(env: dict[str, str], nodes: dict[str, Any], which: dict[str, str]) -> FakeHost:
    return FakeHost({"env": env, "nodes": nodes, "which": which})


def test_the_active_venv_comes_first() -> None:
    host = _host(
        {"VIRTUAL_ENV": "/home/a/venv", "CONDA_PREFIX": "/opt/conda"},
        {"/home/a/venv/bin/python": EXECUTABLE, "/opt/conda/bin/python": EXECUTABLE},
        {"python3": "/usr/bin/python3"},
    )
    python, why = default_python(host)
    assert python == "/home/a/venv/bin/python"
    assert "VIRTUAL_ENV=/home/a/venv" in why


def test_then_the_active_conda_env_then_python3_on_path() -> None:
    conda = _host(
        {"CONDA_PREFIX": "/opt/conda/envs/train"},
        {"/opt/conda/envs/train/bin/python": EXECUTABLE},
        {"python3": "/usr/bin/python3"},
    )
    assert default_python(conda)[0] == "/opt/conda/envs/train/bin/python"
    assert "conda" in default_python(conda)[1]
    # a VIRTUAL_ENV whose interpreter is gone (a deleted venv still "active"), or a relative
    # one, is passed over
    stale = _host(
        {"VIRTUAL_ENV": "/gone", "CONDA_PREFIX": "relative/env"},
        {},
        {"python3": "/usr/bin/python3"},
    )
    assert default_python(stale) == ("/usr/bin/python3", "python3 on PATH (no active environment)")


def test_with_nothing_of_the_users_it_is_envdoctors_own_and_says_so() -> None:
    assert default_python(_host({}, {}, {})) == (sys.executable, OWN_INTERPRETER)


def test_no_torch_in_envdoctors_own_environment_never_advises_installing_it_there() -> None:
    facts = factories.facts(
        torch=factories.torch(
            Absent("No module named 'torch'"), python="/root/.local/pipx/venvs/x/bin/python"
        )
    )
    mine = factories.facts(
        torch=factories.torch(Absent("No module named 'torch'"), python="/home/a/venv/bin/python")
    )
    from dataclasses import replace

    own = replace(facts, torch=replace(facts.torch, chosen_by=OWN_INTERPRETER))
    (finding,) = [f for f in report_of(own).findings if f.code == "torch.not-installed"]
    assert finding.remediation is not None
    assert not any("pip install" in step for step in finding.remediation.steps)
    assert any("--python" in step for step in finding.remediation.steps)
    assert ("chosen because", OWN_INTERPRETER) in finding.evidence
    (theirs,) = [f for f in report_of(mine).findings if f.code == "torch.not-installed"]
    assert theirs.remediation is not None
    assert any("/home/a/venv/bin/python -m pip install" in s for s in theirs.remediation.steps)


def test_check_reads_the_activated_venvs_torch_and_says_why(tmp_path: Path) -> None:
    """The real CLI, in a child, with VIRTUAL_ENV set as `source bin/activate` sets it: the
    torch it reads is that venv's (here a link to this interpreter, which has torch)."""
    venv = tmp_path / "train-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    # a venv of its own to Python (its pyvenv.cfg), with the test venv's packages, torch among them
    (venv / "pyvenv.cfg").write_bytes((Path(sys.prefix) / "pyvenv.cfg").read_bytes())
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("CONDA_PREFIX", None)

    def check(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "envdoctor", "check", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
            check=False,
        ).stdout

    torch = json.loads(check("--json"))["facts"]["torch"]
    assert torch["python"] == str(venv / "bin" / "python")
    assert "2.13.0" in json.dumps(torch["torch"]), torch  # that venv's torch was read
    assert torch["chosen_by"] == f"the active virtual environment (VIRTUAL_ENV={venv})"
    text = check()
    # the summary's torch line, whichever width it was wrapped to
    assert f"(the active virtual environment (VIRTUAL_ENV={venv}))" in " ".join(text.split())


def test_recommend_takes_python_and_refuses_it_with_a_snapshot(tmp_path: Path) -> None:
    host = FakeHost.scenario("healthy_h100", which={"python3": "/usr/bin/python3"})
    from envdoctor.cli.common import AppContext

    ok = invoke(["recommend", "--python", "python3"], obj=AppContext(host=host))
    assert ok.exit_code in (0, 1), ok.stderr
    snap = tmp_path / "snap.json"
    snap.write_text("{}", encoding="utf-8")
    refused = invoke(["recommend", "--snapshot", str(snap), "--python", sys.executable])
    assert refused.exit_code == 2
    assert "--python cannot be used with --snapshot" in refused.stderr


@pytest.mark.parametrize("command", ["check", "collect", "fix", "recommend", "smoke"])
def test_every_command_that_judges_a_torch_takes_python(command: str) -> None:
    result = invoke([command, "--help"])
    assert result.exit_code == 0 and "--python" in result.stdout


def test_version_names_the_distribution() -> None:
    """PyPI's unrelated `envdoctor-cli` installs a command of the same name: `--version` says
    which envdoctor this is (the README tells users to look)."""
    result = invoke(["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip().endswith("(gpu-envdoctor)")
