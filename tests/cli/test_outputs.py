"""``-o FILE`` and ``--format`` wherever a command prints a report: the file holds what stdout
would have held (never coloured), stdout then holds nothing, and JSON is never anywhere else."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.snapshot import dump_snapshot
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.kb.helpers import CORPUS
from tests.runner import Result, invoke

OOM_LOG = CORPUS / "cuda.out-of-memory" / "dcrnn-6.txt"
FAILING = (
    "import sys\n"
    "print('the command says hello', flush=True)\n"
    "sys.stderr.write('RuntimeError: CUDA error: device-side assert triggered\\n')\n"
    "sys.exit(3)\n"
)


def _snapshots(tmp: Path) -> tuple[str, str]:
    a, b = tmp / "a.json", tmp / "b.json"
    a.write_text(dump_snapshot(scenario_facts("healthy_h100")), encoding="utf-8")
    b.write_text(dump_snapshot(scenario_facts("gpu_lost")), encoding="utf-8")
    return str(a), str(b)


Argv = Callable[[Path], list[str]]
REPORTS: dict[str, Argv] = {
    "explain": lambda tmp: ["explain", str(OOM_LOG)],
    "recommend": lambda tmp: ["recommend"],
    "diff": lambda tmp: ["diff", *_snapshots(tmp)],
    "tables-show": lambda tmp: ["tables", "show", "cudnn"],
    "check": lambda tmp: ["check"],
}


def _invoke(argv: list[str], *, tty: bool = False) -> Result:
    host = FakeHost.scenario("healthy_h100")
    return invoke(
        argv,
        obj=AppContext(host=host, python=PYTHON),
        tty=("stdout",) if tty else (),
        env={"TERM": "xterm"},
    )


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_o_writes_exactly_what_stdout_would_show(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    argv = REPORTS[name](tmp_path)
    shown = _invoke([*argv, "--color", "never"] if name != "tables-show" else argv)
    out = tmp_path / "report.txt"
    written = _invoke([*argv, "-o", str(out)], tty=True)  # a terminal, yet the file is plain
    assert written.exit_code == shown.exit_code
    assert written.stdout == ""
    assert out.read_text(encoding="utf-8") == shown.stdout
    assert "\x1b" not in shown.stdout


@pytest.mark.parametrize("name", sorted(set(REPORTS) - {"check"}))
def test_format_json_and_its_shortcut_agree(name: str, tmp_path: Path) -> None:
    argv = REPORTS[name](tmp_path)
    long = _invoke([*argv, "--format", "json"])
    short = _invoke([*argv, "--json"])
    assert json.loads(long.stdout) == json.loads(short.stdout)
    assert long.exit_code == short.exit_code
    out = tmp_path / "doc.json"
    to_file = _invoke([*argv, "-f", "json", "-o", str(out)])
    assert to_file.stdout == "" and to_file.stderr == ""
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(long.stdout)


def test_run_writes_its_explanation_to_the_file_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "why.txt"
    result = invoke(["run", "-o", str(out), "--", sys.executable, "-c", FAILING])
    assert result.exit_code == 3
    assert result.stdout == "the command says hello\n"  # the command's own output, untouched
    text = out.read_text(encoding="utf-8")
    assert "[cuda.device-assert, confidence" in text
    assert "envdoctor: the command exited with 3; explained in" in result.stderr
    assert "fix:" not in result.stderr  # the explanation is in the file, not on the terminal


def test_run_json_to_a_file_leaves_the_commands_stdout_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    argv = ["run", "--format", "json", "-o", str(out), "--", sys.executable, "-c", FAILING]
    result = invoke(argv)
    assert result.exit_code == 3
    assert result.stdout == "the command says hello\n"
    assert json.loads(out.read_text(encoding="utf-8"))["returncode"] == 3


def test_run_writes_the_file_even_when_the_command_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "why.md"
    argv = ["run", "-f", "markdown", "-o", str(out), "--", sys.executable, "-c", "print('ok')"]
    result = invoke(argv)
    assert result.exit_code == 0 and result.stdout == "ok\n" and result.stderr == ""
    assert "No known error signature occurs in this log." in out.read_text(encoding="utf-8")


def test_run_colours_its_explanation_only_on_a_terminal_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    argv = ["run", "--", sys.executable, "-c", FAILING]
    assert "\x1b[1;31m✗\x1b[0m" in invoke(argv, tty=("stderr",)).stderr
    assert "\x1b" not in invoke(argv, tty=("stdout",)).stderr
