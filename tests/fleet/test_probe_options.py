"""The command-line parser (cli/options.py) on `envdoctor probe`'s options: the forms people
and manifests type (argparse's spellings), and clear refusals."""

from __future__ import annotations

import pytest

from envdoctor.cli import registry
from envdoctor.cli.options import Args, UsageError, asks_for_help, parse


def probe(argv: list[str]) -> Args:
    return parse(registry.PROBE, argv, "probe")


def test_defaults() -> None:
    args = probe([])
    assert args.number("timeout") == 1.0 and args.text("format") == "text"
    assert args.texts("require") == () and not args.flag("strict")


def test_every_option_in_both_spellings() -> None:
    spaced = probe(
        ["--timeout", "2.5", "--format", "prometheus", "-o", "/x.prom", "--strict", "-v"]
    )
    joined = probe(["--timeout=2.5", "--format=prometheus", "-o/x.prom", "--strict"])
    assert spaced.number("timeout") == joined.number("timeout") == 2.5
    assert spaced.text("format") == joined.text("format") == "prometheus"
    assert spaced.text("output") == joined.text("output") == "/x.prom"
    assert spaced.flag("strict") and joined.flag("strict")
    assert spaced.flag("verbose") and not joined.flag("verbose")
    assert probe(["--output", "a.prom"]).text("output") == "a.prom"


def test_require_repeats_in_order() -> None:
    args = probe(["--require", "gpus>=8", "--require=model~=H100", "--json"])
    assert args.texts("require") == ("gpus>=8", "model~=H100")
    assert args.flag("json")


def test_help_in_every_spelling_wins_over_errors() -> None:
    for argv in (
        ["-h"],
        ["--help"],
        ["--he"],
        ["-vh"],
        ["--bogus", "-h"],
        ["--require", "x", "-h"],
    ):
        assert asks_for_help(registry.PROBE, argv), argv
    assert not asks_for_help(registry.PROBE, ["-oh"])  # a file named "h"
    assert not asks_for_help(registry.RUN, ["python", "train.py", "-h"])  # the command's own


def test_argparse_spellings_keep_working() -> None:
    """Manifests written when argparse parsed these options must not start failing."""
    args = probe(["--time", "3", "--form=json", "--req", "gpus>=1", "--verb", "--str"])
    assert args.number("timeout") == 3.0 and args.text("format") == "json"
    assert args.texts("require") == ("gpus>=1",)
    assert args.flag("verbose") and args.flag("strict")
    clustered = probe(["-vo", "out.prom"])
    assert clustered.flag("verbose") and clustered.text("output") == "out.prom"
    assert probe(["-vv"]).flag("verbose")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unrecognized option '--bogus'"),
        (["extra"], "unexpected argument 'extra'"),
        (["--timeout"], "--timeout needs a value"),
        (["--timeout", "soon"], "--timeout: expected a number of seconds, got 'soon'"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
        (["--timeout", "1e999"], "--timeout must be at most 86400 seconds (one day)"),
        (["--timeout", "1e9"], "--timeout must be at most 86400 seconds (one day)"),
        (
            ["--format", "xml"],
            "--format: invalid choice 'xml' (choose from text, json, prometheus)",
        ),
        (["--json=yes"], "--json takes no value"),
        (["-o", "--json"], "-o needs a value (got the option '--json')"),
        (["--output", "-v"], "--output needs a value (got the option '-v')"),
        (["--require", "--strict"], "--require needs a value (got the option '--strict')"),
        (["-vx"], "unrecognized option '-x'"),
        (["--expect", "tpu"], "--expect: invalid choice 'tpu' (choose from gpu, cpu)"),
    ],
)
def test_refusals_name_the_option_and_point_at_help(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        probe(argv)
    assert info.value.message == message
    assert info.value.hint == "see envdoctor probe --help"


def test_an_ambiguous_prefix_is_refused() -> None:
    with pytest.raises(UsageError, match="ambiguous option '--s'"):
        parse(registry.CHECK, ["--s"], "check")


def test_integers_are_bounded_before_int_reads_them() -> None:
    """A 5000-digit count is a usage error, not a slow int() or a ValueError (Python 3.11)."""
    with pytest.raises(UsageError, match="expected a whole number"):
        parse(registry.SMOKE, ["--gpu", "9" * 5000], "smoke")
    with pytest.raises(UsageError, match="expected a whole number"):
        parse(registry.SMOKE, ["--gpu", "²"], "smoke")
    assert parse(registry.SMOKE, ["--gpu", "1", "--gpu", "3"], "smoke").integers("gpu") == (1, 3)


def test_run_takes_the_rest_as_the_command() -> None:
    args = parse(registry.RUN, ["--blocking", "python", "-u", "train.py", "--lr", "3"], "run")
    assert args.flag("blocking")
    assert args.texts("command") == ("python", "-u", "train.py", "--lr", "3")
    assert parse(registry.RUN, ["--", "ls", "-l"], "run").texts("command") == ("ls", "-l")
    with pytest.raises(UsageError, match="missing -- CMD"):
        parse(registry.RUN, ["--blocking"], "run")
