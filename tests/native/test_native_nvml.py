"""envdoctor against a native libnvidia-ml through the real nvidia-ml-py (issue 34).

Each test runs ``python -m envdoctor`` as a user would, with the stand-in built from
``nvml_standin.c`` as the driver's ``libnvidia-ml.so.1``. What a Python fake of pynvml cannot
see is what these hold: C signatures and structure layouts (a structure passed by value where C
expects a pointer crashes the process), version words, and a library that crashes or never
returns inside a call.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.native.conftest import NativeMachine

ROOT = Path(__file__).resolve().parents[2]
H200 = 150754820096
RESERVED = 629145600
MIG = "gpu.0.mig=1\ngpu.0.mig_count=2"
BUSY = "gpu.1.procs=4242:1073741824,4343:2097152\ngpu.1.mem_used=1075838976"

# Reached only where the bindings have no newer entry point (nvidia-ml-py before 12.535, which
# the pyproject no longer allows): envdoctor keeps the fallback, no allowed binding calls it.
UNREACHABLE = {"nvmlDeviceGetCurrentClocksThrottleReasons"}


def _gpus(nvml: Any) -> list[dict[str, Any]]:
    assert "found" in nvml, nvml
    return list(nvml["found"]["gpus"])


def _found(field: dict[str, Any]) -> Any:
    assert "found" in field, field
    return field["found"]


def _has(binding: str) -> bool:
    """Whether the nvidia-ml-py under test has this function (12.535 lacks the versioned
    fabric and temperature queries)."""
    import pynvml  # noqa: TID251 (the real bindings under test)

    return callable(getattr(pynvml, binding, None))


def _bindings_envdoctor_calls() -> set[str]:
    """Every pynvml function name envdoctor's NVML layer mentions."""
    import pynvml  # noqa: TID251 (the real bindings, to tell their functions from constants)

    source = (ROOT / "envdoctor" / "platform" / "nvml.py").read_text(encoding="utf-8")
    names = set(re.findall(r"\b(nvml[A-Z]\w+)", source))
    return {n for n in names if callable(getattr(pynvml, n, None))}


def test_every_nvml_function_envdoctor_calls_is_reached_with_the_right_values(
    native: NativeMachine,
) -> None:
    """Two runs: a two-GPU machine (MIG on GPU 0, processes on GPU 1), and one whose driver
    refuses the newest queries, so that the fallbacks are called too."""
    nvml, first = native.facts(f"gpus=2\n{MIG}\n{BUSY}")
    fallback = "\n".join(
        (
            "fail.nvmlDeviceGetTemperature=26",  # NVML_ERROR_DEPRECATED
            "fail.nvmlDeviceGetMemoryInfo_v2=13",  # FUNCTION_NOT_FOUND: an old driver
            "fabric_max_version=2",
            "fail.nvmlDeviceGetGpuFabricInfoV.1=13",
        )
    )
    nvml_old, second = native.facts(f"gpus=2\n{fallback}")
    reached = first.functions() | second.functions()
    for binding in sorted(_bindings_envdoctor_calls() - UNREACHABLE):
        assert any(fn == binding or fn.startswith(binding + "_") for fn in reached), binding

    gpu0, gpu1 = _gpus(nvml)
    assert _found(nvml["found"]["driver_version"]) == "580.159.04"
    assert _found(nvml["found"]["cuda_driver_version"]) == "13.0"
    assert _found(gpu0["name"]) == "NVIDIA H100 80GB HBM3"
    assert _found(gpu1["uuid"]) == "GPU-00000001-1111-2222-3333-444455556666"
    assert _found(gpu1["pci_bus_id"]) == "00000000:28:00.0"
    assert _found(gpu0["compute_capability"]) == "9.0"
    assert _found(gpu0["memory"]) == {
        "total": H200,
        "used": 0,
        "free": H200 - RESERVED,
        "reserved": RESERVED,
    }
    assert _found(gpu0["mig_mode"]) == {"current": True, "pending": True}
    assert _found(gpu0["mig_devices"]) == 2
    assert [p["pid"] for p in _found(gpu1["processes"])] == [4242, 4343]
    assert _found(_found(gpu1["processes"])[0]["used_memory"]) == 1073741824
    assert _found(gpu0["temperature"]) == 33
    assert _found(gpu0["power_draw"]) == 71234
    assert _found(gpu0["pcie"]) == {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16}
    assert _found(gpu0["fabric"]) == {"state": "completed", "status": "Success", "clique_id": 32766}
    assert _found(gpu0["throttle_reasons"]) == ["gpu-idle"]

    old0, old1 = _gpus(nvml_old)
    if _has("nvmlDeviceGetTemperatureV"):
        assert _found(old0["temperature"]) == 33  # the versioned query answered
    else:  # bindings before 12.560 have the deprecated query alone
        assert old0["temperature"]["failed"] == "Deprecated"
    # the original memory query counts the driver's reserve as used, and has no reserved
    assert _found(old0["memory"])["used"] == RESERVED
    assert _found(old0["memory"])["reserved"] == 0
    assert _found(old0["fabric"])["clique_id"] == 32766  # v2 where the driver refused v3
    assert _found(old1["fabric"])["clique_id"] == 32766  # the original query (R525-R545)


def test_the_fabric_structure_goes_to_c_by_pointer(native: NativeMachine) -> None:
    """The binding hands its argument to C as it is: a structure passed by value crashed
    every command that reads NVML (SIGSEGV, no output)."""
    run = native.run("gpus=1", "probe", "--json", "--timeout", "10")
    assert run.returncode in (0, 1), run.stderr
    assert run.json()["kind"] == "probe"
    versioned = _has("nvmlDeviceGetGpuFabricInfoV")
    assert (f"nvmlDeviceGetGpuFabricInfo{'V' if versioned else ''}", 0) in run.calls


@pytest.mark.skipif(
    not _has("nvmlDeviceGetGpuFabricInfoV"), reason="these bindings have no versioned fabric query"
)
def test_a_driver_that_knows_only_v2_gets_v2(native: NativeMachine) -> None:
    nvml, run = native.facts("gpus=1\nfabric_max_version=2")
    assert _found(_gpus(nvml)[0]["fabric"])["state"] == "completed"
    assert run.calls.count(("nvmlDeviceGetGpuFabricInfoV", 0)) == 2  # v3 refused, then v2


def test_memory_tells_allocated_from_reserved(native: NativeMachine) -> None:
    """An idle H200: nothing allocated, ~600 MiB kept by the driver."""
    nvml, _ = native.facts("gpus=1")
    memory = _found(_gpus(nvml)[0]["memory"])
    assert (memory["used"], memory["reserved"]) == (0, RESERVED)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (16, "ResetRequired"),
        (22, "VgpuEccNotSupported"),
        (25, "ArgumentVersionMismatch"),
        (27, "NotReady"),
    ],
)
def test_return_codes_keep_their_own_kind(native: NativeMachine, code: int, kind: str) -> None:
    nvml, _ = native.facts(f"gpus=1\nfail.nvmlDeviceGetPowerUsage={code}")
    assert _gpus(nvml)[0]["power_draw"]["failed"] == kind


def test_a_slow_nvml_init_is_waited_for(native: NativeMachine) -> None:
    """Without persistence mode nvmlInit takes seconds: more than one call's bound (2 s)."""
    nvml, _ = native.facts("gpus=1\nsleep.nvmlInitWithFlags=2.5")
    assert _found(_gpus(nvml)[0]["name"]) == "NVIDIA H100 80GB HBM3"


def test_an_init_past_the_budget_names_persistence_mode(native: NativeMachine) -> None:
    run = native.run("gpus=1\nsleep.nvmlInitWithFlags=30", "probe", "--json", "--timeout", "3")
    assert run.seconds < 10
    assert run.returncode in (1, 2)
    text = run.stdout
    assert "nvmlInit did not return" in text
    assert "persistence" in text


def _finding(report: Any, code: str) -> dict[str, Any]:
    found = [f for f in report["findings"] if f["code"] == code]
    assert found, [f["code"] for f in report["findings"]]
    return dict(found[0])


def test_a_crash_in_one_gpus_query_is_an_error_naming_the_call_and_the_gpu(
    native: NativeMachine,
) -> None:
    scenario = "gpus=2\ncrash.nvmlDeviceGetPowerUsage.1=1"
    check = native.run(scenario, "check", "--json", "--timeout", "30")
    assert check.returncode == 1, check.stderr
    report = check.json()  # whole and valid
    finding = _finding(report, "gpu.nvml-crashed")
    assert finding["severity"] == "error"
    assert finding["subject"] == "1"
    text = str(finding)
    assert "nvmlDeviceGetPowerUsage" in text
    assert "SIGSEGV" in text
    assert "GPU 1" in text

    nvml, _ = native.facts(scenario)
    gpu0, gpu1 = _gpus(nvml)
    assert _found(gpu0["power_draw"]) == 71234  # the other GPU is read whole
    assert _found(gpu1["name"]) == "NVIDIA H100 80GB HBM3"  # read before the crash: kept
    assert gpu1["power_draw"]["failed"] == "Crashed"

    # this machine has no NVIDIA driver of its own, so the exit code alone would prove little:
    # the probe's own findings must name the crash
    probe = native.run(scenario, "probe", "--json", "--timeout", "10")
    assert probe.returncode == 1
    assert _finding(probe.json(), "gpu.nvml-crashed")["subject"] == "1"


def test_a_gpu_whose_every_query_blocks_is_not_responding(native: NativeMachine) -> None:
    scenario = "gpus=3\nblock.*.1=1"
    check = native.run(scenario, "check", "--json", "--timeout", "30")
    assert check.returncode == 1, check.stderr
    assert check.seconds < 30
    finding = _finding(check.json(), "gpu.not-responding")
    assert finding["severity"] == "error"
    assert finding["subject"] == "1"
    assert "nvmlDeviceGetHandleByIndex" in str(finding)

    nvml, _ = native.facts(scenario)
    gpu0, gpu1, gpu2 = _gpus(nvml)
    assert _found(gpu0["temperature"]) == 33
    assert _found(gpu2["temperature"]) == 33  # read by a fresh child
    assert gpu1["name"]["failed"] == "NotResponding"


def test_probe_returns_and_fails_when_a_gpu_blocks(native: NativeMachine) -> None:
    """``$(envdoctor probe)`` waits for stdout to close: no child may keep it open."""
    scenario = "gpus=2\nblock.nvmlDeviceGetTemperature.0=1"
    run = native.run(scenario, "probe", "--json", "--timeout", "5")
    assert run.seconds < 8  # capture_output waited for EOF, as $(…) does
    assert run.returncode == 1
    finding = _finding(run.json(), "gpu.not-responding")
    assert "GPU 0" in finding["title"]
    assert "nvmlDeviceGetTemperature" in finding["title"]


def test_a_blocked_call_keeps_what_was_read_before(native: NativeMachine) -> None:
    nvml, _ = native.facts("gpus=1\nblock.nvmlDeviceGetPowerUsage=1")
    gpu = _gpus(nvml)[0]
    assert _found(gpu["temperature"]) == 33
    assert gpu["power_draw"]["failed"] == "NotResponding"
    assert "nvmlDeviceGetPowerUsage" in gpu["power_draw"]["detail"]


def test_a_crash_in_nvml_init_is_reported(native: NativeMachine) -> None:
    run = native.run("gpus=1\ncrash.nvmlInitWithFlags=1", "check", "--json", "--timeout", "30")
    assert run.returncode == 1, run.stderr
    finding = _finding(run.json(), "gpu.nvml-failed")
    assert finding["severity"] == "error"
    assert "nvmlInitWithFlags" in str(finding)


def test_an_abort_in_the_library_names_the_signal(native: NativeMachine) -> None:
    nvml, _ = native.facts("gpus=2\nabort.nvmlDeviceGetUtilizationRates.0=1")
    gpu0, gpu1 = _gpus(nvml)
    assert gpu0["utilization"]["failed"] == "Crashed"
    assert "SIGABRT" in gpu0["utilization"]["detail"]
    assert "nvmlDeviceGetUtilizationRates" in gpu0["utilization"]["detail"]
    assert _found(gpu1["utilization"]) == {"gpu": 3, "memory": 1}
