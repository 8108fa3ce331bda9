"""The command line as Typer runs it: Typer's own ``CliRunner`` over the app (with a fake
machine), and the installed ``envdoctor`` command in a child process, agree with ``dispatch``
on exit codes, and a bad command line is never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envdoctor.cli.app import app
from envdoctor.cli.common import AppContext
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.runner import invoke

ENVDOCTOR = str(Path(sys.executable).parent / "envdoctor")


def installed(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script pip installed, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("_ENVDOCTOR")}
    return subprocess.run(
        [ENVDOCTOR, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.mark.parametrize(("scenario", "code"), [("healthy_h100", 0), ("gpu_lost", 1)])
def test_typers_runner_and_dispatch_give_the_same_exit_code(scenario: str, code: int) -> None:
    def machine() -> AppContext:
        return AppContext(host=FakeHost.scenario(scenario), python=PYTHON)

    typer_result = CliRunner().invoke(app, ["check", "--json"], obj=machine())
    ours = invoke(["check", "--json"], obj=machine())
    assert typer_result.exit_code == ours.exit_code == code
    assert json.loads(typer_result.stdout)["exit_code"] == code
    assert json.loads(ours.stdout)["status"] == json.loads(typer_result.stdout)["status"]


def test_typers_runner_passes_explains_verbose_through(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n")
    result = CliRunner().invoke(app, ["explain", "-v", "--json", str(log)])
    assert result.exit_code in (1, 2), result.output
    assert json.loads(result.stdout)["kind"] == "explain"


def test_explain_shows_why_only_with_v(tmp_path: Path) -> None:
    """The conclusion and the fix always; the generic explanation is what -v adds."""
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n")
    quiet = CliRunner().invoke(app, ["explain", "--color", "never", str(log)])
    loud = CliRunner().invoke(app, ["explain", "-v", "--color", "never", str(log)])
    assert quiet.stdout.startswith("✗ The GPU ran out of memory (line 1)")
    assert "  why:" not in quiet.stdout and "  why:" in loud.stdout
    assert loud.stdout.replace("  why:", "").count("fix:") == quiet.stdout.count("fix:")


def test_installed_version() -> None:
    done = installed("--version")
    assert (done.returncode, done.stdout) == (0, "envdoctor 0.1.0 (gpu-envdoctor)\n")


def test_installed_without_a_command_shows_help_on_stderr_and_exits_2() -> None:
    done = installed()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("Usage: envdoctor [OPTIONS] COMMAND")


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["check", "--jsn"], "envdoctor check: no such option --jsn (did you mean --json?)"),
        (["chek"], "envdoctor: no such command 'chek' (did you mean 'check'?)"),
        (
            ["probe", "--timeout", "nan"],
            "envdoctor probe: --timeout must be a positive number of seconds",
        ),
        (["tables", "show"], "envdoctor tables show: missing NAME"),
        (["run"], "envdoctor run: missing -- CMD [ARGS]..."),
    ],
    ids=" ".join,
)
def test_installed_usage_errors_are_a_line_and_a_hint(args: list[str], first: str) -> None:
    done = installed(*args)
    assert done.returncode == 2 and done.stdout == ""
    where = first.partition(":")[0]
    assert done.stderr == f"{first}\nTry '{where} --help'.\n"


def test_installed_run_keeps_the_commands_own_flags_and_exit_code() -> None:
    script = 'printf "%s\\n" "$@"; exit 3'
    done = installed("run", "sh", "-c", script, "sh", "--its-flag", "-v", "--help")
    assert done.returncode == 3
    assert done.stdout == "--its-flag\n-v\n--help\n"
    after_dashes = installed("run", "--", "sh", "-c", "exit 0")
    assert after_dashes.returncode == 0
