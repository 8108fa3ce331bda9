"""Environment variables that change CUDA's and torch's behaviour, and the local nvcc."""

from __future__ import annotations

import re

from envdoctor.model.facts import EnvFacts, Nvcc
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Deadline, Host

VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "TORCH_CUDA_ARCH_LIST",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_MODULE_LOADING",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
)
_RELEASE = r"release (\d+\.\d+)"
NVCC_TIMEOUT = 5.0


def probe_env(host: Host, *, deadline: Deadline) -> EnvFacts:
    return EnvFacts(variables=probe_variables(host), nvcc=_nvcc(host, deadline))


def probe_variables(host: Host) -> tuple[tuple[str, str], ...]:
    """The set variables of ``VARIABLES``, in that order, as printable text."""
    environ = host.env()
    return tuple((k, printable(environ[k])) for k in VARIABLES if k in environ)


def printable(value: str) -> str:
    r"""``value`` with bytes that were not UTF-8 shown as ``\xNN``.

    Python keeps such bytes of the environment as lone surrogates, which no UTF-8 output (JSON,
    a snapshot, the Prometheus file) can carry; a user should see which byte it was.
    """
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no byte decoded to: escape it as it is
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _nvcc(host: Host, deadline: Deadline) -> Probed[Nvcc]:
    environ = host.env()
    candidates = [host.which("nvcc")]
    candidates.extend(
        f"{environ[var].rstrip('/')}/bin/nvcc"
        for var in ("CUDA_HOME", "CUDA_PATH")
        if environ.get(var)
    )
    candidates.append("/usr/local/cuda/bin/nvcc")
    path = next((c for c in candidates if c and isinstance(host.stat(c), Found)), None)
    if path is None:
        return Absent("nvcc is not on PATH, under $CUDA_HOME or in /usr/local/cuda")
    result = host.run([path, "--version"], timeout=deadline.cap(NVCC_TIMEOUT))
    match = re.search(_RELEASE, result.stdout)
    if not result.ok or not match:
        return ProbeFailed(f"cannot read the version of {path}", detail=result.describe())
    return Found(Nvcc(path=path, version=match.group(1)))
