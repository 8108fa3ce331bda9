"""Every error in the seed documents (../shared/seeds, summarised in their README) is recognised.

The lines are the error messages as the seeds quote them (some without backticks or with the
Markdown they were published in); each must map to the cause the seed explains.
"""

from __future__ import annotations

import pytest

from tests.kb.helpers import ids, run

SEED_ERRORS = [
    # 000 — GPU Error notes
    (
        "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: "
        "[0,0,0], thread: [0,0,0] Assertion t >= 0 && t < n_classes failed.",
        "cuda.assert-target-out-of-range",
    ),
    ("RuntimeError: CUDA error: device-side assert triggered", "cuda.device-assert"),
    (
        "Compile with TORCH_USE_CUDA_DSA to enable device-side assertions.\n"
        "RuntimeError: CUDA error: device-side assert triggered",
        "cuda.device-assert",
    ),
    (
        "`Assertion cur_target >= 0 && cur_target < n_classes` 오류가 발생했습니다.",
        "cuda.assert-target-out-of-range",
    ),
    # 001 — errors with no obvious reason
    ("### `device-side assert triggered`에러", "cuda.device-assert"),
    ("### `CUDNN_STATUS_NOT_INITIALIZED`에러", "cudnn.not-initialized"),
    ("`$rmmod: ERROR: Module nvidia is in use` 메시지가 나타난 경우", "kernel.rmmod-in-use"),
    # 002 — LogSoftmaxBackward0 and friends
    (
        "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output",
        "autograd.nan-in-backward",
    ),
    (
        "RuntimeError: Attempting to deserialize object on CUDA device 2 but torch.cuda.device_count() "
        "is 1. Please use torch.load with map_location to map your storages to an existing device",
        "checkpoint.map-location",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(hand≤)",
        "cublas.alloc-failed",
    ),
    (
        "RuntimeError: stack expects each tensor to be equal size, but got [32] at entry 0 and [24] "
        "at entry 1",
        "data.collate-unequal-size",
    ),
    (
        'assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were recorded for '
        'this optimizer." AssertionError: No inf checks were recorded for this optimizer.',
        "amp.no-inf-checks",
    ),
    (
        "RuntimeError: Trying to backward through the graph a second time (or directly access saved "
        "tensors after they have already been freed).",
        "autograd.backward-twice",
    ),
    # 003 — CUDA runtime error (59)
    ("CUDA runtime error (59) : device-side assert triggered", "cuda.device-assert"),
]


@pytest.mark.parametrize(("line", "expected"), SEED_ERRORS)
def test_seed_error_is_recognised(line: str, expected: str) -> None:
    explanation = run(line)
    assert explanation.top is not None, line
    assert explanation.top.id == expected, ids(explanation)


def test_seed_002_embedding_cause_is_offered_for_cublas_alloc_failed() -> None:
    """Seed 002: CUBLAS_STATUS_ALLOC_FAILED came from an embedding smaller than the tokenizer."""
    bare = run(
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    assert bare.top is not None
    assert "cublas.embedding-too-small" in bare.top.alternatives
    with_frames = run(
        '  File "model.py", line 31, in forward\n'
        "    emb = self.token_embedding(input_ids)\n"
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    assert with_frames.top is not None and with_frames.top.id == "cublas.embedding-too-small"
    assert any("resize_token_embeddings" in step for step in with_frames.top.signature.fix)
