"""The interconnect rules (issue 39, items 4-6) on recorded machines and their variations: the
GPU that matters is named, the healthy ones are not; the fix fits bare metal or a VM; what
could not be read keeps its reason."""

from __future__ import annotations

from typing import Any

from envdoctor.engine import Report
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.outcome import Outcome
from envdoctor.rules.links_data import link_data
from tests.conftest import report_of, scenario_facts

H100_0 = "GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21"
H100_1 = "GPU-7a1d4e2b-9c38-4f51-8e0a-2b6d1c9f4e73"


def report(name: str, **over: Any) -> Report:
    return report_of(scenario_facts(name, **over))


def finding(rep: Report, code: str) -> Finding:
    (found,) = [f for f in rep.findings if f.code == code]
    return found


def codes(rep: Report) -> set[str]:
    return {f.code for f in rep.findings}


def verdict(rep: Report, rule: str) -> tuple[Outcome, str]:
    (check,) = [c for c in rep.checks if c.rule.name == rule]
    return check.outcome, check.reason


# --- NVLink -----------------------------------------------------------------------------------


def test_the_gpu_with_links_down_is_named_and_the_healthy_one_is_not() -> None:
    rep = report("hgx_nvlink_down")
    down = finding(rep, "nvlink.links-down")
    assert down.severity == Severity.ERROR and down.subject == "1"
    assert "16 of its 18 NVLink links up" in down.title
    evidence = dict(down.evidence)
    assert evidence["links down"] == "3, 7"
    assert evidence["active links"] == "16 (16 to NVSwitches)"
    assert "https://www.nvidia.com/en-us/data-center/h100/" in evidence[down.evidence[0][0]]
    assert "GPU 0" not in down.title


def test_errors_climbing_within_the_run_warn_and_old_ones_are_a_note() -> None:
    rep = report("hgx_nvlink_down")
    growing = finding(rep, "nvlink.errors-growing")
    assert growing.subject == "1" and growing.severity == Severity.WARNING
    assert dict(growing.evidence)["link 5"].startswith("+28 CRC flit errors, +6 CRC data errors")
    counted = finding(rep, "nvlink.errors-counted")
    assert counted.subject == "0" and counted.severity == Severity.INFO
    assert dict(counted.evidence)["link 2"] == "4 replays, 1 recoveries"


def test_all_links_up_passes_and_says_what_was_read() -> None:
    links = [[n, True, 2, "00000000:A0:00.0", [0, 0, 0, 0]] for n in range(18)]
    rep = report("healthy_h100", nvml={"gpus": [{"uuid": H100_0, "nvlinks": links}]})
    assert not codes(rep) & {"nvlink.links-down", "nvlink.errors-growing"}
    outcome, reason = verdict(rep, "nvlink.links")
    assert outcome == Outcome.PASSED and "18 to NVSwitches" in reason


def test_a_pcie_board_is_held_to_no_link_count() -> None:
    links = [[0, False, -1, "", None]]
    rep = report(
        "healthy_h100",
        nvml={"gpus": [{"uuid": H100_0, "name": "NVIDIA H100 PCIe", "nvlinks": links}]},
    )
    assert "nvlink.links-down" not in codes(rep)
    outcome, reason = verdict(rep, "nvlink.links")
    assert outcome == Outcome.NOT_APPLICABLE and "NVIDIA H100 PCIe" in reason


def test_no_nvlink_at_all_is_not_applicable_with_nvmls_reason() -> None:
    outcome, reason = verdict(report("healthy_h100"), "nvlink.links")
    assert outcome == Outcome.NOT_APPLICABLE
    assert "NotSupported on link 0" in reason


def test_the_board_table_has_a_public_source_for_every_entry() -> None:
    data = link_data()
    assert data.board("NVIDIA H100 80GB HBM3").links == 18  # type: ignore[union-attr]
    assert data.board("NVIDIA A100-SXM4-80GB").links == 12  # type: ignore[union-attr]
    assert data.board("NVIDIA H200").links == 18  # type: ignore[union-attr]
    assert data.board("NVIDIA H200 NVL") is None  # a PCIe board: bridges are optional
    assert data.board("NVIDIA B200").link_gbps == 50  # type: ignore[union-attr]
    assert all(b.source.startswith("https://") for b in data.boards)


# --- P2P, topology, ACS, IOMMU -------------------------------------------------------------


def test_p2p_off_on_bare_metal_points_at_acs_and_the_iommu() -> None:
    rep = report("pcie_p2p_blocked")
    p2p = finding(rep, "p2p.unavailable")
    assert p2p.severity == Severity.WARNING and p2p.subject == "0,1"
    evidence = dict(p2p.evidence)
    assert evidence["machine"] == "bare metal"
    assert evidence["topology (nvidia-smi topo -m)"] == "GPU0      X   PXB | GPU1    PXB     X"
    steps = " ".join(p2p.remediation.steps if p2p.remediation else ())
    assert "pcie.acs-redirect" in steps and "iommu=pt" in steps
    acs = finding(rep, "pcie.acs-redirect")
    assert acs.severity == Severity.WARNING
    assert acs.remediation is not None
    assert acs.remediation.steps[:2] == (
        "sudo setpci -v -s 0000:17:00.0 ECAP_ACS+0x6.w=0000",
        "sudo setpci -v -s 0000:17:04.0 ECAP_ACS+0x6.w=0000",
    )  # the switch's downstream ports only: not its upstream port, not the root port
    iommu = finding(rep, "pcie.iommu-translated")
    assert iommu.remediation is not None
    assert 'add "intel_iommu=on iommu=pt"' in iommu.remediation.steps[0]
    every_step = " ".join(
        s for f in rep.findings for s in (f.remediation.steps if f.remediation else ())
    )
    assert "iommu=off" not in every_step.replace("never iommu=off", "")


def test_in_a_vm_acs_is_the_hosts_and_the_iommu_is_not_judged() -> None:
    rep = report("vm_p2p_blocked")
    acs = finding(rep, "pcie.acs-redirect")
    assert acs.severity == Severity.INFO
    steps = " ".join(acs.remediation.steps if acs.remediation else ())
    assert "setpci" not in steps and "ask your provider or host admin" in steps
    p2p = finding(rep, "p2p.unavailable")
    assert dict(p2p.evidence)["machine"] == "a VM"
    assert "the host's to give" in " ".join(p2p.remediation.steps if p2p.remediation else ())
    assert "pcie.iommu-translated" not in codes(rep)
    assert verdict(rep, "pcie.iommu")[0] == Outcome.NOT_APPLICABLE


def test_iommu_in_pass_through_mode_passes() -> None:
    cmdline = "BOOT_IMAGE=/vmlinuz root=UUID=1b2c ro intel_iommu=on iommu=pt\n"
    rep = report("pcie_p2p_blocked", files={"/proc/cmdline": cmdline})
    assert "pcie.iommu-translated" not in codes(rep)
    outcome, reason = verdict(rep, "pcie.iommu")
    assert outcome == Outcome.PASSED and "iommu=pt" in reason


def test_acs_past_64_bytes_is_roots_and_says_so() -> None:
    small = {"size": 64, "at": None}  # what a user other than root reads
    config = {
        f"/sys/bus/pci/devices/{b}/config": small
        for b in ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:17:04.0")
    }
    rep = report("pcie_p2p_blocked", pci_config=config)
    assert "pcie.acs-redirect" not in codes(rep)
    outcome, reason = verdict(rep, "pcie.acs")
    assert outcome == Outcome.UNKNOWN and "root only" in reason


def test_consumer_boards_without_p2p_are_a_note_not_an_alarm() -> None:
    gpus = [
        {"uuid": H100_0, "name": "NVIDIA GeForce RTX 4090", "peers": {"1": [2, 2, 5, 40]}},
        {"uuid": H100_1, "name": "NVIDIA GeForce RTX 4090", "pci_bus_id": "00000000:2A:00.0",
         "peers": {"0": [2, 2, 5, 40]}},
    ]  # fmt: skip
    rep = report("hgx_nvlink_down", nvml={"gpus": gpus})
    p2p = finding(rep, "p2p.unavailable")
    assert p2p.severity == Severity.INFO and "by design" in p2p.title


def test_one_gpu_has_no_pair_to_judge() -> None:
    outcome, reason = verdict(report("healthy_h100"), "p2p.status")
    assert outcome == Outcome.NOT_APPLICABLE and reason == "one GPU: no pair to check"


# --- PCIe -------------------------------------------------------------------------------------


def test_an_idle_gpu_below_its_generation_is_not_alarmed_and_the_verdict_says_why() -> None:
    rep = report(
        "healthy_h100",
        nvml={"gpus": [{"uuid": H100_0, "pcie_link": [1, 16, 5, 16], "utilization": [0, 0]}]},
    )
    assert "pcie.link-degraded" not in codes(rep)
    outcome, reason = verdict(rep, "pcie.link")
    assert outcome == Outcome.PASSED
    assert "GPU 0 Gen1 x16" in reason and "by design" in reason


def test_a_busy_gpu_below_its_generation_warns() -> None:
    rep = report("pcie_p2p_blocked")
    degraded = finding(rep, "pcie.link-degraded")
    assert degraded.subject == "0"
    assert dict(degraded.evidence)["link now"] == "Gen3 x16 (about 16 GB/s each way)"


def test_a_narrow_link_stays_gpu_pcie_degradeds_alone() -> None:
    rep = report(
        "healthy_h100",
        nvml={"gpus": [{"uuid": H100_0, "pcie_link": [4, 8, 5, 16], "utilization": [95, 50]}]},
    )
    assert "gpu.pcie-degraded" in codes(rep) and "pcie.link-degraded" not in codes(rep)


def test_replays_climbing_name_their_gpu_and_quiet_replays_pass() -> None:
    rep = report("pcie_p2p_blocked")
    assert finding(rep, "pcie.replays-growing").subject == "1"
    quiet = report("healthy_h100", nvml={"gpus": [{"uuid": H100_0, "pcie_replays": 7}]})
    assert "pcie.replays-growing" not in codes(quiet)
    outcome, reason = verdict(quiet, "pcie.errors")
    assert outcome == Outcome.PASSED and "no PCIe replay climbed in" in reason


def test_aer_errors_of_the_gpu_are_read_through_its_sysfs_path() -> None:
    aer = finding(report("pcie_p2p_blocked"), "pcie.aer-errors")
    assert aer.subject == "0"
    assert dict(aer.evidence)["AER counters"] == (
        "0 fatal, 2 non-fatal, 3 correctable (0000:18:00.0)"
    )


def test_the_probe_tier_reads_no_interconnect() -> None:
    """`envdoctor probe` (1 s budget) leaves the interconnect to check, and says so."""
    from envdoctor.platform.host import Deadline
    from envdoctor.probes import collect_facts
    from tests.conftest import PYTHON
    from tests.fakes.host import FakeHost

    facts = collect_facts(
        FakeHost.scenario("hgx_nvlink_down"), python=PYTHON, deadline=Deadline(5), fast=True
    )
    rep = report_of(facts)
    assert not {c for c in codes(rep) if c.startswith(("nvlink.", "p2p.", "pcie."))}
    outcome, reason = verdict(rep, "nvlink.links")
    assert outcome == Outcome.NOT_APPLICABLE and "probe tier" in reason
