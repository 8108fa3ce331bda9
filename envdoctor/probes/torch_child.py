"""Runs in the *target* interpreter (``python -c``): imports torch and prints one JSON line.

Standard library only, and no envdoctor imports: the target environment may not have envdoctor
installed. Everything torch says, including its warnings, is reported, never interpreted here.
"""

import json
import os
import sys
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

MARK = "ENVDOCTOR-TORCH-JSON "
LIB_FAMILIES = (
    "libcudnn.so",
    "libcublas.so",
    "libcudart.so",
    "libnccl.so",
    "libcuda.so",
    "libnvidia-ml.so",
)


def emit(data: Dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(data) + "\n")
    sys.stdout.flush()


def dist_version(name: str) -> Optional[str]:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def safe(fn: Callable[[], Any]) -> Dict[str, Any]:
    """{"found": value} or {"absent": why}: the reason always travels with a missing value."""
    try:
        value = fn()
    except BaseException as exc:
        return {
            "absent": "%s: %s"
            % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        }
    if value is None:
        return {"absent": "torch returned None"}
    return {"found": str(value)}


def loaded_libraries() -> List[List[str]]:
    seen: List[List[str]] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                name = path.rsplit("/", 1)[-1]
                for family in LIB_FAMILIES:
                    if name.startswith(family) and [family[:-3], path] not in seen:
                        seen.append([family[:-3], path])
    except OSError:
        pass
    return seen


def nvidia_wheels() -> List[Tuple[str, str]]:
    try:
        from importlib import metadata

        names: Dict[str, str] = {}
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower()
            if name.startswith("nvidia-"):
                names[name] = dist.version
        return sorted(names.items())
    except Exception:
        return []


def allocator_verdict(torch: Any, value: str) -> str:
    """torch's own parser on an allocator-config value: "" when it accepts it, else its error
    (torch >= 2.9 parses it in every build; older CUDA builds through torch.cuda.memory)."""
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None and getattr(torch.version, "cuda", None):
        setter = getattr(torch.cuda.memory, "_set_allocator_settings", None)
    if setter is None:
        return "not checked: this torch has no allocator-settings parser to ask"
    try:
        setter(value)
    except BaseException as exc:
        text = str(exc).strip().splitlines()
        return "%s: %s" % (type(exc).__name__, text[0] if text else "")
    return ""


def read_version_file(spec: Any) -> Tuple[Optional[Dict[str, Any]], str]:
    """torch/version.py holds only literals: read it without importing torch (1 s saved)."""
    try:
        path = spec.submodule_search_locations[0] + "/version.py"
        namespace: Dict[str, Any] = {}
        with open(path) as handle:
            exec(compile(handle.read(), path, "exec"), namespace)
        return namespace, spec.submodule_search_locations[0]
    except Exception:
        return None, ""


def main() -> None:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None:
        emit({"installed": False, "error": "No module named 'torch'", "executable": sys.executable})
        return
    version, location = read_version_file(spec)
    cpu = version is not None and not version.get("cuda") and not version.get("hip")
    version_only = "--version-only" in sys.argv
    if version is not None and (version_only or (cpu and "--import" not in sys.argv)):
        # A CPU-only build cannot use a GPU whatever happens at import: skip the import.
        # --version-only: the caller wants the build's identity, not what CUDA makes of it.
        not_read = "envdoctor read only torch/version.py"
        emit(
            {
                "installed": True,
                "version": str(version.get("__version__", "")),
                "location": location,
                "cuda": str(version.get("cuda") or ""),
                "hip": str(version.get("hip") or ""),
                "cudnn_version": {"absent": "CPU-only build: no cuDNN" if cpu else not_read},
                "nccl_version": {"absent": "CPU-only build: no NCCL" if cpu else not_read},
                "arch_list": [],
                "cuda_available": False,
                "unavailable_reason": "torch was built without CUDA (torch.version.cuda is None); "
                "envdoctor did not import it"
                if cpu
                else "not checked: " + not_read,
                "device_count": {"absent": "CUDA is not available to torch" if cpu else not_read},
                "loaded_libraries": [],
                "nvidia_wheels": nvidia_wheels(),
                "imported": False,
            }
        )
        return
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]  # the target's torch, may be absent here
    except BaseException as exc:
        emit(
            {
                "installed": True,
                "import_error": "%s: %s" % (type(exc).__name__, exc),
                "traceback": traceback.format_exc()[-4000:],
                "version": dist_version("torch"),
            }
        )
        return
    cuda = getattr(torch.version, "cuda", None) or ""
    hip = getattr(torch.version, "hip", None) or ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = bool(torch.cuda.is_available())
        except BaseException as exc:
            available = False
            caught.append(warnings.WarningMessage(str(exc), RuntimeWarning, "", 0))
    reason = " ".join(str(w.message).strip() for w in caught)
    if not available and not reason:
        try:
            torch.cuda.init()  # type: ignore[no-untyped-call,unused-ignore]  # torch's own API
        except BaseException as exc:
            reason = "%s: %s" % (type(exc).__name__, exc)
    try:
        flags = torch._C._cuda_getArchFlags() if cuda else ""
        arch_list = flags.split() if flags else list(torch.cuda.get_arch_list())
    except BaseException:
        arch_list = []
    cudnn = safe(lambda: torch.backends.cudnn.version())  # type: ignore[no-untyped-call,unused-ignore]  # torch's API
    nccl = safe(lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))  # type: ignore[no-untyped-call,unused-ignore]  # torch's API
    alloc_conf = [
        [var, allocator_verdict(torch, os.environ[var])]
        for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
        if var in os.environ
    ]
    count = (
        safe(lambda: int(torch.cuda.device_count()))
        if available
        else {"absent": "CUDA is not available to torch"}
    )
    emit(
        {
            "installed": True,
            "version": torch.__version__,
            "location": (torch.__file__ or "").rsplit("/", 1)[0],
            "cuda": cuda,
            "hip": hip,
            "cudnn_version": cudnn,
            "nccl_version": nccl,
            "arch_list": arch_list,
            "cuda_available": available,
            "unavailable_reason": "" if available else reason,
            "device_count": count,
            "loaded_libraries": loaded_libraries(),
            "nvidia_wheels": nvidia_wheels(),
            "imported": True,
            "alloc_conf": alloc_conf,
        }
    )


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        emit(
            {
                "child_error": "%s: %s" % (type(exc).__name__, exc),
                "traceback": traceback.format_exc()[-4000:],
            }
        )
