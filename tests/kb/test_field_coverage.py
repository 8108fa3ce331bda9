"""The failure classes of issue 20, one real line (or block) each, with what a user reads.

Every line is from the in-sample corpus (tests/data/tracebacks/<id>/, with its source) or from
the program that prints it (torch, the CUDA runtime); the held-out logs are not used here.
"""

from __future__ import annotations

import pytest

from tests.kb.helpers import run


@pytest.mark.parametrize(
    ("log", "expected", "summary_part"),
    [
        # cuDNN refused, with the versions
        (
            "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 3, 2) "
            "but found runtime version (8, 2, 1). PyTorch already comes bundled with cuDNN.",
            "cudnn.version-incompatible",
            "built with cuDNN (8, 3, 2) but found cuDNN (8, 2, 1)",
        ),
        # the loader mixing two releases of one library family
        (
            "python: relocation error: /usr/local/cuda-11.1/lib64/libcublas.so: symbol "
            "runGemmShortApi, version libcublasLt.so.11 not defined in file libcublasLt.so.11 "
            "with link time reference",
            "libs.relocation-error",
            "libcublasLt.so.11 is older than what needs its symbol runGemmShortApi",
        ),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasSgemm( "
            "handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
            "cublas.invalid-value",
            "(CUBLAS_STATUS_INVALID_VALUE)",
        ),
        # THC-era wordings
        (
            "RuntimeError: cublas runtime error : the GPU program failed to execute at "
            "/pytorch/aten/src/THC/THCBlas.cu:258",
            "cublas.execution-failed",
            "the GPU program failed to execute",
        ),
        (
            "RuntimeError: cuda runtime error (101) : invalid device ordinal at "
            "/pytorch/torch/csrc/cuda/Module.cpp:59",
            "cuda.invalid-device-ordinal",
            "GPU number this process cannot see",
        ),
        (
            "THCudaCheck FAIL file=/home/nvidia/pytorch/aten/src/THC/generic/THCTensorMath.cu "
            "line=238 error=48 : no kernel image is available for execution on the device",
            "cuda.no-kernel-image",
            "not compiled for this GPU",
        ),
        # numeric-only codes
        (
            "`Unable to load cudart library /usr/lib/x86_64-linux-gnu/libcuda.so.570.169: cuda "
            "driver library init failure: 802`",
            "cuda.system-not-ready",
            "error 802",
        ),
        (
            'time=2024-12-18T11:04:06.910+05:00 level=INFO source=gpu.go:340 msg="Unable to load '
            "cudart CUDA management library /usr/local/cuda/lib64/libcudart.so.12.4.99: cudart "
            'init failure: 35"',
            "cuda.driver-too-old",
            "older CUDA",
        ),
        # busy or unavailable, the CUDA 12 wording
        (
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "cuda.devices-busy",
            "busy or unavailable",
        ),
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "cuda.ecc-error",
            "ECC could not correct",
        ),
        (
            "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 4f000",
            "nccl.duplicate-gpu",
            "Ranks 1 and 0 both use the GPU at bus 4f000",
        ),
        (
            "Error: `RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some "
            "cuda functions before calling NumCudaDevices() that might have already set an error? "
            "Error 803: system has unsupported display driver / cuda driver combination`",
            "cuda.driver-combination-unsupported",
            "error 803",
        ),
        (
            "[   81.967373] NVRM: GPU0 RmInitAdapter: Cannot initialize GSP firmware RM\n"
            "[   81.969353] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0x40:2168)\n",
            # the line before RmInitAdapter's names the step that failed: the GSP firmware
            "kernel.gsp-init-failed",
            "could not boot the GPU System Processor firmware",
        ),
        (
            "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA "
            "install root.",
            "build.cuda-home-missing",
            "no CUDA toolkit",
        ),
        # CTranslate2 loading cuDNN itself, on Linux and on Windows
        (
            "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, "
            "libcudnn_ops.so.9, libcudnn_ops.so}\n"
            "Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor\n",
            "libs.missing-library",
            "libcudnn_ops.so.9.1.0 cannot be loaded",
        ),
        (
            "Could not locate cudnn_ops64_9.dll. Please make sure it is in your library path!\n",
            "libs.missing-library",
            "cudnn_ops64_9.dll cannot be loaded",
        ),
        # the GradScaler assertion present only as the traceback's source line
        (
            '  File "/home/user/anaconda3/envs/science/lib/python3.11/site-packages/torch/cuda/'
            'amp/grad_scaler.py", line 372, in step\n'
            '    assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were '
            'recorded for this optimizer."\n',
            "amp.no-inf-checks",
            "found no gradients",
        ),
        # torch.cuda.is_available() False because torch.version.cuda is None: a CPU build
        (
            "PyTorch version: 1.7.1+cpu\nIs debug build: False\n"
            "CUDA used to build PyTorch: Could not collect\n",
            "cuda.torch-not-compiled",
            "CPU-only wheel",
        ),
    ],
)
def test_issue_20_classes_are_named_first(log: str, expected: str, summary_part: str) -> None:
    explanation = run(log)
    top = explanation.top
    assert top is not None and top.id == expected, [c.id for c in explanation.causes]
    assert explanation.status == "explained"
    assert summary_part in top.summary


def test_an_ecc_error_is_the_root_of_the_errors_it_breaks() -> None:
    log = (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    causes = run(log).causes
    assert causes[0].id == "cuda.ecc-error"
    assert causes[1].consequence_of == "cuda.ecc-error"


def test_no_devices_alone_is_only_a_possible_cause() -> None:
    """nvidia-smi's "No devices were found" says no GPU came up, not why: a possible cause
    (exit code 2) that points at the kernel log."""
    explanation = run("# nvidia-smi\nNo devices were found\n")
    assert explanation.status == "possible"
    assert explanation.exit_code == 2
    top = explanation.top
    assert top is not None and top.id == "nvidia-smi.no-devices"


def test_no_devices_with_the_kernel_log_names_the_init_failure() -> None:
    # tests/data/tracebacks/kernel.gpu-init-failed/ogkm-862.txt, cut to the two lines
    explanation = run(
        "No devices were found\n"
        "Jul 01 22:55:07 gpu kernel: NVRM: GPU 0000:01:00.0: RmInitAdapter failed! "
        "(0x22:0x56:884)\n"
    )
    top = explanation.top
    assert explanation.status == "explained"
    assert top is not None and top.id == "kernel.gpu-init-failed"
    assert "nvidia-smi.no-devices" in [c.id for c in explanation.causes if not c.is_root]
