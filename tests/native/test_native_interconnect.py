"""The interconnect queries (issue 39, items 4-6) against the native NVML stand-in, through the
real nvidia-ml-py and envdoctor's NVML child: the C signatures of the NVLink, P2P, topology and
PCIe replay entry points, counters read twice within one run, and a link query that never
returns costing its GPU alone."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.native.conftest import NativeMachine

ROOT = Path(__file__).resolve().parents[2]
HGX = "gpus=2\ngpu.nvlinks=18\ngpu.1.nvlink_down=3,7\ngpu.1.nvlink_crc_flit=12\ngpu.1.nvlink_step=5"


def _wired(nvml: dict[str, Any]) -> list[dict[str, Any]]:
    wired = nvml["found"]["interconnect"]
    assert "found" in wired, wired
    return list(wired["found"]["gpus"])


def _findings(run_json: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in run_json["findings"] if f["code"] == code]


def _check(run_json: dict[str, Any], name: str) -> dict[str, Any]:
    (check,) = [c for c in run_json["checks"] if c["name"] == name]
    found: dict[str, Any] = check
    return found


def test_every_interconnect_function_is_reached_with_the_right_values(
    native: NativeMachine,
) -> None:
    nvml, run = native.facts(HGX)
    source = (ROOT / "envdoctor" / "platform" / "nvml_links.py").read_text(encoding="utf-8")
    for binding in sorted(set(re.findall(r"\b(nvmlDevice\w+)", source))):
        assert any(fn == binding or fn.startswith(binding + "_") for fn in run.functions()), binding
    gpu0, gpu1 = _wired(nvml)
    links = gpu1["links"]["found"]
    assert len(links) == 18
    assert [link["link"] for link in links if not link["active"]] == [3, 7]
    up = links[0]
    assert up["remote_type"] == "nvswitch" and up["remote_bus_id"] == "00000000:A0:00.0"
    assert up["errors"]["found"] == {"replay": 0, "recovery": 0, "crc_flit": 12, "crc_data": 0}
    later = dict(gpu1["errors_later"]["found"])
    assert later[0]["crc_flit"] == 17  # the stand-in's counter grew by 5 between the readings
    assert 3 not in later  # a link that is down is not read again
    assert gpu0["peers"]["found"] == [
        {"peer": 1, "read": "ok", "write": "ok", "nvlink": "ok", "level": "node"}
    ]
    assert gpu0["pcie_replays"]["found"] == 0


def test_check_names_the_gpu_with_links_down_and_errors_climbing(native: NativeMachine) -> None:
    run = native.run(HGX, "check", "--json", "--timeout", "30")
    assert run.returncode == 1, run.stderr
    data = run.json()
    (down,) = _findings(data, "nvlink.links-down")
    assert down["subject"] == "1" and down["severity"] == "error"
    assert "16 of its 18 NVLink links up" in down["title"]
    (growing,) = _findings(data, "nvlink.errors-growing")
    assert growing["subject"] == "1"
    assert "+5 CRC flit errors" in str(growing["evidence"])
    assert not _findings(data, "nvlink.errors-counted")  # GPU 0's counters are zero
    reason = _check(data, "p2p.status")["reason"]
    assert "GPU0      X  NV16 | GPU1   NV16     X" in reason  # through the NVSwitches


def test_p2p_refused_by_the_topology_and_direct_nvlink_peers(native: NativeMachine) -> None:
    run = native.run("gpus=2\ngpu.p2p=3\ngpu.topo=30", "check", "--json", "--timeout", "30")
    data = run.json()
    (p2p,) = _findings(data, "p2p.unavailable")
    assert p2p["severity"] == "warning" and p2p["subject"] == "0,1"
    assert "read topology-not-supported" in str(p2p["evidence"])
    assert "GPU0      X   PHB | GPU1    PHB     X" in str(p2p["evidence"])
    direct = "gpus=2\ngpu.name=NVIDIA H100 PCIe\ngpu.nvlinks=4\ngpu.nvlink_remote=gpu"
    data = native.run(direct, "check", "--json", "--timeout", "30").json()
    assert "GPU0      X   NV4 | GPU1    NV4     X" in _check(data, "p2p.status")["reason"]
    assert not _findings(data, "nvlink.links-down")  # a PCIe board: bridges are optional


def test_pcie_replays_climbing_while_envdoctor_runs(native: NativeMachine) -> None:
    scenario = "gpus=1\ngpu.pcie_replay=10\ngpu.pcie_replay_step=7"
    data = native.run(scenario, "check", "--json", "--timeout", "30").json()
    (replays,) = _findings(data, "pcie.replays-growing")
    assert replays["subject"] == "0"
    assert "10 → 17 in " in str(replays["evidence"])


def test_a_link_query_that_never_returns_costs_its_gpu_alone(native: NativeMachine) -> None:
    scenario = "gpus=3\ngpu.nvlinks=18\nblock.nvmlDeviceGetNvLinkState.1=1"
    run = native.run(scenario, "check", "--json", "--timeout", "30")
    assert run.seconds < 30
    data = run.json()
    (hung,) = _findings(data, "gpu.not-responding")
    assert hung["subject"] == "1"
    assert "nvmlDeviceGetNvLinkState" in str(hung)
    assert not _findings(data, "nvlink.links-down")  # GPUs 0 and 2 have all their links
    nvml, _ = native.facts(scenario)
    gpu0, gpu1, gpu2 = _wired(nvml)
    assert len(gpu0["links"]["found"]) == 18 and len(gpu2["links"]["found"]) == 18
    assert gpu1["links"]["failed"] == "NotResponding"
    assert [p["peer"] for p in gpu0["peers"]["found"]] == [2]  # GPU 1 is left out of every pair
