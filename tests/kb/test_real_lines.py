"""Real lines, verbatim from public threads, as people paste them: behind any prefix, cut short,
wrapped by a terminal, in the other case an emitter prints them in, and in older wordings.

Each case is (the thread that shows the line, the line, the signature it names, where a paste
may cut it: the shortest beginning that still names the cause, and the words whose case the
emitter varies). The catalogs' own test (test_catalogs.py) does the same with the emitters'
strings; these are lines as users had them, timestamps and process prefixes included.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.kb.helpers import ids, run
from tests.kb.test_catalogs import PREFIXES


@dataclass(frozen=True)
class Line:
    source: str
    text: str
    expected: str
    key: str = ""  # the line's beginning that still names the cause ("" = the whole line)
    case: str = ""  # words the emitter prints in either case (NVML's texts, lower-cased by one)


LINES = (
    Line(
        "https://github.com/NVIDIA/nvidia-docker/issues/1163",
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that"
        " the NVIDIA Display Driver is properly installed and present in your system.",
        "nvidia-smi.no-nvml-library",
        key="NVIDIA-SMI couldn't find libnvidia-ml.so library",
    ),
    Line(
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/69",
        "Unable to determine the device handle for GPU0000:65:00.0: Unknown Error",
        "nvidia-smi.device-handle",
    ),
    Line(
        "https://github.com/NVIDIA/nvidia-docker/issues/1553",
        "Unable to determine the device handle for GPU 0000:09:00.0: Unknown Error",
        "nvidia-smi.device-handle",
    ),
    Line(
        "https://github.com/NVIDIA/gpu-operator/issues/544",
        "nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02"
        " don't match with driver version 530.41.03. Please update with matching NVIDIA driver"
        " package.",
        "fabricmanager.version-mismatch",
        key="nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02"
        " don't match with driver version 530.41.03",
    ),
    # the same message in a later release's words ("doesn't", "the matching")
    Line(
        "https://github.com/akash-network/website/pull/632",
        "Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver"
        " interface version 550.127.05 doesn't match with driver version 550.120. Please update"
        " with the matching NVIDIA driver package.",
        "fabricmanager.version-mismatch",
        key="Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver"
        " interface version 550.127.05 doesn't match with driver version 550.120",
    ),
    Line(
        "https://github.com/NVIDIA/gpu-operator/issues/610",
        "11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device"
        " information from NVSwitch driver failed with error:WARNING Nothing to do"
        " [NV_WARN_NOTHING_TO_DO]",
        "fabricmanager.no-nvswitch",
        key="11月 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch"
        " device information from NVSwitch",
    ),
    Line(
        "https://github.com/NVIDIA/nvtrust/issues/55",
        "[   38.034696] NVRM: installed in this system is not supported by the",
        "kernel.gpu-unsupported",
    ),
    Line(
        "https://github.com/vllm-project/vllm/issues/19670",
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while"
        " trying to connect to (172.17.0.9, 46229).",
        "distributed.rendezvous-timeout",
        key="torch.distributed.DistNetworkError: The client socket has timed out after 600000ms",
    ),
    Line(
        "https://github.com/nicofdga/DZ-FaceDetailer/issues/21",
        "NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA'"
        " backend. This could be because the operator doesn't exist for this backend, or was"
        " omitted during the selective/custom build process (if using custom build). If you are a"
        " Facebook employee using PyTorch on mobile, please visit https://fburl.com/ptmfixes for"
        " possible resolutions. 'torchvision::nms' is only available for these backends: [CPU,"
        " Meta, QuantizedCPU, BackendSelect, Python, FuncTorchDynamicLayerBackMode,"
        " Functionalize, Named, Conjugate, Negative, ZeroTensor, ADInplaceOrView, AutogradOther,"
        " AutogradCPU, AutogradCUDA, AutogradXLA, AutogradMPS, AutogradXPU, AutogradHPU,"
        " AutogradLazy, AutogradMeta, Tracer, AutocastCPU, AutocastCUDA, FuncTorchBatched,"
        " BatchedNestedTensor, FuncTorchVmapMode, Batched, VmapMode, FuncTorchGradWrapper,"
        " PythonTLSSnapshot, FuncTorchDynamicLayerFrontMode, PreDispatch, PythonDispatcher].",
        "torch.op-no-cuda-kernel",
        key="NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'CUDA'"
        " backend",
    ),
    # torch 1.7's wording of the same (RuntimeError, no "This could be because …")
    Line(
        "https://github.com/pytorch/vision/issues/3058",
        "RuntimeError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend."
        " 'torchvision::nms' is only available for these backends: [CPU, BackendSelect, Named,"
        " AutogradOther, AutogradCPU, AutogradCUDA, AutogradXLA, Tracer, Autocast, Batched,"
        " VmapMode].",
        "torch.op-no-cuda-kernel",
        key="RuntimeError: Could not run 'torchvision::nms' with arguments from the 'CUDA' backend",
    ),
    Line(
        "https://github.com/facebookresearch/pycls/issues/183",
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with"
        " multiprocessing, you must use the 'spawn' start method",
        "torch.cuda-fork",
        key="RuntimeError: Cannot re-initialize CUDA in forked subprocess",
    ),
    # Singularity before 3.10 named the platform in full; Apptainer says "nv"
    Line(
        "https://github.com/sylabs/singularity/issues/776",
        "WARNING: Could not find any NVIDIA libraries on this host!",
        "apptainer.no-nv-libraries",
    ),
    Line(
        "https://github.com/sylabs/singularity/issues/2805",
        "Could not find any nv files on this host!",
        "apptainer.no-nv-libraries",
    ),
    Line(
        "https://github.com/dusty-nv/jetson-containers/issues/384",
        "NvRmMemInitNvmap failed with No such file or directory",
        "jetson.nvmap-access",
    ),
    Line(
        "https://github.com/anduril/jetpack-nixos/issues/118",
        "Jul 27 12:26:37 nixos /nix/store/jsmfi4447h39f4xrawfhajjdvnqglzqi-gdm-43.0/libexec/"
        "gdm-x-session[1085]: NvRmMemInitNvmap failed with Permission denied",
        "jetson.nvmap-access",
    ),
    Line(
        "https://github.com/NVIDIA/nvidia-docker/issues/1523",
        "docker: Error response from daemon: OCI runtime create failed: container_linux.go:367:"
        " starting container process caused: process_linux.go:495: container init caused:"
        " Running hook #0:: error running hook: exit status 1, stdout: , stderr:"
        " nvidia-container-cli: initialization error: nvml error: insufficient permissions:"
        " unknown.",
        "nvml.no-permission",
        key="docker: Error response from daemon: OCI runtime create failed: container_linux.go:367:"
        " starting container process caused: process_linux.go:495: container init caused:"
        " Running hook #0:: error running hook: exit status 1, stdout: , stderr:"
        " nvidia-container-cli: initialization error: nvml error: insufficient permissions",
        case="insufficient permissions",
    ),
    Line(
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/210",
        "Failed to initialize NVML: Insufficient Permissions",
        "nvml.no-permission",
        case="Insufficient Permissions",
    ),
    Line(
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/1246",
        "nvidia-container-cli: mount error: failed to add device rules: unable to find any"
        " existing device filters attached to the cgroup: bpf_prog_query(BPF_CGROUP_DEVICE)"
        " failed: operation not permitted: unknown",
        "toolkit.cgroup-device-filters",
        key="nvidia-container-cli: mount error: failed to add device rules: unable to find any"
        " existing device filters attached to the cgroup",
    ),
)


def _variants(line: Line) -> list[str]:
    """The line behind every prefix, cut at its key, wrapped after the key (a terminal's wrap:
    the rest on the next line, indented), and with its case-varying words in both cases."""
    forms = [line.text]
    if line.key:
        assert line.text.startswith(line.key), line.key
        forms.append(line.key)
        rest = line.text[len(line.key) :]
        if rest.strip():
            forms.append(line.key + "\n    " + rest.lstrip())
    if line.case:
        assert line.case in line.text
        forms.extend(
            line.text.replace(line.case, c) for c in (line.case.lower(), line.case.title())
        )
    return [prefix + form for form in dict.fromkeys(forms) for prefix in PREFIXES]


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.expected)
def test_a_real_line_names_its_cause_in_every_form(line: Line) -> None:
    misses = [v for v in _variants(line) if line.expected not in ids(run(v + "\n"))]
    assert not misses, f"{line.source}: {len(misses)} forms not named, first: {misses[:3]}"


def test_every_case_names_a_source_thread() -> None:
    assert all(line.source.startswith("https://github.com/") for line in LINES)
    assert len({line.expected for line in LINES}) >= 12
