"""`envdoctor probe`'s options as the Typer app parses them: the forms people and manifests type
(argparse's spellings, which the manifests were written for), and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envdoctor.cli.app import app, parse
from envdoctor.cli.args import Args
from envdoctor.cli.usage import usage_error_text, usage_message
from tests.runner import invoke


def probe(argv: list[str]) -> Args:
    return parse(["probe", *argv])


def refusal(argv: list[str]) -> str:
    with pytest.raises(Exception) as info:
        parse(argv)
    return usage_message(info.value)


def test_defaults() -> None:
    args = probe([])
    assert args["timeout"] == 1.0 and args["format"] == "text"
    assert args["require"] == () and args["strict"] is False and args["verbose"] is False
    assert not args.given("timeout")


def test_every_option_in_both_spellings() -> None:
    spaced = probe(
        ["--timeout", "2.5", "--format", "prometheus", "-o", "/x.prom", "--strict", "-v"]
    )
    joined = probe(["--timeout=2.5", "--format=prometheus", "-o/x.prom", "--strict"])
    assert spaced["timeout"] == joined["timeout"] == 2.5
    assert spaced["format"] == joined["format"] == "prometheus"
    assert spaced["output"] == joined["output"] == Path("/x.prom")
    assert spaced["strict"] and joined["strict"]
    assert spaced["verbose"] and not joined["verbose"]
    assert spaced.given("timeout") and not joined.given("verbose")


def test_require_repeats_in_order() -> None:
    args = probe(["--require", "gpus>=8", "--require=model~=H100", "--json"])
    assert args["require"] == ("gpus>=8", "model~=H100")
    assert args["json"]


def test_choices_ignore_case() -> None:
    assert probe(["--format", "JSON"])["format"] == "json"


def test_argparse_spellings_keep_working() -> None:
    """Manifests written when argparse parsed these options must not start failing."""
    args = probe(["--time", "3", "--form=json", "--req", "gpus>=1", "--verb", "--str"])
    assert args["timeout"] == 3.0 and args["format"] == "json"
    assert args["require"] == ("gpus>=1",)
    assert args["verbose"] and args["strict"]
    clustered = probe(["-vo", "out.prom"])
    assert clustered["verbose"] and clustered["output"] == Path("out.prom")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "no such option --bogus"),
        (["--jsn"], "no such option --jsn (did you mean --json?)"),
        (["extra"], "unexpected argument extra"),
        (["--timeout"], "--timeout needs an argument"),
        (["--timeout", "soon"], "--timeout: input should be a valid number"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds"),
        (["--timeout", "1e999"], "--timeout must be at most 86400 seconds (one day)"),
        (["--timeout", "1e9"], "--timeout must be at most 86400 seconds (one day)"),
        (["--format", "xml"], "--format: 'xml' is not one of 'text', 'json', 'prometheus'"),
        (["-o", "--json"], "--output needs a value (got the option '--json')"),
        (["--output", "-v"], "--output needs a value (got the option '-v')"),
        (["--require", "--strict"], "--require needs a value (got the option '--strict')"),
        (["-o", ""], "--output needs a value (got an empty one)"),
        (["-vx"], "no such option -x"),
        (["--expect", "tpu"], "--expect: 'tpu' is not one of 'gpu', 'cpu'"),
    ],
)
def test_refusals_name_the_option(argv: list[str], message: str) -> None:
    assert refusal(["probe", *argv]).startswith(message)


@pytest.mark.parametrize("argv", [["--bogus"], ["--timeout", "nan"], ["--format", "xml"]])
def test_a_usage_error_is_a_line_and_a_hint_and_exit_2(argv: list[str]) -> None:
    result = invoke(["probe", *argv])
    assert result.exit_code == 2 and result.stdout == ""
    first, hint = result.stderr.splitlines()
    assert first.startswith("envdoctor probe: ") and first == (
        "envdoctor probe: " + refusal(["probe", *argv])
    )
    assert hint == "Try 'envdoctor probe --help'."
    assert "Traceback" not in result.stderr


def test_typers_runner_sees_the_same_refusal() -> None:
    """Typer's own CliRunner over the app (its standalone handling, not envdoctor's words)."""
    result = CliRunner().invoke(app, ["probe", "--format", "xml"])
    assert result.exit_code == 2 and "xml" in result.output


def test_an_ambiguous_prefix_is_refused_naming_the_candidates() -> None:
    assert parse(["smoke", "--st", "5"])["step_timeout"] == 5.0  # one option starts so
    ambiguous = refusal(["slurm-healthcheck", "--dr"])
    assert ambiguous == (
        "ambiguous option --dr (could be --drain-max-share, --drain-on-unknown, --drain-window, "
        "--dry-run)"
    )
    given = parse(["slurm-healthcheck", "--drain-max-share", "5%", "--drain-window", "600"])
    assert (given["drain_max_share"], given["drain_window"], given["state_dir"]) == (
        "5%",
        "600",
        None,
    )


def test_integers_are_bounded() -> None:
    assert refusal(["smoke", "--gpu", "9" * 5000]).startswith("--gpu: ")
    assert refusal(["smoke", "--gpu", "9" * 12]).startswith("--gpu: input should be less than")
    assert refusal(["smoke", "--gpu", "²"]).startswith("--gpu: input should be a valid integer")
    assert refusal(["smoke", "--gpu", "-1"]).startswith("--gpu: input should be greater than")
    assert parse(["smoke", "--gpu", "1", "--gpu", "3"])["gpu"] == (1, 3)


def test_run_takes_the_rest_as_the_command() -> None:
    args = parse(["run", "--blocking", "python", "-u", "train.py", "--lr", "3", "-v"])
    assert args["blocking"] and not args["verbose"]
    assert args["command"] == ("python", "-u", "train.py", "--lr", "3", "-v")
    assert parse(["run", "--", "ls", "-l"])["command"] == ("ls", "-l")
    assert parse(["run", "-v", "--", "ls"])["verbose"]
    assert refusal(["run", "--blocking"]) == "missing -- CMD [ARGS]..."


def test_usage_error_text_names_the_subcommand_and_its_help() -> None:
    with pytest.raises(Exception) as info:
        parse(["tables", "show", "--jsn"])
    assert usage_error_text(info.value) == (
        "envdoctor tables show: no such option --jsn (did you mean --json?)\n"
        "Try 'envdoctor tables show --help'.\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "-o", ""], "--output needs a value (got an empty one)"),
        (["check", "--snapshot="], "--snapshot needs a value (got an empty one)"),
        (["diff", "", "b.json"], "A needs a value (got an empty one)"),
        (["spec", "validate", ""], "FILE needs a value (got an empty one)"),
        (["check", "-o", "--json"], "--output needs a value (got the option '--json')"),
    ],
)
def test_an_empty_path_is_no_current_directory(argv: list[str], message: str) -> None:
    """``Path("")`` is ``.``: ``-o ""`` (an unset variable in a script) must not write there."""
    assert refusal(argv) == message
