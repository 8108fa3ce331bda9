"""A narrow NVML interface that envdoctor owns, and its pynvml-backed implementation.

Only this module imports ``pynvml`` (lazily, inside ``open_pynvml``). Every NVML failure leaves
as an ``NvmlError`` with a kind from ``NvmlErrorKind``; every call is bounded by a timeout,
because a GPU that fell off the bus can make NVML block for minutes.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.model.record import record

T = TypeVar("T")

# pynvml's NVML_ERROR_* return codes → our kinds. Codes not listed map to OTHER.
_KIND_BY_CODE = {
    3: NvmlErrorKind.NOT_SUPPORTED,
    4: NvmlErrorKind.NO_PERMISSION,
    9: NvmlErrorKind.DRIVER_NOT_LOADED,
    10: NvmlErrorKind.TIMEOUT,
    12: NvmlErrorKind.LIBRARY_NOT_FOUND,
    13: NvmlErrorKind.FUNCTION_NOT_FOUND,
    15: NvmlErrorKind.GPU_IS_LOST,
    18: NvmlErrorKind.LIB_RM_VERSION_MISMATCH,
    999: NvmlErrorKind.UNKNOWN,
}

THROTTLE_BITS = (
    (0x1, "gpu-idle"),
    (0x2, "applications-clocks-setting"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal-slowdown"),
    (0x40, "hw-thermal-slowdown"),
    (0x80, "hw-power-brake-slowdown"),
    (0x100, "display-clock-setting"),
)

COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}


class NvmlError(Exception):
    """An NVML call failed; ``kind`` is one of ``NvmlErrorKind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@record
class NvmlProcess:
    pid: int
    used_memory: int | None


class NvmlSession(Protocol):
    """What envdoctor asks of NVML. Each method raises ``NvmlError`` on failure."""

    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...
    def device_count(self) -> int: ...
    def name(self, index: int) -> str: ...
    def uuid(self, index: int) -> str: ...
    def pci_bus_id(self, index: int) -> str: ...
    def compute_capability(self, index: int) -> tuple[int, int]: ...
    def memory(self, index: int) -> tuple[int, int, int]: ...
    def persistence_mode(self, index: int) -> bool: ...
    def compute_mode(self, index: int) -> str: ...
    def mig_mode(self, index: int) -> tuple[bool, bool]: ...
    def mig_device_count(self, index: int) -> int: ...
    def ecc_uncorrectable(self, index: int) -> tuple[int, int]: ...
    def retired_pages_pending(self, index: int) -> bool: ...
    def row_remap(self, index: int) -> tuple[int, int, bool, bool]: ...
    def processes(self, index: int) -> tuple[NvmlProcess, ...]: ...
    def throttle_reasons(self, index: int) -> tuple[str, ...]: ...
    def pcie_link(self, index: int) -> tuple[int, int, int, int]: ...
    def close(self) -> None: ...


class _Worker:
    """One daemon thread that runs NVML calls, so a hung call cannot hang envdoctor's exit."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = (
            queue.Queue()
        )
        self.hung = False
        threading.Thread(target=self._loop, name="envdoctor-nvml", daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # noqa: BLE001 (handed back to the caller's thread)
                reply.put((False, exc))

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        if self.hung:
            raise NvmlError(NvmlErrorKind.TIMEOUT, "an earlier NVML call is still hung")
        reply: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._jobs.put((fn, reply))
        try:
            ok, value = reply.get(timeout=timeout)
        except queue.Empty:
            self.hung = True
            raise NvmlError(
                NvmlErrorKind.TIMEOUT, f"NVML did not answer within {timeout:.1f} s"
            ) from None
        if ok:
            return value  # type: ignore[no-any-return]  # the queue is untyped; fn returned T
        raise value


class PynvmlSession:
    """``NvmlSession`` over the official nvidia-ml-py bindings."""

    def __init__(self, nvml: Any, worker: _Worker, timeout: float) -> None:
        self._nvml = nvml
        self._worker = worker
        self._timeout = timeout
        self._handles: dict[int, Any] = {}

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return self._worker.call(fn, self._timeout)
        except NvmlError:
            raise
        except self._nvml.NVMLError as exc:
            raise _translate(exc) from None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call(lambda: self._nvml.nvmlDeviceGetHandleByIndex(index))
        return self._handles[index]

    def _q(self, index: int, fn: Callable[[Any], T]) -> T:
        handle = self._handle(index)
        return self._call(lambda: fn(handle))

    def driver_version(self) -> str:
        return _text(self._call(self._nvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> int:
        return int(self._call(self._nvml.nvmlSystemGetCudaDriverVersion))

    def device_count(self) -> int:
        return int(self._call(self._nvml.nvmlDeviceGetCount))

    def name(self, index: int) -> str:
        return _text(self._q(index, self._nvml.nvmlDeviceGetName))

    def uuid(self, index: int) -> str:
        return _text(self._q(index, self._nvml.nvmlDeviceGetUUID))

    def pci_bus_id(self, index: int) -> str:
        return _text(self._q(index, self._nvml.nvmlDeviceGetPciInfo).busId)

    def compute_capability(self, index: int) -> tuple[int, int]:
        major, minor = self._q(index, self._nvml.nvmlDeviceGetCudaComputeCapability)
        return int(major), int(minor)

    def memory(self, index: int) -> tuple[int, int, int]:
        info = self._q(index, self._nvml.nvmlDeviceGetMemoryInfo)
        return int(info.total), int(info.used), int(info.free)

    def persistence_mode(self, index: int) -> bool:
        return bool(self._q(index, self._nvml.nvmlDeviceGetPersistenceMode))

    def compute_mode(self, index: int) -> str:
        mode = int(self._q(index, self._nvml.nvmlDeviceGetComputeMode))
        return COMPUTE_MODES.get(mode, f"unknown-{mode}")

    def mig_mode(self, index: int) -> tuple[bool, bool]:
        current, pending = self._q(index, self._nvml.nvmlDeviceGetMigMode)
        return bool(current), bool(pending)

    def mig_device_count(self, index: int) -> int:
        nvml = self._nvml
        slots = int(self._q(index, nvml.nvmlDeviceGetMaxMigDeviceCount))
        count = 0
        for slot in range(slots):
            try:
                self._q(index, functools.partial(_mig_handle, nvml, slot=slot))
            except NvmlError:  # an empty slot answers NOT_FOUND: skip it
                continue
            count += 1
        return count

    def ecc_uncorrectable(self, index: int) -> tuple[int, int]:
        nvml = self._nvml
        unc = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        vol = self._q(
            index, lambda h: nvml.nvmlDeviceGetTotalEccErrors(h, unc, nvml.NVML_VOLATILE_ECC)
        )
        agg = self._q(
            index, lambda h: nvml.nvmlDeviceGetTotalEccErrors(h, unc, nvml.NVML_AGGREGATE_ECC)
        )
        return int(vol), int(agg)

    def retired_pages_pending(self, index: int) -> bool:
        return bool(self._q(index, self._nvml.nvmlDeviceGetRetiredPagesPendingStatus))

    def row_remap(self, index: int) -> tuple[int, int, bool, bool]:
        corr, unc, pending, failure = self._q(index, self._nvml.nvmlDeviceGetRemappedRows)
        return int(corr), int(unc), bool(pending), bool(failure)

    def processes(self, index: int) -> tuple[NvmlProcess, ...]:
        nvml = self._nvml
        seen: dict[int, NvmlProcess] = {}
        for getter in (
            nvml.nvmlDeviceGetComputeRunningProcesses,
            nvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            for proc in self._q(index, getter):
                used = getattr(proc, "usedGpuMemory", None)
                seen.setdefault(int(proc.pid), NvmlProcess(int(proc.pid), _int_or_none(used)))
        return tuple(seen.values())

    def throttle_reasons(self, index: int) -> tuple[str, ...]:
        nvml = self._nvml
        getter = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = int(self._q(index, getter))
        return tuple(name for bit, name in THROTTLE_BITS if mask & bit)

    def pcie_link(self, index: int) -> tuple[int, int, int, int]:
        nvml = self._nvml
        gen = self._q(index, nvml.nvmlDeviceGetCurrPcieLinkGeneration)
        width = self._q(index, nvml.nvmlDeviceGetCurrPcieLinkWidth)
        max_gen = self._q(index, nvml.nvmlDeviceGetMaxPcieLinkGeneration)
        max_width = self._q(index, nvml.nvmlDeviceGetMaxPcieLinkWidth)
        return int(gen), int(width), int(max_gen), int(max_width)

    def close(self) -> None:
        if self._worker.hung:
            return  # shutting down behind a hung call would hang too
        with contextlib.suppress(NvmlError):  # nothing left to release
            self._call(self._nvml.nvmlShutdown)


def open_pynvml(timeout: float) -> PynvmlSession:
    """Import pynvml lazily and initialise NVML, translating every failure to ``NvmlError``.

    On Linux the driver's library is loaded first, on the worker and within ``timeout`` like
    every NVML call (a library on a hung network mount must not hang envdoctor): where it is
    missing (no driver, a container without the NVIDIA runtime) the error names the loader's
    reason, and the bindings (about 10 ms of the probe's start-up) are never imported.
    """
    worker = _Worker()
    if sys.platform.startswith("linux"):
        worker.call(_load_native_library, timeout)
    try:
        import pynvml  # noqa: TID251 (the one sanctioned, lazy import of pynvml)
    except ImportError as exc:
        raise NvmlError(
            NvmlErrorKind.LIBRARY_NOT_FOUND,
            f"the Python bindings are missing ({exc}); pip install nvidia-ml-py",
        ) from None
    if not hasattr(pynvml, "nvmlInitWithFlags"):
        raise NvmlError(
            NvmlErrorKind.OTHER,
            f"the pynvml module at {getattr(pynvml, '__file__', '?')} is shadowed or outdated; "
            "pip uninstall pynvml && pip install --force-reinstall nvidia-ml-py",
        )
    session = PynvmlSession(pynvml, worker, timeout)
    session._call(lambda: pynvml.nvmlInitWithFlags(0))
    return session


NATIVE_LIBRARY = "libnvidia-ml.so.1"
"""The soname pynvml loads on Linux (the driver installs it; the CUDA toolkit only a stub)."""


def _load_native_library() -> None:
    import ctypes  # noqa: TID251 (the platform layer owns native access)

    try:
        ctypes.CDLL(NATIVE_LIBRARY)
    except OSError as exc:  # the loader's reason, e.g. "cannot open shared object file: ..."
        reason = str(exc).removeprefix(f"{NATIVE_LIBRARY}: ")
        raise NvmlError(NvmlErrorKind.LIBRARY_NOT_FOUND, reason) from None


def _mig_handle(nvml: Any, handle: Any, *, slot: int) -> Any:
    return nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)


def _translate(exc: Any) -> NvmlError:
    code = getattr(exc, "value", None)
    kind = _KIND_BY_CODE.get(code, NvmlErrorKind.OTHER) if isinstance(code, int) else "Other"
    return NvmlError(kind, str(exc) or type(exc).__name__)


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None
