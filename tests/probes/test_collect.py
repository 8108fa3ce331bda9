"""``collect_facts`` overlaps its waits (issue 15): the caller's loading and the other probes run while
the torch child starts, nvcc beside them."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from envdoctor.model.facts import TorchFacts
from envdoctor.model.probed import Absent
from envdoctor.platform.host import Deadline
from envdoctor.probes import collect_facts, torch_probe
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost


def test_meanwhile_overlaps_the_torch_child_and_its_error_still_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, loaded, finished = threading.Event(), threading.Event(), threading.Event()

    def torch_child(*_: object, **__: object) -> TorchFacts:
        started.set()
        # what the child found: whether the caller's loading ran while it was still running
        seen = "overlapped" if loaded.wait(5) else "ran alone"
        finished.set()
        return TorchFacts(python=PYTHON, torch=Absent(seen))

    monkeypatch.setattr(torch_probe, "probe_torch", torch_child)

    def load() -> None:
        assert started.wait(5), "the torch child was not started before the loading"
        loaded.set()

    host = FakeHost.scenario("healthy_h100")
    facts = collect_facts(host, python=PYTHON, deadline=Deadline(30), meanwhile=load)
    assert facts.torch.torch == Absent("overlapped")

    for event in (started, loaded, finished):
        event.clear()

    def broken_load() -> None:
        started.wait(5)
        loaded.set()
        raise RuntimeError("a malformed table")

    with pytest.raises(RuntimeError, match="malformed table"):
        collect_facts(host, python=PYTHON, deadline=Deadline(30), meanwhile=broken_load)
    assert finished.is_set()  # the child's thread was waited for, not left behind


def test_nvcc_runs_beside_the_other_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    from envdoctor.probes.containers import probe_containers as real_containers
    from envdoctor.probes.environment import probe_env as real_env

    containers_read = threading.Event()

    def containers(*args: Any, **kwargs: Any) -> Any:
        containers_read.set()
        return real_containers(*args, **kwargs)

    def nvcc(*args: Any, **kwargs: Any) -> Any:
        # on the main thread this would come before the containers are read, and wait alone
        beside = containers_read.wait(5)
        found = real_env(*args, **kwargs)
        return replace(found, nvcc=found.nvcc if beside else Absent("ran alone"))

    monkeypatch.setattr("envdoctor.probes.probe_containers", containers)
    monkeypatch.setattr("envdoctor.probes.probe_env", nvcc)
    facts = collect_facts(FakeHost.scenario("healthy_h100"), python=PYTHON, deadline=Deadline(30))
    assert facts.env.nvcc != Absent("ran alone")


def test_the_loading_does_not_use_up_the_probes_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from envdoctor.probes.kernel_log import probe_kernel_log as real_kernel_log

    left: list[float] = []

    def kernel_log(*args: Any, deadline: Deadline, **kwargs: Any) -> Any:  # the last probe
        left.append(deadline.remaining())
        return real_kernel_log(*args, deadline=deadline, **kwargs)

    monkeypatch.setattr("envdoctor.probes.probe_kernel_log", kernel_log)
    budget = Deadline(0.5)
    collect_facts(
        FakeHost.scenario("healthy_h100"),
        python=PYTHON,
        deadline=budget,
        meanwhile=lambda: time.sleep(0.6),  # longer than the whole --timeout
    )
    assert left and left[0] > 0.2
