"""Attribution: the same error, different machines, different causes — from the facts alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envdoctor.model.facts import DeviceNode, EccErrors, Facts, RowRemap
from envdoctor.model.finding import Finding
from envdoctor.model.probed import Found
from envdoctor.smoke.attribute import fmt_bytes, smoke_findings
from envdoctor.smoke.model import (
    FAILED,
    PASSED,
    SKIPPED,
    ChildRun,
    NotRun,
    SmokeRun,
    StepResult,
    Target,
)
from tests import factories
from tests.smoke.conftest import errors, gpu_facts, uuid

ERR = errors()
VENV = "/opt/venv/lib/python3.12/site-packages"


def failing(
    step: str,
    fixture: str = "",
    *,
    info: tuple[tuple[str, str], ...] = (),
    error: str = "",
    kind: str = "",
    seconds: float = 0.5,
) -> ChildRun:
    """A GPU 0 run whose ``step`` failed with the fixture's verbatim text (or ``error``)."""
    if fixture:
        error = f"{ERR[fixture]['type']}: {ERR[fixture]['message']}"
    steps = [
        StepResult("import", PASSED),
        StepResult("context", PASSED, info=info),
        StepResult(step, FAILED, error=error, kind=kind, seconds=seconds),
    ]
    return ChildRun(
        Target("GPU 0", (0,), uuid(0)), "/opt/venv/bin/python", tuple(steps), "completed", 3.0
    )


def only(facts: Facts, child: ChildRun) -> Finding:
    (finding,) = smoke_findings(facts, SmokeRun("/opt/venv/bin/python", (child,)))
    return finding


def test_cudnn_not_initialized_with_memory_held_by_another_process() -> None:
    facts = gpu_facts(
        1, free_mib=210, processes=((4242, "python train.py", 81000), (77, "jupyter", 300))
    )
    finding = only(facts, failing("conv-forward", "cudnn-not-initialized"))
    assert finding.code == "smoke.cudnn-not-initialized"
    assert finding.title == (
        "GPU 0: cuDNN failed to initialise (CUDNN_STATUS_NOT_INITIALIZED) — memory pressure: "
        "GPU 0 has only 210 MiB free and PID 4242 `python train.py` holds 79.1 GiB"
    )
    evidence = dict(finding.evidence)
    assert evidence["memory"] == (
        "GPU 0 has 210 MiB free of 80.0 GiB; PID 4242 `python train.py` holds 79.1 GiB; "
        "PID 77 `jupyter` holds 300 MiB"
    )
    assert evidence["memory read by"] == "NVML"
    assert evidence["error"] == "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
    assert finding.remediation is not None
    assert finding.remediation.steps[:2] == (
        "kill 4242   # `python train.py` holds 79.1 GiB",
        "kill 77   # `jupyter` holds 300 MiB",
    )
    # not on GPU 0, which others fill: --reproduce would refuse it and pick an idle GPU
    assert finding.remediation.steps[-1].startswith(
        "envdoctor smoke --reproduce cudnn-init   # on an idle GPU"
    )


def test_the_childs_own_memory_reading_beats_nvmls() -> None:
    facts = gpu_facts(1, free_mib=40000)
    child = failing(
        "gemm-fp32",
        "cublas-alloc-failed",
        info=(("free", str(150 << 20)), ("total", str(80 << 30))),
    )
    evidence = dict(only(facts, child).evidence)
    assert evidence["memory"] == "GPU 0 has 150 MiB free of 80.0 GiB"
    assert evidence["memory read by"] == "torch.cuda.mem_get_info in the smoke child"


def test_cudnn_not_initialized_with_a_foreign_cudnn_on_ld_library_path() -> None:
    facts = gpu_facts(
        1,
        torch_over={
            "location": f"{VENV}/torch",
            "loaded_libraries": (("libcudnn", "/usr/local/cuda-11.8/lib64/libcudnn.so.8.9.7"),),
        },
        env={"LD_LIBRARY_PATH": "/usr/local/cuda-11.8/lib64:/usr/lib"},
    )
    finding = only(facts, failing("conv-forward", "cudnn-not-initialized"))
    assert (
        "torch loaded libcudnn.so.8.9.7 from /usr/local/cuda-11.8/lib64, not its own copy"
        in finding.title
    )
    evidence = dict(finding.evidence)
    assert evidence["cuDNN torch was built with"] == "91500"
    assert evidence["LD_LIBRARY_PATH"] == "/usr/local/cuda-11.8/lib64:/usr/lib"
    assert finding.remediation is not None
    assert finding.remediation.steps[0] == (
        "remove /usr/local/cuda-11.8/lib64 from LD_LIBRARY_PATH (it shadows torch's own libcudnn)"
    )


def test_a_memory_reading_that_is_no_byte_count_falls_back_to_nvml() -> None:
    """The child runs in the target interpreter: free = 10**400 ended smoke in "internal
    error" (a float division of it); "²" and -5 are no byte count either."""
    facts = gpu_facts(1, free_mib=210)
    for odd in ("1" + "0" * 400, "\u00b2", "-5"):
        child = failing("gemm-fp32", "cublas-alloc-failed", info=(("free", odd), ("total", odd)))
        evidence = dict(only(facts, child).evidence)
        assert evidence["memory"] == "GPU 0 has 210 MiB free of 80.0 GiB", odd
        assert evidence["memory read by"] == "NVML"


def test_cudnn_not_initialized_with_plenty_of_memory_and_clean_libraries() -> None:
    facts = gpu_facts(
        1,
        free_mib=79000,
        torch_over={
            "location": f"{VENV}/torch",
            "loaded_libraries": (("libcudnn", f"{VENV}/nvidia/cudnn/lib/libcudnn.so.9"),),
        },
    )
    finding = only(facts, failing("conv-forward", "cudnn-not-initialized"))
    assert finding.title.endswith("— not memory pressure (77.1 GiB free); no foreign library found")
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("envdoctor smoke --reproduce cudnn-init")


def test_no_kernel_image_for_a_newer_gpu() -> None:
    facts = gpu_facts(
        1,
        compute_capability=Found("12.0"),
        torch_over={"version": "2.5.1+cu121", "arch_list": ("sm_50", "sm_80", "sm_86", "sm_90")},
    )
    finding = only(facts, failing("memory", "no-kernel-image"))
    assert finding.code == "smoke.no-kernel-image"
    assert finding.title.endswith(
        "— torch 2.5.1+cu121 has no sm_120 kernels (built for sm_50, sm_80, sm_86, sm_90)"
    )
    assert dict(finding.evidence)["GPU architecture"] == "sm_120 (compute capability 12.0)"
    assert finding.remediation is not None
    (step,) = finding.remediation.steps  # a command to paste: no <cuXXX> left to fill in
    assert step.startswith("envdoctor recommend --python ") and "<" not in step


def test_no_kernel_image_although_the_arch_is_listed() -> None:
    finding = only(gpu_facts(1), failing("memory", "no-kernel-image"))
    assert "lists sm_90 yet its kernels did not load" in finding.title


def test_driver_too_old_for_torchs_cuda() -> None:
    facts = gpu_facts(1)
    facts = replace(facts, nvml=factories.nvml(cuda_driver_version=Found("12.2")))
    finding = only(facts, failing("context", "driver-too-old"))
    assert finding.code == "smoke.driver-insufficient"
    assert finding.title.endswith("— torch needs CUDA 13.0; the driver supports only up to 12.2")
    assert finding.remediation is not None and finding.remediation.needs_root
    assert "whl/cu122" in finding.remediation.steps[1]


def test_forward_compatibility_library_on_the_path() -> None:
    facts = gpu_facts(1, env={"LD_LIBRARY_PATH": "/usr/local/cuda/compat:/usr/lib"})
    finding = only(facts, failing("context", "forward-compat-804"))
    assert finding.code == "smoke.driver-mismatch"
    assert "(/usr/local/cuda/compat) is on LD_LIBRARY_PATH" in finding.title


def test_busy_gpu_in_exclusive_mode() -> None:
    facts = gpu_facts(
        1, processes=((999, "vllm serve", 70000),), compute_mode=Found("exclusive-process")
    )
    finding = only(facts, failing("context", "device-busy"))
    assert finding.title.endswith(
        "— the GPU is in exclusive-process mode and PID 999 `vllm serve` owns it"
    )


def test_permission_denied_device_node_explains_no_device() -> None:
    facts = gpu_facts(1)
    nodes = Found((DeviceNode("/dev/nvidia0", True, "0660", False, False),))
    facts = replace(facts, kernel=replace(facts.kernel, device_nodes=nodes))
    finding = only(facts, failing("context", "no-cuda-gpus"))
    assert finding.title.endswith("— this user cannot open /dev/nvidia0")


def test_illegal_memory_access_on_a_gpu_with_ecc_errors() -> None:
    facts = gpu_facts(
        1, ecc=Found(EccErrors(3, 5)), row_remap=Found(RowRemap(0, 1, pending=True, failure=False))
    )
    child = failing("gemm-fp16", "illegal-memory-access")
    child = replace(
        child,
        steps=(
            *child.steps,
            StepResult(
                "conv-forward",
                SKIPPED,
                reason="the CUDA context is unusable after `gemm-fp16` failed with: …",
            ),
        ),
    )
    finding = only(facts, child)
    assert finding.code == "smoke.illegal-memory-access"
    assert (
        "reports 3 uncorrectable ECC error(s) since the driver loaded; a row remap is pending"
        in finding.title
    )
    assert dict(finding.evidence)["then skipped"].startswith(
        "conv-forward: the CUDA context is unusable"
    )


def test_context_timeout_without_persistence_mode() -> None:
    facts = gpu_facts(1, persistence_mode=Found(False))
    child = failing(
        "context", error="no result within the per-step limit of 30 s", kind="timeout", seconds=30.0
    )
    finding = only(facts, child)
    assert finding.code == "smoke.timeout"
    assert finding.title.endswith(
        "— persistence mode is off, so the driver initialises the GPU on each first use"
    )
    assert dict(finding.evidence)["hung in"] == "`context` after 30.0 s"


def test_not_run_is_inconclusive() -> None:
    run = SmokeRun(
        "/usr/bin/python3", not_run=(NotRun("GPU", "no GPU to test", (("NVML", "not found"),)),)
    )
    (finding,) = smoke_findings(gpu_facts(1), run)
    assert finding.code == "smoke.not-run" and finding.inconclusive


def test_fmt_bytes() -> None:
    assert fmt_bytes(210 << 20) == "210 MiB"
    assert fmt_bytes(int(79.1 * (1 << 30))) == "79.1 GiB"


@pytest.mark.parametrize(
    ("version", "location", "library"),
    [
        # an NGC image: torch built against the image's CUDA, no nvidia-* wheels
        (
            "2.5.0a0+e000cf0ad9.nv24.10",
            "/usr/local/lib/python3.10/dist-packages/torch",
            "/usr/local/cuda/lib64/libcudnn.so.9.5.0",
        ),
        # conda: the CUDA libraries live in the environment's lib
        (
            "2.5.1",
            "/opt/conda/lib/python3.11/site-packages/torch",
            "/opt/conda/lib/libcudnn.so.9.5.0",
        ),
    ],
)
def test_ngc_and_conda_libraries_are_torchs_own(version: str, location: str, library: str) -> None:
    """Not "foreign" copies to force-reinstall over (issue 34)."""
    facts = gpu_facts(
        1,
        torch_over={
            "version": version,
            "location": location,
            "loaded_libraries": (("libcudnn", library),),
        },
    )
    finding = only(facts, failing("conv-forward", "cudnn-not-initialized"))
    assert "not its own copy" not in finding.title
    assert finding.remediation is not None
    assert not any("pip install --force-reinstall" in step for step in finding.remediation.steps)
