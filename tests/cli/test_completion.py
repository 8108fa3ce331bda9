"""Shell completion (Typer's own scripts over the Typer app), tried through the real bash."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor.cli import app
from envdoctor.cli.main import dispatch
from envdoctor.compat.tables import TABLE_NAMES
from tests.cli.commands import leaves, options

BIN = Path(sys.executable).parent
ENVDOCTOR = str(BIN / "envdoctor")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("_ENVDOCTOR")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` with envdoctor's bin directory on PATH (and ``env`` added), output captured."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=_env(**env), check=False
    )


@functools.cache
def _bash_script() -> str:
    """``envdoctor --show-completion bash``, asked once: it is the same script for every line."""
    shown = _run([ENVDOCTOR, "--show-completion", "bash"])
    assert shown.returncode == 0 and "_envdoctor_completion" in shown.stdout, shown.stderr
    return shown.stdout


def bash_complete(line: str) -> list[str]:
    """What bash offers for ``line`` (a trailing space: a new word) with the shown script loaded;
    bash runs the real envdoctor for the answer."""
    words = line.split(" ")
    quoted = " ".join(shlex.quote(w) for w in words)
    script = (
        f"{_bash_script()}\n"
        f"COMP_WORDS=({quoted})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_envdoctor_completion envdoctor\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = _run(["bash", "--norc", "-c", script])
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@needs_bash
def test_bash_completes_a_command_name() -> None:
    assert bash_complete("envdoctor che") == ["check"]
    assert sorted(bash_complete("envdoctor s")) == ["slurm-healthcheck", "smoke", "spec"]


@needs_bash
def test_bash_completes_choices_and_table_names() -> None:
    assert bash_complete("envdoctor check --format j") == ["json"]
    assert bash_complete("envdoctor check --expect ") == ["gpu", "cpu"]
    assert bash_complete("envdoctor tables show cu") == ["cuda-toolkits", "cudnn"]


@pytest.mark.parametrize(
    ("path", "command"),
    [(path, command) for path, command in leaves() if options(command)],
    ids=lambda v: str(v)[:20],
)
def test_every_option_of_every_command_completes(
    path: str, command: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Completion offers every long option the command declares.
    (In this process: the requests bash makes through the real program are the tests above.)"""
    line = f"envdoctor {path} --"
    monkeypatch.setenv("_ENVDOCTOR_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(len(line.split(" ")) - 1))
    assert dispatch([]) == 0
    offered = set(capsys.readouterr().out.split())
    longs = {o for p in options(command) for o in p.opts if o.startswith("--")}
    assert longs and longs <= offered


def test_the_table_names_completion_offers_are_the_loaders() -> None:
    assert app.TABLE_NAMES == TABLE_NAMES


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "#compdef envdoctor"), ("fish", "complete")])
def test_show_completion_for_a_named_shell(shell: str, marker: str) -> None:
    done = _run([ENVDOCTOR, "--show-completion", shell])
    assert done.returncode == 0 and marker in done.stdout
    assert "_ENVDOCTOR_COMPLETE" in done.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = _run([ENVDOCTOR, "--show-completion", "tcsh"])
    assert done.returncode == 2 and done.stdout == ""
    first, hint = done.stderr.splitlines()
    assert first.startswith("envdoctor: --show-completion: 'tcsh' is not one of 'bash'"), first
    assert hint == "Try 'envdoctor --help'."


@needs_bash
def test_install_completion_writes_to_the_users_home_and_bash_then_completes(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _run([ENVDOCTOR, "--install-completion", "bash"], HOME=str(home))
    assert done.returncode == 0, done.stderr
    bashrc = (home / ".bashrc").read_text()
    assert "envdoctor" in bashrc
    # A new interactive-like shell that reads the rc file completes envdoctor's commands.
    script = (
        f"source {home / '.bashrc'}\n"
        "COMP_WORDS=(envdoctor expl); COMP_CWORD=1\n"
        "_envdoctor_completion envdoctor\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    shell = _run(["bash", "--norc", "-c", script], HOME=str(home))
    assert shell.stdout.split() == ["explain"], shell.stderr
