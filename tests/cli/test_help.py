"""Every command's ``--help`` (Typer's) reads as help for people: each option's placeholder in
capitals or a list of choices, never a Python type name or doubled brackets; usage lines as
Typer writes them ({A} required, [DIR] optional); asking for help runs nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.testing import CliRunner

from envdoctor.cli.app import app
from tests.cli.commands import options, tree
from tests.runner import invoke

PATHS = [path for path, _ in tree()]
TYPE_NAMES = re.compile(r"\b(str|int|float|bool|list|dict|tuple|Path|None|TEXT|INTEGER|FLOAT)\b")
# FILE, N, [text|json], [DIR] for an argument that may be left out
PLACEHOLDER = re.compile(r"\[?[A-Z][A-Z_|. -]*\]?|\[[a-z0-9-]+(\|[a-z0-9-]+)*\]")


@pytest.mark.parametrize(
    ("path", "command"), list(tree()), ids=[" ".join(p) or "envdoctor" for p in PATHS]
)
def test_help_has_readable_placeholders(path: list[str], command: Any) -> None:
    result = invoke([*path, "--help"])
    assert result.exit_code == 0 and result.stderr == ""
    text = result.stdout
    assert text.startswith(f"Usage: envdoctor {' '.join(path)}".rstrip() + " ")
    assert "[[" not in text and "]]" not in text, text
    for option in options(command):
        if option.is_flag or not option.expose_value:
            continue
        shown = option.metavar
        assert shown and PLACEHOLDER.fullmatch(shown) and not TYPE_NAMES.search(shown), option
        long = next(o for o in option.opts if o.startswith("--"))
        assert f"{long} {shown}" in text  # as help prints it
    for argument in (p for p in command.params if p.param_type_name == "argument"):
        assert not TYPE_NAMES.search(argument.metavar), argument
        assert argument.metavar in text.splitlines()[0]  # in the usage line


def test_help_goes_through_typers_runner_too() -> None:
    """Typer's own CliRunner, on the Typer app itself (not envdoctor's boundary)."""
    result = CliRunner().invoke(app, ["explain", "--help"])
    assert result.exit_code == 0
    assert "-v, --verbose" in result.output and "generic explanation" in result.output
    assert "--with-host" in result.output


@pytest.mark.parametrize(
    ("path", "usage"),
    [
        (["run"], "Usage: envdoctor run [OPTIONS] [CMD]..."),
        (["explain"], "Usage: envdoctor explain [OPTIONS] [FILE|-]"),
        (["tables", "validate"], "Usage: envdoctor tables validate [OPTIONS] [DIR]"),
        (["diff"], "Usage: envdoctor diff [OPTIONS] {A} {B}"),
        (["check"], "Usage: envdoctor check [OPTIONS]"),
    ],
)
def test_usage_lines_as_a_shell_user_types_them(path: list[str], usage: str) -> None:
    assert invoke([*path, "--help"]).stdout.splitlines()[0] == usage


@pytest.mark.parametrize(
    "path",
    [["check"], ["probe"], ["smoke"], ["explain"], ["recommend"], ["diff"], ["run"]],
    ids=" ".join,
)
def test_every_text_report_takes_color_and_output(path: list[str]) -> None:
    text = invoke([*path, "--help"]).stdout
    assert "--color WHEN" in text and "auto" in text and "NO_COLOR" in text
    assert "-o, --output FILE" in text


@pytest.mark.parametrize("spelling", ["-h", "--help", "--he"])
def test_help_in_any_spelling_runs_nothing(spelling: str, tmp_path: object) -> None:
    """``run -h`` shows run's help; it must not run a command (there is none to run)."""
    result = invoke(["run", spelling])
    assert result.exit_code == 0 and result.stdout.startswith("Usage: envdoctor run")


def test_help_after_the_command_is_the_commands_own() -> None:
    """``run sh -c … -h``: the ``-h`` belongs to the command being run."""
    result = invoke(["run", "sh", "-c", "echo ran", "-h"])
    assert result.exit_code == 0 and "ran" in result.stdout and "Usage:" not in result.output


def test_no_command_prints_help_on_stderr_and_exits_2() -> None:
    result = invoke([])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Usage: envdoctor [OPTIONS] COMMAND")
    for name in ("check", "probe", "explain", "run", "spec", "tables"):
        assert f"  {name} " in result.stderr


@pytest.mark.parametrize("group", ["spec", "tables"])
def test_a_group_without_its_command_prints_its_help_and_exits_2(group: str) -> None:
    result = invoke([group])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"Usage: envdoctor {group} [OPTIONS] COMMAND")


def test_version() -> None:
    result = invoke(["--version"])
    assert (result.exit_code, result.stdout) == (0, "envdoctor 0.1.0 (gpu-envdoctor)\n")
