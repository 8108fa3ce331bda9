"""Runs in the *target* interpreter (``python -c``): imports torch and prints one JSON line.

Standard library only, and no envdoctor imports: the target environment may not have envdoctor
installed. Everything torch says, including its warnings, is reported, never interpreted here.
"""

import json
import sys
import traceback
import warnings

MARK = "ENVDOCTOR-TORCH-JSON "
LIB_FAMILIES = ("libcudnn.so", "libcublas.so", "libcudart.so", "libnccl.so", "libcuda.so", "libnvidia-ml.so")


def emit(data):
    sys.stdout.write(MARK + json.dumps(data) + "\n")
    sys.stdout.flush()


def dist_version(name):
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def safe(fn):
    """{"found": value} or {"absent": why}: the reason always travels with a missing value."""
    try:
        value = fn()
    except BaseException as exc:
        return {"absent": "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")}
    if value is None:
        return {"absent": "torch returned None"}
    return {"found": value}


def loaded_libraries():
    seen = []
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


def nvidia_wheels():
    try:
        from importlib import metadata

        names = {}
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower()
            if name.startswith("nvidia-"):
                names[name] = dist.version
        return sorted(names.items())
    except Exception:
        return []


def main():
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        emit({"installed": False, "error": "No module named 'torch'", "executable": sys.executable})
        return
    try:
        import torch
    except BaseException as exc:
        emit({
            "installed": True,
            "import_error": "%s: %s" % (type(exc).__name__, exc),
            "traceback": traceback.format_exc()[-4000:],
            "version": dist_version("torch"),
        })
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
            torch.cuda.init()
        except BaseException as exc:
            reason = "%s: %s" % (type(exc).__name__, exc)
    try:
        flags = torch._C._cuda_getArchFlags() if cuda else ""
        arch_list = flags.split() if flags else list(torch.cuda.get_arch_list())
    except BaseException:
        arch_list = []
    cudnn = safe(lambda: str(torch.backends.cudnn.version()) if torch.backends.cudnn.version() else None)
    nccl = safe(lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))
    count = safe(lambda: int(torch.cuda.device_count())) if available else {"absent": "CUDA is not available to torch"}
    emit({
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
    })


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        emit({"child_error": "%s: %s" % (type(exc).__name__, exc), "traceback": traceback.format_exc()[-4000:]})
