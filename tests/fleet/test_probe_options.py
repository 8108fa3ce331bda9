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


def test_help_in_both_spellings() -> None:
    assert parse_options(["-h"]).help and parse_options(["--help"]).help


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
        (["--json=yes"], "unrecognized argument '--json=yes'"),
    ],
)
def test_refusals_name_the_option_and_point_at_help(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_options(argv)
    assert info.value.one_line() == f"{message} (see envdoctor probe --help)"
