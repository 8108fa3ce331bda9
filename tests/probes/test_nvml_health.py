"""NVML health facts through the real pynvml-backed session, over simulated GPUs.

The simulator (tests/fakes/pynvml_sim.py) has the real bindings' names, parameters, constants,
structures and errors; what is under test is envdoctor's session (its workers, timeouts and
translation of each answer) and the probe that reads every GPU side by side.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pynvml  # noqa: TID251 (the real bindings, to hold the simulator to them)
import pytest

from envdoctor.model.facts import (
    NOT_COLLECTED,
    EccCorrected,
    FabricInfo,
    NvmlErrorKind,
    Utilization,
)
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.host import Deadline
from envdoctor.platform.nvml import MAX_WORKERS, NvmlError, NvmlSession, PynvmlSession, _Worker
from envdoctor.probes.nvml import probe_nvml, read_gpus
from envdoctor.snapshot import dump_snapshot, parse_snapshot
from tests.conftest import report_of, scenario_facts
from tests.fakes.host import FakeHost
from tests.fakes.pynvml_sim import SimGpu, _Sim, make_pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND


class SimHost(FakeHost):
    """A healthy machine whose NVML is the real session over a simulated pynvml."""

    def __init__(self, module: Any) -> None:
        super().__init__(FakeHost.scenario("healthy_h100").data)
        self.module = module
        self.session: PynvmlSession | None = None

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        self.session = PynvmlSession(self.module, _Worker(), timeout)
        return self.session


def session(gpus: list[SimGpu], *, timeout: float = 2.0, delay: float = 0.0) -> PynvmlSession:
    return PynvmlSession(make_pynvml(gpus, delay=delay), _Worker(), timeout)


NEWER_THAN_THE_FLOOR = {"nvmlDeviceGetGpuFabricInfoV": "12.550"}
"""Bindings the simulator has that nvidia-ml-py 12.535 (the pyproject's floor) lacks."""


def test_the_simulator_has_the_real_bindings_names_and_parameters() -> None:
    """A misspelt binding, or a parameter the real one lacks, fails here and not on a GPU."""
    for name, method in inspect.getmembers(_Sim, inspect.isfunction):
        if not name.startswith("nvml"):
            continue
        real = getattr(pynvml, name, None)
        if real is None and name in NEWER_THAN_THE_FLOOR:
            continue  # the floor's bindings (scripts/test --floor) predate it
        assert real is not None, f"pynvml has no {name}"
        real_params = list(inspect.signature(real).parameters)
        sim_params = list(inspect.signature(method).parameters)[1:]  # without self
        assert sim_params == real_params, name


def test_health_values_are_read_in_nvml_units() -> None:
    s = session([SimGpu(temperature=71, power_mw=455_000, utilization=(97, 41))])
    assert s.temperature(0) == 71
    assert (s.power_draw(0), s.power_limit(0)) == (455_000, 700_000)
    assert s.utilization(0) == (97, 41)
    assert s.ecc_corrected(0) == (0, 2)
    assert s.fabric_info(0) == ("completed", "Success", 32766)


def test_retired_pages_are_not_supported_on_ampere_and_later() -> None:
    with pytest.raises(NvmlError) as info:
        session([SimGpu()]).retired_pages(0)
    assert info.value.kind == NvmlErrorKind.NOT_SUPPORTED


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        (pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, 0, ("not-supported", "Success")),
        (pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED, 0, ("not-started", "Success")),
        (pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS, 0, ("in-progress", "Success")),
        (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 999, ("completed", NvmlErrorKind.UNKNOWN)),
        (7, 42, ("unknown-7", "NVML error 42")),
    ],
)
def test_fabric_states_and_registration_status(
    state: int, status: int, expected: tuple[str, str]
) -> None:
    assert session([SimGpu(fabric=(state, status, 0))]).fabric_info(0)[:2] == expected


def test_fabric_falls_back_to_the_original_query_on_an_older_driver() -> None:
    """R525-R545 drivers have nvmlDeviceGetGpuFabricInfo but not ...InfoV."""
    gpu = SimGpu(fail={"nvmlDeviceGetGpuFabricInfoV": FUNCTION_NOT_FOUND})
    assert session([gpu]).fabric_info(0) == ("completed", "Success", 32766)


def test_fabric_not_supported_is_not_retried() -> None:
    gpu = SimGpu(
        fail={"nvmlDeviceGetGpuFabricInfoV": NOT_SUPPORTED, "nvmlDeviceGetGpuFabricInfo": 999}
    )
    with pytest.raises(NvmlError) as info:
        session([gpu]).fabric_info(0)
    assert info.value.kind == NvmlErrorKind.NOT_SUPPORTED


def test_bindings_without_any_fabric_query_say_how_to_get_one() -> None:
    module = make_pynvml([SimGpu()])
    del module.nvmlDeviceGetGpuFabricInfoV, module.nvmlDeviceGetGpuFabricInfo
    with pytest.raises(NvmlError) as info:
        PynvmlSession(module, _Worker(), 1.0).fabric_info(0)
    assert info.value.kind == NvmlErrorKind.FUNCTION_NOT_FOUND
    assert "pip install -U nvidia-ml-py" in info.value.message


def test_eight_gpus_are_read_in_index_order_with_every_health_field() -> None:
    host = SimHost(make_pynvml([SimGpu(temperature=30 + i) for i in range(8)]))
    nvml = probe_nvml(host, deadline=Deadline(10))
    assert isinstance(nvml, Found)
    gpus = nvml.value.gpus
    assert [g.index for g in gpus] == list(range(8))
    assert [g.temperature for g in gpus] == [Found(30 + i) for i in range(8)]
    assert gpus[5].pci_bus_id == Found("00000000:68:00.0")
    first = gpus[0]
    assert first.power_draw == Found(71_234) and first.power_limit == Found(700_000)
    assert first.utilization == Found(Utilization(gpu=3, memory=1))
    assert first.ecc_corrected == Found(EccCorrected(volatile=0, aggregate=2))
    assert isinstance(first.retired_pages, Absent) and "NotSupported" in first.retired_pages.reason
    assert first.fabric == Found(FabricInfo("completed", "Success", 32766))


def test_each_gpu_is_queried_on_its_own_worker_thread() -> None:
    """The GPUs are read side by side: one NVML worker per GPU, not one for all."""
    seen: dict[int, set[int]] = {}
    module: Any = make_pynvml([SimGpu() for _ in range(4)])
    real = module.nvmlDeviceGetTemperature

    def recording(handle: Any, sensor: int) -> int:
        seen.setdefault(handle.index, set()).add(threading.get_ident())
        return int(real(handle, sensor))

    module.nvmlDeviceGetTemperature = recording
    probe_nvml(SimHost(module), deadline=Deadline(10))
    assert len(seen) == 4
    threads = [next(iter(names)) for _, names in sorted(seen.items())]
    assert all(len(names) == 1 for names in seen.values())
    assert len(set(threads)) == 4


def test_more_gpus_than_workers_share_them_and_keep_their_order() -> None:
    count = MAX_WORKERS + 3
    host = SimHost(make_pynvml([SimGpu(temperature=i) for i in range(count)]))
    nvml = probe_nvml(host, deadline=Deadline(10))
    assert isinstance(nvml, Found)
    assert [g.temperature for g in nvml.value.gpus] == [Found(i) for i in range(count)]
    assert host.session is not None and len(host.session._workers) == MAX_WORKERS


def test_a_hung_call_on_one_gpu_fails_the_rest_fast_and_names_the_timeout() -> None:
    gpus = [SimGpu() for _ in range(4)]
    gpus[2].hang = frozenset({"nvmlDeviceGetTemperature"})
    host = SimHost(make_pynvml(gpus))
    started = time.monotonic()
    nvml = probe_nvml(host, deadline=Deadline(0.3))  # each NVML call gets 0.3 s at most
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, elapsed
    assert isinstance(nvml, Found)
    hung = nvml.value.gpus[2].temperature
    assert isinstance(hung, ProbeFailed) and hung.error == NvmlErrorKind.TIMEOUT
    assert "did not answer" in hung.detail
    later = nvml.value.gpus[2].power_draw  # asked after the hang: refused at once
    assert isinstance(later, ProbeFailed) and "still hung" in later.detail


def test_a_gpu_reader_that_raises_is_not_lost_with_its_thread() -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("a bug in a session")

    with pytest.raises(RuntimeError, match="a bug in a session"):
        read_gpus(FakeHost.scenario("healthy_h100"), Broken(), 3)


def test_a_snapshot_from_before_the_health_facts_still_loads() -> None:
    """The fields added for GPU health are left out of an older snapshot: each reads 'not
    collected', and the diagnosis is the one the snapshot gave."""
    facts = scenario_facts("memory_held")
    data = json.loads(dump_snapshot(facts, redact=False))
    added = ("temperature", "power_draw", "power_limit", "utilization", "ecc_corrected")
    for gpu in data["facts"]["nvml"]["found"]["gpus"]:
        for name in (*added, "retired_pages", "fabric"):
            del gpu[name]
    del data["facts"]["kernel_log"], data["facts"]["fabric"], data["facts"]["env"]["build_nvcc"]
    old = parse_snapshot(json.dumps(data), where="old.json")
    assert isinstance(old.nvml, Found)
    assert old.nvml.value.gpus[0].temperature == NOT_COLLECTED
    assert old.kernel_log == NOT_COLLECTED and old.fabric.manager == NOT_COLLECTED
    assert [(f.code, f.severity) for f in report_of(old).findings] == [
        (f.code, f.severity) for f in report_of(facts).findings
    ]


@pytest.mark.parametrize(
    "error",
    [
        AttributeError("'c_nvmlGpuFabricInfo_t' object has no attribute 'cliqueId'"),
        pynvml.NVMLLibraryMismatchError(
            "Unversioned function called and the pyNVML version does not match the NVML lib version. Either use matching pyNVML and NVML lib versions or use a versioned function such as nvmlDeviceGetPciInfo_v2"
        )
        if hasattr(pynvml, "NVMLLibraryMismatchError")
        else RuntimeError("the library and the bindings disagree"),
    ],
)
def test_anything_the_bindings_raise_is_a_typed_nvml_error(error: Exception) -> None:
    """Not only NVMLError: what the bindings raise otherwise is one field's BindingError, never
    an internal error that takes the whole report down."""
    module = make_pynvml([SimGpu()])

    def broken(handle: object) -> int:
        raise error

    module.__dict__["nvmlDeviceGetPowerUsage"] = broken
    host = SimHost(module)
    nvml = probe_nvml(host, deadline=Deadline(10))
    assert isinstance(nvml, Found)
    (gpu,) = nvml.value.gpus
    assert isinstance(gpu.power_draw, ProbeFailed)
    assert gpu.power_draw.error == NvmlErrorKind.BINDING_ERROR
    assert type(error).__name__ in gpu.power_draw.detail
    assert gpu.temperature == Found(33)
