"""Ranking: the first asynchronous CUDA error is the root; asserts explain what follows them."""

from __future__ import annotations

import pytest

from envdoctor.kb.analyzers import analyze_gres_count
from envdoctor.kb.loader import load_default_kb
from envdoctor.kb.model import Cause
from tests.kb.helpers import ids, run

TARGET_ASSERT = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: "
    "[0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed."
)
INDEX_ASSERT = (
    "../aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [18,0,0], "
    "thread: [5,0,0] Assertion `srcIndex < srcSelectDimSize` failed."
)
DSA = "RuntimeError: CUDA error: device-side assert triggered"
CUBLAS_ALLOC = (
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
)
CUDNN_INIT = "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
LAUNCH = "RuntimeError: CUDA error: unspecified launch failure"


def test_kernel_assert_is_root_and_explains_the_generic_assert() -> None:
    explanation = run("\n".join([TARGET_ASSERT, TARGET_ASSERT, DSA]))
    top = explanation.top
    assert top is not None and top.id == "cuda.assert-target-out-of-range"
    generic = next(c for c in explanation.causes if c.id == "cuda.device-assert")
    assert generic.consequence_of == "cuda.assert-target-out-of-range"
    assert generic.confidence < top.confidence
    assert explanation.status == "explained"


def test_kernel_assert_printed_after_the_runtime_error_still_wins() -> None:
    explanation = run("\n".join([DSA, "Traceback ...", TARGET_ASSERT]))
    assert ids(explanation)[0] == "cuda.assert-target-out-of-range"


def test_device_side_assert_explains_later_cublas_and_cudnn_errors() -> None:
    explanation = run("\n".join([DSA, "next step", CUBLAS_ALLOC, CUDNN_INIT]))
    assert ids(explanation)[0] == "cuda.device-assert"
    for cause in explanation.causes[1:]:
        assert cause.consequence_of == "cuda.device-assert", cause.id


def test_index_assert_explains_cublas_errors() -> None:
    explanation = run("\n".join([INDEX_ASSERT, CUBLAS_ALLOC]))
    assert ids(explanation)[0] == "cuda.assert-index-out-of-range"
    assert all(c.consequence_of for c in explanation.causes[1:])


def test_first_asynchronous_error_is_the_root() -> None:
    explanation = run("\n".join([ILLEGAL, "...", LAUNCH, DSA]))
    assert ids(explanation)[0] == "cuda.illegal-memory-access"
    assert {c.consequence_of for c in explanation.causes[1:]} == {"cuda.illegal-memory-access"}


def test_follow_on_error_alone_is_a_cause() -> None:
    explanation = run(CUBLAS_ALLOC)
    assert explanation.top is not None and explanation.top.is_root
    assert explanation.top.id == "cublas.alloc-failed"
    assert explanation.top.alternatives == ("cublas.embedding-too-small",)


def test_follow_on_error_before_the_assert_is_not_its_consequence() -> None:
    explanation = run("\n".join([CUDNN_INIT, "restart", DSA]))
    cudnn = next(c for c in explanation.causes if c.id == "cudnn.not-initialized")
    assert cudnn.is_root


def test_explains_declared_in_data() -> None:
    log = (
        "RuntimeError: NCCL error in ProcessGroupNCCL.cpp:290, unhandled system error\n"
        "node08:27106:27302 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-zTYolS (size 5967872)\n"
    )
    explanation = run(log)
    assert ids(explanation) == ["nccl.shared-memory", "nccl.system-error"]
    assert explanation.causes[1].consequence_of == "nccl.shared-memory"


def test_a_cause_two_signatures_explain_goes_to_the_one_not_itself_explained() -> None:
    """shm_open's "Permission denied" explains the shared-memory failure, which explains the
    system error: the system error must not become a root cause because its nearer explainer
    is itself explained (a world round 8 log named /dev/shm's size instead of its mode)."""
    log = (
        "RuntimeError: NCCL error in ProcessGroupNCCL.cpp:290, unhandled system error\n"
        "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied\n"
        "node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-b7948f403864987a-0-3-0 (size 4460544)\n"
    )
    explanation = run(log)
    assert explanation.top is not None and explanation.top.id == "nccl.shm-permission-denied"
    assert [c.id for c in explanation.causes if c.is_root] == ["nccl.shm-permission-denied"]


def test_independent_errors_rank_by_confidence() -> None:
    explanation = run(
        "RuntimeError: stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1\n"
        + CUDNN_INIT
    )
    assert ids(explanation) == ["data.collate-unequal-size", "cudnn.not-initialized"]
    assert all(c.is_root for c in explanation.causes)


def test_summary_is_filled_from_captures() -> None:
    explanation = run(
        "RuntimeError: Attempting to deserialize object on CUDA device 3 but torch.cuda.device_count() is 1."
    )
    top = explanation.top
    assert top is not None
    assert top.hit.occurrences[0].capture("device") == "3"
    assert "map_location" in top.summary


def test_a_fallback_yields_to_a_signature_on_its_line_and_stands_alone_elsewhere() -> None:
    """A generic reading (role fallback) is the consequence of a specific signature that read
    the same line; on a line nothing else reads, it is the cause."""
    cuda_lib = (
        "ImportError: libcudnn.so.8: cannot open shared object file: No such file or directory"
    )
    other_lib = "ImportError: libGL.so.1: cannot open shared object file: No such file or directory"
    specific = run(cuda_lib + "\n")
    assert specific.top is not None and specific.top.id == "libs.missing-library"
    generic = next(c for c in specific.causes if c.id == "fallback.shared-library-not-found")
    assert generic.consequence_of == "libs.missing-library"
    alone = run(other_lib + "\n")
    assert alone.top is not None and alone.top.id == "fallback.shared-library-not-found"
    assert alone.status == "explained" and "libGL.so.1" in alone.top.summary


# NVIDIA/nvidia-docker#1160: the reporter's command and the shell's answer, verbatim
RUNTIME_IMAGE = "docker run -it --gpus all nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04 /bin/bash"
NVCC_MISSING = "bash: nvcc: command not found"


def test_a_line_read_beside_its_context_names_the_image_and_explains_the_build_reading() -> None:
    explanation = run(
        "\n".join([RUNTIME_IMAGE, "root@7c0be9bfaeec:/# nvcc --version", NVCC_MISSING])
    )
    top = explanation.top
    assert top is not None and top.id == "container.runtime-image-no-toolkit"
    assert top.notes  # the context rule says why: the image named before it
    build = next(c for c in explanation.causes if c.id == "build.cuda-home-missing")
    assert build.consequence_of == "container.runtime-image-no-toolkit"


def test_the_same_line_without_that_context_is_not_read_that_way() -> None:
    devel = RUNTIME_IMAGE.replace("-runtime-", "-devel-")
    far = "\n".join([RUNTIME_IMAGE, *(f"step {n}" for n in range(200)), NVCC_MISSING])
    for log in (NVCC_MISSING, f"{devel}\n{NVCC_MISSING}", far, f"{NVCC_MISSING}\n{RUNTIME_IMAGE}"):
        assert ids(run(log)) == ["build.cuda-home-missing"], log[:80]


def _capability_warning(gpu: str, capability: str) -> str:
    """torch's warning (torch/cuda/__init__.py, _check_capability) as it prints it."""
    return (
        f"    Found GPU0 {gpu} which is of cuda capability {capability}.\n"
        "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
        "    (3.7) - (8.6)\n"
    )


def test_torchs_capability_warning_for_a_newer_minor_is_harmless_and_for_a_newer_major_not() -> (
    None
):
    harmless = run(_capability_warning("NVIDIA GeForce RTX 4090", "8.9"))
    assert harmless.causes == ()
    assert [c.id for c in harmless.harmless] == ["torch.gpu-newer-minor-than-build"]
    refused = run(_capability_warning("NVIDIA H100 PCIe", "9.0"))
    assert refused.status == "explained" and not refused.harmless


# ldconfig under WSL2 on every package install (microsoft/WSL#5548, #11229): its line verbatim
# from mahbub-aumi/tensorflow-cuda-wsl-ubuntu24.04#2, after the trigger line apt prints first
_WSL_LDCONFIG = (
    "Processing triggers for libc-bin (2.35-0ubuntu3.8) ...\n"
    "/sbin/ldconfig.real: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link\n"
)
# Theano/Theano#5972's device line (a run the thread judged fine)
_THEANO_DEVICE_LINE = (
    "Using gpu device 0: GeForce GTX 1060 (CNMeM is enabled with initial size: 100 MB, cuDNN "
    "Mixed dnn version. The header is from one version, but we link with a different version "
    "(6021, 5005))\n"
)


@pytest.mark.parametrize(
    ("notice", "benign", "failure", "cause"),
    [
        # the WSL notice does not hide a real failure after it
        (
            _WSL_LDCONFIG,
            "wsl.libcuda-copies-not-symlinks",
            _WSL_LDCONFIG + "OSError: libcudart.so.12: cannot open shared object file: "
            "No such file or directory\n",
            "libs.missing-library",
        ),
        # Theano's message alone (raised where cuDNN is required), as keras-team/keras#720
        # pasted it, is a cause
        (
            _THEANO_DEVICE_LINE,
            "theano.runs-without-cudnn",
            "Mixed dnn version. The header is from one version, but we link with a different "
            "version (2000, 20)\n",
            "cudnn.header-library-mismatch",
        ),
    ],
)
def test_a_notice_the_program_survives_is_harmless_and_the_failure_beside_it_is_not(
    notice: str, benign: str, failure: str, cause: str
) -> None:
    alone = run(notice)
    assert alone.causes == ()
    assert [c.id for c in alone.harmless] == [benign]
    failed = run(failure)
    assert failed.status == "explained"
    assert failed.top is not None and failed.top.id == cause


def _smi_row(ecc: str) -> str:
    """nvidia-smi's first row of a GPU, as ORNL-CEES/mfmg#55 pasted it, with its ECC column."""
    return f"|   1  Tesla K40m          Off  | 00000000:82:00.0 Off |{ecc:>21} |\n"


def test_nvidia_smis_table_is_read_for_uncorrectable_ecc_only_when_the_count_is_not_zero() -> None:
    for quiet in ("0", "N/A"):
        assert run(_smi_row(quiet)).causes == (), quiet
    faulty = run(_smi_row("3"))
    assert faulty.status == "explained"
    assert faulty.top is not None and faulty.top.id == "cuda.ecc-error"


# tensorflow/tensorflow#4768, the reporter's log, verbatim: libcuda 361.93.2, the module 352.63
TF_VERSIONS_DIFFER = """\
E tensorflow/stream_executor/cuda/cuda_driver.cc:491] failed call to cuInit: CUDA_ERROR_INVALID_VALUE
I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:153] retrieving CUDA diagnostic information for host: next-gpu1
I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:160] hostname: next-gpu1
I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:185] libcuda reported version is: 361.93.2
I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:347] driver version file contents: \"\"\"NVRM version: NVIDIA UNIX x86_64 Kernel Module  352.63  Sat Nov  7 21:25:42 PST 2015
GCC version:  gcc version 4.8.4 (Ubuntu 4.8.4-2ubuntu1~14.04.1)
\"\"\"
I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:189] kernel reported version is: 352.63.0
E tensorflow/stream_executor/cuda/cuda_diagnostics.cc:296] kernel version 352.63.0 does not match DSO version 361.93.2 -- cannot find working devices in this configuration
I tensorflow/core/common_runtime/gpu/gpu_init.cc:81] No GPU devices available on machine.
"""
# tensorflow/tensorflow#62494, the first lines of the reporter's log, verbatim: the same version
TF_VERSIONS_AGREE = """\
2023-11-28 16:42:02.582642: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:169] retrieving CUDA diagnostic information for host: idun-06-18
2023-11-28 16:42:02.582670: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:176] hostname: idun-06-18
2023-11-28 16:42:02.582809: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:200] libcuda reported version is: 515.43.4
2023-11-28 16:42:02.582869: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:204] kernel reported version is: 515.43.4
2023-11-28 16:42:02.582896: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:310] kernel version seems to match DSO: 515.43.4
2023-11-28 16:42:02.591947: E tensorflow/stream_executor/cuda/cuda_driver.cc:328] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected
"""


def test_tensorflows_two_version_lines_name_the_mismatch_with_both_versions() -> None:
    explanation = run(TF_VERSIONS_DIFFER)
    top = explanation.top
    assert top is not None and top.id == "driver.module-differs-from-libcuda"
    assert "352.63.0" in top.summary and "361.93.2" in top.summary
    nvml = next(c for c in explanation.causes if c.id == "nvml.driver-library-mismatch")
    assert nvml.consequence_of == top.id
    # without TensorFlow's own verdict line (releases before it, or a cut paste) the pair still
    # names it; the cuInit failure is what follows from it
    lines = TF_VERSIONS_DIFFER.splitlines(keepends=True)
    assert "does not match DSO" in lines[8]
    cut = run("".join(lines[:8] + lines[9:]))
    assert cut.top is not None and cut.top.id == "driver.module-differs-from-libcuda"


def test_tensorflows_version_lines_that_agree_or_stand_alone_say_nothing() -> None:
    agree = run(TF_VERSIONS_AGREE)
    assert "driver.module-differs-from-libcuda" not in ids(agree)
    assert ids(agree) == ["cuda.no-device"]
    lines = TF_VERSIONS_DIFFER.splitlines(keepends=True)
    module_first = "".join([lines[7], lines[3]])  # the module's line before libcuda's
    assert run(module_first).causes == ()


# facebookarchive/caffe2#549, the reporter's CMake status line, verbatim (a directory)
CUDNN_FOUND_DIRECTORY = (
    "-- Found cuDNN: v6.0.21  (include: /export/mlrg/hma02/cudnn/include, library: "
    "/export/mlrg/hma02/cudnn/lib64)"
)


def test_cmakes_cudnn_line_is_a_cause_only_where_the_library_is_a_directory() -> None:
    found = run(CUDNN_FOUND_DIRECTORY)
    assert found.top is not None and found.top.id == "build.cudnn-library-is-directory"
    assert "/export/mlrg/hma02/cudnn/lib64" in found.top.summary
    a_file = CUDNN_FOUND_DIRECTORY.replace("/lib64)", "/lib64/libcudnn.so)")
    assert run(a_file).causes == ()


def test_a_missing_nvjitlink_symbol_under_a_toolkit_is_read_as_nvjitlink_too_old() -> None:
    # both readings fit a toolkit's libcusparse missing nvJitLink's versioned function: the
    # one that names the release it needs comes first
    line = (
        "ImportError: /usr/local/cuda-12.1/lib64/libcusparse.so.12: undefined symbol: "
        "__nvJitLinkAddData_12_1, version libnvJitLink.so.12"
    )
    assert ids(run(line))[:2] == ["libs.nvjitlink-too-old", "libs.cuda-libraries-mixed"]


# Lightning's GPU check, the exception's two lines as device_parser.py's f-string forms them
# and as a training project's docs quote them (a config asking for two GPUs on a one-GPU machine)
LIGHTNING_REQUEST = (
    "lightning.fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1]"
)
LIGHTNING_VISIBLE = " But your machine only has: [0]"


def test_lightnings_two_lines_read_alone_and_together() -> None:
    together = run(f"{LIGHTNING_REQUEST}\n{LIGHTNING_VISIBLE}\n")
    top = together.top
    assert top is not None and top.id == "lightning.gpus-not-visible"
    assert "[0, 1]" in top.summary and "only [0]" in top.summary
    for alone in (LIGHTNING_REQUEST, LIGHTNING_VISIBLE):
        explanation = run(alone + "\n")
        assert explanation.top is not None and explanation.top.id == "lightning.gpus-not-visible"


# FFmpeg's NVENC refusing a fourth session on GeForce cards, verbatim from
# joinhive-ai/transcoder#4 (fixed there by lifting the consumer cards' session limit); the
# transcoder's own lines after it say only "Cannot allocate memory"
NVENC_SESSION_LIMIT = """\
[mpegts @ 0x347e840] Format mpegts detected only with low score of 2, misdetection possible!
[h264_nvenc @ 0x46d8300] OpenEncodeSessionEx failed: out of memory (10): (no details)
ERROR: encoder.c:199] Error opening video encoder : Cannot allocate memory
ERROR: transcoder.c:173] Unable to open output : Cannot allocate memory
"""


def test_nvencs_out_of_memory_is_its_session_limit_not_the_gpus_memory() -> None:
    found = run(NVENC_SESSION_LIMIT)
    assert found.top is not None and found.top.id == "nvenc.session-limit"
    assert "cuda.out-of-memory" not in ids(found)


def test_ffmpegs_follow_up_lines_defer_to_the_line_that_names_the_cause() -> None:
    # the loader's line, then hwcontext_cuda's and fftools' results of it: one cause
    log = (
        "[AVHWDeviceContext @ 0x59162cd23d40] Cannot load libcuda.so.1\n"
        "[AVHWDeviceContext @ 0x59162cd23d40] Could not dynamically load CUDA\n"
        "Device creation failed: -1.\n"
    )
    assert ids(run(log)) == ["driver.libcuda-missing"]
    # HandBrake's start banner on a Windows machine without an NVIDIA driver says this on
    # every run, encoding or not: alone, it is no cause
    assert run("Cannot load nvEncodeAPI64.dll\n").causes == ()


# slurmctld's notice when a node reports another GPU count than before, verbatim from
# ComputeCanada/puppet-magic_castle#361 (a MIG layout cut from four parts to three)
GRES_COUNT_CHANGED = (
    "May 23 12:49:52 mgmt1.int.p2-ecole.calculquebec.cloud slurmctld[80708]: slurmctld: "
    "_node_config_validate: gres/gpu: Count changed on node nodegpu1 (4 != 3)"
)


def test_slurms_gpu_count_change_is_a_cause_only_when_it_fell() -> None:
    fell = run(GRES_COUNT_CHANGED + "\n")
    assert fell.top is not None and fell.top.id == "slurm.gres-count-low"
    assert "now counts 3 GPUs on nodegpu1, where it counted 4" in fell.top.summary
    rose = GRES_COUNT_CHANGED.replace("(4 != 3)", "(3 != 4)")
    assert run(rose + "\n").causes == ()


def test_slurms_count_analyzer_takes_any_digits_the_regex_engines_take() -> None:
    # the re engine's \d matches "²" and "٣" (int() takes the second only); RE2's does not
    kb = load_default_kb()
    assert analyze_gres_count({"before": "4", "found": "²"}, kb).confidence == 0.0
    fell = analyze_gres_count({"before": "٤", "found": "٣", "node": "n1"}, kb)
    assert "now counts ٣ GPUs on n1" in fell.summary


def test_glibc_and_libstdcxx_versions_are_told_apart() -> None:
    # glibc is the distribution's and cannot be upgraded alone; libstdc++ comes with compilers
    # and conda environments (the first line is pytorch/pytorch#6607's with its path cut; the
    # second is the loader's same message for libstdc++)
    glibc = "ImportError: /lib64/libc.so.6: version `GLIBC_2.17' not found (required by _C.so)"
    cxx = "ImportError: /usr/lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found"
    assert ids(run(glibc + "\n"))[:1] == ["libs.glibc-too-old"]
    assert ids(run(cxx + "\n"))[:1] == ["libs.libstdcxx-too-old"]


def _first_cause(log: str, signature: str) -> Cause:
    """The log's first cause, which must be ``signature``'s."""
    top = run(log).top
    assert top is not None and top.id == signature, ids(run(log))
    return top


def test_condas_cpu_build_strings_are_read_and_its_cuda_ones_are_not() -> None:
    # `conda list` rows: conda-forge's CPU libtorch beside pip's CUDA torch (the first two lines
    # are nv-morpheus/Morpheus#1943's); the same packages as CUDA builds say nothing
    cpu = (
        "libtorch                  2.4.0           cpu_generic_h4a3044c_1    conda-forge\n"
        "torch                     2.4.0+cu124              pypi_0    pypi\n"
    )
    top = _first_cause(cpu, "conda.cpu-build-installed")
    assert top.summary.startswith("conda's libtorch 2.4.0 is the CPU-only build")
    cuda = "libtorch                  2.4.0           cuda126_generic_h0a1b2c3_200    conda-forge\n"
    assert run(cuda).causes == ()
    plan = "  jaxlib             conda-forge/linux-64::jaxlib-0.4.4-cuda12py311h1234567_201\n"
    assert run(plan).causes == ()


def test_nvccs_killed_stage_is_memory_and_its_crashed_stage_is_the_toolchain() -> None:
    killed = "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n"
    crashed = "nvcc error : 'cudafe++' died with status 0xC0000005 (ACCESS_VIOLATION)\n"
    assert ids(run(killed))[:1] == ["host.oom-killed"]
    assert ids(run(crashed)) == ["build.nvcc-stage-crashed"]


def test_deepspeeds_skipped_cuda_check_is_no_cause_and_its_refusal_is() -> None:
    # op_builder/builder.py: the same words, as the exception (a build that stops) and as the
    # warning under DS_SKIP_CUDA_CHECK=1 (a build that goes on)
    refusal = (
        "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: "
        "Installed CUDA version 11.8 does not match the version torch was compiled with 12.1"
    )
    skipped = (
        " [WARNING]  DeepSpeed Op Builder: Installed CUDA version 11.8 does not match the version"
        " torch was compiled with 12.1.Detected `DS_SKIP_CUDA_CHECK=1`: Allowing this"
        " combination of CUDA, but it may result in unexpected behavior."
    )
    assert ids(run(refusal + "\n"))[:1] == ["build.cuda-version-mismatch"]
    assert run(skipped + "\n").causes == ()


def test_an_extension_build_with_no_gpu_names_the_arch_list_not_a_generic_index_error() -> None:
    # torch.utils.cpp_extension with no visible GPU and no TORCH_CUDA_ARCH_LIST (the traceback's
    # last lines as mchong6/JoJoGAN#2 shows them, on a Colab runtime without a GPU)
    log = (
        "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'\n"
        "-> 1606         arch_list[-1] += '+PTX'\n"
        "IndexError: list index out of range\n"
    )
    top = _first_cause(log, "build.gpu-arch-undetected")
    assert "set TORCH_CUDA_ARCH_LIST" in top.summary
    assert any("No CUDA runtime is found" in note for note in top.notes)


def test_omniverses_refused_driver_range_is_too_old_only_when_it_starts_at_zero() -> None:
    # isaac-sim/IsaacLab#4244's line, and the same check refusing a range of newer drivers
    # (a known-bad release, not an old driver)
    old = "The unsupported driver range: [0.0, 535.129)\n"
    newer = "The unsupported driver range: [565.0, 565.77)\n"
    assert ids(run(old))[:1] == ["fallback.driver-too-old"]
    assert run(newer).causes == ()


def test_a_removed_device_property_names_the_member_and_cuda_13() -> None:
    line = 'Environment.tpp(293): error: class "cudaDeviceProp" has no member "computeMode"\n'
    top = _first_cause(line, "build.cuda-device-prop-removed")
    assert "has no computeMode" in top.summary


def test_tgis_sharding_refusal_names_the_import_error_it_warned_about() -> None:
    # server/text_generation_server/models/__init__.py: the warning at start, then the refusal
    log = (
        "WARNING text_generation_launcher: Could not import Flash Attention enabled models: "
        "GPU with CUDA capability 7 0 is not supported\n"
        "NotImplementedError: Sharded Llama requires Flash Attention enabled models.\n"
    )
    top = _first_cause(log, "tgi.flash-models-unavailable")
    assert top.summary.endswith(": GPU with CUDA capability 7 0 is not supported")
    refusal = log.splitlines(keepends=True)[1]
    alone = _first_cause(refusal, "tgi.flash-models-unavailable")
    assert alone.summary.endswith("for sharded Llama here")


def test_an_error_inside_libstdcxx_headers_names_the_host_compiler_and_one_in_the_project_not() -> (
    None
):
    # ggml-org/llama.cpp#22714's line (nvcc's front end, "file(line)"), and the same error in
    # the project's own source: a bug of the project's, not the toolchain's
    headers = "  /usr/include/c++/16.1.1/type_traits(3427): error: type name is not allowed\n"
    own = "  ggml/src/ggml-cuda/common.cuh(3427): error: type name is not allowed\n"
    top = _first_cause(headers, "build.host-headers-rejected")
    assert "(libstdc++ 16.1.1)" in top.summary
    assert "build.host-headers-rejected" not in ids(run(own))


def test_cmakes_own_test_target_without_architectures_is_the_compiler_identification() -> None:
    # NVlabs/instant-ngp#1320 (CMake's try_compile target) and EXP-code/EXP#63 (a project's)
    ours = '  CUDA_ARCHITECTURES is empty for target "cmTC_4f57c".\n'
    projects = '  CUDA_ARCHITECTURES is empty for target "exputil".\n'
    _first_cause(ours, "build.cmake-cuda-compiler-unidentified")
    top = _first_cause(projects, "build.cmake-cuda-architectures-unset")
    assert "target exputil" in top.summary


def test_cmakes_failed_test_program_yields_to_the_nvcc_error_under_it() -> None:
    # NVIDIA/cccl#5276's lines: the test program failed on an architecture a newer CUDA removed
    header = (
        "CMake Error at /usr/share/cmake-3.31/Modules/CMakeTestCUDACompiler.cmake:59 (message):\n"
    )
    nvcc = "    nvcc fatal   : Unsupported gpu architecture 'compute_60'\n"
    compiler = '  The CUDA compiler\n\n    "/usr/local/cuda/bin/nvcc"\n\n'
    failed = "  is not able to compile a simple test program.\n"
    assert ids(run(header + compiler + failed + nvcc))[:2] == [
        "build.nvcc-unsupported-arch",
        "build.cmake-cuda-compiler-broken",
    ]
    _first_cause(header, "build.cmake-cuda-compiler-broken")


def test_bitsandbytes_cpu_library_is_a_failure_only_where_its_setup_found_a_gpu() -> None:
    # bmaltais/kohya_ss#331's setup lines (bitsandbytes 0.37-0.41)
    loading = (
        "CUDA SETUP: Loading binary /home/stable-diffusion/kohya_ss/venv/lib/python3.10/"
        "site-packages/bitsandbytes/libbitsandbytes_cpu.so...\n"
    )
    gpu = "CUDA SETUP: Highest compute capability among GPUs detected: 7.5\n"
    _first_cause(gpu + loading, "bnb.cpu-library-on-gpu")
    assert "bnb.cpu-library-on-gpu" not in ids(run(loading))


def test_pip_uninstalling_a_cuda_torch_is_read_and_a_plain_one_is_not() -> None:
    # chflame163/ComfyUI_LayerStyle#305's line, and the same step for a PyPI build (the usual
    # replacement of a CPU torch by a CUDA one)
    cuda = "      Successfully uninstalled torch-2.4.1+cu121\n"
    plain = "      Successfully uninstalled torch-2.4.1\n"
    top = _first_cause(cuda, "pip.cuda-torch-uninstalled")
    assert "2.4.1+cu121" in top.summary
    assert run(plain).causes == ()


def test_ctranslate2s_compute_type_refusal_names_the_type_and_a_torch_device_name_is_named() -> (
    None
):
    # OpenNMT/CTranslate2 src/types.cc and src/devices.cc, as Python raises them
    refusal = (
        "ValueError: Requested int8_float16 compute type, but the target device or backend do "
        "not support efficient int8_float16 computation.\n"
    )
    top = _first_cause(refusal, "ct2.compute-type-unsupported")
    assert "int8_float16" in top.summary
    torch_name = _first_cause(
        "ValueError: unsupported device cuda:0\n", "ct2.device-name-unsupported"
    )
    assert '"cuda:0"' in torch_name.summary
    assert "ct2.device-name-unsupported" not in ids(run("ValueError: unsupported device foo\n"))


def test_operation_not_supported_is_the_async_allocator_only_beside_it() -> None:
    # Comfy-Org/ComfyUI#1845's error, after ComfyUI's start-up line naming the backend, and alone
    error = "RuntimeError: CUDA error: operation not supported\n"
    banner = "Device: cuda:0 NVIDIA GeForce GTX 960M : cudaMallocAsync\n"
    top = _first_cause(banner + error, "torch.cuda-malloc-async-unsupported")
    assert "--disable-cuda-malloc" in top.summary
    assert "torch.cuda-malloc-async-unsupported" not in ids(run(error))


def test_a_warning_the_programs_own_check_passed_after_is_harmless() -> None:
    # PaddlePaddle/Paddle#17217: a maintainer's run_check on a working machine
    warning = (
        "W0511 23:02:20.692178 24883 device_context.cc:293] WARNING: device: 0. The installed "
        "Paddle is compiled with CUDNN 7.3, but CUDNN version in your machine is 7.1, which may "
        "cause serious incompatible bug. Please recompile or reinstall Paddle with compatible "
        "CUDNN version.\n"
    )
    passed = "Your Paddle Fluid is installed successfully! Let's start deep Learning with Paddle Fluid now\n"
    after = run(warning + passed)
    assert after.causes == ()
    assert {c.id for c in after.harmless} == {
        "paddle.cudnn-older-than-build",
        "paddle.install-check-passed",
    }
    warned = next(c for c in after.harmless if c.id == "paddle.cudnn-older-than-build")
    assert warned.notes == (
        "Harmless here: the program reported its own check passed after it (line 2).",
    )
    # the warning alone, or printed again after the check, stays a cause
    _first_cause(warning, "paddle.cudnn-older-than-build")
    _first_cause(passed + warning, "paddle.cudnn-older-than-build")


def test_a_missing_torch_submodule_is_an_older_torch_and_torch_c_is_not() -> None:
    # meta-pytorch/attention-gym#36's line; torch._C missing is a broken or shadowed install
    top = _first_cause(
        "ModuleNotFoundError: No module named 'torch.nn.attention.flex_attention'\n",
        "torch.submodule-missing",
    )
    assert "torch.nn.attention.flex_attention" in top.summary
    shadowed = run("ModuleNotFoundError: No module named 'torch._C'\n")
    assert "torch.submodule-missing" not in ids(shadowed)


def test_detectron2s_own_cpu_only_error_is_its_build_not_mmcvs() -> None:
    # facebookresearch/detectron2's layers/csrc message, which mmcv's op pattern also matches
    top = _first_cause(
        "RuntimeError: Detectron2 is not compiled with GPU support!\n",
        "extension.built-without-cuda",
    )
    assert "mmcv.ops-missing" in top.alternatives


def test_a_success_line_clears_only_the_warnings_that_name_it() -> None:
    # a log that also failed for its own reason: the install check's success line, printed
    # after both, does not hide the failure (only paddle.cudnn-older-than-build is cleared_by it)
    warning = (
        "WARNING: device: 0. The installed Paddle is compiled with CUDNN 8.2, but CUDNN version "
        "in your machine is 8.1\n"
    )
    failure = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; "
        "4.00 GiB total capacity; 3.45 GiB already allocated; 0 bytes free; 3.50 GiB reserved "
        "in total by PyTorch)\n"
    )
    passed = (
        "PaddlePaddle is installed successfully! Let's start deep learning with PaddlePaddle now.\n"
    )
    explanation = run(warning + failure + passed * 1000)
    assert explanation.top is not None and explanation.top.id == "cuda.out-of-memory"
    assert "paddle.cudnn-older-than-build" not in ids(explanation)
    assert "paddle.cudnn-older-than-build" in {c.id for c in explanation.harmless}


# NCCL's INFO lines as a multi-node job prints them (src/transport/net_ib.cc, init.cc)
IB_NOT_FOUND = "node1:1234:1234 [0] NCCL INFO NET/IB : No device found."
IB_ASKED = "node1:1234:1234 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1,mlx5_1:1"
SOCKETS = "node1:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.47.14.218<0>"


def test_no_ib_device_is_silent_where_nobody_asked_for_infiniband() -> None:
    """Every NCCL run on a machine without IB prints the line and works."""
    assert run("\n".join([IB_NOT_FOUND, SOCKETS])).causes == ()


def test_no_ib_device_after_the_job_asked_for_infiniband_is_the_cause() -> None:
    explanation = run("\n".join([IB_ASKED, IB_NOT_FOUND, SOCKETS]))
    assert ids(explanation)[:1] == ["nccl.ib-configured-not-found"]
    assert explanation.status == "explained"


VERSION_ASSERT = '----> 3 assert torch.__version__.startswith("1.5")'


def test_a_torch_version_assert_is_read_only_where_it_failed() -> None:
    """The same line pasted as code (no AssertionError before it) names nothing."""
    assert run("import torch\n" + VERSION_ASSERT).causes == ()
    failed = run(
        "AssertionError                            Traceback (most recent call last)\n"
        + VERSION_ASSERT
    )
    assert ids(failed)[:1] == ["notebook.torch-version-assert"]


def test_an_old_abi_string_in_a_missing_framework_symbol_is_the_abi_not_the_version() -> None:
    old_abi = (
        "tensorflow.python.framework.errors_impl.NotFoundError: /x/libtf_grouping.so: "
        "undefined symbol: _ZN10tensorflow12OpDefBuilder4AttrESs"
    )
    assert ids(run(old_abi))[:1] == ["build.cxx11-abi-mismatch"]
    # a torch function without a string argument stays a version mismatch
    other = (
        "ImportError: /x/_C.cpython-37m-x86_64-linux-gnu.so: undefined symbol: "
        "_ZNK2at6Tensor7is_cudaEv"
    )
    assert ids(run(other))[:1] == ["libs.undefined-symbol"]


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (
            "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor)",
            "tensor.device-mismatch",
        ),
        (
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)",
            "tensor.device-mismatch",
        ),
        (
            "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor)",
            "tensor.dtype-mismatch",
        ),
        (
            "Input type (torch.HalfTensor) and weight type (torch.FloatTensor)",
            "tensor.dtype-mismatch",
        ),
    ],
)
def test_the_convolution_check_names_device_or_dtype_by_the_two_types(
    message: str, cause: str
) -> None:
    """aten's check_input_same_type_as_parameters prints one sentence for both mistakes."""
    assert ids(run(f"RuntimeError: {message} should be the same"))[:1] == [cause]
