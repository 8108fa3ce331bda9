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
CUDA_DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"
NVCC_TIMEOUT = 5.0


def probe_env(host: Host, *, deadline: Deadline) -> EnvFacts:
    on_path = host.which("nvcc")
    path, nvcc = _nvcc(host, deadline, on_path)
    build = _build_nvcc(host, deadline, on_path, asked=(path, nvcc))
    return EnvFacts(variables=probe_variables(host), nvcc=nvcc, build_nvcc=build)


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


def _nvcc(host: Host, deadline: Deadline, on_path: str | None) -> tuple[str, Probed[Nvcc]]:
    """The nvcc a shell would run (PATH, then $CUDA_HOME/$CUDA_PATH, then /usr/local/cuda):
    its path ("" when none) and what it says."""
    environ = host.env()
    candidates = [on_path]
    candidates.extend(
        f"{environ[var].rstrip('/')}/bin/nvcc"
        for var in ("CUDA_HOME", "CUDA_PATH")
        if environ.get(var, "").startswith("/")  # a relative one: see _build_nvcc
    )
    candidates.append(CUDA_DEFAULT_NVCC)
    path = next((c for c in candidates if c and isinstance(host.stat(c), Found)), None)
    if path is None:
        return "", Absent("nvcc is not on PATH, under $CUDA_HOME or in /usr/local/cuda")
    return path, _nvcc_version(host, path, deadline)


def _build_nvcc(
    host: Host, deadline: Deadline, on_path: str | None, *, asked: tuple[str, Probed[Nvcc]]
) -> Probed[Nvcc]:
    """The nvcc torch.utils.cpp_extension would build with, found as torch finds it; ``asked``:
    the nvcc already asked and its answer, reused when it is the same one (even a failure: a
    hung nvcc costs its timeout once)."""
    environ = host.env()
    var = next((v for v in ("CUDA_HOME", "CUDA_PATH") if environ.get(v)), None)
    if var is not None:
        if not environ[var].startswith("/"):
            # it names a different directory from every working directory; a program is
            # never run from the current directory (root may run envdoctor in anyone's)
            return Absent(
                f"${var} is {printable(environ[var])!r}, a relative path: it depends on the "
                "directory a build runs from"
            )
        path = f"{environ[var].rstrip('/')}/bin/nvcc"
        if not isinstance(host.stat(path), Found):
            return Absent(f"${var} is {printable(environ[var])!r}, which has no bin/nvcc")
    else:
        path = on_path or CUDA_DEFAULT_NVCC
        if not isinstance(host.stat(path), Found):
            return Absent("no CUDA toolkit: no $CUDA_HOME, no nvcc on PATH, no /usr/local/cuda")
    if path == asked[0]:
        return asked[1]  # the same nvcc: asked once
    return _nvcc_version(host, path, deadline)


def _nvcc_version(host: Host, path: str, deadline: Deadline) -> Probed[Nvcc]:
    result = host.run([path, "--version"], timeout=deadline.cap(NVCC_TIMEOUT))
    match = re.search(_RELEASE, result.stdout)
    if not result.ok or not match:
        return ProbeFailed(f"cannot read the version of {path}", detail=result.describe())
    return Found(Nvcc(path=path, version=match.group(1)))
