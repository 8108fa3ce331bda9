"""The option parser splits a command line exactly as the standard library's getopt did.

``cli/options.py`` used ``getopt.getopt`` / ``gnu_getopt`` until getopt's start-up cost (it
imports gettext and locale) was cut; its own splitter must keep every spelling scripts use.
Here getopt is the oracle: random command lines built from a command's real flags, their
prefixes, clusters, ``=`` values, ``--`` and ``-``, are split by both, and the results (or the
usage errors, in the words the old adapter gave getopt's messages) must be the same.
"""

from __future__ import annotations

import functools
import getopt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envdoctor.cli import registry
from envdoctor.cli.options import Command, Option, UsageError, _flags, _split

# No real command has a long option that is a prefix of another; this one has two such pairs.
PREFIXES = Command(
    "prefixes",
    "made-up options whose names are prefixes of others",
    options=(
        Option(("--json",), "json", "a flag", kind="flag"),
        Option(("--json-x", "-j"), "json_x", "a value"),
        Option(("--spec",), "spec", "a value"),
        Option(("--spec-dir",), "spec_dir", "a flag", kind="flag"),
    ),
)
COMMANDS = {
    "check": registry.CHECK,
    "explain": registry.EXPLAIN,
    "run": registry.RUN,  # options end at its first argument
    "smoke": registry.SMOKE,
    "prefixes": PREFIXES,
}


def _getopt_split(command: Command, argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """What the parser did before: getopt, with its messages reworded as the adapter did."""
    shorts, longs = "h", ["help"]
    for option in command.options:
        for flag in option.flags:
            if flag.startswith("--"):
                longs.append(flag[2:] + ("=" if option.takes_value else ""))
            else:
                shorts += flag[1] + (":" if option.takes_value else "")
    parser = getopt.gnu_getopt if command.interspersed else getopt.getopt
    try:
        return parser(argv, shorts, longs)
    except getopt.GetoptError as exc:
        text, opt = exc.msg, exc.opt
        shown = f"--{opt}" if f"--{opt}" in text else f"-{opt}"
        if "requires argument" in text:
            raise UsageError(f"{shown} needs a value") from None
        if "not recognized" in text or "not a unique prefix" in text:
            why = "ambiguous" if "not a unique prefix" in text else "unrecognized"
            raise UsageError(f"{why} option {shown!r}") from None
        assert "must not have an argument" in text, text
        raise UsageError(f"--{opt} takes no value") from None


def _outcome(split: object, command: Command, argv: list[str]) -> object:
    try:
        return split(command, argv)  # type: ignore[operator]  # one of the two splitters
    except UsageError as exc:
        return ("usage error", exc.message)


def _ours(command: Command, argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    return _split(command, argv, _flags(command), command.name)


@functools.cache
def _argv(name: str) -> st.SearchStrategy[list[str]]:
    """Command lines of up to 6 tokens made of the command's flags. Built once per command:
    a strategy made again for every example is validated again too (a third of the time)."""
    command = COMMANDS[name]
    flags = [flag for option in command.options for flag in option.flags] + ["-h", "--help"]
    longs = [flag for flag in flags if flag.startswith("--")]
    letters = [flag[1] for flag in flags if not flag.startswith("--")]
    # a flag, then one of its prefixes: a prefix that several flags share (the ambiguous case)
    # is drawn as often as each of them is, not once among all the prefixes
    prefix = st.one_of([st.sampled_from([f[:n] for n in range(2, len(f) + 1)]) for f in longs])
    token = st.one_of(
        st.sampled_from(flags),
        prefix,  # a prefix, unique or not
        st.tuples(prefix, st.sampled_from(["", "x", "-v", "a=b"])).map(
            lambda pair: f"{pair[0]}={pair[1]}"  # ... with a value
        ),
        st.lists(st.sampled_from([*letters, "z", ":"]), min_size=1, max_size=4).map(
            lambda cluster: "-" + "".join(cluster)
        ),
        st.sampled_from(["--", "-", "--=x", "---", "value", "python", "-1", "--nope", ""]),
    )
    return st.lists(token, max_size=6)


@pytest.fixture(autouse=True)
def _no_posixly_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    # gnu_getopt stopped at the first argument under POSIXLY_CORRECT; the parser now keeps to
    # the documented argparse spellings whatever the environment says
    monkeypatch.delenv("POSIXLY_CORRECT", raising=False)


@pytest.mark.parametrize("name", sorted(COMMANDS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_split_is_getopts(name: str, data: st.DataObject) -> None:
    command = COMMANDS[name]
    argv = data.draw(_argv(name))
    assert _outcome(_ours, command, argv) == _outcome(_getopt_split, command, argv)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--form", "json", "x.log"], ([("--format", "json")], ["x.log"])),  # a unique prefix
        (["-vo", "out.txt"], ([("-v", ""), ("-o", "out.txt")], [])),  # a cluster, then a value
        (["-oout.txt", "--", "-v"], ([("-o", "out.txt")], ["-v"])),
        (["--output=", "x", "--json"], ([("--output", ""), ("--json", "")], ["x"])),
    ],
)
def test_spellings_scripts_use(argv: list[str], expected: object) -> None:
    assert _ours(registry.CHECK, argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--s"], "ambiguous option '--s'"),  # --strict, --snapshot, --spec
        (["--jsn"], "unrecognized option '--jsn'"),
        (["--js=1"], "--json takes no value"),
        (["-vx"], "unrecognized option '-x'"),
        (["--tim"], "--timeout needs a value"),
    ],
)
def test_bad_spellings_are_named(argv: list[str], message: str) -> None:
    assert _outcome(_ours, registry.CHECK, argv) == ("usage error", message)


def test_every_declared_flag_is_one_a_getopt_split_can_read() -> None:
    """The splitter equals getopt only for well-formed declarations: each flag once per command,
    no command declaring -h/--help itself, short flags of one letter."""
    commands = [c for top in registry.TOP.subcommands for c in (top, *top.subcommands)]
    for command in commands:
        flags = [flag for option in command.options for flag in option.flags]
        assert len(flags) == len(set(flags)), command.name
        assert not {"-h", "--help"} & set(flags), command.name
        for flag in flags:
            assert (flag.startswith("--") and len(flag) > 3) or (
                len(flag) == 2 and flag[1].isalpha()
            ), (command.name, flag)
