"""Issue 13 item 4: untrusted strings never reach the terminal as control sequences.

Hostile text comes from snapshot fields (GPU and process names, paths, reasons), log lines,
file names and missing command names. Every text and Markdown output must show each control
character as a visible escape; JSON must stay lossless (the same strings after ``json.loads``)
and still carry no raw control character.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from envdoctor.cli.common import AppContext
from envdoctor.remedy.model import Plan, Step, StopService
from envdoctor.remedy.script import render_script
from envdoctor.snapshot import dump_snapshot
from envdoctor.terminal import json_document, safe_json, safe_line, safe_text
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.hostile.child import envdoctor
from tests.remedy.sandbox import Sandbox
from tests.runner import invoke as cli_invoke

# OSC 52 (write the clipboard), OSC 0 (window title), ESC[2J (clear), C1 CSI, a bidi override,
# DEL, a carriage return (overwrite the line) and a line separator.
PAYLOAD = "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\u009b31m\u202e\x7f\r\u2028"
ROOT = Path(__file__).resolve().parents[2]


def raw_controls(text: str) -> list[str]:
    """The characters in ``text`` that a terminal could act on (newline and tab are fine)."""
    return sorted({ch for ch in text if not ch.isprintable() and ch not in "\n\t"})


def hostile(value: Any) -> Any:
    """Every string of a decoded snapshot with the payload appended."""
    if isinstance(value, dict):
        return {key: hostile(item) for key, item in value.items()}
    if isinstance(value, list):
        return [hostile(item) for item in value]
    return value + PAYLOAD if isinstance(value, str) else value


def strings(value: Any) -> list[str]:
    """Every string in decoded JSON, keys included."""
    if isinstance(value, dict):
        return [*value, *(s for item in value.values() for s in strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return [value] if isinstance(value, str) else []


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = json.loads(dump_snapshot(scenario_facts("memory_held"), redact=False))
    data["facts"] = hostile(data["facts"])
    path = tmp_path_factory.mktemp("hostile") / "snap.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def invoke(*args: str) -> Any:
    host = FakeHost.scenario("memory_held")
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


# --- the function -------------------------------------------------------------------------


def test_controls_are_shown_as_escapes_not_dropped() -> None:
    shown = safe_text("name" + PAYLOAD + "\nnext\tline")
    assert raw_controls(shown) == []
    assert "\\x1b]52;c;cHduZWQ=\\x07" in shown and "\\x9b31m" in shown and "\\u202e" in shown
    assert "\\x7f" in shown and "\\r" in shown and "\\u2028" in shown
    assert shown.endswith("\nnext\tline")  # a report's lines and tabs stay


def test_one_line_escapes_newlines_and_tabs_too() -> None:
    assert safe_line("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert safe_line("plain — ✓ text, ünïcode, 漢字") == "plain — ✓ text, ünïcode, 漢字"


def test_json_stays_lossless_and_terminal_safe() -> None:
    data = {"name": PAYLOAD, "surrogate": "0\udcff", "astral": "\U000e0001", "ok": "✓ —"}
    document = json_document(data)
    assert raw_controls(document) == []
    assert json.loads(document) == data
    document.encode("utf-8")  # a lone surrogate is an escape, not an unencodable character
    assert safe_json('{"a": "✓"}') == '{"a": "✓"}'


# --- every command, fed a hostile snapshot ------------------------------------------------

SNAPSHOT_COMMANDS = [
    ("check", "--snapshot", "{snap}"),
    ("check", "--snapshot", "{snap}", "-v"),
    ("check", "--snapshot", "{snap}", "--format", "markdown"),
    ("recommend", "--snapshot", "{snap}"),
    ("fix", "--snapshot", "{snap}", "--format", "steps"),
    ("fix", "--snapshot", "{snap}"),
    ("spec", "init", "--snapshot", "{snap}"),
    ("diff", "{snap}", "{clean}"),
    ("diff", "{snap}", "{clean}", "--all"),
]
JSON_COMMANDS = [  # (command, whether its JSON carries snapshot strings)
    (("check", "--snapshot", "{snap}", "--json"), True),
    (("recommend", "--snapshot", "{snap}", "--json"), True),
    (("fix", "--snapshot", "{snap}", "--format", "json"), False),  # a plan: no machine names
    (("diff", "{snap}", "{clean}", "--json"), True),
]


def _args(command: tuple[str, ...], snap: Path, clean: Path) -> list[str]:
    return [a.format(snap=snap, clean=clean) for a in command]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clean") / "clean.json"
    path.write_text(dump_snapshot(scenario_facts("healthy_h100")), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", SNAPSHOT_COMMANDS, ids=" ".join)
def test_text_outputs_show_hostile_snapshot_fields_escaped(
    command: tuple[str, ...], snapshot: Path, clean: Path
) -> None:
    result = invoke(*_args(command, snapshot, clean))
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert raw_controls(result.output) == []
    assert "\\x1b]52;c;" in result.output  # shown, not silently dropped


@pytest.mark.parametrize(
    ("command", "carries"), JSON_COMMANDS, ids=lambda c: " ".join(c) if isinstance(c, tuple) else ""
)
def test_json_outputs_keep_hostile_strings_exactly(
    command: tuple[str, ...], carries: bool, snapshot: Path, clean: Path
) -> None:
    result = invoke(*_args(command, snapshot, clean))
    assert raw_controls(result.stdout) == []
    data = json.loads(result.stdout)
    assert any(PAYLOAD in text for text in strings(data)) == carries  # lossless: the payload


def test_spec_written_from_a_hostile_snapshot_reads_back(snapshot: Path, tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    result = invoke("spec", "init", "--snapshot", str(snapshot), "-o", str(spec))
    assert result.exit_code == 0, result.output
    text = spec.read_text(encoding="utf-8")
    assert raw_controls(text) == []
    data = yaml.safe_load(text)  # no comment or value broke out of its line
    assert set(data) == {"schema_version", "kind", "gpus", "driver", "torch"}
    assert data["gpus"]["model"] == "NVIDIA H100 80GB HBM3" + PAYLOAD


# --- logs, file names, command names ------------------------------------------------------


def test_explain_shows_a_hostile_log_line_and_file_name_escaped(tmp_path: Path) -> None:
    log = tmp_path / f"train{PAYLOAD.replace('/', '')}.log"
    log.write_text(
        f"RuntimeError: CUDA error: out of memory {PAYLOAD}\n"
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB{PAYLOAD}\n",
        encoding="utf-8",
    )
    for fmt in ("text", "markdown"):
        result = invoke("explain", str(log), "--format", fmt)
        assert result.exit_code == 1, result.output
        assert raw_controls(result.output) == [], fmt
        assert "\\x1b]0;owned" in result.output
    result = invoke("explain", str(log), "--json")
    data = json.loads(result.stdout)
    assert raw_controls(result.stdout) == []
    assert data["source"] == str(log)
    assert any(PAYLOAD in o["text"] for c in data["causes"] for o in c["occurrences"])


def test_error_messages_name_hostile_files_escaped(tmp_path: Path) -> None:
    missing = str(tmp_path / f"nothing{PAYLOAD}.json")
    for args in (
        ("check", "--snapshot", missing),
        ("explain", missing),
        ("spec", "validate", missing),
    ):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.output.startswith("envdoctor: error: ")
        assert raw_controls(result.output) == [], args


def test_run_names_a_missing_hostile_command_escaped() -> None:
    result = envdoctor("run", "--", f"no-such-program{PAYLOAD}")
    assert result.returncode != 0
    assert "no-such-program" in result.stderr
    assert raw_controls(result.stdout + result.stderr) == []


def test_probe_verdict_escapes_a_hostile_gpu_name() -> None:
    nvml = FakeHost.scenario("healthy_h100").data["nvml"]
    gpus = [dict(gpu, name=f"NVIDIA H100{PAYLOAD}") for gpu in nvml["gpus"]]
    host = FakeHost.scenario("healthy_h100", nvml=dict(nvml, gpus=gpus))
    for args in (["probe", "-v", "--require", "model~=H100"], ["probe", "--json"]):
        result = cli_invoke(args, obj=AppContext(host=host, python=PYTHON))
        assert raw_controls(result.output) == [], args
        assert "\\x1b]52" in result.output or "\\u001b]52" in result.output


# --- the fix script's own messages at run time ----------------------------------------------


def test_fix_script_messages_escape_a_hostile_unit_name(tmp_path: Path) -> None:
    unit = f"evil{PAYLOAD}.service"
    plan = Plan(steps=(Step("Stop the unit", StopService(unit)),))
    box = Sandbox(tmp_path / "sandbox")
    box.service(unit, active=False)
    script = render_script(plan)
    assert raw_controls(script) == []
    for args in ((), ("--apply", "--yes")):
        run = box.run(script, *args)
        assert run.returncode == 0, run.stderr
        assert raw_controls(run.stdout + run.stderr) == [], args
    assert "is not active" in run.stdout and "\\E]52;c;" in run.stdout


def test_the_hostile_checks_see_raw_controls() -> None:
    """The helper the tests rely on is not blind: raw output would fail them."""
    assert raw_controls(PAYLOAD) != []
    assert os.linesep == "\n"


def test_json_for_people_is_written_by_json_document_only() -> None:
    """``ensure_ascii=False`` keeps C1 controls and bidi overrides raw: only ``json_document``
    may use it, after which ``safe_json`` escapes them (a new JSON output stays safe)."""
    package = ROOT / "envdoctor"
    raw = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "ensure_ascii=False" in path.read_text(encoding="utf-8") and path.name != "terminal.py"
    ]
    assert raw == []
