"""Reusing an earlier ``import torch`` while nothing it depended on has changed.

A CUDA build of torch must be imported to say what it is (cuDNN, NCCL, the arch list, whether
the import works at all): seconds, every run. The cache keeps the torch child's result of a full
import, per user (``platform/cache.py``) and per interpreter (its path as given and its real
path), with the child's manifest: the files the import read (modules, shared libraries, their
directories, ``sys.path``) and a digest of their state together with the interpreter, the
environment (every variable but the terminal's and the login's own: ``LD_*``, ``CUDA*``,
``PYTHON*``, ``PYTORCH_*`` and whatever else the import might read), the loader's cache and the
driver (``/proc/driver/nvidia/version``).

The next run hands the manifest back (``--unchanged-since``). The child recomputes the digest
(a few thousand ``stat`` calls, no import); when it matches, the cached facts stand, and what
can change without any file changing, whether CUDA can be used now and on how many devices, is
read afresh through the CUDA driver API (``cuInit``, ``cuDeviceGetCount``), never from the
cache. Any difference, a libcuda other than the one the import used, a ROCm build or
``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (torch then asks NVML) means a full import. A result that
reused the cache says so: ``TorchBuild.from_cache`` holds when that import ran.

Only complete imports are kept (a failed import, a timeout or a crash is probed again next
time), and an entry from another envdoctor, another child script or another user is ignored.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from envdoctor import __version__
from envdoctor.model.facts import TorchBroken, TorchBuild
from envdoctor.model.probed import Found, Probed
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes import now_utc
from envdoctor.probes.interpreter import run_python
from envdoctor.probes.torch_build import (
    TORCH_TIMEOUT,
    child_source,
    decode_result,
    last_json,
    parse_child,
)

FORMAT = 1
MAX_MANIFEST_CHARS = 100_000
"""The manifest travels as one argument; Linux allows 128 KiB per argument (MAX_ARG_STRLEN)."""
DRIVER_FAMILIES = ("libcuda",)
"""Libraries the driver API loads now: the cached import's are replaced by the current ones."""


@dataclass(frozen=True, slots=True)
class CachedImport:
    """A usable entry: the full import's result, when it ran, and the manifest to hand back."""

    created: str
    manifest: str
    result: dict[str, Any]


def probe_cached(
    host: Host, cache: CacheDir, args: list[str], *, python: str, deadline: Deadline
) -> tuple[Probed[TorchBuild | TorchBroken], dict[str, Any] | None]:
    """Run the torch child (``python ARGS``) with the cache: reuse an unchanged import, store a
    new one. Also the child's last result (its ``environment`` is read afresh every run)."""
    realpath = host.realpath(python)
    name = entry_name(python, realpath, cache.uid)
    entry = lookup(cache, name, python=python, realpath=realpath)
    reuse = [f"--unchanged-since={entry.manifest}"] if entry is not None else []
    timeout = deadline.cap(TORCH_TIMEOUT)
    result = run_python(host, python, [*args, "--manifest", *reuse], timeout=timeout)
    data = last_json(result.stdout) if result.ok else None
    if entry is not None and data is not None and data.get("unchanged") is True:
        return _reused(entry, data.get("cuda_now"), python), data
    if entry is not None and data is not None and "stale" in data:
        # The child loaded libcuda to check it: import torch in a fresh process, not there.
        result = run_python(host, python, [*args, "--manifest"], timeout=timeout)
        data = last_json(result.stdout) if result.ok else None
    probed = parse_child(result, python)
    if data is not None and isinstance(probed, Found) and isinstance(probed.value, TorchBuild):
        _store(cache, name, data, python=python, realpath=realpath)
    elif entry is not None:
        cache.remove(name)  # the import ran afresh and did not complete: keep nothing of it
    return probed, data


def entry_name(python: str, realpath: str, uid: int) -> str:
    key = json.dumps([python, realpath, uid]).encode("utf-8")
    return f"torch-{hashlib.sha256(key).hexdigest()[:32]}.json"


@functools.cache
def _child_digest() -> str:
    """The child script's identity (an entry made by another child script is not used)."""
    return hashlib.sha256(child_source().encode("utf-8")).hexdigest()[:16]


def _identity(python: str, realpath: str, uid: int) -> dict[str, Any]:
    """What an entry must match to be used: this envdoctor, this child script, user, python."""
    return {
        "format": FORMAT,
        "envdoctor": __version__,
        "child": _child_digest(),
        "uid": uid,
        "python": python,
        "realpath": realpath,
    }


def lookup(cache: CacheDir, name: str, *, python: str, realpath: str) -> CachedImport | None:
    """The entry for this interpreter when it is one this envdoctor wrote for this user."""
    data = cache.read(name)
    if data is None:
        return None
    identity = _identity(python, realpath, cache.uid)
    if any(data.get(key) != value for key, value in identity.items()):
        return None
    created, manifest, result = data.get("created"), data.get("manifest"), data.get("result")
    if not (
        isinstance(created, str)
        and isinstance(manifest, str)
        and len(manifest) <= MAX_MANIFEST_CHARS
        and isinstance(result, dict)
    ):
        return None
    return CachedImport(created=created, manifest=manifest, result=result)


def _store(cache: CacheDir, name: str, data: dict[str, Any], *, python: str, realpath: str) -> None:
    manifest = data.get("manifest")
    if not data.get("imported") or not isinstance(manifest, str):
        return  # read from the version file, or the child could not list what it read
    if len(manifest) > MAX_MANIFEST_CHARS:
        return
    result = {k: v for k, v in data.items() if k != "manifest"}
    created = now_utc()
    entry = {**_identity(python, realpath, cache.uid), "created": created}
    cache.write(name, {**entry, "manifest": manifest, "result": result})


def _reused(entry: CachedImport, now: object, python: str) -> Probed[TorchBuild | TorchBroken]:
    """The cached import's facts, with what the driver API says now (a CUDA build)."""
    data = dict(entry.result)
    if isinstance(now, dict):
        available = bool(now.get("available"))
        data["cuda_available"] = available
        data["unavailable_reason"] = "" if available else str(now.get("reason", ""))
        data["device_count"] = (
            {"found": now.get("device_count", 0)}  # decode_result checks it is a count
            if available
            else {"absent": "CUDA is not available to torch"}
        )
        libraries = [
            pair for pair in data.get("loaded_libraries", []) if pair[0] not in DRIVER_FAMILIES
        ]
        if now.get("libcuda"):
            libraries.append(["libcuda", str(now["libcuda"])])
        data["loaded_libraries"] = libraries
    probed = decode_result(data, python)
    if isinstance(probed, Found) and isinstance(probed.value, TorchBuild):
        return Found(replace(probed.value, from_cache=entry.created))
    return probed
