"""Per-GPU health metrics: values in their units, nothing made up for what NVML could not read."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from envdoctor.model.facts import RetiredPages
from envdoctor.model.probed import Found, ProbeFailed
from envdoctor.render.gpu_metrics import FAMILIES, FIELDS
from envdoctor.render.prometheus import render_prometheus
from envdoctor.snapshot import dump_snapshot, parse_snapshot
from tests import factories as fx
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts
from tests.fleet.test_prometheus import samples

GPU0 = 'gpu="0",uuid="GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21",pci_bus_id="00000000:18:00.0"'


def metrics(scenario: str, **overrides: object) -> dict[str, float]:
    return samples(render_prometheus(report_of(scenario_facts(scenario, **overrides)), 0.5))


def test_health_values_in_prometheus_units() -> None:
    got = metrics("healthy_h100")
    assert got[f"envdoctor_gpu_up{{{GPU0}}}"] == 1
    assert got[f"envdoctor_gpu_temperature_celsius{{{GPU0}}}"] == 34
    assert got[f"envdoctor_gpu_power_draw_watts{{{GPU0}}}"] == 71.234  # NVML's milliwatts
    assert got[f"envdoctor_gpu_power_limit_watts{{{GPU0}}}"] == 700
    assert got[f"envdoctor_gpu_memory_total_bytes{{{GPU0}}}"] == 85520809984
    assert got[f"envdoctor_gpu_memory_used_bytes{{{GPU0}}}"] == 1073741824
    assert got[f'envdoctor_gpu_clock_event_reason{{{GPU0},reason="gpu-idle"}}'] == 1
    assert got[f'envdoctor_gpu_clock_event_reason{{{GPU0},reason="hw-slowdown"}}'] == 0
    assert got[f'envdoctor_gpu_ecc_volatile_errors_total{{{GPU0},error_type="uncorrected"}}'] == 0
    assert got[f"envdoctor_gpu_persistence_mode{{{GPU0}}}"] == 1
    assert got["envdoctor_kernel_log_up"] == 1


def test_utilisation_is_a_ratio_and_counters_are_typed_as_counters() -> None:
    over = {
        "nvml": {
            "gpus": [
                {
                    "uuid": "GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21",
                    "utilization": [97, 41],
                    "ecc_corrected": [3, 17],
                }
            ]
        }
    }
    text = render_prometheus(report_of(scenario_facts("healthy_h100", **over)), 0.5)
    got = samples(text)
    assert got[f"envdoctor_gpu_utilization_ratio{{{GPU0}}}"] == 0.97
    assert got[f"envdoctor_gpu_memory_activity_ratio{{{GPU0}}}"] == 0.41
    assert got[f'envdoctor_gpu_ecc_volatile_errors_total{{{GPU0},error_type="corrected"}}'] == 3
    assert got[f'envdoctor_gpu_ecc_aggregate_errors_total{{{GPU0},error_type="corrected"}}'] == 17
    for name in re.findall(r"^# TYPE (\S+) counter$", text, flags=re.MULTILINE):
        assert name.endswith("_total"), name
    assert "# TYPE envdoctor_gpu_xid_events_total counter" not in text  # no Xid: no series


def test_a_value_nvml_refused_is_left_out_with_its_reason() -> None:
    """H100: no dynamic page retirement (row remapping instead): no retired-pages sample at all."""
    text = render_prometheus(report_of(scenario_facts("healthy_h100")), 0.5)
    got = samples(text)
    assert not any(k.startswith("envdoctor_gpu_retired_pages{") for k in got)
    assert got[f'envdoctor_gpu_field_up{{{GPU0},field="retired_pages"}}'] == 0
    assert got[f'envdoctor_gpu_field_up{{{GPU0},field="temperature"}}'] == 1
    reason = "not supported by this GPU or driver (NVML NotSupported)"
    assert (
        got[f'envdoctor_gpu_field_error_info{{{GPU0},field="retired_pages",reason="{reason}"}}']
        == 1
    )


def test_a_lost_gpu_is_down_and_has_no_values() -> None:
    got = metrics("gpu_lost")
    lost = 'gpu="1",uuid="",pci_bus_id=""'
    assert got[f"envdoctor_gpu_up{{{lost}}}"] == 0
    assert not any(k.startswith(f"envdoctor_gpu_temperature_celsius{{{lost}") for k in got)
    for field in FIELDS:
        assert got[f'envdoctor_gpu_field_up{{{lost},field="{field}"}}'] == 0
        assert (
            got[
                f'envdoctor_gpu_field_error_info{{{lost},field="{field}",reason="probe failed: GPUIsLost"}}'
            ]
            == 1
        )


def test_xid_events_are_counted_per_gpu_and_code() -> None:
    got = metrics("xid_app_faults")
    assert got[f'envdoctor_gpu_xid_events_total{{{GPU0},xid="31"}}'] == 2
    assert got[f'envdoctor_gpu_xid_events_total{{{GPU0},xid="13"}}'] == 1
    assert got['envdoctor_kernel_log_info{source="/dev/kmsg",complete="true"}'] == 1


def test_an_xid_of_a_gpu_nvml_cannot_name_keeps_its_pci_address() -> None:
    got = metrics("xid_reboot_required")
    assert (
        got['envdoctor_gpu_xid_events_total{gpu="",uuid="",pci_bus_id="0000:2a:00",xid="79"}'] == 1
    )


def test_an_unreadable_kernel_log_is_down_with_every_reason() -> None:
    got = metrics("kernel_log_unreadable")
    assert got["envdoctor_kernel_log_up"] == 0
    (reason,) = [k for k in got if k.startswith("envdoctor_kernel_log_error_info")]
    assert "dmesg_restrict" in reason and "systemd-journal" in reason


def test_fabric_state_and_manager() -> None:
    got = metrics("fabric_manager_stopped")
    assert got[f'envdoctor_gpu_fabric_info{{{GPU0},state="in-progress",status="Success"}}'] == 1
    assert got["envdoctor_nvswitches"] == 4
    assert got['envdoctor_fabric_manager_info{service="inactive (dead)",version="580.159.04"}'] == 1


def test_a_redacted_snapshot_gives_redacted_uuids() -> None:
    facts = scenario_facts("healthy_h100")
    redacted = parse_snapshot(dump_snapshot(facts), where="snap")
    text = render_prometheus(report_of(redacted), 0.5)
    assert "5f2b8c1e" not in text
    assert 'uuid="GPU-redacted-' in text


def test_values_from_older_snapshots_are_left_out_not_zero() -> None:
    """A snapshot from before these facts existed decodes with them 'not collected'."""
    old = fx.facts(nvml=fx.nvml(gpus=(fx.gpu(0),)))  # the factories leave the new fields default
    got = samples(render_prometheus(report_of(old), 0.5))
    assert not any(k.startswith("envdoctor_gpu_temperature_celsius") for k in got)
    assert any(
        k.startswith("envdoctor_gpu_field_error_info")
        and 'field="temperature"' in k
        and "not collected" in k
        for k in got
    )


def test_a_probe_failure_names_the_nvml_error_kind() -> None:
    gpu = replace(
        fx.gpu(0),
        temperature=ProbeFailed("Timeout", "NVML did not answer within 2.0 s"),
        retired_pages=Found(RetiredPages(single_bit=2, double_bit=1)),
    )
    got = samples(render_prometheus(report_of(fx.facts(nvml=fx.nvml(gpus=(gpu,)))), 0.5))
    labels = 'gpu="0",uuid="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:18:00.0"'
    assert (
        got[
            f'envdoctor_gpu_field_error_info{{{labels},field="temperature",reason="probe failed: Timeout"}}'
        ]
        == 1
    )
    assert got[f'envdoctor_gpu_retired_pages{{{labels},cause="double_bit_ecc"}}'] == 1


def test_every_family_follows_the_naming_conventions() -> None:
    units = ("_celsius", "_watts", "_bytes", "_ratio", "_total", "_info")
    for family in FAMILIES:
        assert re.fullmatch(r"envdoctor_gpu_[a-z_]+", family.name), family.name
        assert family.help.endswith("."), family.name
        if family.kind == "counter":
            assert family.name.endswith("_total")
    measured = {"temperature", "power_draw", "power_limit", "memory"}
    for family in FAMILIES:
        if family.field in measured:
            assert family.name.endswith(units), family.name


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_every_line_is_well_formed(scenario: str) -> None:
    samples(render_prometheus(report_of(scenario_facts(scenario)), 0.5))
