"""The node_exporter textfile: format, labels, atomic writes, and the real `promtool`."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from envdoctor.engine import Report
from envdoctor.errors import EnvdoctorError
from envdoctor.model.probed import Found
from envdoctor.render.prometheus import (
    render_prometheus,
    render_prometheus_unknown,
    write_textfile,
)
from tests import factories as fx
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts
from tests.fleet.conftest import promtool_check

SAMPLE = re.compile(r'^([a-z_]+)(\{([a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+]+)$')


def samples(text: str) -> dict[str, float]:
    """Every sample line as {series: value}; asserts each line is well formed."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ .+$", line), line
            continue
        match = SAMPLE.match(line)
        assert match, line
        series, value = line.rsplit(" ", 1)
        out[series] = float(value)
    return out


def test_unhealthy_report_as_metrics() -> None:
    report = report_of(scenario_facts("gpu_lost"))
    text = render_prometheus(report, 0.25, command="check", now=1_700_000_000.5)
    got = samples(text)
    assert got['envdoctor_status{status="unhealthy"}'] == 1
    assert got['envdoctor_status{status="healthy"}'] == 0
    assert got["envdoctor_exit_code"] == 1
    assert got['envdoctor_finding{code="gpu.lost",severity="error"}'] == 1
    assert got['envdoctor_findings{severity="error"}'] >= 1
    assert got["envdoctor_last_run_timestamp_seconds"] == 1_700_000_000.5
    assert got["envdoctor_last_run_duration_seconds"] == 0.25
    assert 'envdoctor_info{version="' in text and 'command="check"' in text
    assert "# TYPE envdoctor_finding gauge" in text


def test_healthy_report_has_facts_as_info_metrics() -> None:
    report = report_of(scenario_facts("healthy_h100"))
    got = samples(render_prometheus(report, 1.0))
    assert got['envdoctor_status{status="healthy"}'] == 1
    assert not any(k.startswith("envdoctor_finding{") for k in got)
    assert got["envdoctor_gpus"] == 1
    (driver,) = [k for k in got if k.startswith("envdoctor_driver_info")]
    assert 'version="580.159.04"' in driver and 'cuda_version="13.0"' in driver
    (gpu,) = [k for k in got if k.startswith("envdoctor_gpu_info")]
    assert 'gpu="0"' in gpu and 'name="NVIDIA H100 80GB HBM3"' in gpu
    (torch,) = [k for k in got if k.startswith("envdoctor_torch_info")]
    assert 'version="2.11.0+cu130"' in torch


def test_label_values_are_escaped() -> None:
    name = 'GPU "quoted" \\ back\nslash'
    facts = fx.facts(nvml=fx.nvml(gpus=(fx.gpu(0, name=Found(name)),)))
    text = render_prometheus(report_of(facts), 0.1)
    assert 'name="GPU \\"quoted\\" \\\\ back\\nslash"' in text
    samples(text)


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_promtool_accepts_every_scenario(scenario: str, tmp_path: Path) -> None:
    path = tmp_path / "envdoctor.prom"
    write_textfile(path, render_prometheus(report_of(scenario_facts(scenario)), 0.5))
    promtool_check(path)


def test_promtool_accepts_the_unknown_file(tmp_path: Path) -> None:
    path = tmp_path / "envdoctor.prom"
    text = render_prometheus_unknown('no verdict within 1 s; stuck reading "/proc/x"\n', 1.0)
    assert samples(text)['envdoctor_status{status="unknown"}'] == 1
    write_textfile(path, text)
    promtool_check(path)


def test_write_is_atomic_world_readable_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "envdoctor.prom"
    path.write_text("old\n")
    inode_before = path.stat().st_ino
    old_umask = os.umask(0o077)
    try:
        write_textfile(path, "new\n")
    finally:
        os.umask(old_umask)
    assert path.read_text() == "new\n"
    assert path.stat().st_ino != inode_before  # replaced by rename, not rewritten in place
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envdoctor.prom"]


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "envdoctor.prom"
    path.write_text("old\n")
    with pytest.raises(EnvdoctorError) as info:
        write_textfile(tmp_path / "missing-dir" / "envdoctor.prom", "new\n")
    assert "missing-dir" in info.value.where
    assert path.read_text() == "old\n"


def test_report_without_findings_omits_the_finding_family() -> None:
    report = Report(facts=scenario_facts("healthy_h100"), findings=())
    assert "envdoctor_finding{" not in render_prometheus(report, 0.1)
    assert "# HELP envdoctor_finding " not in render_prometheus(report, 0.1)
