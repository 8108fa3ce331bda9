"""The README's install path for admins, for real: a fresh clone, ``pipx install``, and the
installed ``envdoctor`` run from pipx's own bin directory.

A distribution's Python refuses a system-wide ``pip install .`` (PEP 668), so the README leads
with a venv (``pip install .`` inside the environment being diagnosed) or pipx (its own
environment, ``check --python`` pointed at the one to diagnose). This test holds the pipx path:
it needs the package index (pipx, when it is not installed, and envdoctor's dependencies), takes
a few tens of seconds, and so is marked ``install``: deselected by default, run by
``./scripts/test`` (CI) with the rest of the suite. Without an index that can serve pipx it skips and
says so.

pipx's shared libraries (the pip every pipx environment uses) are kept between runs in
``.test-cache/pipx-shared-libs`` (git-ignored), as pipx keeps them for a user: making them again
was half of this test's time (10.5 s against 5.7 s here). ``ENVDOCTOR_TEST_NO_CACHE=1`` starts
from none; a fresh clone (CI) has none. pip is told not to byte-compile what it installs
(``--no-compile``): compiling pydantic, rich and pygments ahead was 2.4 s of this test's 6 s of
CPU, and the commands run the same without it (Python compiles what they import on first use).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_LIBS = ROOT / ".test-cache" / "pipx-shared-libs"

pytestmark = pytest.mark.install


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _pipx(tmp: Path) -> str:
    """pipx: the dev dependency beside this interpreter, the one on PATH, else one installed
    into a venv of the test's own."""
    beside = Path(sys.executable).parent / "pipx"
    found = str(beside) if beside.exists() else shutil.which("pipx")
    if found is not None:
        return found
    tools = tmp / "tools"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True, timeout=120)
    pip = subprocess.run(
        [str(tools / "bin" / "python"), "-m", "pip", "install", "--quiet", "pipx"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if pip.returncode != 0:
        pytest.skip(f"pipx is not installed and the package index cannot serve it: {pip.stderr}")
    return str(tools / "bin" / "pipx")


def _fresh_clone(tmp: Path) -> Path:
    """The committed tree, as a user gets it: uncommitted files of this checkout are not in it."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout (or no git): nothing to clone")
    clone = tmp / "envdoctor"
    _run(["git", "clone", "--quiet", "--depth", "1", f"file://{ROOT}", str(clone)])
    return clone


def _constraints(tmp: Path) -> Path:
    """requirements/test.lock as pip constraints: the pins without their hashes (a hash in a
    constraints file turns on hash checking for everything pipx installs, pipx's own pip too)."""
    pins = [
        line.split()[0]
        for line in (ROOT / "requirements" / "test.lock").read_text(encoding="utf-8").splitlines()
        if line[:1].isalnum() and "==" in line
    ]
    assert pins, "requirements/test.lock names no package"
    path = tmp / "constraints.txt"
    path.write_text("\n".join(pins) + "\n", encoding="utf-8")
    return path


def test_pipx_install_from_a_fresh_clone_runs(tmp_path: Path) -> None:
    pipx = _pipx(tmp_path)
    clone = _fresh_clone(tmp_path)
    # pipx's envdoctor runs as a user runs it: a PYTHONPATH naming this checkout (the benchmark
    # sets one) would put the checkout's envdoctor in its place whenever pip writes the /bin/sh
    # trampoline instead of a `python -E` line (a path to the interpreter too long for `#!`)
    user = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env = {
        **user,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    if os.environ.get("ENVDOCTOR_TEST_NO_CACHE") != "1":
        env["PIPX_SHARED_LIBS"] = str(SHARED_LIBS)
    if os.environ.get("ENVDOCTOR_TEST_UNLOCKED") != "1":
        # the locked releases of envdoctor's dependencies (and pipx's pip), so that a release made
        # today does not turn a fresh clone red; `./scripts/test --newest` lifts this on purpose
        env["PIP_CONSTRAINT"] = str(_constraints(tmp_path))
    _run(
        [pipx, "install", "--pip-args=--no-compile", "--python", sys.executable, str(clone)],
        env=env,
    )
    envdoctor = tmp_path / "bin" / "envdoctor"
    assert envdoctor.exists(), "pipx installed no envdoctor command"

    assert _run([str(envdoctor), "--version"], env=user).startswith("envdoctor ")
    # the admin's way: envdoctor in its own environment, pointed at the one to diagnose (the
    # test's, which has torch)
    check = subprocess.run(
        [str(envdoctor), "check", "--json", "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=300,
        env=user,
        check=False,
    )
    document = json.loads(check.stdout)
    assert document["kind"] == "check" and document["exit_code"] == check.returncode
    assert check.returncode in (0, 1, 2)
    torch = document["facts"]["torch"]
    assert torch["python"] == sys.executable
    assert "2.13.0" in json.dumps(torch["torch"])  # the torch of the interpreter it was pointed at

    # The first-time user's way (issue 37): envdoctor installed with pipx, run with no --python
    # inside an activated venv (the test's, with a CPU torch): it speaks of that venv's torch,
    # says why it chose it, and its advice uses that venv's installer, never pipx's environment.
    venv = Path(sys.prefix)
    activated = {
        **user,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{user.get('PATH', '')}",
    }
    activated.pop("CONDA_PREFIX", None)
    check = subprocess.run(
        [str(envdoctor), "check", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=activated,
        check=False,
    )
    torch = json.loads(check.stdout)["facts"]["torch"]
    assert torch["python"] == str(venv / "bin" / "python")
    assert "VIRTUAL_ENV" in torch["chosen_by"]
    assert torch["installer"]["found"]["prefix"] == str(venv)
    advice = subprocess.run(
        [str(envdoctor), "recommend", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=activated,
        check=False,
    )
    recommend = json.loads(advice.stdout)
    assert recommend["command"].startswith(f"{venv / 'bin' / 'python'} -m pip install torch==")
    assert "pipx" not in recommend["command"]

    # Two installs sharing one cache directory (this checkout's and pipx's): each keeps its own
    # checked tables and signatures, so alternating runs hit (the entries are not rewritten);
    # with one name for both, every run replaced the other install's entry.
    log = tmp_path / "short.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n", encoding="utf-8")
    directory = tmp_path / "shared-cache" / "envdoctor"

    # both check pipx's own environment, which has no torch: what is cached here are the tables
    # and signatures, and importing the test environment's torch again would only cost a second
    lean = str(tmp_path / "pipx" / "venvs" / "gpu-envdoctor" / "bin" / "python")
    assert Path(lean).exists(), "pipx's environment is not where PIPX_HOME says"

    def alternate() -> dict[str, int]:
        for command, environ in (
            ([str(envdoctor)], user),
            ([sys.executable, "-m", "envdoctor"], os.environ),
        ):
            for args in (["check", "--json", "--python", lean], ["explain", str(log)]):
                subprocess.run(
                    [*command, *args],
                    env={**environ, "XDG_CACHE_HOME": str(tmp_path / "shared-cache")},
                    capture_output=True,
                    timeout=300,
                    check=False,
                )
        return {p.name: p.stat().st_ino for p in directory.glob("[ck]*.json")}

    first = alternate()
    assert sorted(name.rsplit("-", 1)[0] for name in first) == [
        "compat-tables",
        "compat-tables",
        "knowledge-base",
        "knowledge-base",
    ]
    assert alternate() == first
