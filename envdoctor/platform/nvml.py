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
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from envdoctor.model.facts import CLOCK_EVENT_REASONS, NvmlErrorKind
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.nvml_links import InterconnectQueries, PynvmlInterconnect

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
    16: NvmlErrorKind.RESET_REQUIRED,
    18: NvmlErrorKind.LIB_RM_VERSION_MISMATCH,
    22: NvmlErrorKind.VGPU_ECC_NOT_SUPPORTED,
    25: NvmlErrorKind.ARGUMENT_VERSION_MISMATCH,
    26: NvmlErrorKind.DEPRECATED,
    27: NvmlErrorKind.NOT_READY,
    999: NvmlErrorKind.UNKNOWN,
}

THROTTLE_BITS = tuple((1 << bit, name) for bit, name in enumerate(CLOCK_EVENT_REASONS))
"""nvmlClocksEventReason* masks: 0x1 gpu-idle, 0x8 hw-slowdown, 0x40 hw-thermal-slowdown …"""

COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}

# nvmlGpuFabricState_t (nvml.h): where the GPU is in registering with the NVLink fabric.
FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}

MAX_WORKERS = 16
"""NVML worker threads per session: GPU ``i`` is queried on worker ``i % MAX_WORKERS``, so that
the GPUs of a node are read side by side (NVML is thread-safe, and ctypes releases the GIL)."""


class NvmlError(Exception):
    """An NVML call failed; ``kind`` is one of ``NvmlErrorKind``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def probed(call: Callable[[], T]) -> Probed[T]:
    """``call()``'s value, NVML's NotSupported as Absent (with why), any other NVML error as
    ProbeFailed: the one translation every NVML-reading probe uses."""
    try:
        return Found(call())
    except NvmlError as exc:
        if exc.kind == NvmlErrorKind.NOT_SUPPORTED:
            return Absent("not supported by this GPU or driver (NVML NotSupported)")
        return ProbeFailed(exc.kind, exc.message)


@dataclass(frozen=True, slots=True)
class NvmlProcess:
    pid: int
    used_memory: int | None


class NvmlSession(InterconnectQueries, Protocol):
    """What envdoctor asks of NVML. Each method raises ``NvmlError`` on failure (the
    interconnect's queries: ``nvml_links.InterconnectQueries``)."""

    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...
    def device_count(self) -> int: ...
    def name(self, index: int) -> str: ...
    def uuid(self, index: int) -> str: ...
    def pci_bus_id(self, index: int) -> str: ...
    def compute_capability(self, index: int) -> tuple[int, int]: ...
    def memory(self, index: int) -> tuple[int, int, int, int]:
        """(total, used, free, reserved) bytes: ``used`` is what processes allocated,
        ``reserved`` what the driver keeps for itself (~600 MiB on an idle H200)."""
        ...

    def persistence_mode(self, index: int) -> bool: ...
    def compute_mode(self, index: int) -> str: ...
    def mig_mode(self, index: int) -> tuple[bool, bool]: ...
    def mig_devices(self, index: int) -> tuple[tuple[str, str], ...]: ...
    def ecc_uncorrectable(self, index: int) -> tuple[int, int]: ...
    def retired_pages_pending(self, index: int) -> bool: ...
    def row_remap(self, index: int) -> tuple[int, int, bool, bool]: ...
    def processes(self, index: int) -> tuple[NvmlProcess, ...]: ...
    def throttle_reasons(self, index: int) -> tuple[str, ...]: ...
    def pcie_link(self, index: int) -> tuple[int, int, int, int]: ...
    def temperature(self, index: int) -> int: ...
    def power_draw(self, index: int) -> int: ...
    def power_limit(self, index: int) -> int: ...
    def utilization(self, index: int) -> tuple[int, int]: ...
    def ecc_corrected(self, index: int) -> tuple[int, int]: ...
    def retired_pages(self, index: int) -> tuple[int, int]: ...
    def fabric_info(self, index: int) -> tuple[str, str, int]: ...
    # per-GPU health (issue 39): the driver's verdict, thermal limits, clocks
    def recovery_action(self, index: int) -> int: ...
    def temperature_threshold(self, index: int, which: str) -> int: ...
    def sm_clocks(self, index: int) -> tuple[int, int]: ...
    def close(self) -> None: ...


class _Worker:
    """One daemon thread that runs NVML calls, so a hung call cannot hang envdoctor's exit.

    Workers made with ``sibling()`` share one hang flag: once any call hangs (NVML usually hangs
    on a driver-wide lock), every later call on any of them fails at once instead of waiting.
    """

    def __init__(self, hang: threading.Event | None = None) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = (
            queue.Queue()
        )
        self._hang = hang if hang is not None else threading.Event()
        threading.Thread(target=self._loop, name="envdoctor-nvml", daemon=True).start()

    @property
    def hung(self) -> bool:
        return self._hang.is_set()

    def sibling(self) -> _Worker:
        """Another worker thread that shares this one's hang flag."""
        return _Worker(self._hang)

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
            self._hang.set()
            raise NvmlError(
                NvmlErrorKind.TIMEOUT, f"NVML did not answer within {timeout:.1f} s"
            ) from None
        if ok:
            return value  # type: ignore[no-any-return]  # the queue is untyped; fn returned T
        raise value


class InlineWorker(_Worker):
    """Runs each call on the calling thread, unbounded: for the NVML child, whose parent
    bounds every call and kills the child when one never returns."""

    def __init__(self) -> None:
        pass

    @property
    def hung(self) -> bool:
        return False

    def sibling(self) -> _Worker:
        return self

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        return fn()


class PynvmlSession(PynvmlInterconnect):
    """``NvmlSession`` over the official nvidia-ml-py bindings."""

    def __init__(self, nvml: Any, worker: _Worker, timeout: float) -> None:
        self._nvml = nvml
        self._worker = worker
        self._timeout = timeout
        self._handles: dict[int, Any] = {}
        self._workers = [worker]
        self._workers_lock = threading.Lock()

    def _call(self, fn: Callable[[], T], worker: _Worker | None = None) -> T:
        try:
            return (worker or self._worker).call(fn, self._timeout)
        except NvmlError:
            raise
        except self._nvml.NVMLError as exc:
            raise _translate(exc) from None
        except Exception as exc:  # noqa: BLE001 (NVMLLibraryMismatchError, AttributeError … of the bindings)
            raise NvmlError(
                NvmlErrorKind.BINDING_ERROR,
                f"the nvidia-ml-py bindings raised {type(exc).__name__}: {exc}",
            ) from None

    def _worker_for(self, index: int) -> _Worker:
        """GPU ``index``'s worker, started on first use (a one-GPU node starts no other)."""
        slot = index % MAX_WORKERS
        with self._workers_lock:
            while len(self._workers) <= slot:
                self._workers.append(self._worker.sibling())
            return self._workers[slot]

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call(
                lambda: self._nvml.nvmlDeviceGetHandleByIndex(index), self._worker_for(index)
            )
        return self._handles[index]

    def _q(self, index: int, fn: Callable[[Any], T]) -> T:
        handle = self._handle(index)
        return self._call(lambda: fn(handle), self._worker_for(index))

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

    def memory(self, index: int) -> tuple[int, int, int, int]:
        """The v2 query (R510+), which tells the driver's reserved memory from allocations;
        the original one (its ``used`` counts both) where the driver refuses v2."""
        nvml = self._nvml
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                info = self._q(index, lambda h: nvml.nvmlDeviceGetMemoryInfo(h, version=version))
                return int(info.total), int(info.used), int(info.free), int(info.reserved)
            except NvmlError as exc:
                if exc.kind not in _NO_SUCH_VERSION:
                    raise
        info = self._q(index, nvml.nvmlDeviceGetMemoryInfo)
        return int(info.total), int(info.used), int(info.free), 0

    def persistence_mode(self, index: int) -> bool:
        return bool(self._q(index, self._nvml.nvmlDeviceGetPersistenceMode))

    def compute_mode(self, index: int) -> str:
        mode = int(self._q(index, self._nvml.nvmlDeviceGetComputeMode))
        return COMPUTE_MODES.get(mode, f"unknown-{mode}")

    def mig_mode(self, index: int) -> tuple[bool, bool]:
        current, pending = self._q(index, self._nvml.nvmlDeviceGetMigMode)
        return bool(current), bool(pending)

    def mig_devices(self, index: int) -> tuple[tuple[str, str], ...]:
        """(UUID, name) of each MIG device: ``CUDA_VISIBLE_DEVICES=MIG-…`` names them."""
        nvml = self._nvml
        slots = int(self._q(index, nvml.nvmlDeviceGetMaxMigDeviceCount))
        out = []
        for slot in range(slots):
            uuid_of = functools.partial(_mig_query, nvml, "nvmlDeviceGetUUID", slot)
            try:
                uuid = self._q(index, uuid_of)
            except NvmlError:  # an empty slot answers NOT_FOUND: skip it
                continue
            name_of = functools.partial(_mig_query, nvml, "nvmlDeviceGetName", slot)
            try:
                name = self._q(index, name_of)
            except NvmlError:
                name = ""
            out.append((_text(uuid), _text(name)))
        return tuple(out)

    def ecc_uncorrectable(self, index: int) -> tuple[int, int]:
        return self._ecc_totals(index, self._nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)

    def _ecc_totals(self, index: int, error_type: int) -> tuple[int, int]:
        """(since the driver was loaded, over the GPU's life) counts of one ECC error type."""
        nvml = self._nvml
        vol = self._q(
            index, lambda h: nvml.nvmlDeviceGetTotalEccErrors(h, error_type, nvml.NVML_VOLATILE_ECC)
        )
        agg = self._q(
            index,
            lambda h: nvml.nvmlDeviceGetTotalEccErrors(h, error_type, nvml.NVML_AGGREGATE_ECC),
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

    def temperature(self, index: int) -> int:
        """The deprecated query first (every driver has it), then the versioned one (drivers
        and bindings that dropped or refuse the old one)."""
        nvml = self._nvml
        sensor = nvml.NVML_TEMPERATURE_GPU
        old = getattr(nvml, "nvmlDeviceGetTemperature", None)
        versioned = getattr(nvml, "nvmlDeviceGetTemperatureV", None)
        if old is not None:
            try:
                return int(self._q(index, lambda h: old(h, sensor)))
            except NvmlError as exc:
                if versioned is None or exc.kind not in _RETRY_VERSIONED:
                    raise
        if versioned is None:
            raise NvmlError(
                NvmlErrorKind.FUNCTION_NOT_FOUND, "no temperature query in these bindings"
            )
        return int(self._q(index, lambda h: versioned(h, sensor)))

    def power_draw(self, index: int) -> int:
        return int(self._q(index, self._nvml.nvmlDeviceGetPowerUsage))

    def power_limit(self, index: int) -> int:
        return int(self._q(index, self._nvml.nvmlDeviceGetEnforcedPowerLimit))

    def utilization(self, index: int) -> tuple[int, int]:
        rates = self._q(index, self._nvml.nvmlDeviceGetUtilizationRates)
        return int(rates.gpu), int(rates.memory)

    def ecc_corrected(self, index: int) -> tuple[int, int]:
        return self._ecc_totals(index, self._nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED)

    def retired_pages(self, index: int) -> tuple[int, int]:
        nvml = self._nvml
        sbe = nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        dbe = nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        single = self._q(index, lambda h: nvml.nvmlDeviceGetRetiredPages(h, sbe))
        double = self._q(index, lambda h: nvml.nvmlDeviceGetRetiredPages(h, dbe))
        return len(single), len(double)

    def fabric_info(self, index: int) -> tuple[str, str, int]:
        """(state, registration status, clique id): the versioned query (R550+) with the newest
        structure the driver takes (v3, then v2), else the original query (R525+).

        The structures are envdoctor's own (``FABRIC_LAYOUTS``), as nvml.h lays them out, and go
        to the binding as a pointer: the binding hands its argument to C as it is, and some
        bindings' own structures are not C's size (12.550's is 100 bytes against 36).
        """
        nvml = self._nvml
        versioned = getattr(nvml, "nvmlDeviceGetGpuFabricInfoV", None)
        original = getattr(nvml, "nvmlDeviceGetGpuFabricInfo", None)
        if versioned is None and original is None:
            raise NvmlError(
                NvmlErrorKind.FUNCTION_NOT_FOUND,
                "these nvidia-ml-py bindings cannot query the GPU fabric; "
                "pip install -U nvidia-ml-py",
            )
        last: NvmlError | None = None
        if versioned is not None:
            for version in (3, 2):
                try:
                    return self._fabric(index, versioned, version)
                except NvmlError as exc:  # noqa: PERF203 (two tries at most: the driver decides)
                    if exc.kind not in _NO_SUCH_VERSION:
                        raise
                    last = exc
        if original is not None:
            return self._fabric(index, original, 1)
        assert last is not None  # the versioned query was tried
        raise last

    def _fabric(self, index: int, fn: Any, version: int) -> tuple[str, str, int]:
        info = fabric_struct(version)
        self._q(index, functools.partial(_fill, fn, info))
        state, status = int(info.state), int(info.status)
        return (
            FABRIC_STATES.get(state, f"unknown-{state}"),
            "Success" if status == 0 else _KIND_BY_CODE.get(status, f"NVML error {status}"),
            int(info.cliqueId),
        )

    # --- per-GPU health (issue 39): the driver's verdict, thermal limits, clocks ----------

    def recovery_action(self, index: int) -> int:
        """NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (R565+): what the driver says the GPU needs now
        (an NVML_GPU_RECOVERY_ACTION_* number). The field has no function of its own: it is
        read with nvmlDeviceGetFieldValues, by its number where the bindings do not name it
        (before nvidia-ml-py 12.565); a driver that does not know it answers in the field's
        own return code (NotSupported)."""
        nvml = self._nvml
        field_id = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", RECOVERY_ACTION_FIELD)
        if getattr(nvml, "nvmlDeviceGetFieldValues", None) is None:
            raise NvmlError(
                NvmlErrorKind.FUNCTION_NOT_FOUND,
                "these nvidia-ml-py bindings cannot read NVML field values; "
                "pip install -U nvidia-ml-py",
            )
        values = self._q(index, lambda h: nvml.nvmlDeviceGetFieldValues(h, [field_id]))
        value = values[0]
        code = int(value.nvmlReturn)
        if code != 0:
            kind = _KIND_BY_CODE.get(code, NvmlErrorKind.OTHER)
            raise NvmlError(kind, f"the recovery action field answered NVML error {code}")
        return int(value.value.uiVal)

    def temperature_threshold(self, index: int, which: str) -> int:
        """One of NVML's temperature thresholds, in degrees Celsius: ``which`` is "shutdown"
        (the GPU powers off), "slowdown" (hardware slows the clocks) or "gpu_max" (the highest
        temperature the GPU is meant to run at)."""
        nvml = self._nvml
        names = {
            "shutdown": "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",
            "slowdown": "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
            "gpu_max": "NVML_TEMPERATURE_THRESHOLD_GPU_MAX",
        }
        if which not in names:
            raise NvmlError(NvmlErrorKind.OTHER, f"no such temperature threshold: {which}")
        threshold = getattr(nvml, names[which], None)
        if threshold is None:
            raise NvmlError(
                NvmlErrorKind.FUNCTION_NOT_FOUND, f"these bindings do not name {names[which]}"
            )
        return int(self._q(index, lambda h: nvml.nvmlDeviceGetTemperatureThreshold(h, threshold)))

    def sm_clocks(self, index: int) -> tuple[int, int]:
        """(current, highest) SM clock in MHz: what a clock event (throttle) reason costs."""
        nvml = self._nvml
        sm = nvml.NVML_CLOCK_SM
        current = self._q(index, lambda h: nvml.nvmlDeviceGetClockInfo(h, sm))
        highest = self._q(index, lambda h: nvml.nvmlDeviceGetMaxClockInfo(h, sm))
        return int(current), int(highest)

    def close(self) -> None:
        if self._worker.hung:
            return  # shutting down behind a hung call would hang too
        with contextlib.suppress(NvmlError):  # nothing left to release
            self._call(self._nvml.nvmlShutdown)


def open_pynvml(
    timeout: float,
    *,
    worker: _Worker | None = None,
    wrap: Callable[[Any], Any] | None = None,
    skip_load: bool = False,
) -> PynvmlSession:
    """Import pynvml lazily and initialise NVML, translating every failure to ``NvmlError``.

    On Linux the driver's library is loaded first, on the worker and within ``timeout`` like
    every NVML call (a library on a hung network mount must not hang envdoctor): where it is
    missing (no driver, a container without the NVIDIA runtime) the error names the loader's
    reason, and the bindings (about 10 ms of the probe's start-up) are never imported.
    """
    worker = worker or _Worker()
    if sys.platform.startswith("linux") and not skip_load:
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
    module = wrap(pynvml) if wrap is not None else pynvml
    session = PynvmlSession(module, worker, timeout)
    session._call(lambda: module.nvmlInitWithFlags(0))
    return session


def preload_native_library(timeout: float) -> None:
    """Load the driver's NVML library here, bounded, before an isolated session starts its child:
    its absence is common and needs no child, nor json and subprocess imported (``NvmlError``)."""
    if sys.platform.startswith("linux"):
        _Worker().call(_load_native_library, timeout)


RECOVERY_ACTION_FIELD = 230
"""NVML_FI_DEV_GET_GPU_RECOVERY_ACTION's number in nvml.h (R565 and later)."""

NATIVE_LIBRARY = "libnvidia-ml.so.1"
"""The soname pynvml loads on Linux (the driver installs it; the CUDA toolkit only a stub)."""


def _load_native_library() -> None:
    import ctypes  # noqa: TID251 (the platform layer owns native access)

    try:
        ctypes.CDLL(NATIVE_LIBRARY)
    except OSError as exc:  # the loader's reason, e.g. "cannot open shared object file: ..."
        reason = str(exc).removeprefix(f"{NATIVE_LIBRARY}: ")
        raise NvmlError(NvmlErrorKind.LIBRARY_NOT_FOUND, reason) from None


def _fill(fn: Any, info: Any, handle: Any) -> None:
    """Call an NVML query that fills ``info`` in place (the fabric queries), by pointer."""
    import ctypes  # noqa: TID251 (the platform layer owns native access)

    fn(handle, ctypes.byref(info))


_RETRY_VERSIONED = frozenset(
    {
        NvmlErrorKind.FUNCTION_NOT_FOUND,
        NvmlErrorKind.NOT_SUPPORTED,
        NvmlErrorKind.ARGUMENT_VERSION_MISMATCH,
        NvmlErrorKind.DEPRECATED,
        NvmlErrorKind.OTHER,
        NvmlErrorKind.BINDING_ERROR,
    }
)
"""How a deprecated query that a driver or binding no longer serves fails."""

_NO_SUCH_VERSION = frozenset(
    {
        NvmlErrorKind.ARGUMENT_VERSION_MISMATCH,  # a driver that knows only older versions
        NvmlErrorKind.FUNCTION_NOT_FOUND,  # a driver before R550: no versioned entry point
        NvmlErrorKind.BINDING_ERROR,
    }
)

FABRIC_UUID_LEN = 16
"""NVML_GPU_FABRIC_UUID_LEN: the bindings' own structures use 80 here, C uses 16."""

FABRIC_VERSIONS = {2: 0x02000024, 3: 0x03000028}
"""nvmlGpuFabricInfo_v2 and _v3: (version << 24) | sizeof(the structure)."""


@functools.cache
def fabric_layouts() -> dict[int, Any]:
    """nvmlGpuFabricInfo_t (1: unversioned, 28 bytes), _v2_t (36) and _v3_t (40) as ctypes
    structures, checked against their version words; the state is an ``unsigned char``."""
    import ctypes  # noqa: TID251 (the platform layer owns native access)

    head = [
        ("clusterUuid", ctypes.c_ubyte * FABRIC_UUID_LEN),
        ("status", ctypes.c_int),  # nvmlReturn_t
        ("cliqueId", ctypes.c_uint),  # partitionId in R535's header: the same word
        ("state", ctypes.c_ubyte),  # nvmlGpuFabricState_t
    ]
    v2 = [("version", ctypes.c_uint), *head, ("healthMask", ctypes.c_uint)]
    fields = {1: head, 2: v2, 3: [*v2, ("healthSummary", ctypes.c_ubyte)]}
    layouts = {
        n: type(f"FabricInfoV{n}", (ctypes.Structure,), {"_fields_": f}) for n, f in fields.items()
    }
    sizes = {n: ctypes.sizeof(layout) for n, layout in layouts.items()}
    expected = {1: 28, **{n: word & 0xFFFFFF for n, word in FABRIC_VERSIONS.items()}}
    if sizes != expected:  # a platform whose C layout differs: refuse rather than corrupt
        raise NvmlError(NvmlErrorKind.OTHER, f"fabric structure sizes {sizes} != {expected}")
    return layouts


def fabric_struct(version: int) -> Any:
    """A zeroed fabric structure of that version, its ``version`` word set (v2, v3)."""
    info = fabric_layouts()[version]()
    if version in FABRIC_VERSIONS:
        info.version = FABRIC_VERSIONS[version]
    return info


def _mig_query(nvml: Any, query: str, slot: int, handle: Any) -> Any:
    """``query`` (nvmlDeviceGetUUID …) of the MIG device in ``slot`` of the GPU ``handle``."""
    return getattr(nvml, query)(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))


def _translate(exc: Any) -> NvmlError:
    code = getattr(exc, "value", None)
    kind = _KIND_BY_CODE.get(code, NvmlErrorKind.OTHER) if isinstance(code, int) else "Other"
    return NvmlError(kind, str(exc) or type(exc).__name__)


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None
