"""Container engine configuration files, parsed into what GPU containers depend on.

Pure functions over file contents (the probe reads the files through the Host): Docker's
``daemon.json``, containerd's ``config.toml`` (config versions 1, 2 and 3, and the drop-ins it
``imports``), CRI-O's ``crio.conf`` and its ``crio.conf.d`` drop-ins, and the NVIDIA Container
Toolkit's ``config.toml``. Where a key lives and what it means follows the files the tools
write (docs/containers.md cites each source); what cannot be parsed raises ``ConfigError``
with one line saying why.

TOML: ``tomllib`` on Python 3.11+, the same parser as the ``tomli`` package on 3.10 (a
dependency only there): the configs use nested quoted tables
(``[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]``) that a
hand-written subset reader would get wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from envdoctor.model.containers import CDI_DIRS, NVIDIA_KIND, EngineConfig, ToolkitConfig

# containerd's CRI plugin, by config version (containerd 1.x writes version 2, 2.x version 3;
# a file without ``version`` is version 1). Source: nvidia-container-toolkit
# pkg/config/engine/containerd/containerd.go (criRuntimePluginName).
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
NVIDIA_BINARY = "nvidia-container-runtime"
MAX_RUNTIMES = 64


class ConfigError(ValueError):
    """A configuration file that cannot be parsed; the message says where and why."""


def parse_toml(text: str, path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover (3.10 only)
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} nests too deeply to parse") from None


def parse_json(text: str, path: str) -> dict[str, Any]:
    import json

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} nests too deeply to parse") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object")
    return data


def _table(data: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The nested table at ``keys``, or {} where a key is missing or not a table."""
    node: Any = data
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _is_nvidia(name: str, binary: object) -> bool:
    base = str(binary or "").rsplit("/", 1)[-1]
    return base.startswith(NVIDIA_BINARY) or (not base and name.startswith("nvidia"))


# --- Docker ---------------------------------------------------------------------------------


def docker_config(text: str, path: str) -> EngineConfig:
    """``daemon.json``: ``runtimes`` (name → {path, args}), ``default-runtime``,
    ``features.cdi`` and ``exec-opts`` (``native.cgroupdriver=…``), as ``nvidia-ctk runtime
    configure --runtime=docker`` writes them (pkg/config/engine/docker/docker.go)."""
    data = parse_json(text, path) if text.strip() else {}
    runtimes = data.get("runtimes") or {}
    if not isinstance(runtimes, dict):
        raise ConfigError(f"{path}: runtimes is not an object")
    names = tuple(sorted(str(n) for n in runtimes)[:MAX_RUNTIMES])
    nvidia = tuple(
        n
        for n in names
        if _is_nvidia(n, (runtimes[n] or {}).get("path") if isinstance(runtimes[n], dict) else "")
    )
    default = data.get("default-runtime") or ""
    if not isinstance(default, str):
        raise ConfigError(f"{path}: default-runtime is not a string")
    features = data.get("features") or {}
    cdi = isinstance(features, dict) and features.get("cdi") is True
    driver = ""
    opts = data.get("exec-opts") or []
    for opt in opts if isinstance(opts, list) else []:
        key, _, value = str(opt).partition("=")
        if key.strip() == "native.cgroupdriver":
            driver = value.strip()
    return EngineConfig(
        path=path,
        runtimes=names,
        nvidia_runtimes=nvidia,
        default_runtime=default,
        cdi=cdi,
        cgroup_driver=driver,
        files=(path,),
    )


# --- containerd -----------------------------------------------------------------------------


def containerd_version(data: Mapping[str, Any], path: str = "") -> int:
    """A file's config version (1 when unset, as containerd reads 0). With ``path``, a version
    containerd cannot load is a ConfigError: not an integer (its decoder fails), or above 3
    (ValidateVersion); without, such a value reads as 1."""
    version = data.get("version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and 0 <= version <= 3:
        return max(version, 1)
    if path:
        raise ConfigError(
            f"{path}: version = {str(version)[:40]!r} is not a config version containerd "
            "loads (1, 2 or 3)"
        )
    return 1


def containerd_imports(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``imports`` globs of a version 2/3 config (version 1 has none)."""
    raw = data.get("imports") or []
    return tuple(str(i) for i in raw if isinstance(i, str))[:32] if isinstance(raw, list) else ()


def merge_tables(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merge key by key, other values replace: containerd 2.x's merge of an imported
    file (config version 3), and CRI-O's of its drop-ins."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = value
    return out


def merge_files(files: list[tuple[str, dict[str, Any]]], *, by_key: bool) -> dict[str, Any]:
    """containerd's config from its root file and the files it imports, in reading order.

    containerd 1.x (mergeConfig in its server/config) replaces the whole table of every plugin
    an imported file names ("Replace entire sections instead of merging map's values": why
    nvidia-ctk's drop-in repeats the whole CRI section), and a file's ``version`` replaces the
    config's like any value it sets. containerd 2.x (``by_key``) merges key by key and brings
    every file to one version, the highest, its CRI settings included (a version 2 drop-in
    beside a version 3 root keeps the root's "io.containerd.cri.v1.runtime" table): releases
    differ in where they do it, not in that outcome for the settings envdoctor reads.
    """
    for path, data in files:
        containerd_version(data, path)  # a version containerd cannot load fails here
    if not by_key:
        merged: dict[str, Any] = {}
        for _, data in files:
            merged = _replace_sections(merged, data)
        return merged
    target = max(containerd_version(data) for _, data in files)
    merged = {}
    for _, data in files:
        body = {k: v for k, v in data.items() if k != "version"}
        merged = merge_tables(merged, _migrate_cri(body, containerd_version(data), target))
    return {**merged, "version": target}


def _migrate_cri(data: Mapping[str, Any], version: int, target: int) -> dict[str, Any]:
    """A file's CRI plugin table where version ``target`` keeps it: version 1's "cri" is version
    2's "io.containerd.grpc.v1.cri"; version 3 keeps its runtime settings (what envdoctor reads:
    containerd.*, enable_cdi, cdi_spec_dirs) under "io.containerd.cri.v1.runtime". A version 1
    file may already use the long name (containerd renames only names without a dot)."""
    if version >= target:
        return dict(data)
    plugins = _table(data, "plugins")
    names = [CRI_PLUGIN[v] for v in (1, 2) if version <= v < target]
    found = [_table(plugins, n) for n in names]
    if not any(found):
        return dict(data)
    old: dict[str, Any] = {}
    for table in found:
        old = merge_tables(old, table)
    if target >= 3:
        old = {k: v for k, v in old.items() if k in ("containerd", "enable_cdi", "cdi_spec_dirs")}
    rest = {k: v for k, v in plugins.items() if k not in names}
    moved = merge_tables(_table(rest, CRI_PLUGIN[target]), old)
    return {**data, "plugins": {**rest, CRI_PLUGIN[target]: moved}}


def _replace_sections(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    plugins = over.get("plugins")
    out = merge_tables(base, {k: v for k, v in over.items() if k != "plugins"})
    if isinstance(plugins, dict):
        merged = dict(out["plugins"]) if isinstance(out.get("plugins"), dict) else {}
        merged.update(plugins)
        out["plugins"] = merged
    return out


def containerd_config(
    data: Mapping[str, Any], files: tuple[str, ...], *, merge: str = "", release: str = ""
) -> EngineConfig:
    """The (merged) containerd config: the CRI plugin's ``containerd.runtimes``,
    ``containerd.default_runtime_name`` and ``enable_cdi``. Without a ``default_runtime_name``
    containerd runs ``runc``; a version 1 ``default_runtime`` table counts as that name."""
    version = containerd_version(data)
    plugin = _table(data, "plugins", CRI_PLUGIN[version])
    section = _table(plugin, "containerd")
    runtimes = _table(section, "runtimes")
    names = tuple(sorted(runtimes)[:MAX_RUNTIMES])
    nvidia = []
    for name in names:
        runtime = runtimes[name] if isinstance(runtimes[name], dict) else {}
        options = _table(runtime, "options")
        binary = options.get("BinaryName") or options.get("Runtime") or runtime.get("path")
        if _is_nvidia(name, binary):
            nvidia.append(name)
    default = section.get("default_runtime_name")
    if not isinstance(default, str) or not default:
        legacy = _table(section, "default_runtime")
        binary = _table(legacy, "options").get("Runtime") or legacy.get("runtime_engine")
        default = "nvidia" if legacy and _is_nvidia("", binary) else "runc"
    cdi = plugin.get("enable_cdi") is True
    major = release.split(".")[0]
    if version == 3 or (major.isdigit() and int(major) >= 2):
        # containerd 2.x (which reads a version 2 file as version 3): CDI on unless switched off
        cdi = plugin.get("enable_cdi", True) is not False
    return EngineConfig(
        path=files[0] if files else "",
        runtimes=names,
        nvidia_runtimes=tuple(nvidia),
        default_runtime=default,
        cdi=cdi,
        version=version,
        files=files,
        merge=merge,
        release=release,
    )


# --- CRI-O ----------------------------------------------------------------------------------


def crio_config(data: Mapping[str, Any], files: tuple[str, ...]) -> EngineConfig:
    """``[crio.runtime] default_runtime`` and ``[crio.runtime.runtimes.NAME] runtime_path``
    (what ``nvidia-ctk runtime configure --runtime=crio`` writes to crio.conf.d/99-nvidia.toml).
    Unset, CRI-O's own default applies ("": crun since CRI-O 1.31, runc before). CRI-O
    resolves CDI devices itself."""
    runtime = _table(data, "crio", "runtime")
    runtimes = _table(runtime, "runtimes")
    names = tuple(sorted(runtimes)[:MAX_RUNTIMES])
    nvidia = tuple(n for n in names if _is_nvidia(n, _table(runtimes, n).get("runtime_path") or ""))
    default = runtime.get("default_runtime")
    return EngineConfig(
        path=files[0] if files else "",
        runtimes=names,
        nvidia_runtimes=nvidia,
        default_runtime=default if isinstance(default, str) else "",
        cdi=True,
        files=files,
    )


# --- the NVIDIA Container Toolkit -----------------------------------------------------------


def toolkit_config(text: str, path: str) -> ToolkitConfig:
    """``[nvidia-container-runtime] mode`` ("auto" by default; "legacy", "cdi", "csv",
    "jit-cdi"), ``[nvidia-container-runtime.modes.cdi] spec-dirs`` and ``default-kind``, and
    ``[nvidia-container-cli] no-cgroups`` (api/config/v1 of nvidia-container-toolkit)."""
    data = parse_toml(text, path)
    runtime = _table(data, "nvidia-container-runtime")
    mode = runtime.get("mode", "auto")
    cdi = _table(runtime, "modes", "cdi")
    kind = cdi.get("default-kind")
    dirs = cdi.get("spec-dirs")
    spec_dirs = (
        tuple(str(d) for d in dirs if isinstance(d, str))[:8]
        if isinstance(dirs, list)
        else CDI_DIRS
    )
    return ToolkitConfig(
        path=path,
        mode=mode if isinstance(mode, str) else "auto",
        no_cgroups=_table(data, "nvidia-container-cli").get("no-cgroups") is True,
        spec_dirs=spec_dirs,
        default_kind=kind if isinstance(kind, str) and is_kind(kind) else NVIDIA_KIND,
    )


_KIND_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def is_kind(kind: str) -> bool:
    """``vendor/class`` as CDI allows it: letters, digits, '.', '-' and '_', each part starting
    with a letter or digit (container-device-interface's parser)."""
    vendor, slash, cls = kind.partition("/")
    return bool(
        slash
        and vendor[:1].isascii()
        and vendor[:1].isalnum()
        and cls[:1].isascii()
        and cls[:1].isalnum()
        and set(vendor) <= _KIND_CHARS
        and set(cls) <= _KIND_CHARS
        and len(kind) <= 255
    )
