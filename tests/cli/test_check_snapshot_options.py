"""`check --snapshot` refuses options that act on the live machine instead of the snapshot's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from envdoctor import smoke
from envdoctor.cli.common import AppContext
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke

SmokeCalls = list[tuple[str, float]]


@pytest.fixture
def smoke_calls(monkeypatch: pytest.MonkeyPatch) -> SmokeCalls:
    """Stands in for the smoke kernels (real child processes on this machine's GPUs)."""
    calls: SmokeCalls = []

    def fake_deep_findings(
        facts: Facts,
        *,
        python: str,
        timeout: float,
        on_step: Callable[[str, str], None] | None = None,
    ) -> tuple[Finding, ...]:
        calls.append((python, timeout))
        return ()

    monkeypatch.setattr(smoke, "deep_findings", fake_deep_findings)
    return calls


@pytest.fixture
def healthy_snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "healthy.json"
    result = cli_invoke(
        ["collect", "-o", str(snap)],
        obj=AppContext(host=FakeHost.scenario("healthy_h100"), python=PYTHON),
    )
    assert result.exit_code == 0, result.output
    return snap


def check_offline(snap: Path, *args: str) -> tuple[int, str, FakeHost]:
    """`check --snapshot` on a machine that has a broken driver: none of it may leak in."""
    here = FakeHost.scenario("driver_mismatch")
    result = cli_invoke(
        ["check", "--snapshot", str(snap), *args], obj=AppContext(host=here, python=PYTHON)
    )
    return result.exit_code, result.output, here


def test_snapshot_alone_is_judged_on_its_own_facts(healthy_snapshot: Path) -> None:
    code, out, here = check_offline(healthy_snapshot)
    assert code == 0, out
    assert here.ran == []


def test_deep_with_snapshot_is_a_usage_error(
    healthy_snapshot: Path, smoke_calls: SmokeCalls
) -> None:
    code, out, here = check_offline(healthy_snapshot, "--deep")
    assert code == 2
    assert out.count("\n") == 1
    assert out.startswith("envdoctor: error: --deep cannot be used with --snapshot")
    assert "smoke tests need the live machine" in out
    assert "UNHEALTHY" not in out
    assert smoke_calls == [] and here.ran == []


def test_python_with_snapshot_is_a_usage_error(healthy_snapshot: Path) -> None:
    code, out, here = check_offline(healthy_snapshot, "--python", "/nonexistent")
    assert code == 2
    assert out.count("\n") == 1
    assert out.startswith("envdoctor: error: --python cannot be used with --snapshot")
    assert "envdoctor collect --python PATH" in out
    assert here.ran == []


def test_deep_live_still_runs_the_smoke_tests(smoke_calls: SmokeCalls) -> None:
    """Only the combination is refused: `--deep` on the live machine runs as before."""
    host = FakeHost.scenario("healthy_h100")
    result = cli_invoke(["check", "--deep"], obj=AppContext(host=host, python=PYTHON))
    assert result.exit_code == 0, result.output
    assert smoke_calls == [(PYTHON, 30.0)]


@pytest.mark.parametrize("scenario", ["cpu_only", "container_no_gpu"])
def test_deep_on_a_machine_that_needs_no_gpu_exits_as_check_does(
    scenario: str, smoke_calls: SmokeCalls
) -> None:
    """Issue 37: `check --deep` exited 2 ("could not determine") on a CPU machine where `check`
    exits 0: there is nothing for the smoke tests to run on, which is a note, not a doubt."""
    host = FakeHost.scenario(scenario)
    plain = cli_invoke(["check", "--json"], obj=AppContext(host=host, python=PYTHON))
    deep = cli_invoke(["check", "--deep", "--json"], obj=AppContext(host=host, python=PYTHON))
    assert deep.exit_code == plain.exit_code, deep.output
    codes = {f["code"]: f for f in json.loads(deep.stdout)["findings"]}
    assert codes["smoke.not-applicable"]["severity"] == "info"
    assert "smoke.not-run" not in codes
    assert smoke_calls == []  # no child was started for GPUs that are not there
    expected = cli_invoke(
        ["check", "--deep", "--expect", "gpu"], obj=AppContext(host=host, python=PYTHON)
    )
    assert smoke_calls == [(PYTHON, 30.0)] and expected.exit_code == 1
