"""The interconnect probes on what sysfs and NVML may hand over: config space that loops, is cut
short or is root's; AER files of another shape; the IOMMU words; a NVLink query past the last
link; and a snapshot that keeps it all."""

from __future__ import annotations

from typing import Any

import pytest

from envdoctor.model.interconnect import AerCounts
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.nvml_links import MAX_LINKS, PynvmlInterconnect
from envdoctor.probes.interconnect import _acs, _aer, probe_pci_paths, sysfs_name
from envdoctor.snapshot import dump_snapshot, parse_snapshot
from tests.conftest import scenario_facts
from tests.fakes.host import FakeHost

CONFIG = "/sys/bus/pci/devices/0000:17:00.0/config"


def host_with(
    config: dict[str, Any] | None = None, files: dict[str, str] | None = None
) -> FakeHost:
    return FakeHost({"pci_config": {CONFIG: config} if config else {}, "files": files or {}})


def test_the_acs_control_word_is_found_down_the_capability_list() -> None:
    # AER (0x0001) at 0x100 pointing at 0x148, ACS (0x000d) there
    host = host_with({"at": {"0x100": "01008214", "0x148": "0d000100 5f00 0400"}})
    assert _acs(host, "0000:17:00.0") == Found(0x0004)


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ({"size": 64}, "readable by root only"),
        ({"size": 256}, "no PCIe extended configuration space"),
        ({"at": {"0x100": "01000010"}}, "no ACS capability"),  # next → itself: a loop
        ({"at": {"0x100": "ffffffff"}}, "no ACS capability"),  # a device that fell off
        ({"at": {"0x100": "0100f0ff"}}, "no ACS capability"),  # next past the end
    ],
)
def test_config_space_that_is_short_loops_or_lies_is_absent_with_why(
    layout: dict[str, Any], why: str
) -> None:
    found = _acs(host_with(layout), "0000:17:00.0")
    assert isinstance(found, Absent) and why in found.reason


def test_aer_totals_and_other_shapes() -> None:
    device = "/sys/devices/pci0000:15/0000:18:00.0"
    files = {
        f"{device}/aer_dev_correctable": "RxErr 2\nBadTLP 1\nTOTAL_ERR_COR 3\n",
        # no TOTAL line (an older kernel's file): the counts are summed
        f"{device}/aer_dev_nonfatal": "DLP 1\nCmpltTO 2\n",
        f"{device}/aer_dev_fatal": "garbage\nTOTAL_ERR_FATAL x\n\x00\x01",
    }
    assert _aer(FakeHost({"files": files}), device) == Found(AerCounts(3, 3, 0))
    missing = _aer(FakeHost({}), device)
    assert isinstance(missing, Absent) and "no AER counters" in missing.reason


def test_a_gpu_missing_from_sysfs_keeps_the_reason() -> None:
    paths = probe_pci_paths(FakeHost({}), ("00000000:18:00.0", "not-an-address"))
    assert isinstance(paths, Found)
    first, second = paths.value.gpus
    assert isinstance(first.bridges, Absent) and "not in sysfs" in first.bridges.reason
    assert isinstance(second.bridges, ProbeFailed)
    assert probe_pci_paths(FakeHost({}), ()) == Absent("no GPU whose PCIe path to read")


def test_sysfs_names_from_nvml_bus_ids() -> None:
    assert sysfs_name("00000000:1A:00.0") == "0000:1a:00.0"
    assert sysfs_name("00000001:3b:1f.3") == "0001:3b:1f.3"
    assert sysfs_name("nonsense") is None


class FakeNvmlModule:
    """A pynvml with ``links`` NVLink links (NotSupported on link 0 when 0)."""

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

    def __init__(self, links: int, past_the_end: int = 2) -> None:
        self.links = links
        self.past_the_end = past_the_end
        self.asked: list[int] = []

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:  # noqa: N802 (NVML's name)
        self.asked.append(link)
        if self.links == 0:
            raise self.NVMLError(3)
        if link >= self.links:
            raise self.NVMLError(self.past_the_end)
        return 1

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:  # noqa: N802
        return type("Pci", (), {"busId": b"00000000:A0:00.0"})()

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:  # noqa: N802
        raise self.NVMLError(3)


class Session(PynvmlInterconnect):
    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml

    def _q(self, index: int, fn: Any) -> Any:
        return fn(object())

    def _handle(self, index: int) -> Any:
        return object()


@pytest.mark.parametrize("past_the_end", [2, 3])  # InvalidArgument or NotSupported
def test_links_are_read_up_to_the_last_one_the_gpu_has(past_the_end: int) -> None:
    nvml = FakeNvmlModule(18, past_the_end)
    rows = Session(nvml).nvlinks(0)
    assert rows is not None and len(rows) == 18
    assert rows[0] == (0, True, 2, "00000000:A0:00.0", None)  # counters refused: None
    assert nvml.asked[-1] == 18 < MAX_LINKS


def test_no_nvlink_is_none_after_one_question() -> None:
    nvml = FakeNvmlModule(0)
    assert Session(nvml).nvlinks(0) is None
    assert nvml.asked == [0]


def test_a_snapshot_keeps_the_interconnect() -> None:
    facts = scenario_facts("pcie_p2p_blocked")
    again = parse_snapshot(dump_snapshot(facts, redact=False), where="snapshot.json")
    assert again.pci_paths == facts.pci_paths
    assert isinstance(again.nvml, Found) and isinstance(facts.nvml, Found)
    assert again.nvml.value.interconnect == facts.nvml.value.interconnect
