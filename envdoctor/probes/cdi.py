"""CDI specs (/etc/cdi, /var/run/cdi): what each names, and which of its paths are gone.

The format is the Container Device Interface's (``cdiVersion``, ``kind``, ``devices[].name``,
``containerEdits`` with ``deviceNodes``, ``mounts`` and ``hooks``), YAML or JSON, as
``nvidia-ctk cdi generate`` writes it. A spec generated for one driver names that driver's
libraries (``libcuda.so.580.95.05``) and passes ``--host-driver-version=…`` to its hooks: after
a driver upgrade those paths are gone and every CDI device of the spec fails to resolve.
"""

from __future__ import annotations

import re
from typing import Any

from envdoctor.inputfile import MAX_YAML_BYTES
from envdoctor.model.containers import CdiSpec, clean_dir
from envdoctor.model.probed import Absent, Found, Probed, why_missing
from envdoctor.platform.host import Host
from envdoctor.probes.engine_config import is_kind

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
MAX_SPECS = 64
# one limit for YAML and JSON specs alike (a YAML one is read by yamlsource, which has this one)
MAX_SPEC_BYTES = MAX_YAML_BYTES
MAX_EDITS = 4096  # paths checked per spec: a real spec for 8 GPUs has a few hundred
MAX_MISSING = 16
# CDI's ValidateDeviceName: letters and digits at both ends, and "_", "-", ".", ":" between
_DEVICE_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.:-]*[A-Za-z0-9])?"
# pattern strings, compiled by re on first use (most machines have no CDI spec to read)
_HOST_DRIVER = r"--host-driver-version=(\d+\.\d+(?:\.\d+)?)"
_DRIVER_LIB = r"/lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)$"


def probe_specs(host: Host, dirs: tuple[str, ...]) -> Probed[tuple[CdiSpec, ...]]:
    """Every spec file in ``dirs`` (a missing directory holds none), parsed and checked."""
    specs: list[CdiSpec] = []
    # a directory listed twice is read once (its files are the same; the rules give it the
    # priority of its later place, as CDI's cache does)
    for directory in dict.fromkeys(clean_dir(d) for d in dirs):
        listing = host.list_dir(directory)
        if isinstance(listing, Absent):
            continue
        if not isinstance(listing, Found):
            return listing  # unreadable: the specs there are unknown, not absent
        for name in sorted(listing.value):
            if name.endswith(SPEC_SUFFIXES) and len(specs) < MAX_SPECS:
                specs.append(read_spec(host, f"{directory.rstrip('/')}/{name}"))
    return Found(tuple(specs))


def read_spec(host: Host, path: str) -> CdiSpec:
    raw = host.read_bytes(path, limit=MAX_SPEC_BYTES + 1)
    if not isinstance(raw, Found):
        return _broken(path, f"cannot read it: {why_missing(raw)}")
    if len(raw.value) > MAX_SPEC_BYTES:
        return _broken(path, f"larger than {MAX_SPEC_BYTES >> 20} MiB: not read")
    try:
        data = parse_spec(raw.value, path)
    except ValueError as exc:
        return _broken(path, str(exc))
    return check_spec(host, path, data)


def _broken(path: str, error: str, kind: str = "") -> CdiSpec:
    return CdiSpec(path=path, kind=kind, devices=(), driver_version="", missing=(), error=error)


def parse_spec(data: bytes, path: str) -> dict[str, Any]:
    """A spec's document: JSON for ``.json``, else YAML through envdoctor's bounded reader (no
    aliases, no deep nesting, no tags: a spec in /var/run/cdi may come from any service)."""
    if b"\x00" in data:
        raise ValueError("binary data, not a CDI spec")
    text = data.decode("utf-8", errors="replace")
    if path.endswith(".json"):
        from envdoctor.probes.engine_config import ConfigError, parse_json

        try:
            return parse_json(text, path)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    from envdoctor import yamlsource  # the one bounded reader: no aliases, no deep nesting
    from envdoctor.errors import EnvdoctorError

    try:
        doc = yamlsource.plain(yamlsource.parse(text, path))
    except EnvdoctorError as exc:
        raise ValueError(exc.message) from None
    if not isinstance(doc, dict):
        raise ValueError("not a CDI spec (no mapping at the top)")
    return doc


def check_spec(host: Host, path: str, doc: dict[str, Any]) -> CdiSpec:
    kind = doc.get("kind")
    if not isinstance(kind, str) or not is_kind(kind):
        return _broken(path, f"kind {kind!r} is not vendor/class (e.g. nvidia.com/gpu)")
    if not isinstance(doc.get("cdiVersion"), str):
        return _broken(path, "no cdiVersion", kind)
    devices = doc.get("devices")
    if not isinstance(devices, list) or not devices:
        return _broken(path, "no devices", kind)
    names: list[str] = []
    edits: list[Any] = [doc.get("containerEdits")]
    for device in devices[:MAX_EDITS]:
        if not isinstance(device, dict) or not isinstance(device.get("name"), str):
            return _broken(path, "a device without a name", kind)
        name = device["name"]
        # CDI refuses the whole spec for any of these (its validation: ValidateDeviceName,
        # "invalid spec, multiple device", "invalid device, empty device edits")
        if not re.fullmatch(_DEVICE_NAME, name):
            return _broken(
                path, f"device name {name[:64]!r} is invalid: CDI refuses the spec", kind
            )
        if name in names:
            return _broken(path, f"device {name!r} is defined twice: CDI refuses the spec", kind)
        if not _edits(device.get("containerEdits")):
            return _broken(path, f"device {name!r} has no container edits: CDI refuses it", kind)
        names.append(name)
        edits.append(device.get("containerEdits"))
    paths, driver = _edit_paths(edits)
    missing: list[str] = []
    for item in paths:
        if len(missing) >= MAX_MISSING:
            break
        if not isinstance(host.stat(item), Found):
            missing.append(item)
    return CdiSpec(
        path=path,
        kind=kind,
        devices=tuple(names),
        driver_version=driver,
        missing=tuple(missing),
    )


def _edit_paths(edits: list[Any]) -> tuple[list[str], str]:
    """Host paths the edits need (device nodes, mount sources, hook programs), in order and
    without repeats, and the driver version the spec names."""
    out: list[str] = []
    seen: set[str] = set()
    driver = ""

    def add(value: Any) -> None:
        fresh = isinstance(value, str) and value.startswith("/") and value not in seen
        if fresh and len(seen) < MAX_EDITS:
            seen.add(value)
            out.append(value)

    for edit in edits:
        if not isinstance(edit, dict):
            continue
        for node in _items(edit.get("deviceNodes")):
            add(node.get("hostPath") or node.get("path"))
        for mount in _items(edit.get("mounts")):
            source = mount.get("hostPath")
            add(source)
            found = re.search(_DRIVER_LIB, source) if isinstance(source, str) else None
            if found and not driver:
                driver = found.group(1)
        for hook in _items(edit.get("hooks")):
            add(hook.get("path"))
            args = hook.get("args")
            for arg in args[:64] if isinstance(args, list) else []:
                found = re.search(_HOST_DRIVER, arg) if isinstance(arg, str) else None
                if found:
                    driver = found.group(1)
    return out, driver


def _edits(value: Any) -> bool:
    """Does a device's ``containerEdits`` change anything (env, nodes, mounts, hooks …)?"""
    return isinstance(value, dict) and any(value.get(key) for key in value)


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value[:MAX_EDITS] if isinstance(v, dict)] if isinstance(value, list) else []
