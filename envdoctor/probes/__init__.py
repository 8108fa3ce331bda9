"""Probes: read the machine through a Host, once, into ``Facts``. Probes never raise."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from envdoctor import __version__
from envdoctor.model.facts import (
    EnvFacts,
    Facts,
    HostFacts,
    KernelFacts,
    LibraryFamily,
    NvmlSystem,
    TorchFacts,
)
from envdoctor.model.probed import Absent, Probed
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes.environment import probe_env, probe_variables
from envdoctor.probes.kernel import probe_kernel
from envdoctor.probes.libraries import probe_libraries
from envdoctor.probes.nvml import probe_nvml
from envdoctor.probes.system import probe_host

if TYPE_CHECKING:
    from envdoctor.platform.cache import CacheDir

FAST_TIER = "not probed by the fast tier (envdoctor check reads it)"
"""Why a fact is missing from ``envdoctor probe``: it starts neither torch nor nvcc."""


def collect_facts(
    host: Host,
    *,
    python: str,
    deadline: Deadline,
    include_torch: bool | None = None,
    fast: bool = False,
    torch_version_only: bool = False,
    torch_cache: CacheDir | None = None,
) -> Facts:
    """Probe everything once. The torch child (the slow part) runs while the rest is read.

    ``fast`` is the probe tier, for a 1 s startup probe: NVML, ``/proc``, ``/dev`` and the
    loader's view of the CUDA libraries (``/etc/ld.so.cache`` read as a file: a CUDA stub
    shadowing the driver's libcuda is a broken node too), but no nvcc and, unless
    ``include_torch`` asks for it (``slurm-healthcheck --python``), no torch: no process.
    ``include_torch`` defaults to the tier's choice: the full tier reads torch, the fast one not.
    ``torch_cache`` lets the torch child reuse an earlier import (``probes/torch_cache.py``).
    """
    with_torch = not fast if include_torch is None else include_torch
    if not with_torch:
        skipped = FAST_TIER if fast else "not probed (torch is skipped by this command)"
        rest = _probe_rest(host, deadline=deadline, fast=fast)
        return _facts(*rest, TorchFacts(python=python, torch=Absent(skipped)))
    # Imported here: the fast tier without torch pays for no thread pool or torch child.
    from concurrent.futures import ThreadPoolExecutor

    from envdoctor.probes.torch_build import probe_torch

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="envdoctor-torch") as pool:
        future = pool.submit(
            probe_torch,
            host,
            python=python,
            deadline=deadline,
            version_only=torch_version_only,
            cache=torch_cache,
        )
        rest = _probe_rest(host, deadline=deadline, fast=fast)
        return _facts(*rest, future.result())


def _probe_rest(
    host: Host, *, deadline: Deadline, fast: bool
) -> tuple[HostFacts, KernelFacts, Probed[NvmlSystem], Probed[tuple[LibraryFamily, ...]], EnvFacts]:
    """Everything but torch; the fast tier runs no nvcc."""
    env = (
        EnvFacts(variables=probe_variables(host), nvcc=Absent(FAST_TIER))
        if fast
        else probe_env(host, deadline=deadline)
    )
    return (
        probe_host(host),
        probe_kernel(host),
        probe_nvml(host, deadline=deadline),
        probe_libraries(host, deadline=deadline),
        env,
    )


def _facts(
    host_facts: HostFacts,
    kernel: KernelFacts,
    nvml: Probed[NvmlSystem],
    libraries: Probed[tuple[LibraryFamily, ...]],
    env: EnvFacts,
    torch: TorchFacts,
) -> Facts:
    return Facts(
        host=host_facts,
        kernel=kernel,
        nvml=nvml,
        libraries=libraries,
        env=env,
        torch=torch,
        envdoctor_version=__version__,
        collected_at=_now(),
    )


def _now() -> str:
    """UTC, to the second, as ``datetime.isoformat`` writes it (without importing datetime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
