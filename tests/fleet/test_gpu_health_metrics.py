"""Per-GPU health metrics of issue 39: the recovery action, the thermal limits and margins, the
SM clock and the Xid counts, each on the labels dcgm-exporter's series join on (``gpu``,
``pci_bus_id``, and the UUID)."""

from __future__ import annotations

from envdoctor.render.prometheus import render_prometheus
from tests.conftest import report_of, scenario_facts
from tests.fleet.test_prometheus import samples

GPU0 = 'gpu="0",uuid="GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21",pci_bus_id="00000000:18:00.0"'
GPU1 = 'gpu="1",uuid="GPU-9a1c3e5b-7d20-4f68-8b13-2c4e6a8f0d17",pci_bus_id="00000000:2A:00.0"'


def metrics(scenario: str, **overrides: object) -> dict[str, float]:
    return samples(render_prometheus(report_of(scenario_facts(scenario, **overrides)), 0.5))


def test_the_recovery_action_is_a_number_with_its_name() -> None:
    got = metrics("xid_consequences")
    assert got[f'envdoctor_gpu_recovery_action{{{GPU0},action="none"}}'] == 0
    assert got[f'envdoctor_gpu_recovery_action{{{GPU1},action="gpu-reset"}}'] == 1


def test_a_driver_without_the_recovery_field_leaves_the_series_out_with_its_reason() -> None:
    gpu = {"uuid": "GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21", "recovery_action": "NotSupported"}
    got = metrics("healthy_h100", nvml={"gpus": [gpu]})
    assert not any(k.startswith("envdoctor_gpu_recovery_action{") for k in got)
    assert got[f'envdoctor_gpu_field_up{{{GPU0},field="recovery_action"}}'] == 0


def test_thresholds_and_margins_past_a_threshold_are_negative() -> None:
    got = metrics("thermal_shutdown")
    threshold = "envdoctor_gpu_temperature_threshold_celsius"
    assert got[f'{threshold}{{{GPU0},threshold="shutdown"}}'] == 92
    assert got[f'{threshold}{{{GPU0},threshold="slowdown"}}'] == 89
    assert got[f'{threshold}{{{GPU0},threshold="max_operating"}}'] == 87
    margin = "envdoctor_gpu_temperature_margin_celsius"
    assert got[f'{margin}{{{GPU0},threshold="shutdown"}}'] == 0
    assert got[f'{margin}{{{GPU0},threshold="slowdown"}}'] == -3
    assert got[f"envdoctor_gpu_sm_clock_hertz{{{GPU0}}}"] == 660e6
    assert got[f"envdoctor_gpu_sm_clock_max_hertz{{{GPU0}}}"] == 1980e6


def test_xid_counts_are_per_gpu_on_its_uuid() -> None:
    got = metrics("xid_consequences")
    xid = "envdoctor_gpu_xid_events_total"
    assert got[f'{xid}{{{GPU1},xid="45"}}'] == 3
    assert got[f'{xid}{{{GPU1},xid="48"}}'] == 1
    assert not any(k.startswith(f"{xid}{{{GPU0}") for k in got)


def test_volta_page_retirement_values() -> None:
    got = metrics("volta_retirement_pending")
    volta = 'gpu="0",uuid="GPU-2c7e41a0-58b9-4d13-a6f2-91e0b3c5d784",pci_bus_id="00000000:18:00.0"'
    assert got[f'envdoctor_gpu_retired_pages{{{volta},cause="single_bit_ecc"}}'] == 2
    assert got[f"envdoctor_gpu_retired_pages_pending{{{volta}}}"] == 1
    assert not any(k.startswith("envdoctor_gpu_row_remap_pending{") for k in got)
