"""A stand-in for the ``pynvml`` module (nvidia-ml-py) with simulated GPUs and a delay per call.

It drives envdoctor's real NVML path (``PynvmlSession``: the workers, the timeouts, the
translation of every answer) where no GPU is, in the fast unit tests (the native stand-in,
``tests/native``, drives the bindings and the NVML child). Each call sleeps ``delay`` seconds,
releasing the GIL as a ctypes call into ``libnvidia-ml`` does. Constants, ctypes structures and
``NVMLError`` are the installed nvidia-ml-py's own, and every function here has the name and
the parameters of the real binding (``tests/probes/test_nvml_health.py`` holds it to that), so a
misspelt or misused binding fails here as it would on a GPU.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml  # noqa: TID251 (the real bindings: their constants, structures and errors)


@dataclass
class SimGpu:
    """One simulated GPU: an H100 SXM on an NVSwitch baseboard, registered with the fabric."""

    name: str = "NVIDIA H100 80GB HBM3"
    temperature: int = 33
    power_mw: int = 71_234
    power_limit_mw: int = 700_000
    utilization: tuple[int, int] = (3, 1)
    ecc_corrected: tuple[int, int] = (0, 2)
    ecc_uncorrected: tuple[int, int] = (0, 0)
    fabric: tuple[int, int, int] = (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0, 32766)
    fail: dict[str, int] = field(default_factory=dict)
    """NVML function name → the NVML return code it fails with (e.g. 3, NotSupported)."""
    hang: frozenset[str] = frozenset()
    """NVML function names that never answer (they sleep a minute)."""


def make_pynvml(
    gpus: list[SimGpu], *, delay: float = 0.0, driver: str = "580.159.04"
) -> types.ModuleType:
    """A module that answers like ``pynvml`` for these GPUs, ``delay`` seconds per call."""
    module = types.ModuleType("pynvml")
    module.__file__ = __file__
    for name in dir(pynvml):  # constants, structures and error classes of the real bindings
        if name.startswith(("NVML_", "c_nvml", "NVMLError")) or name == "NVMLError":
            setattr(module, name, getattr(pynvml, name))
    sim = _Sim(gpus, delay, driver)
    for name in dir(_Sim):
        if name.startswith("nvml"):
            setattr(module, name, getattr(sim, name))
    return module


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class _Sim:
    def __init__(self, gpus: list[SimGpu], delay: float, driver: str) -> None:
        self._gpus = gpus
        self._delay = delay
        self._driver = driver

    def _gpu(self, handle: _Handle, function: str) -> SimGpu:
        if self._delay:
            time.sleep(self._delay)
        gpu = self._gpus[handle.index]
        if function in gpu.hang:
            time.sleep(60)
        if function in gpu.fail:
            raise pynvml.NVMLError(gpu.fail[function])
        return gpu

    def _tick(self) -> None:
        if self._delay:
            time.sleep(self._delay)

    # --- the system ---------------------------------------------------------------------------

    def nvmlInitWithFlags(self, flags: int) -> None:
        self._tick()

    def nvmlShutdown(self) -> None:
        self._tick()

    def nvmlSystemGetDriverVersion(self) -> str:
        self._tick()
        return self._driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._tick()
        return 13000

    def nvmlDeviceGetCount(self) -> int:
        self._tick()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._tick()
        if index >= len(self._gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    # --- identity and configuration -----------------------------------------------------------

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._gpu(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        self._gpu(handle, "nvmlDeviceGetUUID")
        return f"GPU-{handle.index:08x}-1111-2222-3333-444455556666"

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> Any:
        self._gpu(handle, "nvmlDeviceGetPciInfo")
        info = pynvml.nvmlPciInfo_t()
        info.busId = f"00000000:{0x18 + 0x10 * handle.index:02X}:00.0".encode()
        return info

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        self._gpu(handle, "nvmlDeviceGetCudaComputeCapability")
        return (9, 0)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle, version: Any = None) -> Any:
        self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        if version is None:
            memory = pynvml.c_nvmlMemory_t()
            memory.total, memory.used, memory.free = 85520809984, 1073741824, 84447068160
            return memory
        if version != pynvml.nvmlMemory_v2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        memory = pynvml.c_nvmlMemory_v2_t()
        memory.total, memory.reserved = 85520809984, 629145600
        memory.used, memory.free = 444596224, 84447068160
        return memory

    def nvmlDeviceGetPersistenceMode(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetPersistenceMode")
        return 1

    def nvmlDeviceGetComputeMode(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetComputeMode")
        return 0

    def nvmlDeviceGetMigMode(self, device: _Handle) -> list[int]:
        self._gpu(device, "nvmlDeviceGetMigMode")
        return [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: _Handle) -> int:
        self._gpu(device, "nvmlDeviceGetMaxMigDeviceCount")
        return 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: _Handle, index: int) -> _Handle:
        self._gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex")
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    # --- health -------------------------------------------------------------------------------

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, errorType: int, counterType: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        counts = (
            gpu.ecc_corrected
            if errorType == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
            else gpu.ecc_uncorrected
        )
        return counts[0 if counterType == pynvml.NVML_VOLATILE_ECC else 1]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: _Handle) -> int:
        self._gpu(device, "nvmlDeviceGetRetiredPagesPendingStatus")
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # Ampere+: row remapping

    def nvmlDeviceGetRetiredPages(self, device: _Handle, sourceFilter: int) -> list[int]:
        self._gpu(device, "nvmlDeviceGetRetiredPages")
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRemappedRows(self, device: _Handle) -> tuple[int, int, int, int]:
        self._gpu(device, "nvmlDeviceGetRemappedRows")
        return (0, 0, 0, 0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[Any]:
        self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return []

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: _Handle) -> list[Any]:
        self._gpu(handle, "nvmlDeviceGetGraphicsRunningProcesses")
        return []

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")
        return 0x1  # GPU idle

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth")
        return 16

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: _Handle) -> int:
        self._gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth")
        return 16

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> Any:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu, rates.memory = gpu.utilization
        return rates

    def nvmlDeviceGetGpuFabricInfoV(self, device: _Handle, gpuFabricInfo: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetGpuFabricInfoV")
        info = _pointee(gpuFabricInfo)
        if info.version not in (0x02000024, 0x03000028):  # nvmlGpuFabricInfo_v2, _v3
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        info.state, info.status, info.cliqueId = gpu.fabric
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, device: _Handle, gpuFabricInfo: Any) -> int:
        gpu = self._gpu(device, "nvmlDeviceGetGpuFabricInfo")
        info = _pointee(gpuFabricInfo)
        info.state, info.status, info.cliqueId = gpu.fabric
        return 0


def _pointee(argument: Any) -> Any:
    """The structure a ``ctypes.byref`` points at, as C would see it; the binding passes its
    argument straight to C, so a structure passed by value is refused here (C would crash)."""
    if not hasattr(argument, "_obj"):
        raise TypeError("the fabric query takes a pointer (ctypes.byref), not a structure")
    return argument._obj
