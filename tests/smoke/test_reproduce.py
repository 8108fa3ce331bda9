"""--reproduce against the fake torch, whose device memory, handles, workspaces and kernels fail
below thresholds the tests choose (tests/fake_torch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts, GpuProcess, MemoryInfo
from envdoctor.model.finding import Finding
from envdoctor.model.probed import Found
from envdoctor.smoke.model import PASSED, ChildRun, StepResult, Target
from envdoctor.smoke.reproduce import (
    Probe,
    ReproduceOptions,
    reproduce,
    reproduce_exit_code,
    reproduce_findings,
    search,
)
from tests import factories
from tests.smoke.conftest import PYTHON, GiB, MiB, alive, fake_pids, gpu_facts, uuid

EnvMaker = Callable[..., dict[str, str | None]]
# An 80 GiB GPU, all of it free before envdoctor starts; each context costs 500 MiB.
MEMORY = {"TOTAL_MIB": "81920", "CONTEXT_MIB": "500"}
OOM_32 = "OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB."


def idle_facts(count: int = 1, **kw: object) -> Facts:
    return gpu_facts(count, free_mib=81920, **kw)  # type: ignore[arg-type]


def options(
    env: dict[str, str | None], kind: str = "cublas-alloc", **kw: object
) -> ReproduceOptions:
    return ReproduceOptions(python=PYTHON, kind=kind, env=env, timeout=10.0, **kw)  # type: ignore[arg-type]


def no_child_left(state: Path) -> None:
    pids = fake_pids(state)
    assert pids, "the fake torch recorded no process"
    assert not [pid for pid in pids if alive(pid)]


def only(findings: tuple[Finding, ...]) -> Finding:
    (finding,) = findings
    return finding


def evidence(finding: Finding) -> dict[str, str]:
    return dict(finding.evidence)


# --- item 2: the context outside --leave, every memory text confirms ------------------------


def test_the_probes_own_context_is_measured_and_kept_out_of_the_levels(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    """cublasCreate needs 8 MiB; the context's 500 MiB must not hide it behind an OOM."""
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_MIB="8")))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces"
    assert finding.title == (
        "GPU 0: memory pressure reproduces the failure — the cuBLAS initialisation (first GEMM) "
        "fails with 4 MiB free and succeeds with 8 MiB"
    )
    found = evidence(finding)
    assert found["CUBLAS_STATUS_ALLOC_FAILED itself"] == "appeared with 4 MiB free or less"
    assert found["the probe's own CUDA context"].startswith("500 MiB (NVML's free memory before")
    assert "context" not in found["levels tried"].split("\n", 1)[1]  # no level failed there
    assert finding.remediation is not None
    assert (
        "keep more than 508 MiB (500 MiB for its CUDA context) free on GPU 0"
        in finding.remediation.steps[0]
    )
    assert reproduce_exit_code((finding,)) == 1
    no_child_left(tmp_path)


def test_each_band_of_free_memory_keeps_its_verbatim_error(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    """Handle 8 MiB, workspace 32 MiB through the allocator, kernels 200 MiB: three texts."""
    facts = idle_facts()
    env = fake_env(**MEMORY, CUBLAS_MIB="8", CUBLAS_WORKSPACE_MIB="32", CUBLAS_MODULE_MIB="200")
    run = reproduce(facts, options(env))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces"
    # 240 MiB = 8 + 32 + 200: the bisection lands within 4 MiB of it
    assert finding.title.endswith("fails with 236 MiB free and succeeds with 240 MiB")
    bands = evidence(finding)["failures by free memory"].splitlines()
    assert len(bands) == 3
    assert bands[0].startswith("48 MiB–236 MiB free: RuntimeError: CUDA error: out of memory")
    assert bands[1].startswith(f"8 MiB–32 MiB free: {OOM_32}")
    assert bands[2] == (
        "0 MiB–4 MiB free: RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
        "`cublasCreate(handle)`"
    )
    assert len(run.probes) <= 20
    no_child_left(tmp_path)


def test_the_workspace_oom_confirms_pressure_without_the_status_asked_about(
    fake_env: EnvMaker,
) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_WORKSPACE_MIB="32")))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces"
    found = evidence(finding)
    assert found["failures by free memory"].startswith(f"0 MiB–28 MiB free: {OOM_32}")
    assert found["CUBLAS_STATUS_ALLOC_FAILED itself"].startswith("did not appear: under pressure")
    # the title says it too: a shortage, but not the status the user saw (issue 34)
    assert "CUBLAS_STATUS_ALLOC_FAILED itself never appeared" in finding.title


def test_cudnn_no_engine_confirms_pressure(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY, CUDNN_WORKSPACE_MIB="16"), "cudnn-init"))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces"
    assert "the cuDNN initialisation (first convolution) fails with 12 MiB free" in finding.title
    assert evidence(finding)["failures by free memory"] == (
        "0 MiB–12 MiB free: RuntimeError: GET was unable to find an engine to execute this "
        "computation"
    )


def test_a_failure_that_names_no_shortage_is_another_error(fake_env: EnvMaker) -> None:
    # with eager module loading (with lazy loading, the default, this status counts as memory:
    # test_an_execution_failure_under_lazy_loading_counts_as_memory)
    facts = eager(idle_facts())
    env = fake_env(**MEMORY, CUBLAS_MIB="8", CUBLAS_ERROR="cublas-execution-failed")
    run = reproduce(facts, options(env))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-other-error"
    assert "fails in `gemm-fp32` with cublas-failed (RuntimeError: CUDA error: " in finding.title
    assert reproduce_exit_code((finding,)) == 0


def test_success_down_to_zero_rules_pressure_out(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY)))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-ruled-out"
    assert "succeeds even with 0 MiB left free after its context" in finding.title
    assert reproduce_exit_code((finding,)) == 0


def test_a_fixed_leave_runs_one_level(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_MIB="300"), leave_mib=1000))
    assert [p.leave_mib for p in run.probes] == [None, 1000]
    assert run.probes[1].free_at_step == 1000 * MiB
    assert [f.code for f in reproduce_findings(facts, run)] == ["smoke.pressure-ruled-out"]


def test_a_leave_above_the_free_memory_holds_nothing(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY), leave_mib=999_999))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert "nothing could be held: the GPU has only 79.5 GiB free" in finding.title
    assert reproduce_exit_code((finding,)) == 2


def fake_probe(threshold_mib: int, log: list[int | None]) -> Callable[[int | None], Probe]:
    """A probe that passes with more than ``threshold_mib`` MiB left free."""

    def probe(leave: int | None) -> Probe:
        log.append(leave)
        ok = leave is None or leave > threshold_mib
        step = StepResult("gemm-fp32", PASSED if ok else "failed", error="" if ok else "x")
        info = (("free", str(8000 * MiB)),)
        run = ChildRun(
            Target("GPU 0"),
            PYTHON,
            (StepResult("context", PASSED, info=info), step),
            "completed",
            0.1,
        )
        return Probe(leave, run)

    return probe


@pytest.mark.parametrize(
    ("reported", "read"),
    [
        (("7000",), 7000),
        (("7000", "6500"), 6500),  # the last step that measured it
        (("6500", "\u00b2"), 6500),  # passes str.isdigit(), is no count
        (("6500", "9" * 5000), 6500),  # int() refuses it (more than 4300 digits)
        (("6500", "-5"), 6500),
        (("6500", "1e9"), 6500),
        (("\u0661\u0662",), None),  # Arabic-Indic digits, which int() takes
        ((), None),
    ],
)
def test_the_free_memory_a_probe_reports_is_read_as_a_count_or_not_at_all(
    reported: tuple[str, ...], read: int | None
) -> None:
    """The probe child runs in the target interpreter, so what it reports is checked: the first
    GEMM's cost (free before it, minus free after) is left out rather than computed from a
    value that is no count of bytes."""
    steps = [StepResult("context", PASSED, info=(("free", "8000"),))]
    steps += [
        StepResult(f"step-{n}", PASSED, info=(("free_after", value),))
        for n, value in enumerate(reported)
    ]
    probe = Probe(None, ChildRun(Target("GPU 0"), PYTHON, tuple(steps), "completed", 0.1))
    assert probe.free_after == read
    assert probe.free_in_probe == 8000


@pytest.mark.parametrize("threshold", [0, 7, 300, 1500, 4000])
def test_the_search_brackets_the_threshold_within_the_grain(threshold: int) -> None:
    log: list[int | None] = []
    search(fake_probe(threshold, log), options({}))
    levels = [level for level in log if level is not None]
    assert len(levels) == len(set(levels)), "a level was probed twice"
    assert len(log) <= 20
    failed = [lv for lv in levels if lv <= threshold]
    passed = [lv for lv in levels if lv > threshold]
    assert failed and passed
    assert min(passed) - max(failed) <= 4  # the threshold, within the grain
    assert {0, 4, 8, 16} <= set(levels)  # the last tens of MiB are always swept


def test_the_budget_stops_the_search(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env(**MEMORY, CUBLAS_MIB="8"), budget=0.001))
    assert len(run.probes) == 1
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert "the time budget of 0.001 s ran out after 1 probes" in finding.title


# --- item 3: torch's own cache holds the memory, a new thread creates its handle -------------


def test_in_process_reproduces_the_new_threads_handle_failure(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    """The workspace comes from torch's cache and the kernels are loaded: only the new thread's
    cublasCreate, outside torch's allocator, runs out."""
    facts = idle_facts()
    env = fake_env(**MEMORY, CUBLAS_MIB="8", CUBLAS_WORKSPACE_MIB="32", CUBLAS_MODULE_MIB="200")
    run = reproduce(facts, options(env, in_process=True))
    assert run.probes[1].run.step("warm-up") is not None
    assert run.probes[1].run.info("holder") == (
        "torch's cache (tensors allocated, then freed into the cache)"
    )
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces"
    assert finding.title == (
        "GPU 0: memory pressure reproduces the failure — the cuBLAS initialisation (first GEMM) "
        "in a new thread while torch's cache holds the memory fails with 4 MiB free and "
        "succeeds with 8 MiB"
    )
    assert evidence(finding)["failures by free memory"] == (
        "0 MiB–4 MiB free: RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
        "`cublasCreate(handle)`"
    )
    assert finding.remediation is not None
    assert any("in each worker thread first" in step for step in finding.remediation.steps)
    no_child_left(tmp_path)


# --- item 4: shared nodes ---------------------------------------------------------------------


def busy(facts: Facts, index: int, pid: int = 4242, mib: int = 30000) -> Facts:
    assert isinstance(facts.nvml, Found)
    gpus = list(facts.nvml.value.gpus)
    proc = GpuProcess(pid, Found("python train.py"), Found(mib * MiB))
    gpus[index] = replace(gpus[index], processes=Found((proc,)))
    nvml = replace(facts.nvml.value, gpus=tuple(gpus))
    return replace(facts, nvml=Found(nvml))


def test_a_gpu_others_use_is_refused_and_nothing_starts(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = busy(idle_facts(), 0)
    run = reproduce(facts, options(fake_env(**MEMORY)))
    assert run.refused and not run.probes
    assert fake_pids(tmp_path) == []  # no child was started at all
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.reproduce-refused" and finding.inconclusive
    assert "GPU 0 is in use: NVML lists PID 4242 `python train.py` (29.3 GiB) on it" in (
        finding.title
    )
    assert finding.remediation is not None
    assert finding.remediation.steps[-1].endswith(
        "--gpu N --force   # other jobs on GPU N may fail"
    )
    assert reproduce_exit_code((finding,)) == 2


def test_the_first_idle_gpu_is_chosen(fake_env: EnvMaker) -> None:
    facts = busy(idle_facts(2), 0)
    run = reproduce(facts, options(fake_env(**MEMORY), leave_mib=1000))
    assert run.target is not None and run.target.label == "GPU 1"
    assert run.target.visible == uuid(1)


def test_memory_in_use_without_a_listed_process_counts_as_in_use(fake_env: EnvMaker) -> None:
    facts = gpu_facts(1, free_mib=70000)  # 10 GiB used, NVML lists nobody (another container)
    run = reproduce(facts, options(fake_env(**MEMORY)))
    assert run.refused
    assert "processes in other containers are invisible from here" in run.problem


def test_force_fills_a_named_busy_gpu_and_says_so(fake_env: EnvMaker) -> None:
    facts = busy(idle_facts(), 0)
    run = reproduce(facts, options(fake_env(**MEMORY), gpu=0, force=True, leave_mib=1000))
    assert len(run.probes) == 2
    finding = only(reproduce_findings(facts, run))
    assert evidence(finding)["filled although in use (--force)"].startswith("NVML lists PID 4242")


def test_a_named_busy_gpu_without_force_is_refused(fake_env: EnvMaker) -> None:
    run = reproduce(busy(idle_facts(), 0), options(fake_env(**MEMORY), gpu=0))
    assert run.refused and not run.probes


def test_force_needs_a_named_gpu() -> None:
    with pytest.raises(EnvdoctorError, match="--force needs --gpu N"):
        ReproduceOptions(python=PYTHON, kind="cublas-alloc", force=True)


def test_cuda_visible_devices_bounds_the_choice(fake_env: EnvMaker) -> None:
    facts = idle_facts(2, env={"CUDA_VISIBLE_DEVICES": "1"})
    run = reproduce(facts, options(fake_env(**MEMORY), leave_mib=1000))
    assert run.target is not None and run.target.label == "GPU 1"
    with pytest.raises(EnvdoctorError, match="GPU 0 is hidden by CUDA_VISIBLE_DEVICES='1'"):
        reproduce(facts, options(fake_env(**MEMORY), gpu=0))


# --- item 5: compute modes ------------------------------------------------------------------


def mode(facts: Facts, value: str) -> Facts:
    assert isinstance(facts.nvml, Found)
    gpus = tuple(replace(g, compute_mode=Found(value)) for g in facts.nvml.value.gpus)
    return replace(facts, nvml=Found(replace(facts.nvml.value, gpus=gpus)))


def test_an_idle_exclusive_process_gpu_is_reproduced_one_process_at_a_time(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    facts = mode(idle_facts(), "exclusive-process")
    env = fake_env(**MEMORY, CUBLAS_MIB="8", COMPUTE_MODE="exclusive-process")
    run = reproduce(facts, options(env))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.pressure-reproduces", finding.title
    no_child_left(tmp_path)


def test_an_exclusive_gpu_another_process_owns_is_inconclusive(fake_env: EnvMaker) -> None:
    facts = mode(busy(idle_facts(), 0, pid=999), "exclusive-process")
    run = reproduce(facts, options(fake_env(**MEMORY), gpu=0, force=True))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert (
        "GPU 0 is in the exclusive-process compute mode and PID 999 `python train.py` (29.3 GiB) "
        "owns it" in finding.title
    )


def test_a_prohibited_gpu_is_inconclusive(fake_env: EnvMaker) -> None:
    facts = mode(idle_facts(), "prohibited")
    finding = only(reproduce_findings(facts, reproduce(facts, options(fake_env(**MEMORY)))))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert "Prohibited compute mode: no process may create a context" in finding.title


def test_busy_with_nothing_held_is_inconclusive_not_a_failure(fake_env: EnvMaker) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env("context=raise:device-busy", **MEMORY)))
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert "busy or unavailable to a new process even with nothing held" in finding.title
    assert evidence(finding)["compute mode"] == "default"
    assert reproduce_exit_code((finding,)) == 2


# --- the rest -------------------------------------------------------------------------------


def test_no_gpu_to_test_says_what_nvml_said() -> None:
    facts = gpu_facts(0, torch_over={"cuda": "", "device_count": Found(0)})
    finding = only(reproduce_findings(facts, reproduce(facts, options({}))))
    assert finding.code == "smoke.reproduce-inconclusive"
    assert evidence(finding)["NVML"] == "sees no GPU"
    assert evidence(finding)["torch"] == "2.11.0+cu130: CPU-only build"


def test_failure_without_pressure_is_the_real_thing(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = idle_facts()
    run = reproduce(facts, options(fake_env("matmul=raise:cublas-alloc-failed")))
    assert len(run.probes) == 1
    finding = only(reproduce_findings(facts, run))
    assert finding.code == "smoke.cublas-alloc-failed"
    assert "memory pressure is not needed" in evidence(finding)["reproduce"]
    assert reproduce_exit_code((finding,)) == 1
    no_child_left(tmp_path)


def test_hung_probe_is_killed(fake_env: EnvMaker, tmp_path: Path) -> None:
    facts = idle_facts()
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
    with pytest.raises(EnvdoctorError, match="--budget"):
        ReproduceOptions(python=PYTHON, kind="cudnn-init", budget=0)


def test_no_nvml_reading_means_refusal_unless_forced(fake_env: EnvMaker) -> None:
    build = factories.torch_build(device_count=Found(1))
    facts = factories.facts(
        nvml=factories.nvml(()), torch=factories.torch(Found(build)), env=factories.env({})
    )
    run = reproduce(facts, options(fake_env(**MEMORY)))
    assert run.refused and "NVML cannot say" in run.problem
    forced = reproduce(facts, options(fake_env(**MEMORY), gpu=0, force=True, leave_mib=1000))
    assert len(forced.probes) == 2


def test_an_idle_gpu_with_the_drivers_reservation_is_not_refused(fake_env: EnvMaker) -> None:
    """1 GiB in use and no process listed: what an idle H100 shows (driver reservations)."""
    facts = gpu_facts(1)
    assert isinstance(facts.nvml, Found)
    assert facts.nvml.value.gpus[0].memory == Found(MemoryInfo(80 * GiB, 1 * GiB, 79 * GiB))
    run = reproduce(facts, options(fake_env(**MEMORY), leave_mib=1000))
    assert not run.refused and len(run.probes) == 2


def test_in_process_without_torchs_cache_says_it_cannot_reproduce(
    fake_env: EnvMaker, tmp_path: Path
) -> None:
    """PYTORCH_NO_CUDA_MEMORY_CACHING=1: torch's cache holds nothing, so --in-process has
    nothing to hold; inconclusive and why, never "ruled out" (issue 34)."""
    facts = idle_facts()
    env = {**fake_env(**MEMORY), "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    run = reproduce(facts, options(env, in_process=True))
    assert run.probes == ()
    finding = only(reproduce_findings(facts, run))
    assert finding.code != "smoke.pressure-ruled-out"
    assert finding.inconclusive
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in finding.title + str(finding.evidence)


def test_an_execution_failure_under_lazy_loading_counts_as_memory(fake_env: EnvMaker) -> None:
    """CUDA_MODULE_LOADING=LAZY (the default): a kernel with no memory to load into fails its
    launch with CUBLAS_STATUS_EXECUTION_FAILED; with EAGER loading it is some other error."""
    env = fake_env(**MEMORY, CUBLAS_MIB="8", CUBLAS_ERROR="cublas-execution-failed")
    facts = idle_facts()
    finding = only(reproduce_findings(facts, reproduce(facts, options(env))))
    assert finding.code == "smoke.pressure-reproduces"
    assert "*_STATUS_EXECUTION_FAILED" in evidence(finding)

    facts = eager(facts)
    finding = only(reproduce_findings(facts, reproduce(facts, options(env))))
    assert finding.code == "smoke.pressure-other-error"


def eager(facts: Facts) -> Facts:
    """The same machine with CUDA_MODULE_LOADING=EAGER in the environment."""
    variables = (*facts.env.variables, ("CUDA_MODULE_LOADING", "EAGER"))
    return replace(facts, env=replace(facts.env, variables=variables))


def test_a_job_that_arrives_mid_search_stops_it(fake_env: EnvMaker) -> None:
    """The GPU is read again before every probe after the baseline (issue 34): once NVML lists
    another process on it, no further probe fills it."""
    facts = idle_facts()
    busy = gpu_facts(1, free_mib=40000, processes=((777, "python train.py", 40000),))
    readings = [facts.nvml, facts.nvml, busy.nvml]
    asked: list[int] = []

    def recheck() -> object:
        asked.append(1)
        return readings[min(len(asked) - 1, len(readings) - 1)]

    run = reproduce(facts, options(fake_env(**MEMORY)), recheck)  # type: ignore[arg-type]  # a reading
    assert len(run.probes) == 3  # the baseline, then two probes while the GPU was idle
    assert "no longer idle" in run.problem and "777" in run.problem
    codes = [f.code for f in reproduce_findings(facts, run)]
    assert codes[0] == "smoke.reproduce-inconclusive", codes

    forced = reproduce(facts, options(fake_env(**MEMORY), gpu=0, force=True), recheck)  # type: ignore[arg-type]  # a reading
    assert not forced.problem  # --force: the user accepted to fill a GPU others use
