"""slurm-healthcheck: scontrol output parsing, the drain/resume rules, and the CLI against a
recording scontrol shim (always runs; the real single-node Slurm is in test_slurm_integration)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.fleet.slurm import (
    MAX_REASON_BYTES,
    NodeState,
    Scontrol,
    SlurmError,
    clip_reason,
    decide,
    parse_show_node,
)
from envdoctor.platform.host import Deadline
from tests.conftest import PYTHON
from tests.fleet.slurm_fakes import FakeSlurm, SlurmHost
from tests.runner import invoke as cli_invoke

# Verbatim `scontrol show node vm` of Slurm 22.05.8 (Debian bookworm), drained by an operator.
SHOW_NODE_22_05 = (Path(__file__).parent / "data" / "scontrol-show-node-22.05.txt").read_text()
# The same node in `scontrol -o show node` (one line), drained by envdoctor.
SHOW_NODE_ONELINE = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.34 "
    "State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=debug  ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
    "Reason=envdoctor: gpu.lost GPU 3 fell off (+1 more) [root@2026-11-21T16:24:08]\n"
)


def test_parse_multi_line_output() -> None:
    node = parse_show_node(SHOW_NODE_22_05, "vm")
    assert node == NodeState("vm", "IDLE", frozenset({"DRAIN"}), "maintenance by ops")
    assert node.offline and not node.ours and not node.reboot_pending


def test_parse_one_line_output() -> None:
    node = parse_show_node(SHOW_NODE_ONELINE, "vm")
    assert node.reason == "envdoctor: gpu.lost GPU 3 fell off (+1 more)"
    assert node.ours and node.offline


def test_parse_states() -> None:
    idle = parse_show_node("   State=IDLE ThreadsPerCore=1\n", "n")
    assert not idle.offline and idle.reason == ""
    down = parse_show_node("   State=DOWN* ThreadsPerCore=1\n   Reason=Not responding\n", "n")
    assert down.base == "DOWN" and down.offline
    reboot = parse_show_node("   State=MIXED+DRAIN+REBOOT_REQUESTED\n", "n")
    assert reboot.reboot_pending
    with pytest.raises(SlurmError):
        parse_show_node("Node n not found\n", "n")


REASON = "envdoctor: gpu.lost: GPU 3 has fallen off the bus"


def node(base: str = "IDLE", *flags: str, reason: str = "") -> NodeState:
    return NodeState("n", base, frozenset(flags), reason)


@pytest.mark.parametrize(
    ("status", "state", "kind"),
    [
        ("unhealthy", node(), "drain"),
        ("unhealthy", node("MIXED"), "drain"),
        ("unhealthy", node("IDLE", "DRAIN", reason=REASON), "none"),  # same reason: nothing to do
        ("unhealthy", node("IDLE", "DRAIN", reason="envdoctor: gpu.memory-held: …"), "drain"),
        ("unhealthy", node("IDLE", "DRAIN", reason="maintenance by ops"), "none"),
        ("unhealthy", node("DOWN", reason="hw fault"), "none"),
        ("unhealthy", node("IDLE", "REBOOT_REQUESTED", reason="Reboot ASAP"), "none"),
        ("healthy", node("IDLE", "DRAIN", reason=REASON), "resume"),
        ("healthy", node("DOWN", reason=REASON), "resume"),
        ("healthy", node("IDLE", "DRAIN", reason="maintenance by ops"), "none"),  # never theirs
        ("healthy", node("IDLE", "DRAIN", "REBOOT_ISSUED", reason=REASON), "none"),
        ("healthy", node("IDLE", "DRAIN"), "none"),  # drained without a reason: not ours
        ("healthy", node(), "none"),
        ("unknown", node(), "none"),
        ("unknown", node("IDLE", "DRAIN", reason=REASON), "none"),
    ],
)
def test_drain_and_resume_rules(status: str, state: NodeState, kind: str) -> None:
    action = decide(status, state, REASON)
    assert action.kind == kind, action.why
    if kind == "drain":
        assert action.reason == REASON


def test_drain_on_unknown_is_opt_in() -> None:
    assert decide("unknown", node(), "envdoctor: x.y: z", drain_on_unknown=True).kind == "drain"


def test_reasons_are_one_prefixed_line_of_bounded_length() -> None:
    assert clip_reason("gpu.lost: a\nb") == "envdoctor: gpu.lost: a b"
    long = clip_reason("envdoctor: " + "é" * 200)
    assert long.startswith("envdoctor: ") and long.endswith("...")
    assert len(long.encode()) <= MAX_REASON_BYTES


# --- through a real executable (the shim) ------------------------------------------------------


@pytest.fixture
def fake_slurm(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm.create(tmp_path)


def healthcheck(fake: FakeSlurm, scenario: str, *args: str):  # type: ignore[no-untyped-def]  # click's Result
    host = SlurmHost(scenario, fake.environ)
    obj = AppContext(host=host, python=PYTHON)
    return cli_invoke(["slurm-healthcheck", *args], obj=obj)


def test_unhealthy_node_is_drained_with_an_envdoctor_reason(fake_slurm: FakeSlurm) -> None:
    result = healthcheck(fake_slurm, "gpu_lost")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("unhealthy: gpu.lost: ")
    assert lines[1] == "slurm: node gpu-node-17: draining (IDLE before)"
    assert fake_slurm.state["flags"] == ["DRAIN"]
    assert fake_slurm.state["reason"].startswith("envdoctor: gpu.lost: GPU 1 ")
    show, count, update = fake_slurm.calls
    assert show == ["show", "node", "gpu-node-17"]
    assert count == ["-o", "show", "node"]  # the drain budget counts the partition first
    assert update[:3] == ["update", "NodeName=gpu-node-17", "State=DRAIN"]
    assert update[3] == "Reason=" + fake_slurm.state["reason"]
    # The next run finds its own drain with the same reason and leaves it.
    again = healthcheck(fake_slurm, "gpu_lost")
    assert "already drained by envdoctor for the same reason" in again.output
    assert len(fake_slurm.calls) == 4


def test_healthy_again_resumes_only_its_own_drain(fake_slurm: FakeSlurm) -> None:
    fake_slurm.set(flags=["DRAIN"], reason="envdoctor: gpu.lost: GPU 1 has fallen off the bus")
    result = healthcheck(fake_slurm, "healthy_h100")
    assert result.exit_code == 0
    assert "resuming: healthy now" in result.output
    assert fake_slurm.calls[-1] == ["update", "NodeName=gpu-node-17", "State=RESUME"]
    assert fake_slurm.state["flags"] == []

    fake_slurm.set(flags=["DRAIN"], reason="rack 12 maintenance")
    result = healthcheck(fake_slurm, "healthy_h100")
    assert "offline for another reason (IDLE+DRAIN: rack 12 maintenance)" in result.output
    assert fake_slurm.calls[-1][:2] == ["show", "node"]  # no update of an operator's drain
    assert fake_slurm.state["reason"] == "rack 12 maintenance"


def test_operator_drain_is_never_overwritten(fake_slurm: FakeSlurm) -> None:
    fake_slurm.set(flags=["DRAIN"], reason="rack 12 maintenance")
    result = healthcheck(fake_slurm, "gpu_lost")
    assert result.exit_code == 1
    assert "offline by someone else (IDLE+DRAIN: rack 12 maintenance)" in result.output
    assert [c[0] for c in fake_slurm.calls] == ["show"]


def test_dry_run_reads_but_does_not_update(fake_slurm: FakeSlurm) -> None:
    result = healthcheck(fake_slurm, "gpu_lost", "--dry-run")
    assert "slurm: would run: " in result.output
    assert "State=DRAIN" in result.output
    assert "update" not in [c[0] for c in fake_slurm.calls]
    assert fake_slurm.state["flags"] == []


def test_node_name_from_option_and_from_slurmd(fake_slurm: FakeSlurm) -> None:
    fake_slurm.set(name="gpu042")
    assert healthcheck(fake_slurm, "gpu_lost", "--node", "gpu042").exit_code == 1
    assert fake_slurm.calls[0] == ["show", "node", "gpu042"]
    host = SlurmHost("gpu_lost", fake_slurm.environ, env={"SLURMD_NODENAME": "gpu042"})
    cli_invoke(["slurm-healthcheck"], obj=AppContext(host=host, python=PYTHON))
    assert fake_slurm.calls[-1][:2] == ["show", "node"] and fake_slurm.calls[3][2] == "gpu042"


def test_unknown_node_and_missing_scontrol_are_errors_not_tracebacks(
    fake_slurm: FakeSlurm, tmp_path: Path
) -> None:
    result = healthcheck(fake_slurm, "gpu_lost", "--node", "nosuch")
    assert result.exit_code == 1  # the verdict stands; Slurm could not be told
    assert (
        "envdoctor: error: slurm: `" in result.output and "Node nosuch not found" in result.output
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    host = SlurmHost("gpu_lost", {"PATH": str(empty)})
    result = cli_invoke(["slurm-healthcheck"], obj=AppContext(host=host, python=PYTHON))
    assert "scontrol is not on PATH" in result.output


NVCC = "/usr/local/cuda/bin/nvcc"
WITH_NVCC = {
    "which": {"nvcc": NVCC, "python3": PYTHON},
    "files": {NVCC: "#!/bin/sh\n"},
    "commands": [
        {"argv": [NVCC, "--version"], "stdout": "Cuda compilation tools, release 13.0, V13.0.88\n"}
    ],
}


def _children(host: SlurmHost) -> list[str]:
    """What the host was asked to run, by program name (the torch child as ``torch-child``)."""
    return [
        "torch-child" if any("ENVDOCTOR-TORCH-JSON" in a for a in argv) else argv[0].rsplit("/")[-1]
        for argv in host.ran
    ]


def test_no_nvcc_and_no_torch_unless_torch_is_asked_for(fake_slurm: FakeSlurm) -> None:
    """docs/fleet.md: slurm-healthcheck reads the node as check does, but runs nvcc and the
    torch child only for --python (or a spec that pins torch). `check` on the same host runs
    nvcc: the scenario really has one to run."""
    host = SlurmHost("healthy_h100", fake_slurm.environ, **WITH_NVCC)
    result = cli_invoke(["slurm-healthcheck"], obj=AppContext(host=host, python=PYTHON))
    assert result.exit_code == 0, result.output
    assert not {"nvcc", "torch-child"} & set(_children(host)), _children(host)

    asked = SlurmHost("healthy_h100", fake_slurm.environ, **WITH_NVCC)
    args = ["slurm-healthcheck", "--python", "python3"]
    cli_invoke(args, obj=AppContext(host=asked, python=PYTHON))
    assert {"nvcc", "torch-child"} <= set(_children(asked)), _children(asked)

    control = SlurmHost("healthy_h100", fake_slurm.environ, **WITH_NVCC)
    cli_invoke(["check"], obj=AppContext(host=control, python=PYTHON))
    assert "nvcc" in _children(control)


def test_hung_scontrol_is_killed_within_its_budget(fake_slurm: FakeSlurm) -> None:
    fake_slurm.set(sleep=30)
    host = SlurmHost("gpu_lost", fake_slurm.environ)
    client = Scontrol(host, str(fake_slurm.bin_dir / "scontrol"), Deadline(1.0))
    started = time.monotonic()
    with pytest.raises(SlurmError) as info:
        client.show_node("gpu-node-17")
    assert time.monotonic() - started < 5
    assert "did not finish within" in info.value.one_line()
    assert "slurmctld did not answer" in info.value.one_line()


def test_a_relative_scontrol_path_is_the_one_in_this_directory(
    fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--scontrol bin/scontrol names the file from where the command is typed, as --python
    does (the host runs no relative path: it would be read from its children's "/")."""
    monkeypatch.chdir(fake_slurm.bin_dir.parent)
    result = healthcheck(fake_slurm, "gpu_lost", "--scontrol", "bin/scontrol", "--node", "gpu042")
    assert result.exit_code == 1
    assert fake_slurm.calls and fake_slurm.calls[0] == ["show", "node", "gpu042"]
