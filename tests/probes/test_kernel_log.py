"""Xid events from the kernel log: /dev/kmsg records, the journal, and why a source is unreadable."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from envdoctor.model.facts import KernelLog
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes.kernel_log import (
    JOURNAL,
    MAX_XID_KINDS,
    MESSAGE_CHARS,
    parse_journal,
    parse_kmsg,
    probe_kernel_log,
)
from tests.fakes.host import FakeHost

TRACEBACKS = Path(__file__).parents[1] / "data" / "tracebacks"
RECORD = re.compile(r"^\d+,\d+,\d+,[^;]*;")


def fixture_lines(name: str) -> list[str]:
    """The verbatim log lines of a recorded fixture (its header names the source)."""
    text = (TRACEBACKS / name).read_text(encoding="utf-8")
    return text.split("# ---\n", 1)[1].splitlines()


def as_kmsg(lines: list[str], first_seq: int = 0) -> str:
    """``dmesg`` lines ("[  170.053881] text") as the /dev/kmsg records they were read from."""
    records = []
    for seq, line in enumerate(lines, start=first_seq):
        match = re.match(r"^\[\s*(\d+)\.(\d{6})\]\s?(.*)$", line)
        usec, text = (
            (int(match.group(1)) * 10**6 + int(match.group(2)), match.group(3))
            if match
            else (0, line)
        )
        records.append(f"4,{seq},{usec},-;{text}")
    return "\n".join(records) + "\n"


def test_kmsg_records_give_each_xid_with_counts_and_times() -> None:
    # autumnai/collenchyma-blas#14: three Xid 31 lines from a failing CUDA test run.
    log = parse_kmsg(as_kmsg(fixture_lines("kernel.xid/collenchyma-blas-14.txt")))
    assert log.source == "/dev/kmsg" and log.complete
    (xid31,) = log.xids
    assert (xid31.device, xid31.xid, xid31.count) == ("0000:01:00", 31, 3)
    assert (xid31.first_seconds, xid31.last_seconds) == (170.053881, 391.163575)
    assert xid31.last_message == (
        "NVRM: Xid (PCI:0000:01:00): 31, Ch 00000019, engmask 00000101, intr 10000000"
    )


def test_a_log_that_lost_its_first_records_is_not_complete() -> None:
    text = as_kmsg(fixture_lines("kernel.xid/pytorch-74235.txt"), first_seq=48211)
    log = parse_kmsg(text)
    assert not log.complete
    assert [(e.xid, e.count) for e in log.xids] == [(109, 1)]


def test_continuation_lines_and_malformed_records_are_not_events() -> None:
    text = (
        "6,0,0,-;Linux version 6.8.0\n"
        " SUBSYSTEM=pci\n"
        " NVRM: Xid (PCI:0000:01:00): 79, in a key=value line\n"
        "garbage without a header; NVRM: Xid (PCI:0000:01:00): 79, x\n"
        "4,x,y,-;NVRM: Xid (PCI:0000:01:00): 79, bad numbers\n"
        "4,7,1000000,-;NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    log = parse_kmsg(text)
    assert [(e.xid, e.count, e.first_seconds) for e in log.xids] == [(79, 1, 1.0)]


@pytest.mark.parametrize(
    ("line", "device", "xid"),
    [
        # tests/data/tracebacks/kernel.xid/pytorch-74235.txt (pytorch/pytorch#74235)
        (
            "NVRM: Xid (PCI:0000:01:00): 109, pid=4124, name=python, Ch 00000028, errorString CTX SWITCH TIMEOUT, Info 0x2c014",
            "0000:01:00",
            109,
        ),
        # the old spelling without "PCI:" (envdoctor/kb/signatures/driver.yaml's example)
        (
            "Nov 22 18:29:55 hostname kernel: [ 966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000",
            "0000:01:00",
            31,
        ),
        ("NVRM: Xid (PCI:0000:3b:00.0): 48, DBE", "0000:3b:00.0", 48),
        ("NVRM: Xid 154, GPU recovery action changed to 0x2 (Node Reboot Required)", "", 154),
    ],
)
def test_xid_spellings(line: str, device: str, xid: int) -> None:
    (events,) = parse_kmsg(f"4,0,5,-;{line}\n").xids
    assert (events.device, events.xid) == (device, xid)


def test_hostile_lines_are_bounded_and_never_crash() -> None:
    huge = "NVRM: Xid (PCI:0000:01:00): 13, " + "A" * 100_000
    binary = "NVRM: Xid (PCI:0000:01:00): 31, \ufffd\ufffd\x00\x1b[31m"
    not_a_number = "NVRM: Xid (PCI:0000:01:00): 123456789, too long to be an Xid"
    log = parse_kmsg(
        "".join(f"4,{i},1,-;{t}\n" for i, t in enumerate((huge, binary, not_a_number)))
    )
    assert sorted(e.xid for e in log.xids) == [13, 31]
    assert all(len(e.last_message) <= MESSAGE_CHARS for e in log.xids)


def test_a_flood_of_distinct_codes_keeps_a_bounded_tally() -> None:
    text = "".join(f"4,{i},1,-;NVRM: Xid (PCI:0000:01:00): {i}, x\n" for i in range(1, 1000))
    assert len(parse_kmsg(text).xids) == MAX_XID_KINDS


def test_journal_lines_newest_first_are_put_back_in_order() -> None:
    text = (
        "[ 5012.204131] node kernel: NVRM: Xid (PCI:0000:18:00): 48, pid=1, second\n"
        "[  900.000001] node kernel: NVRM: Xid (PCI:0000:18:00): 48, pid=1, first\n"
        "-- No entries --\n"
        "[    0.000000] node kernel: Linux version 6.8.0\n"
    )
    log = parse_journal(text)
    (xid48,) = log.xids
    assert (xid48.count, xid48.first_seconds, xid48.last_seconds) == (2, 900.000001, 5012.204131)
    assert xid48.last_message.endswith("second")
    assert log.complete


def test_a_journal_whose_oldest_line_is_late_is_not_complete() -> None:
    assert not parse_journal("[ 7200.5] node kernel: some message\n").complete


def test_the_probe_tier_reads_kmsg_only_and_says_why_it_could_not() -> None:
    host = FakeHost.scenario("kernel_log_unreadable")
    log = probe_kernel_log(host, deadline=Deadline(5), fast=True)
    assert isinstance(log, ProbeFailed)
    assert "/dev/kmsg: permission denied reading /dev/kmsg (kernel.dmesg_restrict = 1" in log.detail
    assert "journalctl -k: not read by the probe tier" in log.detail
    assert host.ran == []  # no process at all


def test_the_journal_refusing_a_user_outside_adm_is_named() -> None:
    log = probe_kernel_log(
        FakeHost.scenario("kernel_log_unreadable"), deadline=Deadline(5), fast=False
    )
    assert isinstance(log, ProbeFailed)
    assert "journalctl -k: this user may not read the system journal" in log.detail


def test_the_journal_is_read_when_kmsg_is_not() -> None:
    log = probe_kernel_log(FakeHost.scenario("xid_in_journal"), deadline=Deadline(5), fast=False)
    assert isinstance(log, Found)
    assert log.value.source == "journalctl -k -b" and log.value.complete
    assert sorted(e.xid for e in log.value.xids) == [48, 63]
    ((source, why),) = log.value.unread
    assert source == "/dev/kmsg" and "dmesg_restrict" in why


def journal(**result: object) -> dict[str, object]:
    """A scenario override: what `journalctl -k -b …` answers."""
    return {"commands": [{"argv": list(JOURNAL), **result}]}


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"which": {"journalctl": None}}, "journalctl is not installed"),
        (journal(stdout=""), "the journal holds no kernel message of this boot"),
        (journal(status="timeout"), "did not finish"),
    ],
)
def test_journal_failures_keep_their_reason(overrides: dict[str, object], reason: str) -> None:
    host = FakeHost.scenario("xid_in_journal", **overrides)
    log = probe_kernel_log(host, deadline=Deadline(5), fast=False)
    assert isinstance(log, ProbeFailed) and reason in log.detail


def test_no_kmsg_in_a_container_says_so() -> None:
    host = FakeHost.scenario("healthy_h100", kmsg=None)
    log = probe_kernel_log(host, deadline=Deadline(5), fast=True)
    assert isinstance(log, ProbeFailed)
    assert "/dev/kmsg does not exist (a container without the host's /dev/kmsg?)" in log.detail


# --- the real /dev/kmsg -------------------------------------------------------------------------


def test_the_real_kmsg_is_read_without_waiting_for_new_messages() -> None:
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here (kernel.dmesg_restrict, or a container)")
    started = time.monotonic()
    text = SystemHost().read_kmsg()
    assert time.monotonic() - started < 5  # a blocking read would wait for the next message
    assert isinstance(text, Found) and text.value
    headers = [line for line in text.value.splitlines() if not line.startswith(" ")]
    assert all(RECORD.match(line) for line in headers), headers[:3]
    assert isinstance(parse_kmsg(text.value), KernelLog)


def test_kmsg_under_a_root_is_read_there_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text("6,0,0,-;hello\n" * 1000)
    host = SystemHost(root=str(tmp_path))
    assert host.read_kmsg(limit=28) == Found("6,0,0,-;hello\n" * 2)
    assert isinstance(SystemHost(root=str(tmp_path / "nowhere")).read_kmsg(), Absent)


def test_kmsg_that_is_a_fifo_without_a_writer_does_not_block(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    os.mkfifo(tmp_path / "dev" / "kmsg")
    started = time.monotonic()
    assert SystemHost(root=str(tmp_path)).read_kmsg() == Found("")
    assert time.monotonic() - started < 2
