"""The runner against the fake torch: verdicts, timeouts, crashes, poisoning, parallelism."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Found
from envdoctor.smoke import SmokeOptions, run_smoke, smoke_findings
from envdoctor.smoke.model import FAILED, PASSED, SKIPPED, ChildRun, SmokeRun, StepResult, Target
from envdoctor.smoke.runner import parse_line, step_result
from tests.smoke.conftest import (
    FAKE_TORCH,
    PYTHON,
    alive,
    child_events,
    fake_pids,
    fake_sleeps,
    gpu_facts,
    uuid,
    wait_dead,
)

EnvMaker = Callable[..., dict[str, str | None]]


def run(facts_count: int, env: dict[str, str | None], **options: float) -> SmokeRun:
    facts = gpu_facts(facts_count)
    opts = SmokeOptions(
        python=PYTHON,
        env=env,
        timeout=options.get("timeout", 10.0),
        step_timeout=options.get("step_timeout", 10.0),
    )
    return run_smoke(facts, opts)


def statuses(run_: SmokeRun, index: int = 0) -> dict[str, str]:
    return {s.step: s.status for s in run_.runs[index].steps}


def test_healthy_gpu_passes_every_step(fake_env: EnvMaker) -> None:
    result = run(1, fake_env())
    assert len(result.runs) == 1
    child = result.runs[0]
    assert child.ok and child.ending == "completed"
    assert set(statuses(result).values()) == {PASSED}
    assert child.target.visible == uuid(0)
    findings = smoke_findings(gpu_facts(1), result)
    assert [f.code for f in findings] == ["smoke.passed"]
    assert findings[0].severity == Severity.OK
    assert ("gemm-fp16", "256x256 float16: max error 0.0e+00 (tolerance 5e-03)") in findings[
        0
    ].evidence


def test_two_gpus_run_in_parallel_then_nccl_across_them(fake_env: EnvMaker, tmp_path: Path) -> None:
    result = run(2, fake_env(f"init@{uuid(0)}=sleep:1.5,init@{uuid(1)}=sleep:1.5"))
    labels = [r.target.label for r in result.runs]
    assert labels == ["GPU 0", "GPU 1", "GPUs 0,1"]
    # each per-GPU child spends 1.5 s initialising CUDA, and says when (the system's monotonic
    # clock): one after the other, one would start after the other ended; in parallel, each
    # starts before the other ends. No wall-clock bound, so a busy machine cannot fail it.
    slept = fake_sleeps(tmp_path)
    assert len(slept) == 2, slept
    (start_a, end_a), (start_b, end_b) = slept
    assert start_a < end_b and start_b < end_a, slept
    nccl = result.runs[2]
    assert nccl.target.visible == f"{uuid(0)},{uuid(1)}"
    assert nccl.step("nccl-allreduce") is not None
    assert nccl.ok


def test_cublas_alloc_failure_is_classified_and_attributed(fake_env: EnvMaker) -> None:
    facts = gpu_facts(1, free_mib=210, processes=((4242, "python train.py", 81000),))
    env = fake_env(TOTAL_MIB="81920", USED_MIB="81210", CONTEXT_MIB="400", CUBLAS_MIB="400")
    result = run_smoke(facts, SmokeOptions(python=PYTHON, env=env, timeout=10))
    status = statuses(result)
    assert status["gemm-fp32"] == FAILED and status["conv-forward"] == PASSED
    (finding,) = [f for f in smoke_findings(facts, result) if f.severity == Severity.ERROR]
    assert finding.code == "smoke.cublas-alloc-failed"
    assert "memory pressure" in finding.title
    evidence = dict(finding.evidence)
    assert evidence["error"].startswith(
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    # the child's own reading (310 MiB free after its context) and the holder from NVML
    assert (
        evidence["memory"]
        == "GPU 0 has 310 MiB free of 80.0 GiB; PID 4242 `python train.py` holds 79.1 GiB"
    )
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("kill 4242")
    # no --gpu 0: the GPU others fill would be refused; envdoctor picks an idle one
    assert any(
        s.startswith("envdoctor smoke --reproduce cublas-alloc   # on an idle GPU")
        for s in finding.remediation.steps
    )


def test_hung_step_is_killed_and_named(fake_env: EnvMaker, tmp_path: Path) -> None:
    start = time.monotonic()
    result = run(1, fake_env("conv=hang-with-child"), step_timeout=1.0, timeout=5.0)
    assert time.monotonic() - start < 4.0
    child = result.runs[0]
    assert child.ending == "timeout"
    conv = child.step("conv-forward")
    assert conv is not None and conv.status == FAILED and conv.kind == "timeout"
    assert "per-step limit of 1 s" in conv.error
    backward = child.step("conv-backward")
    assert backward is not None and backward.status == SKIPPED
    assert backward.reason == "not run: the child was killed after `conv-forward` hung"
    # the whole process group went: the child and the grandchild it started
    assert wait_dead(int((tmp_path / "grandchild").read_text()))
    assert all(wait_dead(pid) for pid in fake_pids(tmp_path))
    (finding,) = [f for f in smoke_findings(gpu_facts(1), result) if f.code != "smoke.passed"]
    assert finding.code == "smoke.timeout"
    assert dict(finding.evidence)["hung in"].startswith("`conv-forward` after")


def test_per_gpu_budget_bounds_the_whole_child(fake_env: EnvMaker) -> None:
    start = time.monotonic()
    result = run(1, fake_env("sync=sleep:0.4"), step_timeout=5.0, timeout=1.0)
    assert time.monotonic() - start < 3.0
    failed = [s for s in result.runs[0].steps if s.status == FAILED]
    assert len(failed) == 1 and "per-GPU limit of 1 s" in failed[0].error


def test_segfault_is_a_crash_with_the_signal(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("matmul.float16=segv"))
    child = result.runs[0]
    assert child.ending == "crashed" and child.returncode == -11
    step = child.step("gemm-fp16")
    assert step is not None and step.kind == "crash"
    assert step.error == "the child was killed by SIGSEGV during `gemm-fp16`"
    assert "Segmentation fault" in child.stderr_tail  # faulthandler's Python stack
    (finding,) = [f for f in smoke_findings(gpu_facts(1), result) if f.code != "smoke.passed"]
    assert finding.code == "smoke.crashed"
    assert (
        finding.title
        == "GPU 0: the smoke child crashed — the child was killed by SIGSEGV during `gemm-fp16`"
    )
    assert "Segmentation fault" in dict(finding.evidence)["child's stderr"]


def test_abort_is_a_crash_with_sigabrt(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("conv-backward=abort"))
    step = result.runs[0].step("conv-backward")
    assert step is not None and step.error_type == "SIGABRT"


def test_exit_without_report_is_a_crash(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("fill=exit:3"))
    step = result.runs[0].step("memory")
    assert step is not None and step.error == "the child exited with status 3 during `memory`"


def test_poisoning_error_skips_the_rest(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("matmul.float16=raise:illegal-memory-access"))
    status = statuses(result)
    assert status["gemm-fp32"] == PASSED and status["gemm-fp16"] == FAILED
    for name in ("gemm-bf16", "conv-forward", "conv-backward"):
        assert status[name] == SKIPPED
    reason = result.runs[0].steps[-1].reason
    assert reason.startswith("the CUDA context is unusable after `gemm-fp16` failed with:")
    (finding,) = [f for f in smoke_findings(gpu_facts(1), result) if f.code != "smoke.passed"]
    assert finding.code == "smoke.illegal-memory-access"
    assert "then skipped" in dict(finding.evidence)


def test_non_poisoning_errors_let_later_steps_run(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("conv=raise:cudnn-not-initialized"))
    status = statuses(result)
    assert status["conv-forward"] == FAILED
    assert status["conv-backward"] == FAILED  # its own forward pass fails the same way
    findings = smoke_findings(gpu_facts(1), result)
    (finding,) = [f for f in findings if f.code == "smoke.cudnn-not-initialized"]
    assert dict(finding.evidence)["failed steps"] == "`conv-forward`, `conv-backward`"
    assert "not memory pressure" in finding.title  # 81 GiB free on the fake GPU


def test_wrong_result_is_reported(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("matmul.bfloat16=wrong"))
    step = result.runs[0].step("gemm-bf16")
    assert step is not None and step.kind == "mismatch"
    assert "differs from the float64 CPU reference" in step.error
    codes = [f.code for f in smoke_findings(gpu_facts(1), result)]
    assert codes == ["smoke.wrong-result"]


def test_bf16_is_skipped_before_sm80(fake_env: EnvMaker) -> None:
    result = run(1, fake_env(CAPABILITY="7.5"))
    step = result.runs[0].step("gemm-bf16")
    assert step is not None and step.status == SKIPPED
    assert "compute capability 8.0" in step.reason
    assert result.runs[0].ok


def test_import_failure_skips_everything(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("import=raise:cudnn-version-incompatibility"))
    status = statuses(result)
    assert status["import"] == FAILED
    assert {status[s] for s in status if s != "import"} == {SKIPPED}
    codes = [f.code for f in smoke_findings(gpu_facts(1), result)]
    assert codes == ["smoke.torch-import-failed"]


def test_only_the_broken_gpu_fails(fake_env: EnvMaker) -> None:
    result = run(2, fake_env(f"init@{uuid(1)}=raise:no-cuda-gpus"))
    assert result.runs[0].ok
    assert statuses(result, 1)["context"] == FAILED
    assert len(result.runs) == 2  # no NCCL: only one GPU came up
    codes = {(f.subject, f.code) for f in smoke_findings(gpu_facts(2), result)}
    assert codes == {("GPU 0", "smoke.passed"), ("GPU 1", "smoke.no-device")}


def test_gpu_selection_and_unknown_gpu(fake_env: EnvMaker) -> None:
    facts = gpu_facts(2)
    result = run_smoke(facts, SmokeOptions(python=PYTHON, env=fake_env(), gpus=(1,)))
    assert [r.target.label for r in result.runs] == ["GPU 1"]
    try:
        run_smoke(facts, SmokeOptions(python=PYTHON, env=fake_env(), gpus=(5,)))
    except Exception as exc:  # noqa: BLE001
        assert "no GPU 5: NVML sees GPU(s) 0, 1" in str(exc)
    else:
        raise AssertionError("expected an error for GPU 5")


def test_missing_interpreter_is_not_run(fake_env: EnvMaker) -> None:
    facts = gpu_facts(1)
    result = run_smoke(facts, SmokeOptions(python="/nonexistent/python3", env=fake_env()))
    assert result.runs[0].ending == "not-started"
    (finding,) = smoke_findings(facts, result)
    assert finding.code == "smoke.not-run" and finding.inconclusive


def test_no_child_outlives_a_run(fake_env: EnvMaker, tmp_path: Path) -> None:
    run(2, fake_env())
    pids = fake_pids(tmp_path)
    assert len(pids) == 3  # two GPUs and the NCCL child
    assert not any(alive(pid) for pid in pids)


# --- issue 19 item 1: TF32 ------------------------------------------------------------------


def test_the_tf32_override_is_taken_out_of_the_childrens_environment(fake_env: EnvMaker) -> None:
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 keeps TF32 on: a healthy GPU's fp32 GEMM would miss
    the fp32 tolerance (2.8e-4 > 1e-4) and be reported as a wrong result."""
    facts = gpu_facts(1, env={"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"})
    env = {**fake_env(), "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    result = run_smoke(facts, SmokeOptions(python=PYTHON, env=env, timeout=10))
    gemm = result.runs[0].step("gemm-fp32")
    assert gemm is not None and gemm.status == PASSED, gemm
    assert gemm.detail == "256x256 float32: max error 0.0e+00 (tolerance 1e-04, TF32 off)"
    (finding,) = smoke_findings(facts, result)
    assert finding.code == "smoke.passed"
    assert dict(finding.evidence)["children's environment"].startswith(
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 was removed from the smoke children's environment: "
        "it forces TF32 for float32 GEMMs"
    )


def test_tf32_that_stays_on_gets_the_tf32_tolerance_and_says_why(fake_env: EnvMaker) -> None:
    result = run(1, fake_env(TF32="stuck"))
    gemm = result.runs[0].step("gemm-fp32")
    assert gemm is not None and gemm.status == PASSED
    assert gemm.detail == (
        "256x256 float32: max error 2.8e-04 (tolerance 2e-03, TF32 on: "
        "torch.backends.cuda.matmul.allow_tf32 stayed True)"
    )
    assert gemm.get("tf32") == "on"


def test_a_wrong_result_under_tf32_names_the_tolerance_it_missed(fake_env: EnvMaker) -> None:
    result = run(1, fake_env("matmul.float32=wrong", TF32="stuck"))
    (finding,) = smoke_findings(gpu_facts(1), result)
    assert finding.code == "smoke.wrong-result"
    assert dict(finding.evidence)["error"] == (
        "float32 GEMM differs from the float64 CPU reference: max error 1 of the largest value "
        "(tolerance 2e-03, TF32 on: torch.backends.cuda.matmul.allow_tf32 stayed True)"
    )


# --- issue 19 item 6: libraries writing to stdout -------------------------------------------


def test_nccl_output_glued_to_a_result_line_does_not_lose_the_result(fake_env: EnvMaker) -> None:
    """NCCL_DEBUG=INFO output without a newline on descriptor 1 (NCCL's unflushed stdio)."""
    result = run(2, fake_env("nccl=chatter"))
    nccl = result.runs[2]
    step = nccl.step("nccl-allreduce")
    assert step is not None and step.status == PASSED, step
    assert nccl.ok


def test_the_marker_is_found_anywhere_in_a_line() -> None:
    glued = (
        "678c7278cb2d:26023:26023 [0] NCCL INFO Bootstrap : Using eth0:172.17.2.7<0>"
        '@@envdoctor-smoke@@ {"event": "result", "step": "nccl-allreduce", "status": "passed"}'
    )
    assert parse_line(glued) == {"event": "result", "step": "nccl-allreduce", "status": "passed"}
    assert parse_line('@@envdoctor-smoke@@ {"event": "done"} trailing NCCL text') == {
        "event": "done"
    }
    assert parse_line("@@envdoctor-smoke@@ [1, 2]") is None


@pytest.mark.parametrize(
    "payload",
    ['{"seconds": ' + "9" * 5000 + "}", "[" * 100_000],
    ids=["5000-digit-number", "deep-nesting"],
)
def test_a_line_the_decoder_cannot_hold_is_no_message(payload: str) -> None:
    """A target interpreter's output is anything: these raised out of the decoder (json's
    4300-digit limit, RecursionError) and ended smoke in "internal error"."""
    assert parse_line("@@envdoctor-smoke@@ " + payload) is None


@pytest.mark.parametrize("seconds", ["fast", float("inf"), float("nan"), [1], True, -3, None])
def test_a_step_time_that_is_not_a_duration_reads_as_zero(seconds: object) -> None:
    assert step_result({"step": "import", "status": PASSED, "seconds": seconds}).seconds == 0.0


# --- issue 19 item 7: persistence mode, survivors -------------------------------------------


def hung_without_persistence(env: dict[str, str | None]) -> Finding:
    """The one finding of a run that hangs (per ``env``) on a GPU with persistence mode off."""
    facts = gpu_facts(1, persistence_mode=Found(False))
    options = SmokeOptions(python=PYTHON, env=env, timeout=5, step_timeout=1.0)
    (finding,) = smoke_findings(facts, run_smoke(facts, options))
    return finding


def test_a_hung_import_never_blames_persistence_mode(fake_env: EnvMaker) -> None:
    finding = hung_without_persistence(fake_env("import=hang"))
    assert finding.code == "smoke.timeout"
    assert "persistence" not in finding.title.lower()
    assert "importing never touches the GPU" in finding.title
    assert finding.remediation is not None
    assert "sudo nvidia-smi -pm 1" not in finding.remediation.steps


def test_a_hung_context_with_persistence_off_still_names_it(fake_env: EnvMaker) -> None:
    finding = hung_without_persistence(fake_env("init=hang"))
    assert "persistence mode is off" in finding.title


def test_a_grandchild_that_left_the_group_is_killed_too(fake_env: EnvMaker, tmp_path: Path) -> None:
    result = run(1, fake_env("conv=hang-with-escaped-child"), step_timeout=1.0, timeout=5.0)
    assert result.runs[0].ending == "timeout"
    assert wait_dead(int((tmp_path / "grandchild").read_text()))
    assert result.runs[0].survivors == ()


def test_a_process_stuck_in_the_driver_after_sigkill_is_reported() -> None:
    """State D cannot be produced here without a wedged driver: the run is built by hand."""
    child = ChildRun(
        Target("GPU 0", (0,), visible=uuid(0)),
        PYTHON,
        (
            StepResult("import", PASSED),
            StepResult("context", PASSED),
            StepResult("memory", FAILED, seconds=30.0, error="no result", kind="timeout"),
        ),
        "timeout",
        31.0,
        survivors=((4242, "D"),),
    )
    (finding,) = smoke_findings(gpu_facts(1), SmokeRun(PYTHON, runs=(child,)))
    assert finding.code == "smoke.timeout"
    assert "PID 4242 is stuck in the kernel (state D) even after SIGKILL" in finding.title
    assert dict(finding.evidence)["still there after SIGKILL"].startswith(
        "PID 4242 in state D (uninterruptible sleep: stuck inside a kernel call"
    )


def test_a_child_that_still_sees_the_override_uses_the_tf32_tolerance(tmp_path: Path) -> None:
    """Started by hand (not through the runner, which removes it): recent torch no longer shows
    the override through allow_tf32, so the child reads the variable itself."""
    config = {"device": "cuda", "steps": ["import", "context", "gemm-fp32"]}
    env = {
        "PYTHONPATH": FAKE_TORCH,
        "ENVDOCTOR_FAKE_STATE": str(tmp_path),
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1",
    }
    results = [e for e in child_events(config, env) if e["event"] == "result"]
    gemm = results[-1]
    assert gemm["status"] == "passed", gemm
    assert gemm["detail"] == (
        "256x256 float32: max error 2.8e-04 (tolerance 2e-03, TF32 on: "
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 forces it)"
    )


def test_an_uncorrectable_ecc_error_poisons_the_context_and_names_the_gpu(
    fake_env: EnvMaker,
) -> None:
    result = run(1, fake_env("matmul.float32=raise:ecc-uncorrectable"))
    status = statuses(result)
    assert status["gemm-fp32"] == FAILED
    assert {status[n] for n in ("gemm-fp16", "conv-forward", "conv-backward")} == {SKIPPED}
    (finding,) = [f for f in smoke_findings(gpu_facts(1), result) if f.code != "smoke.passed"]
    assert finding.code == "smoke.ecc-error"
    assert "uncorrectable ECC error encountered" in " ".join(v for _, v in finding.evidence)


def test_a_torch_without_cudnn_fails_the_convolutions_only(fake_env: EnvMaker) -> None:
    result = run(1, fake_env(cudnn_available="0"))
    status = statuses(result)
    assert status["gemm-fp32"] == status["gemm-fp16"] == PASSED
    assert status["conv-forward"] == status["conv-backward"] == FAILED
    (finding,) = [f for f in smoke_findings(gpu_facts(1), result) if f.code != "smoke.passed"]
    assert finding.code == "smoke.cudnn-unavailable"


def test_torch_is_imported_without_the_collector_and_the_steps_run_with_it(
    tmp_path: Path,
) -> None:
    """The collector is off for torch's import (its ~370 passes free almost nothing) and on again
    for the steps, whose tensors in reference cycles it must still free (the memory and
    reproduce steps measure what the GPU holds)."""
    torch = tmp_path / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text(
        "import gc, types\n"
        "__file__ = 'collector-at-import-%s' % gc.isenabled()\n"
        "version = types.SimpleNamespace(cuda=None)\n"
        "def __getattr__(name):\n"
        "    if name == '__version__':\n"
        "        return 'collector-after-%s' % gc.isenabled()\n"
        "    raise AttributeError(name)\n"
    )
    events = child_events(
        {"device": "cpu", "steps": ["import"], "memory_mib": 1}, env={"PYTHONPATH": str(tmp_path)}
    )
    (result,) = [e for e in events if e["event"] == "result"]
    assert result["status"] == "passed", result
    assert result["info"]["file"] == "collector-at-import-False"
    assert result["info"]["torch"] == "collector-after-True"
