"""NVML facts: driver, CUDA driver API version and every GPU, each field with NVML's reason.

The GPUs are read side by side, one thread per GPU (up to ``MAX_WORKERS``): with about 30 NVML
queries per GPU, reading eight GPUs one after the other took eight times as long. Every query
still has its timeout (the session's workers), and a hung one still fails the rest at once.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from envdoctor.model.facts import (
    EccCorrected,
    EccErrors,
    FabricInfo,
    GpuFacts,
    GpuProcess,
    MemoryInfo,
    MigInstance,
    MigMode,
    NvmlErrorKind,
    NvmlSystem,
    PcieLink,
    RetiredPages,
    RowRemap,
    SmClock,
    Utilization,
)
from envdoctor.model.interconnect import NvlinkFacts
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Deadline, Host
from envdoctor.platform.nvml import (
    MAX_WORKERS,
    NATIVE_LIBRARY,
    NvmlError,
    NvmlSession,
    probed,
)
from envdoctor.probes.interconnect import first_pass, second_pass

T = TypeVar("T")

NVML_CALL_TIMEOUT = 2.0
NVML_INIT_TIMEOUT = 10.0
"""nvmlInit's own bound: without persistence mode the driver sets every GPU up on each init."""
MAX_GPUS = 64
UNREACHABLE = frozenset(
    {NvmlErrorKind.GPU_IS_LOST, NvmlErrorKind.NOT_RESPONDING, NvmlErrorKind.CRASHED}
)
"""How a GPU fails whose pairs are not queried (each query of it would fail or hang again)."""


def probe_nvml(host: Host, *, deadline: Deadline, interconnect: bool = False) -> Probed[NvmlSystem]:
    """Initialise NVML and read every GPU. A library that is missing is ``Absent``.
    ``interconnect`` (``check``, not the probe tier) reads NVLink, P2P and the PCIe counters too
    (``probes/interconnect.py``)."""
    try:
        session = host.open_nvml(
            timeout=deadline.cap(NVML_CALL_TIMEOUT),
            init_timeout=deadline.cap(NVML_INIT_TIMEOUT),
            remaining=deadline.remaining,
        )
    except NvmlError as exc:
        if exc.kind == NvmlErrorKind.LIBRARY_NOT_FOUND:
            return Absent(f"NVML library not found ({NATIVE_LIBRARY}): {exc.message}")
        return ProbeFailed(exc.kind, exc.message)
    try:
        return Found(_read_system(host, session, deadline if interconnect else None))
    finally:
        session.close()


def _read_system(host: Host, session: NvmlSession, links: Deadline | None = None) -> NvmlSystem:
    # the driver's versions first: cheap, and kept should a GPU then take the rest of the time
    driver = probed(session.driver_version)
    cuda = probed(session.cuda_driver_version)
    count = probed(session.device_count)
    gpus: tuple[GpuFacts, ...] = ()
    count_error = ""
    wired: Probed[NvlinkFacts] = Absent("not read by the probe tier (envdoctor check reads it)")
    if isinstance(count, Found):
        first = first_pass(session, min(count.value, MAX_GPUS)) if links else None
        gpus = read_gpus(host, session, min(count.value, MAX_GPUS))
        if first is not None and links is not None:
            broken = frozenset(g.index for g in gpus if g.failure_kinds() & UNREACHABLE)
            wired = Found(second_pass(session, first, links, broken=broken))
    elif isinstance(count, ProbeFailed):
        count_error = f"{count.error}: {count.detail}"
    return NvmlSystem(
        driver_version=driver,
        cuda_driver_version=Found(cuda_version_string(cuda.value))
        if isinstance(cuda, Found)
        else cuda,
        gpus=gpus,
        device_count_error=count_error,
        interconnect=wired,
    )


def read_gpus(host: Host, session: NvmlSession, count: int) -> tuple[GpuFacts, ...]:
    """Every GPU's facts, in index order, read by up to ``MAX_WORKERS`` threads side by side.

    The calling thread reads its share too. Reading a GPU never raises (each query keeps its
    own error); should it raise anyway, the error is raised here, not lost with its thread.
    """
    workers = max(1, min(MAX_WORKERS, count))
    results: list[GpuFacts | None] = [None] * count
    failures: list[BaseException] = []

    def read_share(first: int) -> None:
        try:
            for index in range(first, count, workers):
                results[index] = _read_gpu(host, session, index)
        except BaseException as exc:  # noqa: BLE001 (re-raised by the calling thread below)
            failures.append(exc)

    others = [
        threading.Thread(target=read_share, args=(n,), name=f"envdoctor-gpu-{n}", daemon=True)
        for n in range(1, workers)
    ]
    for thread in others:
        thread.start()
    read_share(0)
    for thread in others:
        thread.join()
    if failures:
        raise failures[0]
    return tuple(gpu for gpu in results if gpu is not None)


def cuda_version_string(encoded: int) -> str:
    """NVML/CUDA encode versions as 1000*major + 10*minor (13000 → "13.0")."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def _read_gpu(host: Host, s: NvmlSession, i: int) -> GpuFacts:
    cc = probed(lambda: s.compute_capability(i))
    memory = probed(lambda: s.memory(i))
    mig = probed(lambda: s.mig_mode(i))
    mig_on = isinstance(mig, Found) and mig.value[0]
    instances: Probed[tuple[MigInstance, ...]] = (
        probed(lambda: tuple(MigInstance(u, n) for u, n in s.mig_devices(i)))
        if mig_on
        else Absent("MIG is off")
    )
    ecc = probed(lambda: s.ecc_uncorrectable(i))
    remap = probed(lambda: s.row_remap(i))
    pcie = probed(lambda: s.pcie_link(i))
    processes = probed(lambda: s.processes(i))
    utilization = probed(lambda: s.utilization(i))
    corrected = probed(lambda: s.ecc_corrected(i))
    retired = probed(lambda: s.retired_pages(i))
    fabric = probed(lambda: s.fabric_info(i))
    clock = probed(lambda: s.sm_clocks(i))
    return GpuFacts(
        index=i,
        name=probed(lambda: s.name(i)),
        uuid=probed(lambda: s.uuid(i)),
        pci_bus_id=probed(lambda: s.pci_bus_id(i)),
        compute_capability=Found(f"{cc.value[0]}.{cc.value[1]}") if isinstance(cc, Found) else cc,
        memory=Found(MemoryInfo(*memory.value)) if isinstance(memory, Found) else memory,
        persistence_mode=probed(lambda: s.persistence_mode(i)),
        compute_mode=probed(lambda: s.compute_mode(i)),
        mig_mode=Found(MigMode(*mig.value)) if isinstance(mig, Found) else mig,
        mig_devices=Found(len(instances.value)) if isinstance(instances, Found) else instances,
        ecc=Found(EccErrors(*ecc.value)) if isinstance(ecc, Found) else ecc,
        retired_pages_pending=probed(lambda: s.retired_pages_pending(i)),
        row_remap=Found(RowRemap(*remap.value)) if isinstance(remap, Found) else remap,
        processes=(
            Found(tuple(_process(host, p.pid, p.used_memory) for p in processes.value))
            if isinstance(processes, Found)
            else processes
        ),
        throttle_reasons=probed(lambda: s.throttle_reasons(i)),
        pcie=Found(PcieLink(*pcie.value)) if isinstance(pcie, Found) else pcie,
        temperature=probed(lambda: s.temperature(i)),
        power_draw=probed(lambda: s.power_draw(i)),
        power_limit=probed(lambda: s.power_limit(i)),
        utilization=Found(Utilization(*utilization.value))
        if isinstance(utilization, Found)
        else utilization,
        ecc_corrected=Found(EccCorrected(*corrected.value))
        if isinstance(corrected, Found)
        else corrected,
        retired_pages=Found(RetiredPages(*retired.value))
        if isinstance(retired, Found)
        else retired,
        fabric=Found(FabricInfo(*fabric.value)) if isinstance(fabric, Found) else fabric,
        mig_instances=instances,
        # per-GPU health (issue 39)
        recovery_action=probed(lambda: s.recovery_action(i)),
        shutdown_temperature=probed(lambda: s.temperature_threshold(i, "shutdown")),
        slowdown_temperature=probed(lambda: s.temperature_threshold(i, "slowdown")),
        max_operating_temperature=probed(lambda: s.temperature_threshold(i, "gpu_max")),
        sm_clock=Found(SmClock(*clock.value)) if isinstance(clock, Found) else clock,
    )


def _process(host: Host, pid: int, used: int | None) -> GpuProcess:
    cmdline = host.read_text(f"/proc/{pid}/cmdline", limit=4096)
    name: Probed[str]
    if isinstance(cmdline, Found) and cmdline.value.strip("\0"):
        name = Found(cmdline.value.replace("\0", " ").strip())
    elif isinstance(cmdline, Found):
        name = Absent("the process has no command line (kernel thread or zombie)")
    else:
        name = Absent(f"PID {pid} is not visible here (another PID namespace, e.g. a container)")
    memory: Probed[int] = (
        Found(used) if used is not None else Absent("NVML does not report per-process memory here")
    )
    return GpuProcess(pid=pid, name=name, used_memory=memory)
