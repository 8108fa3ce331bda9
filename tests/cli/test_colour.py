"""Colour on a terminal: ``--color auto|always|never``, ``NO_COLOR``, ``FORCE_COLOR``,
``TERM=dumb``; never in a file, JSON or Markdown; and never an escape that untrusted text
brought along."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.colour import paint, wants_colour
from envdoctor.snapshot import dump_snapshot
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.runner import Result, invoke

ESC = "\x1b["
RED, GREEN = "\x1b[1;31m", "\x1b[32m"


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A colour terminal with no colour preference in the environment (CI may set one)."""
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def check(
    *args: str,
    scenario: str = "driver_mismatch",
    tty: bool = True,
    env: dict[str, str] | None = None,
) -> Result:
    host = FakeHost.scenario(scenario)
    return invoke(
        ["check", *args],
        obj=AppContext(host=host, python=PYTHON),
        tty=("stdout",) if tty else (),
        env=env,
    )


def test_a_terminal_gets_coloured_marks_and_verdict() -> None:
    result = check()
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first.endswith(f"{RED}UNHEALTHY\x1b[0m")  # the header's verdict
    assert f"  {RED}✗\x1b[0m Driver/library version mismatch" in result.stdout
    assert f"  {GREEN}✓\x1b[0m" in result.stdout
    assert "\x1b[1mDriver\x1b[0m" in result.stdout  # a section title
    assert result.stdout.rstrip().splitlines()[-1].startswith(f"Result: {RED}UNHEALTHY")


def test_colour_changes_nothing_but_the_codes() -> None:
    coloured = check().stdout
    plain = check("--color", "never").stdout
    assert ESC not in plain
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_a_pipe_gets_no_colour_unless_always() -> None:
    assert ESC not in check(tty=False).stdout
    assert RED in check("--color", "always", tty=False).stdout


def test_never_wins_on_a_terminal() -> None:
    assert ESC not in check("--color", "never").stdout


@pytest.mark.parametrize("value", ["1", "yes", "0"], ids=["1", "yes", "zero-is-set-too"])
def test_no_color_turns_auto_off(value: str) -> None:
    assert ESC not in check(env={"NO_COLOR": value}).stdout


def test_an_empty_no_color_is_not_set() -> None:
    assert RED in check(env={"NO_COLOR": ""}).stdout


def test_an_explicit_always_overrides_no_color() -> None:
    # no-color.org: a per-invocation flag may override the variable
    assert RED in check("--color", "always", env={"NO_COLOR": "1"}).stdout


@pytest.mark.parametrize("args", [(), ("--color", "always")], ids=["auto", "always"])
def test_a_dumb_terminal_never_gets_colour(args: tuple[str, ...]) -> None:
    assert ESC not in check(*args, env={"TERM": "dumb"}).stdout


@pytest.mark.parametrize("name", ["FORCE_COLOR", "CLICOLOR_FORCE"])
def test_force_color_colours_a_pipe(name: str) -> None:
    assert RED in check(tty=False, env={name: "1"}).stdout
    assert ESC not in check(tty=False, env={name: "0"}).stdout
    assert ESC not in check(tty=False, env={name: "1", "NO_COLOR": "1"}).stdout


def test_a_file_is_never_coloured(tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    result = check("--color", "always", "-o", str(out))
    assert result.exit_code == 1 and result.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert "UNHEALTHY" in text and ESC not in text


@pytest.mark.parametrize("fmt", ["json", "markdown", "prometheus"])
def test_machine_formats_are_never_coloured(fmt: str) -> None:
    result = check("--color", "always", "--format", fmt)
    assert result.exit_code == 1 and "driver.version-mismatch" in result.stdout
    assert "\x1b" not in result.stdout
    if fmt == "json":
        json.loads(result.stdout)


def test_untrusted_escapes_stay_visible_beside_real_colour(tmp_path: Path) -> None:
    """A GPU name that carries ESC sequences is shown escaped; only envdoctor's own codes are
    real."""
    hostile = "H100\x1b[2J\x1b]0;pwned\x07"
    facts = scenario_facts("healthy_h100")
    snap = tmp_path / "snap.json"
    escaped = json.dumps(hostile)[1:-1]
    text = dump_snapshot(facts, redact=False).replace("NVIDIA H100 80GB HBM3", escaped, 1)
    snap.write_text(text, encoding="utf-8")
    result = invoke(["check", "--snapshot", str(snap), "--color", "always"], tty=("stdout",))
    assert "H100\\x1b[2J\\x1b]0;pwned\\x07" in result.stdout
    codes = result.stdout.replace("\x1b[0m", "")
    for style in ("\x1b[32m", "\x1b[1m", "\x1b[2m", "\x1b[1;31m", "\x1b[1;33m", "\x1b[35m"):
        codes = codes.replace(style, "")
    assert "\x1b" not in codes  # every real ESC is one of the styles above
    assert "\x07" not in result.stdout


def test_paint_makes_its_input_safe_first() -> None:
    """Even text a renderer forgot to make safe cannot bring its own codes past paint."""
    painted = paint("  ✗ \x1b[31mfake\n", ((r"  (✗) ", ("error",)),))
    assert painted == f"  {RED}✗\x1b[0m \\x1b[31mfake\n"


def test_wants_colour_without_a_terminal_or_a_stream() -> None:
    env: dict[str, str] = {}
    assert not wants_colour("auto", io.StringIO(), env)
    assert not wants_colour("auto", None, env)
    assert wants_colour("always", None, env)


@pytest.mark.parametrize(
    ("command", "scenario", "coloured"),
    [
        (["probe"], "driver_mismatch", f"{RED}unhealthy\x1b[0m: driver.version-mismatch"),
        (["probe", "-v"], "driver_mismatch", f"  {RED}error\x1b[0m   driver.version-mismatch"),
        (["probe"], "healthy_h100", f"{GREEN}healthy\x1b[0m: 1x NVIDIA H100"),
        (["recommend"], "healthy_h100", "\x1b[1mInstall:\x1b[0m"),
        (["recommend"], "healthy_h100", f"  {GREEN}pip install torch=="),
        (["fix", "--format", "steps"], "driver_mismatch", "\x1b[1m 1.\x1b[0m "),
        (["fix", "--format", "steps"], "driver_mismatch", f"      {GREEN}$ rmmod nvidia_drm"),
        (["fix", "--format", "steps"], "driver_mismatch", "\x1b[1;33m[root]\x1b[0m"),
        (["tables", "show", "driver-branches"], "healthy_h100", "\x1b[1mbranch  CUDA"),
    ],
    ids=[
        "probe-verdict",
        "probe-verbose",
        "probe-healthy",
        "recommend-head",
        "recommend-command",
        "fix-steps-number",
        "fix-steps-command",
        "fix-steps-root",
        "tables-header",
    ],
)
def test_other_text_reports_take_colour(command: list[str], scenario: str, coloured: str) -> None:
    host = FakeHost.scenario(scenario)
    obj = AppContext(host=host, python=PYTHON)
    on = invoke(command, obj=obj, tty=("stdout",))
    assert coloured in on.stdout
    off = invoke(command, obj=AppContext(host=host, python=PYTHON))
    assert "\x1b" not in off.stdout


@pytest.mark.parametrize("fmt", ["script", "json"])
def test_a_fix_script_and_its_json_are_never_coloured(fmt: str) -> None:
    host = FakeHost.scenario("driver_mismatch")
    result = invoke(["fix", "--format", fmt, "--color", "always"], obj=AppContext(host=host))
    assert result.exit_code == 0 and "nvidia_drm" in result.stdout
    assert "\x1b" not in result.stdout


def test_probe_colours_only_the_verdict_beside_its_file(tmp_path: Path) -> None:
    out = tmp_path / "envdoctor.prom"
    host = FakeHost.scenario("driver_mismatch")
    result = invoke(["probe", "-o", str(out)], obj=AppContext(host=host), tty=("stdout",))
    assert result.stdout.startswith(f"{RED}unhealthy\x1b[0m: ")
    assert "\x1b" not in out.read_text(encoding="utf-8")
