"""The machines the compatibility tests judge, built from tests/factories.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from envdoctor.model.facts import Facts, KernelDriver, Nvcc, TorchBuild
from envdoctor.model.probed import Absent, Found, Probed
from tests import factories as f

# name -> (GPU name, compute capability, driver, CUDA the driver reports, kernel-module flavour)
MACHINES: dict[str, tuple[str, str, str, str, str]] = {
    "h100-580": ("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", "13.0", "open"),
    "a100-535": ("NVIDIA A100-SXM4-80GB", "8.0", "535.104.05", "12.2", "proprietary"),
    "v100-580": ("Tesla V100-SXM2-32GB", "7.0", "580.95.05", "13.0", "proprietary"),
    "rtx3090-550": ("NVIDIA GeForce RTX 3090", "8.6", "550.54.15", "12.4", "proprietary"),
    "rtx5090-570": ("NVIDIA GeForce RTX 5090", "12.0", "570.124.06", "12.8", "open"),
    "gtx1080-535": ("NVIDIA GeForce GTX 1080", "6.1", "535.104.05", "12.2", "proprietary"),
}


def machine(
    gpu_name: str,
    cc: str,
    driver: str,
    driver_cuda: str,
    flavor: str = "open",
    *,
    gpus: int = 1,
    torch: TorchBuild | None = None,
    nvcc: Probed[Nvcc] | None = None,
    **facts_over: Any,
) -> Facts:
    """A machine with ``gpus`` identical GPUs, this driver, and optionally a torch and an nvcc."""
    devices = tuple(
        f.gpu(i, name=Found(gpu_name), compute_capability=Found(cc)) for i in range(gpus)
    )
    kind = "Open Kernel Module" if flavor == "open" else "Kernel Module"
    kernel = f.kernel(
        driver=Found(
            KernelDriver(driver, flavor, f"NVRM version: NVIDIA UNIX x86_64 {kind}  {driver}")
        )
    )
    facts = f.facts(
        nvml=f.nvml(
            gpus=devices, driver_version=Found(driver), cuda_driver_version=Found(driver_cuda)
        ),
        kernel=kernel,
        torch=f.torch(Found(torch) if torch is not None else Absent("torch is not installed")),
        env=f.env(nvcc=nvcc if nvcc is not None else Absent("nvcc is not on PATH")),
    )
    return replace(facts, **facts_over) if facts_over else facts


def named(name: str, **over: Any) -> Facts:
    return machine(*MACHINES[name], **over)


def torch_build(version: str, cuda: str, arch: tuple[str, ...], **over: Any) -> TorchBuild:
    return f.torch_build(version=version, cuda=cuda, arch_list=arch, **over)
