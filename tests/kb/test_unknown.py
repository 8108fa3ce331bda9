"""Text that is not a known error must never produce a confident cause."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.kb.helpers import run

HEALTHY = """\
Epoch 1/10
  0%|          | 0/1563 [00:00<?, ?it/s]
 12%|█▏        | 188/1563 [00:14<01:42, 13.40it/s, loss=2.31, lr=0.001]
[rank0]: step 200 loss 1.8732 grad_norm 0.913 tokens/s 51234 mem 31.2GiB
INFO 2024-05-03 12:00:01,123 trainer.py:120: Using CUDA device cuda:0 (NVIDIA H100 80GB HBM3)
NCCL INFO Bootstrap : Using eth0:10.0.0.4<0>
node1:1234:1234 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using internal implementation
node1:1234:1299 [0] NCCL INFO Channel 00/32 :    0   1   2   3
/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 8 worker processes in total.
wandb: Run summary: train/loss 0.4412 val/MeanSquaredError 0.0213 val/error_rate 0.031
Validation: accuracy 0.9312, error 0.0688, top5 0.9951
Saved checkpoint to /data/ckpt/step_2000.pt (took 3.21s)
CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node 4 train.py
torch 2.5.1+cu124, CUDA 12.4, cuDNN 90100, NVIDIA driver 550.54.15
Epoch 10/10: 100%|██████████| 1563/1563 [01:52<00:00, 13.91it/s, loss=0.112]
Training finished. Best val accuracy 0.9441 at epoch 9.
"""


def test_healthy_training_log_has_no_signature() -> None:
    explanation = run(HEALTHY * 50)
    assert explanation.causes == ()
    assert explanation.status == "no-signature"
    assert explanation.exit_code == 0


def test_random_text_has_no_confident_cause() -> None:
    rng = random.Random(1234)  # noqa: S311 (test data, not cryptography)
    words = [
        "error",
        "Error",
        "CUDA",
        "NVIDIA",
        "NCCL",
        "cuda",
        "assert",
        "memory",
        "device",
        "driver",
        "failed",
        "RuntimeError:",
        "tensor",
        "GPU",
        "the",
        "of",
        "nan",
        "RROR",
    ]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) for _ in range(5000)]
    explanation = run("\n".join(lines))
    assert explanation.status != "explained", [c.id for c in explanation.causes]


def test_random_bytes_do_not_crash_or_explain() -> None:
    rng = random.Random(99)  # noqa: S311 (test data, not cryptography)
    data = bytes(rng.getrandbits(8) for _ in range(200_000))
    explanation = run(data)
    assert explanation.status == "no-signature"
    assert explanation.scan.binary or explanation.scan.undecodable


def test_prose_about_errors_is_not_confident() -> None:
    text = (
        "We fixed a bug where the error message was confusing.\n"
        "Errors in CUDA code are hard to debug; see the docs on asynchronous execution.\n"
        "NVIDIA released a new driver. NCCL is the library for collectives.\n"
    )
    assert run(text).status == "no-signature"


HEALTHY_CORPUS = Path(__file__).parents[1] / "data" / "healthy"


def healthy_logs(directory: Path) -> list[tuple[str, bytes]]:
    """(name, log) of real logs of runs that did not fail, without their header."""
    return [
        (p.name, p.read_bytes().partition(b"# ---\n")[2]) for p in sorted(directory.glob("*.txt"))
    ]


def test_real_healthy_logs_have_no_signature() -> None:
    """Training logs, nvidia-smi tables, NCCL INFO lines and benign warnings from real runs
    (each file names its source): nothing to explain, exit code 0."""
    logs = healthy_logs(HEALTHY_CORPUS)
    assert len(logs) >= 5
    for name, log in logs:
        explanation = run(log)
        assert explanation.causes == (), (name, [c.id for c in explanation.causes])
        assert explanation.exit_code == 0


# torchvision's warning when its image extension does not load: benign where torchvision.io is
# not used, and printed by runs that go on. Verbatim, from
# https://github.com/NixOS/nixpkgs/issues/162286 (a comment of 2022-08-21),
# https://github.com/casperg92/MaSIF_colab/issues/7 and https://github.com/xuelunshen/gim/issues/5
TORCHVISION_IMAGE_WARNINGS = (
    ">>> import torchvision\n"
    "/home/octopus/workdir/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning:"
    " Failed to load image Python extension: /home/octopus/workdir/lib/python3.10/site-packages/"
    "torchvision/image.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationESs\n"
    '  warn(f"Failed to load image Python extension: {e}")\n',
    "/usr/local/lib/python3.9/dist-packages/torchvision/io/image.py:13: UserWarning: Failed to load"
    " image Python extension: '/usr/local/lib/python3.9/dist-packages/torchvision/image.so:"
    " undefined symbol: _ZN3c104impl8GPUTrace13gpuTraceStateE'If you don't plan on using image"
    " functionality from `torchvision.io`, you can ignore this warning. Otherwise, there might be"
    " something wrong with your environment. Did you have `libjpeg` or `libpng` installed before"
    " building `torchvision` from source?\n"
    "  warn(\n",
    "/home/yuanweizhong/anaconda3/envs/gim/lib/python3.8/site-packages/torchvision/io/image.py:11:"
    " UserWarning: Failed to load image Python extension: libc10_cuda.so: cannot open shared object"
    " file: No such file or directory\n"
    '  warn(f"Failed to load image Python extension: {e}")\n',
)


def test_torchvision_image_extension_warning_is_not_a_cause() -> None:
    """An `x.so: undefined symbol` line of its own is a failed import (libs.undefined-symbol);
    the same text inside torchvision's warning is not."""
    for warning in TORCHVISION_IMAGE_WARNINGS:
        explanation = run(warning)
        assert explanation.causes == (), [c.id for c in explanation.causes]
    bare = "/opt/x/site-packages/ext.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105E\n"
    assert [c.id for c in run(bare).causes] == ["libs.undefined-symbol"]


# Warnings of runs that go on, verbatim: bitsandbytes' CPU library fallback
# (https://github.com/bitsandbytes-foundation/bitsandbytes/issues/779), and NCCL skipping an
# InfiniBand device it cannot open (https://github.com/zai-org/ImageReward/issues/65), NCCL
# looking for a network plugin it does not need (https://github.com/NVIDIA/nccl/issues/1231,
# world round 11's one healthy log that was not silent), and the
# start-up lines of TensorFlow and JAX (envdoctor/catalogs/tensorflow.yaml, jax.yaml: the CUDA
# stub on a CPU-only machine, the factory registered twice, a GPU that works, libdevice not
# needed yet, the driver older than ptxas).
GOING_ON = (
    "/home/studio-lab-user/.conda/envs/default/lib/python3.9/site-packages/bitsandbytes/"
    "cextension.py:34: UserWarning: The installed version of bitsandbytes was compiled without "
    "GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.\n"
    '  warn("The installed version of bitsandbytes was compiled without GPU support. "\n'
    "/home/studio-lab-user/.conda/envs/default/lib/python3.9/site-packages/bitsandbytes/"
    "libbitsandbytes_cpu.so: undefined symbol: cadam32bit_grad_fp32\n",
    "65826-86bd789679-2dxbs:80744:80744 [1] misc/ibvwrap.cc:212 NCCL WARN Call to "
    "ibv_open_device failed\n"
    "\n"
    "65826-86bd789679-2dxbs:80746:80746 [3] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable "
    "to open device mlx5_59\n"
    "65826-86bd789679-2dxbs:80746:80746 [3] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE "
    "[1]mlx5_18:1/RoCE ; OOB eth0:33.117.221.247<0>\n"
    "65826-86bd789679-2dxbs:80746:80746 [3] NCCL INFO Using network IB\n",
    "VM-0-14-tencentos:162637:162637 [6] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot "
    "open shared object file: No such file or directory No plugin found (libnccl-net.so), using "
    "internal implementation\n",
    "2024-04-17 10:21:41.644834: I tensorflow/tsl/cuda/cudart_stub.cc:28] Could not find cuda "
    "drivers on your machine, GPU will not be used.\n"
    "2024-04-17 10:21:41.677055: E tensorflow/compiler/xla/stream_executor/cuda/cuda_dnn.cc:9342] "
    "Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one "
    "has already been registered\n"
    "2026-03-09 23:56:34.912345: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2021] Created "
    "device /job:localhost/replica:0/task:0/device:GPU:0 with 6086 MB memory:  -> device: 0, "
    "name: NVIDIA GeForce RTX 2080 SUPER, pci bus id: 0000:05:00.0, compute capability: 7.5\n"
    "2026-03-09 23:56:35.451773: W external/local_xla/xla/service/gpu/llvm_gpu_backend/default/"
    "nvptx_libdevice_path.cc:41] Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice. This "
    "may result in compilation or runtime failures, if the program we try to run uses routines "
    "from libdevice.\n"
    "2024-05-28 04:48:02.870689: W external/xla/xla/service/gpu/nvptx_compiler.cc:760] The "
    "NVIDIA driver's CUDA version is 12.4 which is older than the ptxas CUDA version (12.5.40). "
    "Because the driver is older than the ptxas version, XLA is disabling parallel compilation, "
    "which may slow down compilation. You should update your NVIDIA driver or use the "
    "NVIDIA-provided CUDA forward compatibility packages.\n",
    # google/deepvariant#722: TensorFlow's worker processes, the run completed
    "== CUDA ==\n"
    "CUDA Version 11.3.1\n"
    "2023-10-30 00:30:39.544727: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n"
    "2023-10-30 00:30:40.075465: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n"
    "2023-10-30 00:30:40.617831: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n"
    "2023-10-30 00:30:41.161964: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n"
    "2023-10-30 00:30:41.707151: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n"
    "2023-10-30 00:30:42.254657: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:1278] could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED: initialization error\n",
    # mitsuba-renderer/drjit#44: a machine without a CUDA GPU, the CPU backend is used
    "jit_cuda_init(): cuInit failed, disabling CUDA backend.\n"
    "There are two common explanations for this type of failure:\n"
    "\n"
    " 1. your computer simply does not contain a graphics card that supports CUDA.\n"
    "\n"
    " 2. your CUDA kernel module and CUDA library are out of sync. Try to see if you\n"
    "    can run a utility like 'nvida-smi'. If not, a reboot will likely fix this\n"
    "    issue. Otherwise reinstall your graphics driver.\n"
    "\n"
    " The specific error message produced by cuInit was\n"
    '   "no CUDA-capable device is detected"\n',
)


@pytest.mark.parametrize(
    "log",
    GOING_ON,
    ids=[
        "bitsandbytes-cpu",
        "nccl-ib-device-skipped",
        "nccl-no-net-plugin",
        "tensorflow-jax-startup",
        "tensorflow-workers-device-count",
        "drjit-cpu-backend",
    ],
)
def test_warnings_of_runs_that_go_on_are_not_causes(log: str) -> None:
    assert run(log).causes == ()


def test_a_fallback_shape_on_an_info_line_is_not_a_cause() -> None:
    """A fallback reads a message by its shape alone; where the program that printed it logged
    the line at INFO (it looked for something optional and went on), the shape is not a
    failure. The same words at another level, or with no level, still are."""
    message = "libnccl-net.so: cannot open shared object file: No such file or directory"
    for info in (
        f"node1:2:2 [0] NCCL INFO NET/Plugin : ImportError: {message}",
        f'time=2025-01-14T16:41:34Z level=INFO source=x.go:1 msg="OSError: {message}"',
        f"I0531 03:55:57.941848  2382 loader.cc:166] OSError: {message}",
        f"2024-04-17 10:21:41.644834: I tensorflow/x.cc:28] OSError: {message}",
    ):
        assert run(info + "\n").causes == (), info
    for failing in (f"OSError: {message}", f"[ERROR] OSError: {message}"):
        assert [c.id for c in run(failing + "\n").causes] == ["fallback.shared-library-not-found"]


@pytest.mark.parametrize(
    "line",
    [
        # the user asked Ollama for the CPU (num_gpu 0): no layer on the GPU is what they chose
        "time=2025-05-19T10:50:36.626+05:00 level=INFO source=server.go:168 msg=offload "
        'library=cuda layers.requested=0 layers.model=35 layers.offload=0 layers.split=""',
        # prose about an Xid, not a report of one GPU
        "Xid 79 means the GPU has fallen off the bus; reseat the card if it repeats",
        # ldd listing a CUDA library it found
        "\tlibcudart.so.12 => /usr/local/cuda/lib64/libcudart.so.12 (0x00007f3a1c000000)",
        # the runc hook error where the toolkit's real error follows the mode note on the line
        "stderr: Auto-detected mode as 'legacy' ",
        # nvidia-smi -q of a GPU whose row remapping works
        "        Remapping Failure Occurred        : No",
    ],
    ids=["ollama-cpu-by-choice", "xid-prose", "ldd-found", "mode-note-alone", "remap-ok"],
)
def test_near_misses_of_failure_shapes_are_silent(line: str) -> None:
    """Lines that share words with a failure's message but report none: each pattern that
    reads the failure must leave them alone."""
    assert run(line + "\n").causes == ()
