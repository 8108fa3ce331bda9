"""The classifier: every verbatim error text seen in the wild maps to its finding code."""

from __future__ import annotations

import re

import pytest

from envdoctor.model.finding import is_valid_code
from envdoctor.smoke.classify import (
    PATTERNS,
    POISON_REGEXES,
    classify,
    classify_text,
    poisons,
)
from envdoctor.smoke.codes import CODES
from envdoctor.smoke.model import FAILED, KIND_CRASH, KIND_MISMATCH, KIND_TIMEOUT, StepResult
from tests.smoke.conftest import errors

FIXTURES = errors()


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_verbatim_error_is_classified(name: str) -> None:
    entry = FIXTURES[name]
    text = f"{entry['type']}: {entry['message']}"
    assert classify_text(text).code == entry["code"]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_fixture_names_its_source(name: str) -> None:
    source = FIXTURES[name]["source"]
    assert source.startswith(("https://github.com/", "torch "))


def test_status_codes_are_extracted() -> None:
    text = f"RuntimeError: {FIXTURES['cublas-alloc-failed']['message']}"
    assert classify_text(text).status == "CUBLAS_STATUS_ALLOC_FAILED"
    assert classify_text("RuntimeError: CUDA error: CUDA_ERROR_NO_DEVICE").code == "smoke.no-device"
    assert (
        classify_text("CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY").code == "smoke.out-of-memory"
    )
    assert classify_text(FIXTURES["forward-compat-804"]["message"]).status == "Error 804"


def test_specific_rows_win_over_generic_ones() -> None:
    # CUBLAS_STATUS_ALLOC_FAILED is an allocation failure but must not read as plain OOM
    assert (
        classify_text("CUBLAS_STATUS_ALLOC_FAILED out of memory").code
        == "smoke.cublas-alloc-failed"
    )
    assert classify_text("CUBLAS_STATUS_ARCH_MISMATCH").code == "smoke.cublas-failed"
    assert classify_text("something nobody has seen").code == "smoke.failed"
    # every modern CUDA error ends with this hint: it is not itself a device-side assert
    hint = "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    assert classify_text(f"CUDA error: out of memory\n{hint}").code == "smoke.out-of-memory"


def test_context_poisoning_errors() -> None:
    for name in ("illegal-memory-access", "device-side-assert", "unspecified-launch-failure"):
        assert poisons(FIXTURES[name]["message"]), name
    assert not poisons(FIXTURES["cublas-alloc-failed"]["message"])
    compiled = [re.compile(r, re.IGNORECASE) for r in POISON_REGEXES]
    assert any(r.search(FIXTURES["illegal-memory-access"]["message"]) for r in compiled)


def test_every_pattern_code_is_a_documented_smoke_code() -> None:
    for pattern in PATTERNS:
        assert pattern.code in CODES
        assert is_valid_code(pattern.code)
        re.compile(pattern.regex)


def test_how_a_step_failed_beats_its_text() -> None:
    def step(**kw: str) -> StepResult:
        return StepResult("gemm-fp32", FAILED, **kw)  # type: ignore[arg-type]

    assert classify(step(kind=KIND_TIMEOUT, error="x")).code == "smoke.timeout"
    crashed = classify(step(kind=KIND_CRASH, error_type="SIGSEGV"))
    assert (crashed.code, crashed.status) == ("smoke.crashed", "SIGSEGV")
    assert classify(step(kind=KIND_MISMATCH)).code == "smoke.wrong-result"
    imported = StepResult("import", FAILED, error="ImportError: libcudnn.so.9: cannot open")
    assert classify(imported).code == "smoke.torch-import-failed"


def test_every_memory_row_cites_a_text_a_shortage_produced() -> None:
    """A row marked ``memory`` confirms pressure under --reproduce: each needs a fixture that
    says where a shortage of device memory was shown to produce that text."""
    for pattern in (p for p in PATTERNS if p.memory):
        regex = re.compile(pattern.regex, re.IGNORECASE)
        cited = [
            name
            for name, entry in FIXTURES.items()
            if regex.search(entry["message"]) and entry.get("memory")
        ]
        assert cited, pattern.regex


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_the_memory_flag_follows_the_fixtures(name: str) -> None:
    entry = FIXTURES[name]
    found = classify_text(f"{entry['type']}: {entry['message']}")
    assert found.memory == bool(entry.get("memory")), name


def test_torch_28_accelerator_error_is_read_by_its_message() -> None:
    entry = FIXTURES["accelerator-out-of-memory"]
    assert entry["type"] == "AcceleratorError"
    found = classify_text(f"AcceleratorError: {entry['message']}")
    assert (found.code, found.memory) == ("smoke.out-of-memory", True)


def test_cudnn_9_allocation_statuses() -> None:
    """No public report quotes these yet: the names are cuDNN 9.0's cudnnStatus_t (4003, 4004)."""
    for status in (
        "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
        "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
    ):
        found = classify_text(f"RuntimeError: cuDNN error: {status}")
        assert (found.code, found.status, found.memory) == ("smoke.cudnn-failed", status, True)
    other = classify_text("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
    assert (other.code, other.memory) == ("smoke.cudnn-failed", False)


def test_no_engine_has_a_status_of_its_own() -> None:
    found = classify_text(FIXTURES["cudnn-get-no-engine"]["message"])
    assert found.status == "cuDNN found no engine that could run"
