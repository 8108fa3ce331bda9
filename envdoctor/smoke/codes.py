"""Every finding code smoke can emit: severity, title and the default fix, as data.

Attribution (``attribute.py``) sharpens a finding with what the facts say (who holds the memory,
which cuDNN was loaded …) and may replace the default fix with a precise one.
Each code is documented in docs/findings.md (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.model.finding import Remediation, Severity

DOCS = "docs/smoke.md"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    severity: Severity
    title: str
    fix: Remediation
    inconclusive: bool = False


def _fix(summary: str, *steps: str, root: bool = False, reboot: bool = False) -> Remediation:
    return Remediation(
        summary=summary, steps=steps, needs_root=root, needs_reboot=reboot, docs=DOCS
    )


_E = Severity.ERROR

CODES: dict[str, CodeInfo] = {
    "smoke.passed": CodeInfo(Severity.OK, "every smoke step passed", _fix("Nothing to do")),
    "smoke.cublas-alloc-failed": CodeInfo(
        _E,
        "cuBLAS could not allocate its handle (CUBLAS_STATUS_ALLOC_FAILED)",
        _fix(
            "Find out whether GPU memory was exhausted when cuBLAS started",
            "envdoctor smoke --reproduce cublas-alloc   # does running out of memory produce it?",
        ),
    ),
    "smoke.cublas-not-initialized": CodeInfo(
        _E,
        "cuBLAS failed to initialise (CUBLAS_STATUS_NOT_INITIALIZED)",
        _fix(
            "Find out whether GPU memory was exhausted when cuBLAS started",
            "envdoctor smoke --reproduce cublas-alloc",
        ),
    ),
    "smoke.cudnn-not-initialized": CodeInfo(
        _E,
        "cuDNN failed to initialise (CUDNN_STATUS_NOT_INITIALIZED)",
        _fix(
            "Find out whether GPU memory ran out or a foreign cuDNN was loaded",
            "envdoctor smoke --reproduce cudnn-init   # does running out of memory produce it?",
        ),
    ),
    "smoke.cudnn-version-mismatch": CodeInfo(
        _E,
        "torch loaded a cuDNN other than the one it was built with",
        _fix(
            "Let torch load the cuDNN it ships with",
            "remove foreign cuDNN directories from LD_LIBRARY_PATH",
            "pip install --force-reinstall torch   # restores the bundled nvidia-cudnn wheel",
        ),
    ),
    "smoke.cudnn-unavailable": CodeInfo(
        _E,
        "torch cannot load cuDNN",
        _fix(
            "Reinstall torch with its cuDNN wheel",
            "pip install --force-reinstall torch",
        ),
    ),
    "smoke.illegal-memory-access": CodeInfo(
        _E,
        "a kernel made an illegal memory access; the CUDA context is lost",
        _fix(
            "Check the GPU and driver: smoke's kernels are torch's own and their inputs are valid",
            "sudo dmesg | grep -i xid   # driver-reported GPU faults",
            "nvidia-smi -q -d ECC,ROW_REMAPPER",
        ),
    ),
    "smoke.device-assert": CodeInfo(
        _E,
        "a device-side assert fired; the CUDA context is lost",
        _fix(
            "Check the GPU and driver: smoke's inputs cannot trigger a legitimate assert",
            "sudo dmesg | grep -i xid",
        ),
    ),
    "smoke.ecc-error": CodeInfo(
        _E,
        "the GPU reported an uncorrectable ECC error",
        _fix(
            "Drain the GPU and reset it; replace it if the errors come back",
            "nvidia-smi -q -d ECC,ROW_REMAPPER",
            "sudo nvidia-smi -r -i <gpu>   # with no process on it",
            root=True,
        ),
    ),
    "smoke.launch-failed": CodeInfo(
        _E,
        "a kernel launch failed (unspecified launch failure); the CUDA context is lost",
        _fix(
            "Check the GPU and driver for faults",
            "sudo dmesg | grep -i xid",
            "nvidia-smi -q -d ECC,ROW_REMAPPER",
        ),
    ),
    "smoke.no-kernel-image": CodeInfo(
        _E,
        "torch has no kernel for this GPU's architecture (no kernel image is available)",
        _fix(
            "Install a torch build compiled for this GPU's architecture",
            "python -c 'import torch; print(torch.cuda.get_arch_list())'",
        ),
    ),
    "smoke.driver-insufficient": CodeInfo(
        _E,
        "the NVIDIA driver is too old for the CUDA this torch was built with",
        _fix(
            "Upgrade the driver, or install a torch built for an older CUDA",
            "nvidia-smi   # 'CUDA Version' is the newest CUDA the driver supports",
        ),
    ),
    "smoke.driver-mismatch": CodeInfo(
        _E,
        "the CUDA driver library does not match the kernel driver or this GPU",
        _fix(
            "Use the libcuda that belongs to the installed kernel driver",
            "remove cuda-compat directories from LD_LIBRARY_PATH, or upgrade the driver",
        ),
    ),
    "smoke.fabric-manager": CodeInfo(
        _E,
        "CUDA is not ready on this NVSwitch system (system not yet initialized)",
        _fix(
            "Start NVIDIA Fabric Manager (same version as the driver)",
            "sudo systemctl enable --now nvidia-fabricmanager",
            root=True,
        ),
    ),
    "smoke.no-device": CodeInfo(
        _E,
        "CUDA finds no usable GPU",
        _fix(
            "Make the GPU visible to this process",
            "echo $CUDA_VISIBLE_DEVICES; ls -l /dev/nvidia*",
            "envdoctor check",
        ),
    ),
    "smoke.device-busy": CodeInfo(
        _E,
        "the GPU is busy or unavailable to new processes",
        _fix(
            "Use a GPU in the Default compute mode, or wait for the process that owns it",
            "nvidia-smi --query-gpu=index,compute_mode --format=csv",
            "sudo nvidia-smi -i <gpu> -c DEFAULT",
        ),
    ),
    "smoke.out-of-memory": CodeInfo(
        _E,
        "CUDA ran out of GPU memory",
        _fix(
            "Free GPU memory: stop what holds it, or use another GPU",
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
        ),
    ),
    "smoke.cublas-failed": CodeInfo(
        _E,
        "a cuBLAS call failed",
        _fix(
            "Check which libcublas torch loads, and the driver",
            "envdoctor smoke --reproduce cublas-alloc",
        ),
    ),
    "smoke.cudnn-failed": CodeInfo(
        _E,
        "a cuDNN call failed",
        _fix(
            "Check which libcudnn torch loads, and free GPU memory",
            "envdoctor smoke --reproduce cudnn-init",
        ),
    ),
    "smoke.nccl-failed": CodeInfo(
        _E,
        "the NCCL all-reduce across GPUs failed",
        _fix(
            "Run it again with NCCL's own diagnostics",
            "NCCL_DEBUG=INFO envdoctor smoke",
            "NCCL_P2P_DISABLE=1 envdoctor smoke   # passes? then peer-to-peer (P2P, IOMMU)",
            "nvidia-smi topo -m",
        ),
    ),
    "smoke.allreduce-slow": CodeInfo(
        Severity.WARNING,
        "the NCCL all-reduce's bus bandwidth is below half of what the links allow",
        _fix(
            "Find the slow path between the GPUs",
            "envdoctor check   # nvlink.*, p2p.unavailable, pcie.acs-redirect, pcie.*: the cause",
            "nvidia-smi topo -m; nvidia-smi nvlink --status",
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH envdoctor smoke   # the rings and "
            "channels NCCL chose, and over what",
            "all_reduce_perf -b 256M -e 1G -f 2 -g <GPUs>   # nccl-tests, for a second opinion",
        ),
    ),
    "smoke.p2p-slow": CodeInfo(
        Severity.WARNING,
        "peer-to-peer copies are slow between some GPUs",
        _fix(
            "Look at the link between the GPUs named",
            "envdoctor check   # nvlink.links-down / nvlink.errors-growing name a GPU's links; "
            "p2p.unavailable and pcie.acs-redirect a path",
            "nvidia-smi topo -m; nvidia-smi nvlink --status -i <GPU>",
            "nvbandwidth -t device_to_device_memcpy_read_ce   # NVIDIA's own measurement",
        ),
    ),
    "smoke.torch-without-cuda": CodeInfo(
        _E,
        "this torch is a CPU-only build: it cannot use the GPU",
        _fix(
            "Install a CUDA build of torch",
            "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128",
        ),
    ),
    "smoke.unknown-cuda-error": CodeInfo(
        _E,
        "CUDA reported an unknown error; the CUDA context is lost",
        _fix(
            "Reload the driver state: this is often a GPU left broken by suspend/resume or a fault",
            "sudo dmesg | grep -i xid",
            "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm   # with no GPU process running",
            root=True,
        ),
    ),
    "smoke.timeout": CodeInfo(
        _E,
        "a smoke step hung and was killed",
        _fix(
            "Look for a wedged GPU or driver",
            "nvidia-smi   # a hang here too means the driver is stuck",
            "sudo dmesg | grep -i xid",
        ),
    ),
    "smoke.crashed": CodeInfo(
        _E,
        "the smoke child crashed",
        _fix(
            "Find which native library crashed (the Python stack is in the evidence)",
            "check LD_LIBRARY_PATH and LD_PRELOAD for foreign CUDA libraries",
        ),
    ),
    "smoke.wrong-result": CodeInfo(
        _E,
        "a GPU computation gave a wrong result",
        _fix(
            "Treat the GPU as suspect until a diagnostic passes",
            "nvidia-smi -q -d ECC,ROW_REMAPPER",
            "dcgmi diag -r 3   # NVIDIA DCGM diagnostics, if installed",
        ),
    ),
    "smoke.torch-import-failed": CodeInfo(
        _E,
        "torch cannot be imported by the target interpreter",
        _fix("See why torch fails to import", "envdoctor check"),
    ),
    "smoke.failed": CodeInfo(
        _E,
        "a smoke step failed with an error envdoctor does not recognise",
        _fix(
            "Read the error text; report it to envdoctor if it names a CUDA status",
            "envdoctor collect -o snapshot.json",
        ),
    ),
    "smoke.not-run": CodeInfo(
        Severity.WARNING,
        "smoke tests could not run",
        _fix("Run `envdoctor check` for why no GPU is usable", "envdoctor check"),
        inconclusive=True,
    ),
    "smoke.not-applicable": CodeInfo(
        Severity.INFO,
        "no smoke tests on a machine that needs no GPU",
        _fix(
            "Nothing to do: the smoke tests exercise NVIDIA GPUs, and this machine has none",
            "envdoctor check --deep --expect gpu   # if this machine should have a GPU",
        ),
    ),
    # --reproduce
    "smoke.pressure-reproduces": CodeInfo(
        Severity.WARNING,
        "the error reproduces under memory pressure",
        _fix("Leave GPU memory free for the process that failed"),
    ),
    "smoke.pressure-other-error": CodeInfo(
        Severity.INFO,
        "memory pressure gives a different error",
        _fix("Look for a cause other than memory pressure"),
    ),
    "smoke.pressure-ruled-out": CodeInfo(
        Severity.INFO,
        "memory pressure does not reproduce the error",
        _fix("Look for a cause other than memory pressure"),
    ),
    "smoke.reproduce-refused": CodeInfo(
        Severity.WARNING,
        "the reproduction was not started: the GPU is in use by other processes",
        _fix(
            "Reproduce on an idle GPU, or name the GPU and accept the risk",
            "envdoctor smoke --reproduce <kind> --gpu N --force   # other jobs on GPU N may fail",
        ),
        inconclusive=True,
    ),
    "smoke.reproduce-inconclusive": CodeInfo(
        Severity.WARNING,
        "the reproduction could not be carried out",
        _fix(
            "Check that the GPU is usable at all",
            "envdoctor check   # the driver and NVML findings say why no GPU could be tested",
            "envdoctor smoke   # then the smoke steps, without memory pressure",
        ),
        inconclusive=True,
    ),
}

SMOKE_CODES: tuple[str, ...] = tuple(CODES)
