"""`envdoctor probe`'s hand-written option parser: the forms people type, and clear refusals."""

from __future__ import annotations

import pytest

from envdoctor.cli.probe_options import ProbeOptions, UsageError, parse_options


def test_defaults() -> None:
    assert parse_options([]) == ProbeOptions(timeout=1.0, format="text")


def test_every_option_in_both_spellings() -> None:
    spaced = parse_options(
        ["--timeout", "2.5", "--format", "prometheus", "-o", "/x.prom", "--strict", "-v"]
    )
    joined = parse_options(["--timeout=2.5", "--format=prometheus", "-o/x.prom", "--strict"])
    assert spaced.timeout == joined.timeout == 2.5
    assert spaced.format == joined.format == "prometheus"
    assert spaced.output == joined.output == "/x.prom"
    assert spaced.strict and joined.strict and spaced.verbose and not joined.verbose
    assert parse_options(["--output", "a.prom"]).output == "a.prom"


def test_require_repeats_in_order_and_json_wins_over_format() -> None:
    options = parse_options(["--require", "gpus>=8", "--require=model~=H100", "--json"])
    assert options.require == ("gpus>=8", "model~=H100")
    assert options.format == "json"
    assert parse_options(["--format", "prometheus", "--json"]).format == "json"


def test_help_in_every_spelling_wins_over_errors() -> None:
    for argv in (
        ["-h"],
        ["--help"],
        ["--he"],
        ["-vh"],
        ["--bogus", "-h"],
        ["--require", "x", "-h"],
    ):
        assert parse_options(argv).help, argv
    assert not parse_options(["-oh"]).help  # a file named "h"


def test_argparse_spellings_keep_working() -> None:
    """Manifests written when argparse parsed these options must not start failing."""
    options = parse_options(["--time", "3", "--form=json", "--req", "gpus>=1", "--verb", "--str"])
    assert (options.timeout, options.format, options.require) == (3.0, "json", ("gpus>=1",))
    assert options.verbose and options.strict
    clustered = parse_options(["-vo", "out.prom"])
    assert clustered.verbose and clustered.output == "out.prom"
    assert parse_options(["-o=out.prom"]).output == "out.prom"
    assert parse_options(["-vv"]).verbose


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unrecognized argument '--bogus'"),
        (["extra"], "unrecognized argument 'extra'"),
        (["--timeout"], "--timeout needs a value"),
        (["--timeout", "soon"], "--timeout: invalid float value 'soon'"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
        (
            ["--format", "xml"],
            "--format: invalid choice 'xml' (choose from text, json, prometheus)",
        ),
        (["--json=yes"], "--json takes no value ('--json=yes')"),
        (["-o", "--json"], "-o needs a value"),
        (["--output", "-v"], "--output needs a value"),
        (["--require", "--strict"], "--require needs a value"),
        (["-vx"], "unrecognized argument '-vx'"),
        (["--"], "unrecognized argument '--'"),
        (["--x"], "unrecognized argument '--x'"),
    ],
)
def test_refusals_name_the_option_and_point_at_help(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_options(argv)
    assert info.value.one_line() == f"{message} (see envdoctor probe --help)"


@pytest.mark.parametrize("text", ["inf", "-inf", "1e10", "86400.5", "1e400"])
def test_a_budget_no_timer_can_hold_is_refused(text: str) -> None:
    """The watchdog's ``threading.Timer`` overflowed on these (a traceback after the verdict)."""
    with pytest.raises(UsageError) as info:
        parse_options([f"--timeout={text}"])
    message = info.value.one_line()
    assert message.startswith("--timeout must be ") and message.endswith(
        "(see envdoctor probe --help)"
    )


def test_a_day_is_the_longest_budget() -> None:
    assert parse_options(["--timeout", "86400"]).timeout == 86400.0
