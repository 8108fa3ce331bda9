"""slurm-healthcheck's drain budget (fleet/drain_guard.py): a false alarm on every node must not
drain more than the configured share of a partition within the window; a refusal leaves the node
alone, says what a person runs, and is counted in the node's state file, whatever that file
held before (corrupt, hostile) and however many runs race for it."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.fleet import drain_guard
from envdoctor.fleet.drain_guard import Budget, budget_from, judge, parse_node_list
from envdoctor.fleet.slurm import Scontrol, apply
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import Deadline
from tests.conftest import PYTHON
from tests.fleet.slurm_fakes import FakeSlurm, SlurmHost
from tests.runner import invoke as cli_invoke

NOW = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
TWO_HOURS_AGO = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 7200))


def others(count: int, *, drained: int = 0, stamp: str = NOW, reason: str = "") -> list[Any]:
    """``count`` other nodes of the partition, the first ``drained`` of them drained by
    envdoctor (or with ``reason``) at ``stamp``."""
    nodes = []
    for n in range(count):
        node: dict[str, Any] = {"name": f"gpu{n:03d}"}
        if n < drained:
            node.update(
                flags=["DRAIN"], reason=reason or "envdoctor: gpu.lost: GPU 2 fell", stamp=stamp
            )
        nodes.append(node)
    return nodes


def state_of(fake: FakeSlurm) -> dict[str, Any]:
    path = Path(fake.environ["ENVDOCTOR_STATE_DIR"]) / drain_guard.STATE_FILE
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def healthcheck(fake: FakeSlurm, scenario: str = "gpu_lost", *args: str, **env: str):  # type: ignore[no-untyped-def]  # click's Result
    host = SlurmHost(scenario, fake.environ, env=env) if env else SlurmHost(scenario, fake.environ)
    return cli_invoke(["slurm-healthcheck", *args], obj=AppContext(host=host, python=PYTHON))


@pytest.fixture
def fake(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm.create(tmp_path)


def test_a_tenth_of_the_partition_drained_within_the_hour_refuses_the_next_drain(
    fake: FakeSlurm,
) -> None:
    fake.set(others=others(19, drained=2))  # 20 nodes: 2 allowed, 2 already drained
    result = healthcheck(fake)
    assert result.exit_code == 1  # the verdict stands: the node is unhealthy
    line = result.output.splitlines()[1]
    assert "refused to drain: envdoctor drained 2 of the 20 nodes of partition debug" in line
    assert "the limit is 2 (10 % of 20, at least 1); refusal 1 on this node" in line
    assert "a person drains it: " in line and "State=DRAIN" in line
    assert fake.state["flags"] == []  # the node is left as it was
    assert "update" not in [c[0] for c in fake.calls]
    saved = state_of(fake)
    assert saved["refusals"] == 1
    assert saved["recent_refusals"][0]["node"] == "gpu-node-17"
    assert healthcheck(fake).exit_code == 1
    assert state_of(fake)["refusals"] == 2  # counted, not overwritten


def test_within_the_budget_the_node_is_drained_and_recorded(fake: FakeSlurm) -> None:
    fake.set(others=others(19, drained=1))
    result = healthcheck(fake)
    assert "draining (IDLE before)" in result.output
    assert fake.state["flags"] == ["DRAIN"]
    assert state_of(fake)["drains"][0]["node"] == "gpu-node-17"


def test_old_drains_and_operators_drains_do_not_count(fake: FakeSlurm) -> None:
    old = others(5, drained=5, stamp=TWO_HOURS_AGO)
    operator = [
        {**n, "name": f"op{i}"} for i, n in enumerate(others(5, drained=5, reason="rack 3 PDU"))
    ]
    fake.set(others=[*old, *operator, *others(9)])
    assert "draining" in healthcheck(fake).output


def test_a_small_partition_may_always_drain_one_node(fake: FakeSlurm) -> None:
    fake.set(others=others(2))  # 3 nodes: 10 % is 0.3, but one drain is always allowed
    assert "draining" in healthcheck(fake).output
    fake.set(flags=[], reason="", others=others(2, drained=1))
    assert "refused to drain" in healthcheck(fake).output


def test_every_partition_of_the_node_is_held_to_the_budget(fake: FakeSlurm) -> None:
    small = [{**n, "partitions": "debug,a100"} for n in others(1, drained=1)]
    large = [{**n, "name": f"big{i}", "partitions": "debug"} for i, n in enumerate(others(30))]
    fake.set(partitions="debug,a100", others=[*small, *large])
    out = healthcheck(fake).output
    assert "refused to drain: envdoctor drained 1 of the 2 nodes of partition a100" in out


def test_share_and_window_from_the_environment(fake: FakeSlurm) -> None:
    fake.set(others=others(19, drained=2))
    assert "draining" in healthcheck(fake, ENVDOCTOR_DRAIN_MAX_SHARE="25%").output
    fake.set(flags=[], reason="", others=others(19, drained=2, stamp=TWO_HOURS_AGO))
    out = healthcheck(fake, ENVDOCTOR_DRAIN_WINDOW="10800").output
    assert "refused to drain" in out and "within 3 h" in out
    fake.set(flags=[], reason="")
    result = healthcheck(fake, ENVDOCTOR_DRAIN_MAX_SHARE="lots")
    assert result.exit_code == 2
    assert "drain budget: 'lots' is not a number" in result.output
    assert [c[0] for c in fake.calls].count("update") == 1  # the usage error touched nothing


def test_share_one_turns_the_budget_off(fake: FakeSlurm) -> None:
    fake.set(others=others(3, drained=3))
    assert "draining" in healthcheck(fake, ENVDOCTOR_DRAIN_MAX_SHARE="1").output
    assert ["-o", "show", "node"] not in fake.calls


def test_a_partition_that_cannot_be_counted_is_not_drained(fake: FakeSlurm) -> None:
    bad = fake.bin_dir / "scontrol"
    text = bad.read_text().replace('if args == ["-o", "show", "node"]:', "if False:")
    bad.write_text(text)
    out = healthcheck(fake).output
    assert "refused to drain: the partition's drains could not be counted" in out
    assert fake.state["flags"] == []


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff not json",
        b"[1, 2, 3]",
        b'{"refusals": "many", "drains": {"a": 1}, "recent_refusals": [1, {"time": "x"}]}',
        b'{"refusals": 1e400, "drains": [{"time": 1e999, "node": "x", "reason": ""}]}',
        b"{" * 100000,
    ],
)
def test_a_corrupt_state_file_is_started_afresh_and_the_budget_still_holds(
    fake: FakeSlurm, content: bytes
) -> None:
    state = Path(fake.environ["ENVDOCTOR_STATE_DIR"])
    state.mkdir(mode=0o700)
    path = state / drain_guard.STATE_FILE
    path.write_bytes(content)
    path.chmod(0o600)
    fake.set(others=others(9, drained=1))
    assert "refused to drain" in healthcheck(fake).output
    saved = state_of(fake)
    assert saved["refusals"] == 1 and len(saved["recent_refusals"]) == 1


def test_a_symlinked_state_file_is_neither_read_nor_written_through(
    fake: FakeSlurm, tmp_path: Path
) -> None:
    target = tmp_path / "precious"
    target.write_text("do not touch\n")
    state = Path(fake.environ["ENVDOCTOR_STATE_DIR"])
    state.mkdir(mode=0o700)
    (state / drain_guard.STATE_FILE).symlink_to(target)
    (state / drain_guard.LOCK_FILE).symlink_to(target)
    fake.set(others=others(9, drained=1))
    out = healthcheck(fake).output
    assert "refused to drain" in out and "could not be locked or used" in out
    assert target.read_text() == "do not touch\n"


def test_a_state_directory_open_to_others_is_not_used(fake: FakeSlurm) -> None:
    state = Path(fake.environ["ENVDOCTOR_STATE_DIR"])
    state.mkdir()
    state.chmod(0o777)
    fake.set(others=others(9, drained=1))
    assert "could not be locked or used" in healthcheck(fake).output
    assert not (state / drain_guard.STATE_FILE).exists()


def test_concurrent_refusals_are_each_counted(fake: FakeSlurm) -> None:
    """Eight runs at once on one node: the lock serialises the read-modify-write, so no count
    is lost (without it, the last writer's count would be 1)."""
    fake.set(others=others(9, drained=1))
    host = SlurmHost("gpu_lost", fake.environ)
    cache = CacheDir(fake.environ["ENVDOCTOR_STATE_DIR"])
    outcomes: list[str] = []

    def one() -> None:
        client = Scontrol(host, str(fake.bin_dir / "scontrol"), Deadline(30))
        action, _ = apply(
            client, "gpu-node-17", "unhealthy", "envdoctor: gpu.lost", budget=Budget(),
            state=cache, lock_timeout=30,
        )  # fmt: skip
        outcomes.append(action.kind)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes == ["refused"] * 8
    assert state_of(fake)["refusals"] == 8


def test_a_second_run_counts_the_first_runs_drain_when_slurm_gives_no_time(
    tmp_path: Path,
) -> None:
    """A drain reason without Slurm's stamp counts from the state file's record of it, and
    one whose time is known nowhere is counted (the safe side)."""
    listing = (
        "NodeName=a State=IDLE+DRAIN Partitions=p Reason=envdoctor: gpu.lost\n"
        "NodeName=b State=IDLE Partitions=p\n"
        "NodeName=c State=IDLE+DRAIN Partitions=p Reason=envdoctor: x [root@2001-01-01T00:00:00]\n"
    )
    nodes = parse_node_list(listing)
    assert [n.since is None for n in nodes] == [True, True, False]
    now = time.time()
    assert judge(nodes, "b", Budget(0.1, 3600), now).refused  # a: no time known, counted
    old = {"a": now - 7200}
    assert not judge(nodes, "b", Budget(0.1, 3600), now, own_drains=old).refused


def test_budget_values() -> None:
    def get(values: dict[str, str]) -> Any:
        return lambda dest, default: values.get(dest, default)

    assert budget_from(get({}), {}) == Budget(0.10, 3600.0)
    assert budget_from(get({"drain_max_share": "5%"}), {}).max_share == pytest.approx(0.05)
    assert budget_from(get({}), {"ENVDOCTOR_DRAIN_WINDOW": "600"}).window == 600
    assert budget_from(get({"drain_window": "60"}), {"ENVDOCTOR_DRAIN_WINDOW": "600"}).window == 60
    for bad in ("-0.1", "1.5", "nan", "inf", "ten"):
        with pytest.raises(ValueError):
            budget_from(get({"drain_max_share": bad}), {})
    assert Budget(0.1).allowed(512) == 51
    assert Budget(0.1).allowed(3) == 1
    assert Budget(0.0).allowed(100) == 1


def test_state_dir_defaults() -> None:
    assert drain_guard.state_dir({}) == "/var/lib/envdoctor"
    assert drain_guard.state_dir({"STATE_DIRECTORY": "/var/lib/envdoctor-x:/b"}) == (
        "/var/lib/envdoctor-x"
    )
    assert drain_guard.state_dir({"ENVDOCTOR_STATE_DIR": "relative"}) == "/var/lib/envdoctor"
    assert os.path.isabs(drain_guard.state_dir({"ENVDOCTOR_STATE_DIR": "/s/"}))
