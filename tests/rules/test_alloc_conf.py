"""PYTORCH_CUDA_ALLOC_CONF judged as torch itself parses it (issue 12).

The real torch of this test environment (2.13, CPU build) parses the device-agnostic keys in
every build (``torch._C._accelerator_setAllocatorSettings``); each case below runs through it in
a child process, and envdoctor's model of the parser (rules/alloc_conf.py) must agree. The keys
only a CUDA build parses (``backend``, ``pinned_*``, …) and unknown keys cannot be asked of a CPU
build: those cases follow c10/cuda/CUDAAllocatorConfig.cpp (torch 2.9+), and are marked so.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envdoctor.engine import Report
from envdoctor.model.facts import TorchBuild
from envdoctor.model.probed import Found
from envdoctor.rules import alloc_conf
from tests import factories as f
from tests.conftest import report_of

# (value, torch accepts it) — every build parses these keys.
AGNOSTIC = [
    ("expandable_segments:True", True),
    ("expandable_segments:False", True),
    ("expandable_segments:maybe", False),
    ("expandable_segments:true", False),
    ("expandable_segments:1", False),
    ("max_split_size_mb:512", True),
    ("max_split_size_mb:abc", False),
    ("max_split_size_mb:1", False),
    ("max_split_size_mb:20", True),
    ("max_split_size_mb:20.5", True),
    ("max_split_size_mb:0x20", False),
    ("max_non_split_rounding_mb:1024", True),
    ("max_non_split_rounding_mb:1", False),
    ("garbage_collection_threshold:0.6", True),
    ("garbage_collection_threshold:1.5", False),
    ("garbage_collection_threshold:0", False),
    ("garbage_collection_threshold:abc", False),
    ("garbage_collection_threshold:5e-1", True),
    ("roundup_power2_divisions:4", True),
    ("roundup_power2_divisions:3", False),
    ("roundup_power2_divisions:[256:1,512:2,>:4]", True),
    ("roundup_power2_divisions:[3:2]", False),
    ("roundup_power2_divisions:[64:3]", False),
    ("roundup_power2_divisions:[64:0]", True),
    ("pinned_use_background_threads:True", True),
    ("pinned_use_background_threads:maybe", False),
    ("expandable_segments:True,max_split_size_mb:512", True),
    (" expandable_segments : True ", True),
    ("expandable_segments:True,", True),
    ("expandable_segments:True,,", False),
    ("expandable_segments=True", False),
    ("max_split_size_mb 512", False),
    (":True", False),
    ("max_split_size_mb:", False),
    ("expandable_segments:True;max_split_size_mb:512", False),
    ("", True),
    # numbers as stoull/stod read them: ASCII digits only, 64 bits, a double's range (a
    # 5000-digit value crashed the model: Python refuses int() of more than 4300 digits)
    ("max_split_size_mb:" + "9" * 5000, False),
    ("max_split_size_mb:18446744073709551615", True),
    ("max_split_size_mb:18446744073709551616", False),
    ("max_split_size_mb:-18446744073709551615", False),  # wraps to 1: too small
    ("max_split_size_mb:+512", True),
    ("max_split_size_mb:\u0665\u0661\u0662", False),  # Arabic-Indic 512
    ("max_split_size_mb:512\u0665", True),  # stoull stops at the first non-ASCII digit
    ("roundup_power2_divisions:\u0664", False),
    ("roundup_power2_divisions:[" + "6" * 30 + ":4]", False),
    ("garbage_collection_threshold:1e999", False),
    ("garbage_collection_threshold:1e-310", False),  # a subnormal: stod's ERANGE
    ("garbage_collection_threshold:0." + "0" * 400 + "1", False),
    ("garbage_collection_threshold:0.5" + "5" * 5000, True),
    ("garbage_collection_threshold:0x0.8", True),  # stod reads hexadecimal
    ("garbage_collection_threshold:0x1p-1", True),
    ("garbage_collection_threshold:nan", False),
    ("garbage_collection_threshold:inf", False),
    ("garbage_collection_threshold:.5", True),
    ("garbage_collection_threshold:0.5abc", True),
    ("garbage_collection_threshold:\u0660.5", False),
    ("max_split_size_mb:" + "0" * 5000 + "512", True),  # leading zeros: int() of 5000 raised
    ("roundup_power2_divisions:[" + "0" * 5000 + "64:4]", True),
    ("max_split_size_mb:\t512", True),  # stoull skips C white space; torch drops only " "
    ("garbage_collection_threshold:\n0.5", True),
    ("garbage_collection_threshold:0x1p-1074", True),  # an exact subnormal: no ERANGE
    ("garbage_collection_threshold:0x1.8p-1074", False),  # rounded: ERANGE
]
# Only a CUDA build parses these (c10/cuda/CUDAAllocatorConfig.cpp); a CPU build ignores them.
CUDA_ONLY = [
    ("backend:cudaMallocAsync", True),
    ("backend:native", True),
    ("backend:foo", False),
    ("release_lock_on_cudamalloc:True", True),
    ("release_lock_on_cudamalloc:yes", False),
    ("pinned_use_cuda_host_register:True", True),
    ("pinned_num_register_threads:8", True),
    ("pinned_num_register_threads:3", False),
    ("pinned_num_register_threads:256", False),
    ("pinned_reserve_segment_size_mb:0", False),
    ("graph_capture_record_stream_reuse:True", True),
    (
        "max_split_sz_mb:512",
        False,
    ),  # "Unrecognized key 'max_split_sz_mb' in CUDA allocator config."
    ("foo:1", False),
]
ASK = """
import json, sys, torch
out = []
for value in json.loads(sys.argv[1]):
    try:
        torch._C._accelerator_setAllocatorSettings(value)
        out.append(True)
    except Exception:
        out.append(False)
print(json.dumps(out))
"""


def _torch_accepts(values: list[str]) -> list[bool]:
    result = subprocess.run(
        [sys.executable, "-c", ASK, json.dumps(values)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd="/",
    )
    answer: list[bool] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_envdoctor_reads_every_case_as_the_real_torch_does() -> None:
    values = [value for value, _ in AGNOSTIC]
    real = _torch_accepts(values)
    for (value, expected), accepted in zip(AGNOSTIC, real, strict=True):
        assert accepted == expected, f"the case table is wrong about {value!r}"
        assert (alloc_conf.judge(value) == []) == accepted, value


@pytest.mark.parametrize(("value", "accepted"), CUDA_ONLY)
def test_cuda_only_keys_follow_the_cuda_parser(value: str, accepted: bool) -> None:
    assert (alloc_conf.judge(value) == []) == accepted


def _report(value: str, build: TorchBuild | None = None) -> Report:
    torch = f.torch(Found(build)) if build is not None else f.torch()
    return report_of(f.facts(env=f.env({"PYTORCH_CUDA_ALLOC_CONF": value}), torch=torch))


def test_torch_s_own_verdict_wins() -> None:
    """The child asked torch: its words are the evidence, even where the model would differ."""
    said = "ValueError: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'maybe'"
    build = f.torch_build(alloc_conf=(("PYTORCH_CUDA_ALLOC_CONF", said),))
    (finding,) = _report("expandable_segments:maybe", build).findings
    evidence = dict(finding.evidence)
    assert evidence["rejected because"] == said
    assert evidence["judged by"] == "torch 2.11.0+cu130 itself"
    ok = f.torch_build(alloc_conf=(("PYTORCH_CUDA_ALLOC_CONF", ""),))
    assert _report("foo:1", ok).findings == ()


def test_without_torch_s_verdict_the_model_judges() -> None:
    (finding,) = _report("max_split_size_mb:abc").findings
    assert finding.severity.label == "error"  # a CUDA torch will reject it
    assert "envdoctor's reading" in dict(finding.evidence)["judged by"]
    cpu = f.cpu_machine(env=f.env({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"}))
    (note,) = [x for x in report_of(cpu).findings if x.code == "env.alloc-conf-invalid"]
    assert note.severity.label == "warning"  # no CUDA torch here to fail


# The torch child asking the real torch (its own verdict on the variable) is checked with the
# real import that tests/test_live.py pays for anyway.


def test_a_huge_mantissa_is_judged_in_linear_time() -> None:
    """A snapshot's variable can be megabytes: deciding whether a subnormal is exact converted a
    million-digit mantissa to an integer (26 s, quadratic). Now 8x the digits cost about 8x the
    time (quadratic would be 64x); best of three, as a ratio, so a slow machine does not fail."""
    import time

    def cost(digits: int) -> float:
        value = "garbage_collection_threshold:1" + "0" * digits + f"e-{digits + 310}"
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            assert alloc_conf.judge(value) != []  # 1e-310: inexact, out of range
            best = min(best, time.process_time() - start)
        return max(best, 1e-4)

    assert cost(400_000) / cost(50_000) < 24
