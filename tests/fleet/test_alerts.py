"""deploy/prometheus/alerts.yaml and the Grafana dashboard: real promtool, and every metric they
name is one envdoctor writes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from envdoctor.model.facts import RetiredPages
from envdoctor.model.probed import Found
from envdoctor.render.prometheus import render_prometheus, render_prometheus_unknown
from tests import factories as fx
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "envdoctor-gpu-health.json"
METRIC = re.compile(r"\benvdoctor_[a-z0-9_]+")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip(
            "promtool is not installed (Debian package `prometheus`; scripts/install-test-tools "
            "installs it where it can)"
        )
    return subprocess.run(
        [tool, *args], capture_output=True, text=True, timeout=120, cwd=PROMETHEUS
    )


@cache
def exported() -> frozenset[str]:
    """Every metric family envdoctor writes for some machine: every scenario, a GPU with retired
    pages (pre-Ampere), and the file written when no verdict was reached."""
    texts = [render_prometheus(report_of(scenario_facts(name)), 0.5) for name in SCENARIO_NAMES]
    volta = replace(
        fx.gpu(0), retired_pages=Found(RetiredPages(2, 0)), retired_pages_pending=Found(False)
    )
    texts.append(render_prometheus(report_of(fx.facts(nvml=fx.nvml(gpus=(volta,)))), 0.5))
    texts.append(render_prometheus_unknown("stuck reading /proc/modules", 1.0))
    return frozenset(m for text in texts for m in re.findall(r"^# TYPE (\S+) ", text, re.M))


def alert_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text(encoding="utf-8"))
    return [rule for group in data["groups"] for rule in group["rules"]]


def dashboard_queries() -> list[str]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [t["expr"] for p in data["panels"] for t in p.get("targets", [])]
    queries += [
        v["query"]["query"] for v in data["templating"]["list"] if isinstance(v.get("query"), dict)
    ]
    return queries


def test_promtool_accepts_the_rules() -> None:
    result = promtool("check", "rules", "alerts.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    result = promtool("test", "rules", "alerts_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_tested_firing() -> None:
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yaml").read_text(encoding="utf-8"))["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in alert_rules()} == fired


def test_the_issues_alerts_are_there() -> None:
    """GPU lost, uncorrectable ECC, pending row remap, driver/library mismatch, memory held with
    no process, probe failing (issue #18)."""
    names = {rule["alert"] for rule in alert_rules()}
    assert {
        "EnvdoctorGPULost",
        "EnvdoctorGPUUncorrectableECC",
        "EnvdoctorGPUPendingRowRemap",
        "EnvdoctorDriverLibraryMismatch",
        "EnvdoctorGPUMemoryHeldWithoutProcess",
        "EnvdoctorProbeFailing",
    } <= names
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def test_every_metric_the_alerts_name_is_exported() -> None:
    named = {m for rule in alert_rules() for m in METRIC.findall(rule["expr"])}
    assert named, "no envdoctor metric in the alert expressions"
    assert named - exported() == set()


def test_every_dashboard_query_names_a_metric_envdoctor_exports() -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    for query in queries:
        names = set(METRIC.findall(query))
        assert names, f"names no envdoctor metric: {query}"
        assert names - exported() == set(), query


def test_the_dashboard_is_importable_grafana_json() -> None:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert data["uid"] and data["title"] and data["schemaVersion"] >= 36
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in data["templating"]["list"]}
    assert {"datasource", "instance", "gpu"} <= variables
    for panel in data["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert "$instance" in target["expr"], (panel["title"], target["expr"])


def test_the_metric_families_fleet_md_lists_are_the_ones_written() -> None:
    doc = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    first_cells = [
        line.split("|")[1] for line in doc.splitlines() if line.startswith("| `envdoctor_")
    ]
    listed = {
        name for cell in first_cells for name in re.findall(r"`(envdoctor_[a-z0-9_]+)`", cell)
    }
    assert listed == set(exported())
