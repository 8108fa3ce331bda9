"""The interconnect's Prometheus families (issue 39): per GPU with gpu_metrics' labels, the
values of the facts, nothing written where nothing was read."""

from __future__ import annotations

from envdoctor.render.prometheus import render_prometheus
from tests.conftest import report_of, scenario_facts
from tests.fleet.test_prometheus import samples

GPU0 = 'gpu="0",uuid="GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21",pci_bus_id="00000000:18:00.0"'
GPU1_HGX = 'gpu="1",uuid="GPU-7a1d4e2b-9c38-4f51-8e0a-2b6d1c9f4e73",pci_bus_id="00000000:2A:00.0"'
GPU1_PCIE = 'gpu="1",uuid="GPU-7a1d4e2b-9c38-4f51-8e0a-2b6d1c9f4e73",pci_bus_id="00000000:1A:00.0"'
PEER1 = 'peer="1",peer_uuid="GPU-7a1d4e2b-9c38-4f51-8e0a-2b6d1c9f4e73"'


def metrics(scenario: str) -> dict[str, float]:
    return samples(render_prometheus(report_of(scenario_facts(scenario)), 0.5))


def test_nvlink_links_and_errors_per_gpu() -> None:
    got = metrics("hgx_nvlink_down")
    assert got[f'envdoctor_gpu_nvlink_links{{{GPU1_HGX},state="active"}}'] == 16
    assert got[f'envdoctor_gpu_nvlink_links{{{GPU1_HGX},state="inactive"}}'] == 2
    assert got[f"envdoctor_gpu_nvlink_expected_links{{{GPU1_HGX}}}"] == 18
    # the later reading of the run: the counter as it stood when envdoctor finished
    assert got[f'envdoctor_gpu_nvlink_errors_total{{{GPU1_HGX},counter="crc_flit"}}'] == 40
    assert got[f'envdoctor_gpu_nvlink_errors_total{{{GPU0},counter="recovery"}}'] == 1


def test_p2p_topology_replays_and_aer() -> None:
    got = metrics("pcie_p2p_blocked")
    assert got[f'envdoctor_gpu_peer_access_ok{{{GPU0},{PEER1},capability="read"}}'] == 0
    assert got[f'envdoctor_gpu_topology_info{{{GPU0},{PEER1},level="PXB"}}'] == 1
    assert got[f"envdoctor_gpu_pcie_replays_total{{{GPU1_PCIE}}}"] == 25
    assert got[f'envdoctor_gpu_pcie_aer_errors_total{{{GPU0},severity="nonfatal"}}'] == 2
    assert not any(name.startswith("envdoctor_gpu_nvlink_links") for name in got)  # no NVLink


def test_nothing_is_made_up_where_nothing_was_read() -> None:
    got = metrics("healthy_h100")
    assert got[f"envdoctor_gpu_interconnect_up{{{GPU0}}}"] == 1
    assert not any("nvlink" in name or "aer" in name for name in got)
    assert not any(
        name.startswith("envdoctor_gpu_peer_access_ok") for name in got
    )  # one GPU: no pair
