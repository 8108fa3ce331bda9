"""Build ``Facts`` directly for rule tests: a healthy H100 machine unless told otherwise.

Values match a real H100 box (driver 580.159.04, torch 2.11.0+cu130); each helper takes keyword
overrides so a test states only what its scenario changes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from envdoctor.model.facts import (
    DeviceNode,
    EccErrors,
    EnvFacts,
    Facts,
    GpuFacts,
    HostFacts,
    KernelDriver,
    KernelFacts,
    KernelModule,
    LibraryFamily,
    MemoryInfo,
    MigMode,
    NvmlSystem,
    PciDevice,
    PcieLink,
    RowRemap,
    TorchBuild,
    TorchFacts,
)
from envdoctor.model.probed import Absent, Found, Probed

GiB = 1 << 30
DRIVER = "580.159.04"


def gpu(index: int = 0, **over: Any) -> GpuFacts:
    base = GpuFacts(
        index=index,
        name=Found("NVIDIA H100 80GB HBM3"),
        uuid=Found(f"GPU-00000000-0000-0000-0000-00000000000{index}"),
        pci_bus_id=Found(f"00000000:{0x18 + index:02X}:00.0"),
        compute_capability=Found("9.0"),
        memory=Found(MemoryInfo(total=80 * GiB, used=1 * GiB, free=79 * GiB)),
        persistence_mode=Found(True),
        compute_mode=Found("default"),
        mig_mode=Found(MigMode(current=False, pending=False)),
        mig_devices=Found(0),
        ecc=Found(EccErrors(0, 0)),
        retired_pages_pending=Absent("not supported by this GPU (row remapping instead)"),
        row_remap=Found(RowRemap(0, 0, pending=False, failure=False)),
        processes=Found(()),
        throttle_reasons=Found(("gpu-idle",)),
        pcie=Found(PcieLink(gen=5, width=16, max_gen=5, max_width=16)),
    )
    return replace(base, **over)


def nvml(gpus: tuple[GpuFacts, ...] | None = None, **over: Any) -> Found[NvmlSystem]:
    system = NvmlSystem(
        driver_version=Found(DRIVER),
        cuda_driver_version=Found("13.0"),
        gpus=(gpu(0),) if gpus is None else gpus,
    )
    return Found(replace(system, **over))


def modules(*names: str) -> Found[tuple[KernelModule, ...]]:
    return Found(tuple(KernelModule(n, 0, ()) for n in names))


NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")


def nodes(
    *paths: str, readable: bool = True, writable: bool = True
) -> Found[tuple[DeviceNode, ...]]:
    return Found(tuple(DeviceNode(p, True, "0666", readable, writable) for p in paths))


DEFAULT_NODES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


def kernel(**over: Any) -> KernelFacts:
    base = KernelFacts(
        modules=modules(*NVIDIA_MODULES),
        driver=Found(
            KernelDriver(
                DRIVER, "open", f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER}"
            )
        ),
        device_nodes=nodes(*DEFAULT_NODES),
    )
    return replace(base, **over)


def host(**over: Any) -> HostFacts:
    base = HostFacts(
        os_name=Found("Ubuntu 24.04.3 LTS"),
        kernel=Found("6.8.0-85-generic"),
        machine="x86_64",
        hostname=Found("gpu-node-01"),
        user="alice",
        uid=1000,
        containers=(),
        wsl=False,
        cgroup_version=Found(2),
        nvidia_pci=Found((PciDevice("0000:18:00.0", "0x2330", "0x030200", Found("nvidia")),)),
    )
    return replace(base, **over)


def torch_build(**over: Any) -> TorchBuild:
    base = TorchBuild(
        version="2.11.0+cu130",
        location="/opt/venv/lib/python3.12/site-packages/torch",
        cuda="13.0",
        hip="",
        cudnn_version=Found("91500"),
        nccl_version=Found("2.28.9"),
        arch_list=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
        cuda_available=True,
        unavailable_reason="",
        device_count=Found(1),
        loaded_libraries=(),
        nvidia_wheels=(("nvidia-cudnn-cu13", "9.15.0.57"),),
    )
    return replace(base, **over)


def torch(build: Probed[Any] | None = None, python: str = "/opt/venv/bin/python") -> TorchFacts:
    return TorchFacts(python=python, torch=Found(torch_build()) if build is None else build)


def env(variables: dict[str, str] | None = None, **over: Any) -> EnvFacts:
    base = EnvFacts(variables=tuple((variables or {}).items()), nvcc=Absent("nvcc is not on PATH"))
    return replace(base, **over)


def facts(**over: Any) -> Facts:
    """A healthy single-H100 machine; override any top-level part."""
    base = Facts(
        host=host(),
        kernel=kernel(),
        nvml=nvml(),
        libraries=Found(tuple[LibraryFamily, ...]()),
        env=env(),
        torch=torch(),
    )
    return replace(base, **over)


def cpu_machine(**over: Any) -> Facts:
    """A machine without NVIDIA hardware or driver (a laptop, a CPU build box), CPU torch."""
    base = facts(
        nvml=Absent("NVML library not found (libnvidia-ml.so.1)"),
        kernel=kernel(
            modules=modules("ecc", "kvm"),
            driver=Absent("/proc/driver/nvidia/version does not exist"),
            device_nodes=Found(()),
        ),
        host=host(nvidia_pci=Found(())),
        libraries=Found(()),
        torch=torch(
            Found(
                torch_build(
                    version="2.13.0+cpu",
                    cuda="",
                    cudnn_version=Absent("CPU-only build: no cuDNN"),
                    nccl_version=Absent("CPU-only build: no NCCL"),
                    arch_list=(),
                    cuda_available=False,
                    unavailable_reason="torch was built without CUDA",
                    device_count=Absent("CUDA is not available to torch"),
                    nvidia_wheels=(),
                    imported=False,
                )
            )
        ),
    )
    return replace(base, **over)
