"""Error text → status code → finding code. The patterns are data: add a row, not a branch.

torch raises ``RuntimeError`` for CUDA errors up to 2.7 and ``torch.AcceleratorError`` (a
``RuntimeError`` subclass, pytorch/pytorch#152023) from 2.8, ``torch.OutOfMemoryError`` for its
allocator: the rows match the message, never the class name.

Order matters, first match wins: ``CUBLAS_STATUS_ALLOC_FAILED`` is an allocation failure, but
it must not be read as a generic CUDA out-of-memory, so the specific rows come first. Rows with
``poisons=True`` name errors after which the CUDA context is unusable ("sticky" errors): the
child stops there and the remaining steps are reported as skipped, with that reason.

Each row cites where its text was seen in the wild; the verbatim texts are test fixtures
(``tests/smoke/fixtures/cuda_errors.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envdoctor.smoke.model import (
    KIND_CRASH,
    KIND_MISMATCH,
    KIND_NOT_STARTED,
    KIND_TIMEOUT,
    StepResult,
)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A finding ``code`` for error texts matching ``regex`` (case-insensitive).

    ``memory``: a shortage of device memory is known to produce this text (the source is in the
    fixture that carries it); ``--reproduce`` counts such a failure under pressure as memory
    pressure confirmed, whatever library reported it.
    """

    code: str
    regex: str
    status: str = ""  # the status shown when the text carries no status code of its own
    poisons: bool = False
    memory: bool = False


PATTERNS: tuple[Pattern, ...] = (
    Pattern("smoke.cublas-alloc-failed", r"CUBLAS_STATUS_ALLOC_FAILED", memory=True),
    Pattern("smoke.cublas-not-initialized", r"CUBLAS_STATUS_NOT_INITIALIZED", memory=True),
    Pattern("smoke.cudnn-not-initialized", r"CUDNN_STATUS_NOT_INITIALIZED", memory=True),
    # cuDNN 8's and cuDNN 9's allocation statuses.
    Pattern(
        "smoke.cudnn-failed",
        r"CUDNN_STATUS_ALLOC_FAILED|CUDNN_STATUS_INTERNAL_ERROR_(HOST|DEVICE)_ALLOCATION_FAILED",
        memory=True,
    ),
    # torch's cuDNN frontend path tries every engine, swallows each one's status (an engine
    # whose workspace does not fit fails like any other) and reports only this.
    Pattern(
        "smoke.cudnn-failed",
        r"(GET|FIND) was unable to find an engine",
        status="cuDNN found no engine that could run",
        memory=True,
    ),
    # cuDNN 8 loads its kernels at first use; without device memory for them: internal error.
    Pattern("smoke.cudnn-failed", r"CUDNN_STATUS_INTERNAL_ERROR\b", memory=True),
    Pattern(
        "smoke.cudnn-version-mismatch",
        r"cuDNN version (incompatibility|mismatch)",
        status="cuDNN version incompatibility",
    ),
    Pattern(
        "smoke.cudnn-unavailable",
        r"cudnn\.is_available\(\) is False",
        status="cuDNN not available",
    ),
    Pattern(
        "smoke.illegal-memory-access",
        r"illegal memory access|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress",
        status="cudaErrorIllegalAddress",
        poisons=True,
    ),
    Pattern(
        "smoke.device-assert",
        r"device-side assert triggered|CUDA_ERROR_ASSERT|cudaErrorAssert",
        status="cudaErrorAssert",
        poisons=True,
    ),
    Pattern(
        "smoke.ecc-error",
        r"uncorrectable ECC error|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable",
        status="cudaErrorECCUncorrectable",
        poisons=True,
    ),
    Pattern(
        "smoke.launch-failed",
        r"unspecified launch failure|illegal instruction|misaligned address"
        r"|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure",
        status="cudaErrorLaunchFailure",
        poisons=True,
    ),
    Pattern(
        "smoke.no-kernel-image",
        r"no kernel image is available|CUDA_ERROR_NO_BINARY_FOR_GPU"
        r"|cudaErrorNoKernelImageForDevice",
        status="cudaErrorNoKernelImageForDevice",
    ),
    Pattern(
        "smoke.driver-insufficient",
        r"driver version is insufficient|NVIDIA driver on your system is too old"
        r"|CUDA_ERROR_INSUFFICIENT_DRIVER|cudaErrorInsufficientDriver",
        status="cudaErrorInsufficientDriver",
    ),
    Pattern(
        "smoke.driver-mismatch",
        r"Error 80[34]\b|forward compatibility was attempted|unsupported display driver"
        r"|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        status="cudaErrorSystemDriverMismatch",
    ),
    Pattern(
        "smoke.fabric-manager",
        r"Error 802\b|system not yet initialized|CUDA_ERROR_SYSTEM_NOT_READY",
        status="cudaErrorSystemNotReady",
    ),
    Pattern(
        "smoke.no-device",
        r"No CUDA GPUs are available|no CUDA-capable device is detected"
        r"|Found no NVIDIA driver|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice",
        status="cudaErrorNoDevice",
    ),
    Pattern(
        "smoke.device-busy",
        r"busy or unavailable|CUDA_ERROR_DEVICE_UNAVAILABLE|cudaErrorDevicesUnavailable",
        status="cudaErrorDevicesUnavailable",
    ),
    Pattern(
        "smoke.out-of-memory",
        r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
        status="cudaErrorMemoryAllocation",
        memory=True,
    ),
    Pattern("smoke.cublas-failed", r"CUBLAS_STATUS_\w+"),
    Pattern(
        "smoke.cudnn-failed",
        r"CUDNN_STATUS_\w+|valid cuDNN algorithm|no valid convolution algorithms|cuDNN error",
        status="cuDNN error",
    ),
    Pattern("smoke.nccl-failed", r"NCCL error|nccl\w*Error|ProcessGroupNCCL", status="NCCL error"),
    Pattern(
        "smoke.torch-without-cuda",
        r"Torch not compiled with CUDA enabled",
        status="CPU-only torch",
    ),
    Pattern(
        "smoke.unknown-cuda-error",
        r"CUDA error: unknown error|CUDA_ERROR_UNKNOWN|cudaErrorUnknown",
        status="cudaErrorUnknown",
        poisons=True,
    ),
)

_STATUS = re.compile(
    r"\b(CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+|CUDA_ERROR_[A-Z_]+|cudaError[A-Za-z]+"
    r"|nccl[A-Z][A-Za-z]*Error|Error 80[0-9])"
)
_COMPILED = tuple((p, re.compile(p.regex, re.IGNORECASE)) for p in PATTERNS)

# Codes decided by how a step failed rather than by its text.
TIMEOUT = "smoke.timeout"
CRASHED = "smoke.crashed"
WRONG_RESULT = "smoke.wrong-result"
IMPORT_FAILED = "smoke.torch-import-failed"
NOT_RUN = "smoke.not-run"
UNCLASSIFIED = "smoke.failed"

# Regexes handed to the child so that it stops at a context-poisoning error.
POISON_REGEXES = tuple(p.regex for p in PATTERNS if p.poisons)


@dataclass(frozen=True, slots=True)
class Classification:
    """The finding code for one failed step, the status code it carried, and whether it leaves
    the CUDA context unusable."""

    code: str
    status: str
    poisons: bool = False
    memory: bool = False


def classify_text(text: str) -> Classification:
    """Classify an error text alone (as a user would paste it)."""
    status_match = _STATUS.search(text)
    for pattern, regex in _COMPILED:
        if regex.search(text):
            status = status_match.group(1) if status_match else pattern.status
            return Classification(pattern.code, status, pattern.poisons, pattern.memory)
    return Classification(UNCLASSIFIED, status_match.group(1) if status_match else "")


def classify(step: StepResult) -> Classification:
    """Classify a failed step: by how it failed (hang, crash, wrong result), then by its text."""
    if step.kind == KIND_TIMEOUT:
        return Classification(TIMEOUT, "timeout")
    if step.kind == KIND_CRASH:
        return Classification(CRASHED, step.error_type or "crash")
    if step.kind == KIND_NOT_STARTED:
        return Classification(NOT_RUN, "not started")
    if step.kind == KIND_MISMATCH:
        return Classification(WRONG_RESULT, "wrong result")
    found = classify_text(step.error)
    if step.step == "import":  # whatever the text, torch itself is what failed
        return Classification(IMPORT_FAILED, found.status or step.error_type or "ImportError")
    return found


def poisons(text: str) -> bool:
    """True when this error leaves the CUDA context unusable for later steps."""
    return classify_text(text).poisons
