"""--reproduce against the fake torch, whose cuBLAS/cuDNN fail below a free-memory threshold."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.smoke.reproduce import (
    ReproduceOptions,
    reproduce,
    reproduce_exit_code,
    reproduce_findings,
)
from tests.smoke.conftest import PYTHON, alive, fake_pids, gpu_facts

EnvMaker = Callable[..., dict[str, str | None]]
# An 80 GiB GPU; each context costs 500 MiB; cuBLAS / cuDNN need 300 MiB more at first use.
MEMORY = {"TOTAL_MIB": "81920", "CONTEXT_MIB": "500"}


def options(
    env: dict[str, str | None], kind: str = "cublas-alloc", **kw: object
) -> ReproduceOptions:
    return ReproduceOptions(python=PYTHON, kind=kind, env=env, timeout=10.0, **kw)  # type: ignore[arg-type]


def no_child_left(state: Path) -> None:
    pids = fake_pids(state)
    assert pids, "the fake torch recorded no process"
    assert not [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize(
    ("kind", "library", "status"),
    [
        ("cublas-alloc", "CUBLAS_MIB", "CUBLAS_STATUS_ALLOC_FAILED"),
        ("cudnn-init", "CUDNN_MIB", "CUDNN_STATUS_NOT_INITIALIZED"),
    ],
)
def test_reproduces_and_finds_the_threshold(
    fake_env: EnvMaker, tmp_path: Path, kind: str, library: str, status: str
) -> None:
    facts = gpu_facts(1, processes=((4242, "python train.py", 2000),))
    run = reproduce(facts, options(fake_env(**MEMORY, **{library: "300"}), kind))
    levels = [p.leave_mib for p in run.probes]
    assert levels[:4] == [None, 2048, 1024, 512]  # baseline, then down the ladder
    findings = reproduce_findings(facts, run)
    (finding,) = findings
    assert finding.code == "smoke.pressure-reproduces"
    # 800 MiB left = 500 for the probe's context + 300 for the library: the bisection finds it
    assert finding.title == (
        f"GPU 0: {status} reproduces under memory pressure — the "
        f"{'cuBLAS' if kind == 'cublas-alloc' else 'cuDNN'} initialisation "
        f"(first {'GEMM' if kind == 'cublas-alloc' else 'convolution'}) fails with 768 MiB left free "
        "and succeeds with 800 MiB"
    )
    evidence = dict(finding.evidence)
    assert status in evidence["error"]
    assert evidence["free in the probe after its own context"] == "268 MiB"
    assert "no pressure (" in evidence["levels tried"]
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("kill 4242")
    assert reproduce_exit_code(findings) == 1
    no_child_left(tmp_path)


def test_other_error_under_pressure(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = gpu_facts(1)
    run = reproduce(facts, options(fake_env(**MEMORY)))
    findings = reproduce_findings(facts, run)
    (finding,) = findings
    assert finding.code == "smoke.pressure-other-error"
    assert "fails with out-of-memory (RuntimeError: CUDA error: out of memory)" in finding.title
    assert "not CUBLAS_STATUS_ALLOC_FAILED" in finding.title
    assert reproduce_exit_code(findings) == 0
    no_child_left(tmp_path)


def test_fixed_leave_that_passes_rules_pressure_out(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = gpu_facts(1)
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_MIB="300"), leave_mib=1000))
    assert [p.leave_mib for p in run.probes] == [None, 1000]
    assert run.probes[1].free_before == 1000 * (1 << 20)
    findings = reproduce_findings(facts, run)
    assert [f.code for f in findings] == ["smoke.pressure-ruled-out"]
    assert "succeeds even with only 1000 MiB left free" in findings[0].title
    assert reproduce_exit_code(findings) == 0
    no_child_left(tmp_path)


def test_a_leave_above_the_free_memory_rules_nothing_out(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    """Leaving more free than the GPU has holds nothing: no pressure was applied."""
    facts = gpu_facts(1)
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_MIB="300"), leave_mib=999_999))
    findings = reproduce_findings(facts, run)
    (finding,) = findings
    assert finding.code == "smoke.reproduce-inconclusive"
    assert "leaving 999999 MiB free holds nothing" in finding.title
    assert reproduce_exit_code(findings) == 2
    no_child_left(tmp_path)


def test_no_gpu_to_test_says_what_nvml_said() -> None:
    facts = gpu_facts(0)
    run = reproduce(facts, options({}))
    (finding,) = reproduce_findings(facts, run)
    assert finding.code == "smoke.reproduce-inconclusive"
    evidence = dict(finding.evidence)
    assert evidence["why"] and "GPUs NVML reports" in evidence
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("envdoctor check")


def test_failure_without_pressure_is_the_real_thing(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = gpu_facts(1)
    run = reproduce(facts, options(fake_env("matmul=raise:cublas-alloc-failed")))
    assert len(run.probes) == 1
    findings = reproduce_findings(facts, run)
    (finding,) = findings
    assert finding.code == "smoke.cublas-alloc-failed"
    assert "memory pressure is not needed" in dict(finding.evidence)["reproduce"]
    assert reproduce_exit_code(findings) == 1
    no_child_left(tmp_path)


def test_hog_that_cannot_start_is_inconclusive(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = gpu_facts(1)
    run = reproduce(facts, options(fake_env("init=raise:no-cuda-gpus")))
    findings = reproduce_findings(facts, run)
    (finding,) = findings
    assert finding.code == "smoke.reproduce-inconclusive" and finding.inconclusive
    assert (
        "the memory-holding child failed in `context`: RuntimeError: No CUDA GPUs" in finding.title
    )
    assert reproduce_exit_code(findings) == 2
    no_child_left(tmp_path)


def test_hung_probe_is_killed_and_the_hog_too(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = gpu_facts(1)
    opts = ReproduceOptions(
        python=PYTHON, kind="cublas-alloc", env=fake_env("matmul=hang"), timeout=1.0
    )
    run = reproduce(facts, opts)
    step = run.probes[0].run.step("gemm-fp32")
    assert step is not None and step.kind == "timeout"
    assert [f.code for f in reproduce_findings(facts, run)] == ["smoke.timeout"]
    no_child_left(tmp_path)


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(EnvdoctorError, match="--reproduce takes cublas-alloc or cudnn-init"):
        ReproduceOptions(python=PYTHON, kind="nccl")
    with pytest.raises(EnvdoctorError, match="--leave"):
        ReproduceOptions(python=PYTHON, kind="cudnn-init", leave_mib=-1)
