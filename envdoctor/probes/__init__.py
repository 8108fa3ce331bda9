"""Probes: read the machine through a Host, once, into ``Facts``. Probes never raise."""

from __future__ import annotations

import datetime
from concurrent.futures import ThreadPoolExecutor

from envdoctor import __version__
from envdoctor.model.facts import Facts, TorchFacts
from envdoctor.model.probed import Absent
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes.environment import probe_env
from envdoctor.probes.kernel import probe_kernel
from envdoctor.probes.libraries import probe_libraries
from envdoctor.probes.nvml import probe_nvml
from envdoctor.probes.system import probe_host
from envdoctor.probes.torch_build import probe_torch


def collect_facts(
    host: Host, *, python: str, deadline: Deadline, include_torch: bool = True
) -> Facts:
    """Probe everything once. The torch child (the slow part) runs while the rest is read."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="envdoctor-torch") as pool:
        torch_future = (
            pool.submit(probe_torch, host, python=python, deadline=deadline)
            if include_torch
            else None
        )
        host_facts = probe_host(host)
        kernel = probe_kernel(host)
        nvml = probe_nvml(host, deadline=deadline)
        libraries = probe_libraries(host, deadline=deadline)
        env = probe_env(host, deadline=deadline)
        torch = (
            torch_future.result()
            if torch_future is not None
            else TorchFacts(
                python=python, torch=Absent("not probed (torch is skipped by this command)")
            )
        )
    return Facts(
        host=host_facts,
        kernel=kernel,
        nvml=nvml,
        libraries=libraries,
        env=env,
        torch=torch,
        envdoctor_version=__version__,
        collected_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )
