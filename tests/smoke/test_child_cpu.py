"""The child with the real (CPU) torch: the step protocol, the CPU references, real errors."""

from __future__ import annotations

from envdoctor.smoke import SmokeOptions, run_smoke, smoke_findings
from envdoctor.smoke.model import PASSED, SKIPPED
from envdoctor.smoke.runner import MARK, parse_line
from tests.smoke.conftest import PYTHON, child_events, gpu_facts


def test_every_step_passes_on_the_cpu_with_real_torch() -> None:
    facts = gpu_facts(1)
    result = run_smoke(facts, SmokeOptions(python=PYTHON, device="cpu", memory_mib=4, timeout=60))
    (child,) = result.runs
    assert child.target.label == "CPU"
    assert {s.status for s in child.steps} == {PASSED}
    assert len(child.steps) == 8
    gemm = child.step("gemm-fp16")
    assert gemm is not None and gemm.detail.startswith("256x256 float16: max error")
    # the real float16 GEMM error is small but not zero: the reference is really compared
    error = float(gemm.detail.split("max error ")[1].split(" ")[0])
    assert 0 < error < 5e-3
    assert [f.code for f in smoke_findings(facts, result)] == ["smoke.passed"]


def test_real_cpu_torch_on_a_gpu_says_it_was_built_without_cuda() -> None:
    facts = gpu_facts(1)
    result = run_smoke(
        facts, SmokeOptions(python=PYTHON, timeout=60, steps=("import", "context", "memory"))
    )
    (child,) = result.runs
    context = child.step("context")
    assert context is not None
    assert context.error == "AssertionError: Torch not compiled with CUDA enabled"
    memory = child.step("memory")
    assert memory is not None and memory.status == SKIPPED
    assert memory.reason == "no CUDA context: `context` failed"
    (finding,) = smoke_findings(facts, result)
    assert finding.code == "smoke.torch-without-cuda"


def test_protocol_lines_are_marked_json_one_per_event() -> None:
    config = {"device": "cpu", "steps": ["import", "gemm-fp32", "nccl-allreduce"], "memory_mib": 1}
    events = child_events(config)
    assert [e["event"] for e in events] == [
        "start",
        "result",
        "start",
        "result",
        "start",
        "result",
        "done",
    ]
    results = [e for e in events if e["event"] == "result"]
    assert [r["status"] for r in results] == ["passed", "passed", "skipped"]
    assert results[2]["reason"] == "NCCL needs CUDA devices"
    assert parse_line("NCCL INFO Bootstrap : Using eth0") is None
    assert parse_line(MARK + "{not json") is None
