"""`envdoctor check` and `collect` through Typer's runner, against scenario hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke


def invoke(scenario: str, *args: str, **overrides: object):  # type: ignore[no-untyped-def]  # Result type is click's
    host = FakeHost.scenario(scenario, **overrides)
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


@pytest.mark.parametrize(
    ("scenario", "code"),
    [("healthy_h100", 0), ("driver_mismatch", 1), ("torch_probe_hangs", 2)],
)
def test_exit_codes(scenario: str, code: int) -> None:
    assert invoke(scenario, "check").exit_code == code


def test_text_report_shows_problem_evidence_and_fix() -> None:
    result = invoke("driver_mismatch", "check")
    out = result.output
    assert "✗ Driver/library version mismatch" in out
    assert "kernel module (/proc/driver/nvidia/version): 580.95.05 (open)" in out
    assert "fix: Reload the NVIDIA kernel modules" in out
    assert out.rstrip().endswith("Result: UNHEALTHY — 2 errors (exit 1)")


def test_strict_turns_warnings_into_failure() -> None:
    env = {"PATH": "/usr/bin", "CUDA_LAUNCH_BLOCKING": "1"}
    assert invoke("healthy_h100", "check", env=env).exit_code == 0
    assert invoke("healthy_h100", "check", "--strict", env=env).exit_code == 1


def test_json_finding_carries_evidence_and_remediation() -> None:
    data = json.loads(invoke("memory_held", "check", "--format", "json").output)
    (finding,) = data["findings"]
    assert finding["code"] == "gpu.memory-held"
    assert {"label": "PID 4242", "value": "python train.py --epochs 100 holds 79.1 GiB"} in finding[
        "evidence"
    ]
    assert finding["remediation"]["steps"][0].startswith("check, then stop: kill 4242")


def test_markdown_is_redacted() -> None:
    out = invoke("gpu_lost", "check", "--format", "markdown").output
    assert out.startswith("### envdoctor")
    assert "`gpu.lost`" in out
    full = invoke("healthy_h100", "collect", "--no-redact").output
    assert "gpu-node-17" in full  # the raw facts do hold the identity …
    for secret in ("gpu-node-17", "GPU-5f2b8c1e", "alice"):
        assert secret not in out and secret not in invoke("healthy_h100", "collect").output


def test_list_checks_names_every_code() -> None:
    out = invoke("healthy_h100", "check", "--list-checks").output
    for code in (
        "driver.version-mismatch",
        "gpu.memory-held",
        "libs.shadowed",
        "env.cuda-visible-devices",
    ):
        assert code in out


def test_collect_then_check_snapshot_offline(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    assert invoke("uvm_missing", "collect", "-o", str(snap)).exit_code == 0
    live = json.loads(invoke("uvm_missing", "check", "--json").output)
    offline_host = FakeHost({})  # an empty machine: the snapshot alone must carry the facts
    result = cli_invoke(
        ["check", "--json", "--snapshot", str(snap)], obj=AppContext(host=offline_host)
    )
    offline = json.loads(result.output)
    assert [x["code"] for x in offline["findings"]] == [x["code"] for x in live["findings"]]
    assert result.exit_code == 1 and offline_host.ran == []


def test_malformed_snapshot_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "envdoctor-snapshot", "schema_version": 1, "facts": []}')
    result = invoke("healthy_h100", "check", "--snapshot", str(bad))
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith(f"envdoctor: error: {bad}: malformed snapshot")


def test_unknown_python_is_a_usage_error() -> None:
    result = invoke("healthy_h100", "check", "--python", "/no/such/python")
    assert result.exit_code == 2 and "no such interpreter" in result.output


def test_usage_errors_exit_2() -> None:
    assert invoke("healthy_h100", "check", "--format", "yaml").exit_code == 2
    assert invoke("healthy_h100", "check", "--timeout", "0").exit_code == 2


def test_deep_adds_the_smoke_verdict() -> None:
    data = json.loads(invoke("no_driver", "check", "--json", "--deep", "--timeout", "10").output)
    smoke = [f for f in data["findings"] if f["code"].startswith("smoke.")]
    assert [f["code"] for f in smoke] == ["smoke.not-run"]
    assert smoke[0]["inconclusive"]


def test_spec_drift_fails_the_check(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    assert invoke("healthy_h100", "spec", "init", "-o", str(spec)).exit_code == 0
    matching = invoke("healthy_h100", "check", "--spec", str(spec))
    assert matching.exit_code == 0
    assert "✓ the machine matches the node spec" in matching.output
    drifted = invoke("gpu_lost", "check", "--json", "--spec", str(spec))
    codes = {f["code"] for f in json.loads(drifted.output)["findings"]}
    assert drifted.exit_code == 1 and any(c.startswith("spec.") for c in codes)


def test_prometheus_textfile_is_written_atomically(tmp_path: Path) -> None:
    target = tmp_path / "envdoctor.prom"
    result = invoke("memory_held", "check", "--format", "prometheus", "-o", str(target))
    assert result.exit_code == 1 and result.output == ""
    text = target.read_text()
    assert 'code="gpu.memory-held"' in text
    assert [p.name for p in tmp_path.iterdir()] == ["envdoctor.prom"]
