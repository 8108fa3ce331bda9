"""`--require` gates: parsing, semantics per key, and the findings they become."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envdoctor.errors import EnvdoctorError
from envdoctor.fleet.requirements import (
    UNKNOWN,
    UNMET,
    evaluate_requirement,
    parse_requirement,
    parse_size,
    requirement_findings,
)
from envdoctor.model.facts import Facts, MemoryInfo
from envdoctor.model.finding import Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed
from tests import factories as fx

GiB = 1 << 30


def eight_h100(**gpu: object) -> Facts:
    return fx.facts(nvml=fx.nvml(gpus=tuple(fx.gpu(i, **gpu) for i in range(8))))


def verdict(facts: Facts, text: str) -> str:
    return evaluate_requirement(facts, parse_requirement(text)).verdict


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpus>=8", "met"),
        ("gpus==8", "met"),
        ("gpus>8", "unmet"),
        ("gpus<8", "unmet"),
        ("gpus!=8", "unmet"),
        ("gpus=8", "met"),
        ("driver>=550", "met"),
        ("driver>=580.159", "met"),
        ("driver>=580.160", "unmet"),
        ("driver==580", "met"),  # the branch
        ("driver<580", "unmet"),
        ("driver<=580", "met"),  # 580.x is still branch 580
        ("cuda>=12.4", "met"),
        ("cuda>=13.1", "unmet"),
        ("cuda==13", "met"),
        ("memory_free>=70GiB", "met"),
        ("memory_free>=80GiB", "unmet"),  # 79 GiB free
        ("memory_total>=80GiB", "met"),
        ("memory_free>=84GB", "met"),  # decimal GB: 84e9 < 79 GiB
        ("memory_free>=85GB", "unmet"),
        ("model~=H100", "met"),
        ("model~=h100 80gb", "met"),  # contains, ignoring case
        ("model~=A100", "unmet"),
        ("model==NVIDIA H100 80GB HBM3", "met"),
        ("model!=NVIDIA H100 80GB HBM3", "unmet"),
        ("compute_capability>=8.0", "met"),
        ("cc>=9.0", "met"),
        ("cc>=10", "unmet"),
        (" gpus >= 8 ", "met"),
    ],
)
def test_semantics_on_eight_h100(text: str, expected: str) -> None:
    assert verdict(eight_h100(), text) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("gpus", "cannot read the requirement"),
        ("foo>=1", "unknown requirement key 'foo'"),
        ("gpus>=eight", "whole number"),
        ("gpus~=8", "~= (contains) is for text"),
        ("driver>=abc", "is not a version"),
        ("driver>=5.5.", "is not a version"),
        ("memory_free>=70XB", "is not a size"),
        ("memory_free>=", "has no value"),
        ("model>=H100", "model is text"),
    ],
)
def test_malformed_gates_are_clear_errors(text: str, complaint: str) -> None:
    with pytest.raises(EnvdoctorError) as info:
        parse_requirement(text)
    assert complaint in info.value.one_line()


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("70GiB", 70 * GiB),
        ("70 GiB", 70 * GiB),
        ("70gib", 70 * GiB),
        ("512MiB", 512 << 20),
        ("80GB", 80 * 10**9),
        ("1.5TiB", int(1.5 * (1 << 40))),
        ("70G", 70 * GiB),
        ("1024", 1024),
        ("1024B", 1024),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@given(st.integers(min_value=0, max_value=1 << 50))
def test_bare_sizes_are_bytes(n: int) -> None:
    assert parse_size(str(n)) == n


@given(
    actual=st.lists(st.integers(0, 999), min_size=1, max_size=4),
    wanted=st.lists(st.integers(0, 999), min_size=1, max_size=3),
)
def test_version_gates_compare_on_the_parts_given(actual: list[int], wanted: list[int]) -> None:
    text = ".".join(map(str, actual))
    facts = fx.facts(nvml=fx.nvml(driver_version=Found(text)))
    want = ".".join(map(str, wanted))
    prefix = tuple(actual[: len(wanted)])
    assert (verdict(facts, f"driver>={want}") == "met") == (prefix >= tuple(wanted))
    assert (verdict(facts, f"driver=={want}") == "met") == (prefix == tuple(wanted))


def test_per_gpu_keys_name_the_failing_gpu() -> None:
    gpus = tuple(fx.gpu(i) for i in range(4))
    low = MemoryInfo(total=80 * GiB, used=70 * GiB, free=10 * GiB)
    gpus = (*gpus[:2], replace(gpus[2], memory=Found(low)), gpus[3])
    outcome = evaluate_requirement(
        fx.facts(nvml=fx.nvml(gpus=gpus)), parse_requirement("memory_free>=70GiB")
    )
    assert outcome.verdict == "unmet"
    assert outcome.actual == "GPU 2: 10.0 GiB"


def test_no_driver_means_zero_gpus_and_no_driver() -> None:
    facts = fx.facts(
        nvml=Absent("NVML library not found"),
        kernel=fx.kernel(driver=Absent("/proc/driver/nvidia/version does not exist")),
    )
    assert verdict(facts, "gpus>=1") == "unmet"
    assert verdict(facts, "gpus==0") == "met"  # a CPU-only node may be what the gate wants
    assert verdict(facts, "driver>=550") == "unmet"
    assert verdict(facts, "memory_free>=1GiB") == "unmet"
    assert verdict(facts, "model~=H100") == "unmet"


def test_driver_falls_back_to_the_kernel_module_when_nvml_fails() -> None:
    facts = fx.facts(nvml=ProbeFailed("LibRmVersionMismatch", "mismatch"))
    assert verdict(facts, "driver>=580") == "met"  # /proc/driver/nvidia/version: 580.159.04
    assert verdict(facts, "gpus>=1") == "unknown"
    assert verdict(facts, "cuda>=12") == "unknown"


def test_unreadable_gpu_field_is_unknown_unless_another_gpu_already_fails() -> None:
    gpus = (fx.gpu(0), fx.gpu(1, memory=ProbeFailed("GPUIsLost", "lost")))
    facts = fx.facts(nvml=fx.nvml(gpus=gpus))
    assert verdict(facts, "memory_free>=1GiB") == "unknown"
    assert verdict(facts, "memory_free>=100GiB") == "unmet"


def test_findings_have_codes_evidence_and_remediation() -> None:
    facts = eight_h100()
    reqs = [parse_requirement(t) for t in ("gpus>=8", "gpus>=16", "model~=A100")]
    findings = requirement_findings(facts, reqs)
    assert [f.code for f in findings] == [UNMET, UNMET]
    first = findings[0]
    assert first.severity == Severity.ERROR
    assert ("requirement", "gpus>=16") in first.evidence
    assert ("machine", "8") in first.evidence
    assert first.remediation is not None and first.remediation.steps

    unknown = requirement_findings(
        fx.facts(nvml=ProbeFailed("Timeout", "NVML did not answer")), [parse_requirement("gpus>=1")]
    )
    assert [(f.code, f.inconclusive) for f in unknown] == [(UNKNOWN, True)]


def test_a_driver_gate_judges_the_driver_every_other_check_judges() -> None:
    """Module 550.54.14 still loaded, 580.159.04 installed (NVML refuses: a mismatch): the gate,
    the node spec and the compatibility rules all judge the installed driver, which runs after
    the reload the driver's finding asks for (model/views.py)."""
    from envdoctor.model.views import driver_view
    from tests.conftest import scenario_facts

    facts = scenario_facts("driver_mismatch")
    assert driver_view(facts).version == "580.159.04"
    assert verdict(facts, "driver>=580") == "met"
    assert verdict(facts, "driver<560") == "unmet"
