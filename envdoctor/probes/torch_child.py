"""Runs in the *target* interpreter (``python -c``): imports torch and prints one JSON line.

Standard library only, and no envdoctor imports: the target environment may not have envdoctor
installed. Everything torch says, including its warnings, is reported, never interpreted here.

The import takes seconds, so the caller may cache what it found (``probes/torch_cache.py``).
``--manifest`` adds what a later run needs to tell that nothing the import depended on has
changed: the files it read (modules, shared libraries, their directories, ``sys.path``) and a
digest of their state with the interpreter, the environment and the driver.
``--unchanged-since=BLOB`` hands that back: when the digest still matches, torch is not
imported; a CUDA build's "can CUDA be used" is read now through the CUDA driver API instead
(``libcuda``: ``cuInit``, ``cuDeviceGetCount``), as torch's own ``cudaGetDeviceCount`` does.
"""

from __future__ import annotations

import gc
import os
import sys
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


def format_exc() -> str:
    """The current traceback's end (``traceback`` is imported only on this path: 4 ms)."""
    import traceback

    return traceback.format_exc()[-4000:]


def emit(data: Dict[str, Any]) -> None:
    sys.stdout.write(MARK + to_json(data) + "\n")
    sys.stdout.flush()


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    """One character as ``json.dumps`` (``ensure_ascii``) writes it."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if code < 0x10000:
        return "\\u%04x" % code
    code -= 0x10000
    return "\\u%04x\\u%04x" % (0xD800 | (code >> 10), 0xDC00 | (code & 0x3FF))


def to_json(value: Any) -> str:
    """JSON text, ASCII only, that ``json.loads`` reads back as ``json.dumps(value)`` would give
    it, for the values the child reports (dicts, lists, tuples, strings, numbers, booleans,
    None); a non-finite float is ``null`` (``json.dumps`` writes ``NaN``, which is not JSON)."""
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return '"' + value + '"'
        return (
            '"'
            + "".join(c if " " <= c <= "~" and c not in '"\\' else _escape(c) for c in value)
            + '"'
        )
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value) if value - value == 0 else "null"
    if isinstance(value, dict):
        return "{" + ", ".join(to_json(str(k)) + ": " + to_json(v) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(to_json(v) for v in value) + "]"
    return to_json(str(value))


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
    """The ``nvidia-*`` distributions on ``sys.path``, from their ``.dist-info`` directories'
    names (``nvidia_cudnn_cu13-9.24.0.43.dist-info``): what importlib.metadata would list, the
    first on the path winning as in an import, without reading every distribution's METADATA
    (that took 40 ms, more than the rest of a CPU build's probe)."""
    names: Dict[str, str] = {}
    for entry in sys.path:
        try:
            listing = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for item in listing:
            if item.lower().startswith("nvidia") and item.endswith((".dist-info", ".egg-info")):
                name, _, version = item.rsplit(".", 1)[0].partition("-")
                key = name.lower().replace("_", "-").replace(".", "-")
                if key.startswith("nvidia-"):
                    names.setdefault(key, version.split("-")[0])
    return sorted(names.items())


COMPANIONS = ("torchvision", "torchaudio", "triton")


def dist_dirs(names: Tuple[str, ...]) -> Dict[str, str]:
    """The ``.dist-info`` (or ``.egg-info``) directory of each distribution in ``names`` on
    ``sys.path``, the first on the path winning as in an import; from directory names only."""
    found: Dict[str, str] = {}
    for entry in sys.path:
        base = entry or "."
        try:
            listing = sorted(os.listdir(base))
        except OSError:
            continue
        for item in listing:
            if not item.endswith((".dist-info", ".egg-info")):
                continue
            key = item.rsplit(".", 1)[0].partition("-")[0].lower().replace("_", "-")
            if key in names and key not in found:
                found[key] = os.path.join(base, item)
    return found


def read_head(path: str, limit: int = 8192) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def metadata_version(dist: str) -> str:
    """``Version:`` of a distribution's METADATA (PKG-INFO for an egg), local tag kept."""
    for name in ("METADATA", "PKG-INFO"):
        for line in read_head(os.path.join(dist, name)).splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
            if not line.strip():
                break
    base = os.path.basename(dist).rsplit(".", 1)[0]  # torchvision-0.28.0+cpu
    return base.partition("-")[2].split("-")[0]


def installer_of(dist: str) -> str:
    """The first line of a distribution's INSTALLER ("pip", "uv", "conda"), "" without one."""
    lines = read_head(os.path.join(dist, "INSTALLER"), 256).strip().splitlines()
    return lines[0].strip() if lines else ""


def has_module(name: str) -> bool:
    """Whether ``import NAME`` would find a module, asked of the finders (nothing imported)."""
    if name in sys.modules:
        return True
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None:
            try:
                if find_spec(name, None) is not None:
                    return True
            except Exception:  # noqa: S112 (a broken finder: the next one may know)
                continue
    return False


def environment() -> Dict[str, Any]:
    """The companions of torch (torchvision, torchaudio, triton) with their versions, and how
    this environment installs packages: pip, a uv-made venv, a conda env, torch's INSTALLER."""
    dists = dist_dirs((*COMPANIONS, "torch"))
    companions = []
    for name in COMPANIONS:
        dist = dists.get(name)
        if dist is None:
            companions.append({"name": name, "version": {"absent": "not installed"}})
            continue
        version = metadata_version(dist)
        entry = {"name": name, "installer": installer_of(dist)}  # type: Dict[str, Any]
        entry["version"] = {"found": version} if version else {"absent": "no version in " + dist}
        companions.append(entry)
    prefix = sys.prefix
    uv_version = ""
    uv_venv = False
    for line in read_head(os.path.join(prefix, "pyvenv.cfg")).splitlines():
        key, equals, value = line.partition("=")
        if equals and key.strip() == "uv":
            uv_venv, uv_version = True, value.strip()
    conda = os.path.isdir(os.path.join(prefix, "conda-meta"))
    torch_installer = installer_of(dists["torch"]) if "torch" in dists else ""
    by_conda = torch_installer == "conda"
    if conda and not by_conda:
        try:
            records = os.listdir(os.path.join(prefix, "conda-meta"))
        except OSError:
            records = []
        for item in records:
            for stem in ("pytorch-", "torch-"):
                if item.startswith(stem) and item[len(stem) : len(stem) + 1].isdigit():
                    by_conda = True
    return {
        "companions": companions,
        "installer": {
            "prefix": prefix,
            "pip": has_module("pip"),
            "uv_venv": uv_venv,
            "uv_version": uv_version,
            "conda": conda,
            "torch_by_conda": by_conda,
            "torch_installer": torch_installer,
        },
    }


def emit_with_environment(data: Dict[str, Any]) -> None:
    """``emit``, with what ``environment`` says (it never stops the result)."""
    try:
        data["environment"] = environment()
    except Exception:
        data["environment_error"] = format_exc().strip().splitlines()[-1]
    emit(data)


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
        with open(path) as handle:
            text = handle.read()
        namespace = read_literals(text)
        if namespace is None:  # not the plain form torch writes: run it, as importing would
            namespace = {}
            exec(compile(text, path, "exec"), namespace)
        return namespace, spec.submodule_search_locations[0]
    except Exception:
        return None, ""


_CONSTANTS = {"None": None, "True": True, "False": False}


def read_literals(text: str) -> Optional[Dict[str, Any]]:
    """The assignments of a version.py as torch's build writes it (``name = 'text'``,
    ``cuda: Optional[str] = None``, an import, ``__all__``), without running it: running it
    imports ``typing`` (~7 ms). None for anything else (then it is run)."""
    values: Dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "from ", "import ", "__all__ = [")):
            if line.startswith("__all__") and not line.endswith("]"):
                return None  # a list over several lines: not the plain form
            continue
        target, equals, value = line.partition("=")
        name = target.split(":", 1)[0].strip()
        value = value.strip()
        if not equals or not name.isidentifier():
            return None
        if value in _CONSTANTS:
            values[name] = _CONSTANTS[value]
        elif len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
            inner = value[1:-1]
            if "\\" in inner or value[0] in inner:
                return None  # escapes or quotes inside: leave them to Python
            values[name] = inner
        else:
            return None
    return values


def find_torch() -> Any:
    """``importlib.util.find_spec("torch")`` without importing ``importlib.util`` (~4 ms): ask
    the interpreter's finders in order, as the import system does."""
    if "torch" in sys.modules:
        return getattr(sys.modules["torch"], "__spec__", None)
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None:
            spec = find_spec("torch", None)
            if spec is not None:
                return spec
    return None


# --- the cache's side: what the import depended on, and the driver API ------------------------

SESSION_ENV = frozenset(
    (
        "_",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "TERM",
        "COLORTERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "TERM_SESSION_ID",
        "COLUMNS",
        "LINES",
        "PS1",
        "PS2",
        "PROMPT_COMMAND",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "WINDOWID",
        "TMUX",
        "TMUX_PANE",
        "STY",
        "WINDOW",
        "DBUS_SESSION_BUS_ADDRESS",
        "GPG_AGENT_INFO",
        "MAIL",
        "LS_COLORS",
        "LESSOPEN",
        "LESSCLOSE",
        "HISTFILE",
        "HISTSIZE",
        "HISTCONTROL",
        "HISTFILESIZE",
        "XDG_SESSION_ID",
        "XDG_SESSION_TYPE",
        "XDG_SESSION_CLASS",
        "XDG_VTNR",
        "XDG_SEAT",
    )
)
SESSION_PREFIXES = ("SSH_",)
"""The terminal's and the login's own variables: no import reads them. Every other variable is
part of the digest (a change is a cache miss): whether torch's import reads one (LD_PRELOAD,
KMP_DUPLICATE_LIB_OK, PYTHONPATH, CUDA_HOME …) is not something to guess."""


def state_of(path: str) -> List[Any]:
    """What changes when a file or directory is replaced, edited, touched or created/removed in."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return ["missing", exc.errno]
    return [st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def read_small(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except OSError as exc:
        return "unreadable: %s" % exc.errno


def digest(paths: List[str]) -> str:
    """The interpreter, its import path, the environment (but the session's own variables), the
    driver, the loader's cache and the state of every file in ``paths``: equal digests, same
    import."""
    import hashlib

    library_path = os.environ.get("LD_LIBRARY_PATH", "")
    loader = ["/etc/ld.so.cache"] + [d for d in library_path.split(":") if d]
    state = {
        "executable": [sys.executable, os.path.realpath(sys.executable), sys.version],
        "path": [os.path.abspath(p) for p in sys.path],
        "env": sorted(
            [k, v]
            for k, v in os.environ.items()
            if k not in SESSION_ENV and not k.startswith(SESSION_PREFIXES)
        ),
        "driver": read_small("/proc/driver/nvidia/version"),
        "files": [[p, state_of(p)] for p in loader + paths],
    }
    import json

    return hashlib.sha256(json.dumps(state, sort_keys=True).encode("utf-8")).hexdigest()


def import_manifest(libraries: List[List[str]]) -> Optional[Dict[str, Any]]:
    """Every file the import read (modules, mapped libraries), their directories and the import
    path; None when one cannot be told (a library deleted while mapped). ``libraries``: what
    ``loaded_libraries`` found after the import (the libcuda it used)."""
    files = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.startswith("/"):
            files.add(name)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if path.endswith("(deleted)"):
                    return None
                if path.startswith("/") and not path.startswith(("/dev/", "/proc/", "/sys/")):
                    files.add(path)
    except OSError:
        return None
    dirs = {os.path.dirname(f) for f in files}
    dirs.update(os.path.abspath(p) for p in sys.path)  # "" (python -c): the current directory
    paths = sorted(files | dirs)
    libcuda = [p for family, p in libraries if family == "libcuda"]
    return {"paths": paths, "digest": digest(paths), "libcuda": libcuda[0] if libcuda else ""}


def pack(manifest: Dict[str, Any]) -> str:
    import base64
    import json
    import zlib

    raw = json.dumps(manifest, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def unpack(blob: str) -> Optional[Dict[str, Any]]:
    import base64
    import json
    import zlib

    try:
        data = json.loads(zlib.decompress(base64.b64decode(blob.encode("ascii"))))
    except Exception:
        return None
    return data if isinstance(data, dict) else None


def driver_api(lib: Any, cuda: str) -> Dict[str, Any]:
    """Can CUDA be used, as torch's ``is_available()`` decides it (the runtime's
    ``cudaGetDeviceCount``): a driver new enough for torch's CUDA major version, ``cuInit``,
    and at least one device. ``lib`` is libcuda, loaded with ctypes."""
    import ctypes

    def error(call: str, code: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        lib.cuGetErrorName(code, ctypes.byref(name))
        lib.cuGetErrorString(code, ctypes.byref(text))
        return "%s failed: %s (%d): %s" % (
            call,
            (name.value or b"unknown error").decode("utf-8", "replace"),
            code,
            (text.value or b"").decode("utf-8", "replace"),
        )

    version = ctypes.c_int(0)
    code = lib.cuDriverGetVersion(ctypes.byref(version))
    if code != 0:
        return {"available": False, "reason": error("cuDriverGetVersion", code)}
    major = int(cuda.split(".")[0]) if cuda.split(".")[0].isdigit() else 0
    if version.value < major * 1000:
        return {
            "available": False,
            "reason": "the NVIDIA driver is too old for torch's CUDA %s: it supports CUDA %d.%d "
            "(cuDriverGetVersion %d)"
            % (cuda, version.value // 1000, version.value % 1000 // 10, version.value),
        }
    code = lib.cuInit(0)
    if code != 0:
        return {"available": False, "reason": error("cuInit", code)}
    count = ctypes.c_int(0)
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code != 0:
        return {"available": False, "reason": error("cuDeviceGetCount", code)}
    if count.value < 1:
        return {"available": False, "reason": "cuDeviceGetCount: no CUDA device is visible"}
    return {"available": True, "reason": "", "device_count": count.value}


def cuda_now(cuda: str, expected_libcuda: str) -> Optional[Dict[str, Any]]:
    """The driver API's answer for a CUDA build, or None when libcuda is not the one the cached
    import used (then the caller must import torch afresh)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        if expected_libcuda:
            return None
        reason = "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s)" % exc
        return {"available": False, "reason": reason, "libcuda": ""}
    loaded = [p for family, p in loaded_libraries() if family == "libcuda"]
    if (loaded[0] if loaded else "") != expected_libcuda:
        return None
    answer = driver_api(lib, cuda)
    answer["libcuda"] = expected_libcuda
    return answer


def unchanged(version: Optional[Dict[str, Any]], argv: List[str]) -> Optional[Dict[str, Any]]:
    """The result to emit when the cached import still holds, else None (import torch)."""
    blob = next((a.split("=", 1)[1] for a in argv if a.startswith("--unchanged-since=")), None)
    manifest = unpack(blob) if blob is not None else None
    if manifest is None or version is None or version.get("hip"):
        return None
    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1":
        return None  # torch then asks NVML, not the driver API: only torch can answer
    paths = manifest.get("paths")
    if not isinstance(paths, list) or digest([str(p) for p in paths]) != manifest.get("digest"):
        return None
    cuda = str(version.get("cuda") or "")
    if not cuda:
        return {"installed": True, "unchanged": True}  # a CPU build: nothing changes at run time
    answer = cuda_now(cuda, str(manifest.get("libcuda") or ""))
    if answer is None:
        return {"installed": True, "stale": "libcuda is not the one the cached import loaded"}
    return {"installed": True, "unchanged": True, "cuda_now": answer}


def main() -> None:
    spec = find_torch()
    if spec is None:
        emit_with_environment(
            {"installed": False, "error": "No module named 'torch'", "executable": sys.executable}
        )
        return
    version, location = read_version_file(spec)
    cpu = version is not None and not version.get("cuda") and not version.get("hip")
    version_only = "--version-only" in sys.argv
    if version is not None and (version_only or (cpu and "--import" not in sys.argv)):
        # A CPU-only build cannot use a GPU whatever happens at import: skip the import.
        # --version-only: the caller wants the build's identity, not what CUDA makes of it.
        not_read = "envdoctor read only torch/version.py"
        emit_with_environment(
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
    reuse = unchanged(version, sys.argv)
    if reuse is not None:
        emit_with_environment(reuse)
        return
    # torch's import makes ~370 collector passes over what it builds and frees almost nothing:
    # ~10 % of the import's time. This child ends once its line is written, so it stays off.
    gc.disable()
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]  # the target's torch, may be absent here
    except BaseException as exc:
        emit_with_environment(
            {
                "installed": True,
                "import_error": "%s: %s" % (type(exc).__name__, exc),
                "traceback": format_exc(),
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
    libraries = loaded_libraries()
    result = {
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
        "loaded_libraries": libraries,
        "nvidia_wheels": nvidia_wheels(),
        "imported": True,
        "alloc_conf": alloc_conf,
    }  # type: Dict[str, Any]
    if "--manifest" in sys.argv:
        manifest = import_manifest(libraries)
        if manifest is not None:
            result["manifest"] = pack(manifest)
    emit_with_environment(result)


def finish() -> None:
    """Leave without the interpreter's teardown: after ``import torch`` it took 0.35-0.5 s
    (torch's atexit hooks, and freeing thousands of modules and objects), more than all the
    rest of the probe; nothing is left to clean up once the result is written."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: S110 (a closed or broken pipe: the parent has it all)
        pass
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        emit(
            {
                "child_error": "%s: %s" % (type(exc).__name__, exc),
                "traceback": format_exc(),
            }
        )
    finish()
