"""Per-GPU health (issue 39) through the real nvidia-ml-py, the NVML child and the native
stand-in: each scenario is the stand-in's ``key=value`` machine, judged by ``envdoctor check``.

What the Python fake cannot show is held here: the field-value structure (40 bytes, one
``nvmlReturn`` per field) that carries the recovery action, the threshold and clock queries'
C signatures, and page retirement answered by a pre-Ampere GPU while its row remapper answers
NotSupported.
"""

from __future__ import annotations

import re
from typing import Any

from tests.native.conftest import NativeMachine, Run

VOLTA = "gpu.name=Tesla V100-SXM2-16GB\ngpu.cc=7.0"


def check(native: NativeMachine, scenario: str) -> tuple[Run, dict[str, dict[str, Any]]]:
    run = native.run(scenario, "check", "--json", "--timeout", "30")
    assert run.returncode in (0, 1), run.stderr
    return run, {f["code"]: f for f in run.json()["findings"]}


def said(finding: dict[str, Any]) -> str:
    return str(finding).lower()


def test_a_reset_the_driver_asks_for_is_an_error_on_an_otherwise_clean_gpu(
    native: NativeMachine,
) -> None:
    run, found = check(native, "gpus=2\ngpu.1.field.230=1")  # NVML_GPU_RECOVERY_ACTION_GPU_RESET
    assert run.returncode == 1
    finding = found["gpu.recovery-required"]
    assert (finding["severity"], finding["subject"]) == ("error", "1")
    assert "needs a GPU reset" in finding["title"]
    assert "sudo nvidia-smi -r -i 00000000:28:00.0" in said(finding)
    assert ("nvmlDeviceGetFieldValues", 1) in run.calls


def test_a_driver_without_the_recovery_field_leaves_it_missing_not_an_error(
    native: NativeMachine,
) -> None:
    """A driver before R565 answers the unknown field with NotSupported in its own return."""
    nvml, _ = native.facts("gpus=1")
    assert "not supported" in nvml["found"]["gpus"][0]["recovery_action"]["absent"]
    refused, _ = native.facts("gpus=1\ngpu.field.230=1\ngpu.field_ret.230=13")
    assert refused["found"]["gpus"][0]["recovery_action"]["failed"] == "FunctionNotFound"
    _, found = check(native, "gpus=1")
    assert "gpu.recovery-required" not in found


def test_reset_required_from_any_query_is_an_error(native: NativeMachine) -> None:
    _, found = check(native, "gpus=1\nfail.nvmlDeviceGetPowerUsage=16")
    assert found["gpu.recovery-required"]["severity"] == "error"
    assert "resetrequired" in said(found["gpu.recovery-required"])


def test_a_pending_retirement_on_volta_is_a_reset_not_uncorrectable_errors(
    native: NativeMachine,
) -> None:
    nvml, _ = native.facts(f"gpus=1\n{VOLTA}\ngpu.retired_pending=1\ngpu.retired_sbe=2")
    gpu = nvml["found"]["gpus"][0]
    assert gpu["retired_pages"]["found"] == {"single_bit": 2, "double_bit": 0}
    assert gpu["retired_pages_pending"]["found"] is True
    assert "absent" in gpu["row_remap"]  # Volta has no row remapper
    _, found = check(native, f"gpus=1\n{VOLTA}\ngpu.retired_pending=1\ngpu.retired_sbe=2")
    assert "gpu.ecc-uncorrectable" not in found
    finding = found["gpu.memory-repair-pending"]
    assert finding["severity"] == "warning"
    assert "uncorrectable" not in said(finding) and "remap" not in said(finding)


def test_row_remapping_pending_warns_and_failed_is_an_error(native: NativeMachine) -> None:
    _, pending = check(native, "gpus=1\ngpu.remap_corr=1\ngpu.remap_pending=1")
    assert pending["gpu.memory-repair-pending"]["severity"] == "warning"
    assert not re.search(r"\brma\b", said(pending["gpu.memory-repair-pending"]))
    _, failed = check(native, "gpus=1\ngpu.remap_unc=8\ngpu.remap_failure=1")
    assert failed["gpu.memory-repair-failed"]["severity"] == "error"
    assert "rma" in said(failed["gpu.memory-repair-failed"])


def test_a_gpu_at_its_shutdown_temperature_is_an_error_with_thresholds_and_clocks(
    native: NativeMachine,
) -> None:
    scenario = "gpus=1\ngpu.temperature=92\ngpu.clocks_event=0x60\ngpu.sm_clock=660"
    run, found = check(native, scenario)
    assert run.returncode == 1
    hot = found["gpu.temperature"]
    assert hot["severity"] == "error"
    evidence = {e["label"]: e["value"] for e in hot["evidence"]}
    assert evidence["temperature"] == "92 °C"
    assert evidence["shutdown threshold"] == "92 °C (reached)"
    assert evidence["slowdown threshold"] == "89 °C (3 °C past it)"
    throttled = found["gpu.throttled"]
    assert "660 of 1980 MHz (33%)" in throttled["title"]
    assert {("nvmlDeviceGetTemperatureThreshold", 0), ("nvmlDeviceGetMaxClockInfo", 0)} <= set(
        run.calls
    )


def test_persistence_off_on_four_gpus_warns(native: NativeMachine) -> None:
    _, found = check(native, "gpus=4\ngpu.persistence=0")
    finding = found["gpu.persistence-off"]
    assert (finding["severity"], finding["subject"]) == ("warning", "0,1,2,3")
