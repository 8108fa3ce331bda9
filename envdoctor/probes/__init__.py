"""Probes: read the machine through a Host, once, into ``Facts``. Probes never raise."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from envdoctor import __version__
from envdoctor.model.containers import ContainerFacts
from envdoctor.model.facts import (
    EnvFacts,
    FabricFacts,
    Facts,
    HostFacts,
    KernelFacts,
    LibraryFamily,
    NvmlSystem,
    TorchFacts,
)
from envdoctor.model.probed import Absent, Found, Probed
from envdoctor.platform.background import Background
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes.containers import probe_containers
from envdoctor.probes.environment import probe_env, probe_variables
from envdoctor.probes.fabric import probe_fabric, probe_nvswitches
from envdoctor.probes.interconnect import probe_pci_paths
from envdoctor.probes.kernel import probe_kernel
from envdoctor.probes.kernel_log import probe_kernel_log
from envdoctor.probes.libraries import probe_libraries
from envdoctor.probes.nvml import probe_nvml
from envdoctor.probes.persistenced import probe_persistenced
from envdoctor.probes.system import probe_host

if TYPE_CHECKING:
    from collections.abc import Callable

    from envdoctor.platform.cache import CacheDir

FAST_TIER = "not probed by the fast tier (envdoctor check reads it)"
"""Why a fact is missing from ``envdoctor probe``: it starts neither torch nor nvcc."""
NO_TOOLKIT = "not probed: the CUDA toolkit is read with torch only (envdoctor check reads both)"
"""Why nvcc is missing from ``slurm-healthcheck`` without ``--python``: it matters next to torch."""


def collect_facts(
    host: Host,
    *,
    python: str,
    deadline: Deadline,
    include_torch: bool = True,
    fast: bool = False,
    torch_version_only: bool = False,
    torch_cache: CacheDir | None = None,
    toolkit: bool = True,
    meanwhile: Callable[[], object] | None = None,
) -> Facts:
    """Probe everything once. The torch child (the slow part) runs while the rest is read.

    ``fast`` is the probe tier, for a 1 s startup probe: NVML, ``/proc``, ``/dev`` and the
    loader's view of the CUDA libraries (``/etc/ld.so.cache`` read as a file: a CUDA stub
    shadowing the driver's libcuda is a broken node too), but no torch, no nvcc, no process.
    ``toolkit=False`` runs no nvcc in the full tier either (``slurm-healthcheck`` without torch);
    ``torch_cache`` lets the torch child reuse an earlier import (``probes/torch_cache.py``).
    ``meanwhile`` (full tier) runs on this thread as soon as the torch child is started: the
    caller's own loading (check's rules and tables, ~15 ms) then overlaps the child's start-up
    instead of coming before or after it.
    """
    if fast:
        host_facts = probe_host(host)
        kernel = probe_kernel(host)
        nvml = probe_nvml(host, deadline=deadline)
        libraries = probe_libraries(host, deadline=deadline)
        env = EnvFacts(
            variables=probe_variables(host), nvcc=Absent(FAST_TIER), build_nvcc=Absent(FAST_TIER)
        )
        torch = TorchFacts(python=python, torch=Absent(FAST_TIER))
        fabric = FabricFacts(nvswitches=probe_nvswitches(host), manager=Absent(FAST_TIER))
        containers = probe_containers(
            host, deadline=deadline, fast=True, host_facts=host_facts, kernel=kernel, nvml=nvml
        )
    else:
        host_facts, kernel, nvml, libraries, env, torch, containers = _collect_all(
            host,
            python=python,
            deadline=deadline,
            include_torch=include_torch,
            version_only=torch_version_only,
            cache=torch_cache,
            toolkit=toolkit,
            meanwhile=meanwhile,
        )
        fabric = probe_fabric(host, nvml, deadline=deadline)
    kernel_log = probe_kernel_log(host, deadline=deadline, fast=fast)
    pci_paths = (
        Absent(FAST_TIER) if fast else probe_pci_paths(host, gpu_bus_ids(nvml))
    )  # ACS, AER and the IOMMU: check reads them (issue 39)
    return Facts(
        host=host_facts,
        kernel=kernel,
        nvml=nvml,
        libraries=libraries,
        env=env,
        torch=torch,
        envdoctor_version=__version__,
        collected_at=now_utc(),
        kernel_log=kernel_log,
        fabric=fabric,
        containers=containers,
        persistenced=probe_persistenced(host),
        pci_paths=pci_paths,
    )


def gpu_bus_ids(nvml: Probed[NvmlSystem]) -> tuple[str, ...]:
    """The PCI addresses NVML gave for its GPUs (the PCIe path probe starts from them)."""
    if not isinstance(nvml, Found):
        return ()
    return tuple(g.pci_bus_id.value for g in nvml.value.gpus if isinstance(g.pci_bus_id, Found))


def _collect_all(
    host: Host,
    *,
    python: str,
    deadline: Deadline,
    include_torch: bool,
    version_only: bool,
    cache: CacheDir | None,
    toolkit: bool,
    meanwhile: Callable[[], object] | None,
) -> tuple[
    HostFacts,
    KernelFacts,
    Probed[NvmlSystem],
    Probed[tuple[LibraryFamily, ...]],
    EnvFacts,
    TorchFacts,
    ContainerFacts,
]:
    """The full tier: the torch child and nvcc run on threads while the rest is read (each is a
    child process that the main thread would otherwise wait on)."""
    # Imported here: the fast tier pays for no thread or torch child.
    from envdoctor.probes.torch_probe import probe_torch

    torch_call = (
        Background(
            probe_torch,
            host,
            python=python,
            deadline=deadline,
            version_only=version_only,
            cache=cache,
        )
        if include_torch
        else None
    )
    env_call = Background(probe_env, host, deadline=deadline) if toolkit else None
    try:
        if meanwhile is not None:
            began = time.monotonic()
            meanwhile()
            # the loading is not the machine's time: every probe still gets the budget it had
            # when the loading came before them
            deadline.extend(time.monotonic() - began)
        host_facts = probe_host(host)
        kernel = probe_kernel(host)
        nvml = probe_nvml(host, deadline=deadline, interconnect=True)
        libraries = probe_libraries(host, deadline=deadline)
        containers = probe_containers(
            host, deadline=deadline, fast=False, host_facts=host_facts, kernel=kernel, nvml=nvml
        )
    finally:  # the children end within the deadline: wait for them, as a thread pool would
        for call in (torch_call, env_call):
            if call is not None:
                call.join()
    env = (
        env_call.result()
        if env_call is not None
        else EnvFacts(
            variables=probe_variables(host),
            nvcc=Absent(NO_TOOLKIT),
            build_nvcc=Absent(NO_TOOLKIT),
        )
    )
    torch = (
        torch_call.result()
        if torch_call is not None
        else TorchFacts(
            python=python, torch=Absent("not probed (torch is skipped by this command)")
        )
    )
    return host_facts, kernel, nvml, libraries, env, torch, containers


def now_utc() -> str:
    """UTC, to the second, as ``datetime.isoformat`` writes it (without importing datetime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
