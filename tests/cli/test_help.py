"""Every command's ``--help`` reads as help for people: placeholders in capitals or a list of
choices, never ``<str>``, a Python type name or doubled brackets; usage lines as a shell user
types them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from envdoctor.cli import registry
from envdoctor.cli.options import Command
from tests.runner import invoke


def _paths(group: Command = registry.TOP, prefix: tuple[str, ...] = ()) -> Iterator[list[str]]:
    for command in group.subcommands:
        path = [*prefix, command.name]
        yield path
        yield from _paths(command, tuple(path))


PATHS = [[], *_paths()]
TYPE_NAMES = re.compile(r"\b(str|int|float|bool|list|dict|tuple|Path|None|TEXT|INTEGER|FLOAT)\b")
# FILE, N, {text,json}; [SHELL] for a value that may be left out
PLACEHOLDER = re.compile(r"(\[)?([A-Z][A-Z_|-]*|\{[a-z0-9-]+(,[a-z0-9-]+)*\})(?(1)\])")


def _command(path: list[str]) -> Command:
    command = registry.TOP
    for name in path:
        found = registry.find(name, command)
        assert found is not None
        command = found
    return command


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "envdoctor")
def test_help_has_readable_placeholders(path: list[str]) -> None:
    result = invoke([*path, "--help"])
    assert result.exit_code == 0
    text = result.stdout
    assert "<" not in text and "[[" not in text and "]]" not in text, text
    command = _command(path)
    for option in command.options:
        if not option.takes_value:
            continue
        shown = option.shown_metavar()
        assert PLACEHOLDER.fullmatch(shown) and not TYPE_NAMES.search(shown), option
        assert f"{option.long} {shown}" in text  # as help prints it
    for argument in command.arguments:
        assert not TYPE_NAMES.search(argument.metavar), argument
        assert argument.metavar in text.splitlines()[0]  # in the usage line


def test_run_usage_shows_where_the_command_goes() -> None:
    first = invoke(["run", "--help"]).stdout.splitlines()[0]
    assert first == "usage: envdoctor run [OPTIONS] -- CMD [ARGS]..."


@pytest.mark.parametrize(
    ("path", "usage"),
    [
        (["explain"], "usage: envdoctor explain [OPTIONS] [FILE|-]"),
        (["tables", "validate"], "usage: envdoctor tables validate [OPTIONS] [DIR]"),
        (["diff"], "usage: envdoctor diff [OPTIONS] A B"),
        (["check"], "usage: envdoctor check [OPTIONS]"),
    ],
)
def test_optional_arguments_have_one_pair_of_brackets(path: list[str], usage: str) -> None:
    assert invoke([*path, "--help"]).stdout.splitlines()[0] == usage


@pytest.mark.parametrize(
    "path",
    [p for p in PATHS if p and p[0] in ("check", "probe", "smoke", "explain", "recommend", "diff")]
    + [["run"]],
    ids=" ".join,
)
def test_every_text_report_takes_color_and_output(path: list[str]) -> None:
    text = invoke([*path, "--help"]).stdout
    assert "--color WHEN" in text and "auto" in text and "NO_COLOR" in text
    assert "-o, --output FILE" in text
