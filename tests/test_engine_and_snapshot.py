"""Engine crash containment, and snapshots that round-trip to the same findings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.compat.tables import CompatTables
from envdoctor.engine import evaluate
from envdoctor.errors import EnvdoctorError
from envdoctor.model import codec
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, Severity
from envdoctor.rules import all_rules
from envdoctor.rules.base import Rule, RuleContext
from envdoctor.snapshot import dump_snapshot, load_snapshot, parse_snapshot
from tests import factories as f
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts


def _boom(_: RuleContext) -> Iterator[Finding]:
    raise KeyError("nvml")


def test_a_crashing_rule_becomes_a_finding_and_the_others_still_run() -> None:
    rules = (Rule("test.boom", "crashes", ("test.boom",), _boom), *all_rules())
    report = evaluate(f.facts(env=f.env({"CUDA_LAUNCH_BLOCKING": "1"})), rules, CompatTables())
    codes = [x.code for x in report.findings]
    assert codes == ["envdoctor.rule-crashed", "env.cuda-launch-blocking"]
    crashed = report.findings[0]
    assert "KeyError" in dict(crashed.evidence)["error"] and report.exit_code == 1


def test_finding_codes_are_validated() -> None:
    with pytest.raises(ValueError, match="kebab"):
        Finding("Driver_Bad", Severity.ERROR, "x")


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_snapshot_gives_the_same_findings_as_the_live_run(name: str, tmp_path: Path) -> None:
    facts = scenario_facts(name)
    path = tmp_path / "snap.json"
    path.write_text(dump_snapshot(facts, redact=False))
    assert load_snapshot(path) == facts
    live, offline = report_of(facts), report_of(load_snapshot(path))
    assert live.findings == offline.findings


def test_redacted_snapshot_keeps_the_diagnosis_and_hides_identity() -> None:
    facts = scenario_facts("memory_held")
    text = dump_snapshot(facts)
    assert "gpu-node-17" not in text and "5f2b8c1e" not in text and "alice" not in text
    offline = report_of(parse_snapshot(text, where="snap"))
    assert [(x.code, x.severity) for x in offline.findings] == [
        (x.code, x.severity) for x in report_of(facts).findings
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "snap:1: not valid JSON", id="not-json"),
        pytest.param('{"kind": "other"}', "not an envdoctor snapshot", id="wrong-kind"),
        pytest.param(
            '{"kind": "envdoctor-snapshot", "schema_version": 99}', "schema_version 99", id="future"
        ),
        pytest.param(
            '{"kind": "envdoctor-snapshot", "schema_version": 1, "facts": {"host": 3}}',
            "malformed snapshot: $.host: expected an object",
            id="bad-shape",
        ),
    ],
)
def test_malformed_snapshots_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(EnvdoctorError) as info:
        parse_snapshot(text, where="snap")
    assert message in info.value.one_line()


def test_codec_round_trips_every_scenario() -> None:
    for name in SCENARIO_NAMES:
        facts = scenario_facts(name)
        assert codec.decode(Facts, codec.encode(facts)) == facts


def test_a_malformed_value_deep_inside_is_named_by_its_path() -> None:
    data = codec.encode(scenario_facts("memory_held"))
    data["nvml"]["found"]["gpus"][0]["index"] = "zero"
    with pytest.raises(
        codec.DecodeError, match=r"^\$\.nvml\.gpus\[0\]\.index: expected int, got str$"
    ):
        codec.decode(Facts, data)
    del data["nvml"]["found"]["gpus"][0]["index"]
    with pytest.raises(codec.DecodeError, match=r"^\$\.nvml\.gpus\[0\]: missing key 'index'$"):
        codec.decode(Facts, data)
