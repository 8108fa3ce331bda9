"""The container layer, read once: the NVIDIA Container Toolkit and the engines on this host,
their CDI specs, and what a container itself sees (device nodes it can open, /dev/shm, the
image's CUDA requirement).

Everything here is a bounded file read or ``stat``, so the probe tier reads it too; only the
toolkit's version commands are subprocesses, run by the full tier alone.
"""

from __future__ import annotations

import posixpath
import re
from fnmatch import fnmatchcase
from typing import Any

from envdoctor.model.containers import (
    CDI_DIRS,
    SHM_PATH,
    ContainerFacts,
    ContainerHostFacts,
    DeviceOpen,
    EngineConfig,
    EngineFacts,
    InsideFacts,
    ShmMount,
    ToolkitConfig,
    ToolkitFacts,
)
from envdoctor.model.facts import HostFacts, KernelFacts, NvmlSystem
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing
from envdoctor.model.units import whole
from envdoctor.model.views import GPU_NODE
from envdoctor.platform.host import CommandResult, Deadline, Host
from envdoctor.probes.cdi import probe_specs
from envdoctor.probes.engine_config import (
    ConfigError,
    containerd_config,
    containerd_imports,
    containerd_version,
    crio_config,
    docker_config,
    merge_files,
    merge_tables,
    parse_toml,
    toolkit_config,
)
from envdoctor.probes.environment import printable

FAST_TIER = "not probed by the fast tier (envdoctor check reads it)"
BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin", "/usr/local/nvidia/toolkit")
TOOLKIT_PROGRAMS = (
    "nvidia-container-runtime-hook",  # what Docker's --gpus looks for on PATH
    "nvidia-ctk",
    "nvidia-container-cli",
    "nvidia-container-runtime",
    "nvidia-cdi-hook",  # newer Docker (moby devices_nvidia_linux.go) looks for it too
)
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
DOCKER_SNAP = "/snap/bin/docker"
ENGINES = (
    ("docker", ("/usr/bin/dockerd", "/usr/local/bin/dockerd", "/usr/sbin/dockerd", DOCKER_SNAP)),
    ("containerd", ("/usr/bin/containerd", "/usr/local/bin/containerd")),
    ("cri-o", ("/usr/bin/crio", "/usr/local/bin/crio")),
    ("podman", ("/usr/bin/podman", "/usr/local/bin/podman")),
)
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROP_INS = "/etc/crio/crio.conf.d"
KUBELET_DIR = "/var/lib/kubelet"
MAX_CONFIG_BYTES = 1 << 20
MAX_DROP_INS = 32
VERSION_TIMEOUT = 5.0
OPEN_TIMEOUT = 0.5
_CTK_VERSION = re.compile(r"version\s+v?(\d+\.\d+\.\d+\S*)", re.IGNORECASE)
_CLI_VERSION = re.compile(r"^(?:cli-)?version:\s*v?(\S+)", re.MULTILINE)
_LIB_VERSION = re.compile(r"^lib-version:\s*v?(\S+)", re.MULTILINE)
# "containerd github.com/containerd/containerd 1.6.20~ds1 …", "containerd containerd.io 1.7.27
# …", "containerd github.com/containerd/containerd/v2 v2.1.4 …"
_CONTAINERD_VERSION = re.compile(
    r"^containerd \S+ v?(\d{1,4}\.\d{1,4}(?:\.\d{1,6})?)", re.MULTILINE
)
_SHM_SIZE = r"(?:^|,)size=([0-9]{1,18})([kmg]?)(?:,|$)"  # compiled on first use (in a container)
REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
REQUIRE_OTHERS = ("NVIDIA_DISABLE_REQUIRE", "CUDA_VERSION")
# NVML failures after which opening the device nodes tells nothing more.
_NO_NODES = ("LibraryNotFound", "DriverNotLoaded")


def probe_containers(
    host: Host,
    *,
    deadline: Deadline,
    fast: bool,
    host_facts: HostFacts,
    kernel: KernelFacts,
    nvml: Probed[NvmlSystem],
) -> ContainerFacts:
    return ContainerFacts(
        host=Found(probe_container_host(host, deadline=deadline, fast=fast)),
        inside=Found(
            probe_inside(host, host_facts=host_facts, kernel=kernel, nvml=nvml, deadline=deadline)
        ),
    )


# --- the host side --------------------------------------------------------------------------


def probe_container_host(host: Host, *, deadline: Deadline, fast: bool) -> ContainerHostFacts:
    toolkit = probe_toolkit(host, deadline=deadline, fast=fast)
    dirs: tuple[str, ...] = CDI_DIRS
    if isinstance(toolkit.config, Found):
        dirs = toolkit.config.value.spec_dirs or dirs
    return ContainerHostFacts(
        toolkit=toolkit,
        engines=tuple(
            e
            for e in (_engine(host, name, paths, deadline, fast=fast) for name, paths in ENGINES)
            if e
        ),
        cdi_specs=probe_specs(host, dirs),
        kubelet=_is_dir(host, KUBELET_DIR),
    )


def probe_toolkit(host: Host, *, deadline: Deadline, fast: bool) -> ToolkitFacts:
    found: dict[str, str] = {}
    for name in TOOLKIT_PROGRAMS:
        where = _find(host, name)
        if where is not None:
            found[name] = where
    ctk: Probed[str]
    cli: Probed[str]
    lib: Probed[str]
    if fast:
        ctk = cli = lib = Absent(FAST_TIER)
    else:
        (ctk,) = _versions(host, found.get("nvidia-ctk"), deadline, _CTK_VERSION)
        # one `nvidia-container-cli --version` prints both its own and libnvidia-container's
        cli, lib = _versions(
            host, found.get("nvidia-container-cli"), deadline, _CLI_VERSION, _LIB_VERSION
        )
    return ToolkitFacts(
        programs=tuple(found.items()),
        ctk_version=ctk,
        cli_version=cli,
        lib_version=lib,
        config=_toolkit_config(host),
    )


def _find(host: Host, name: str) -> str | None:
    """The program in the usual directories (no PATH search: the probe tier runs no `which`)."""
    for directory in BIN_DIRS:
        path = f"{directory}/{name}"
        info = host.stat(path)
        if isinstance(info, Found) and not info.value.is_dir:
            return path
    return None


def _is_dir(host: Host, path: str) -> bool:
    info = host.stat(path)
    return isinstance(info, Found) and info.value.is_dir


def _versions(
    host: Host, program: str | None, deadline: Deadline, *patterns: re.Pattern[str]
) -> tuple[Probed[str], ...]:
    """What each pattern reads from one run of ``program --version``."""
    if program is None:
        return tuple(Absent("not installed") for _ in patterns)
    result = host.run([program, "--version"], timeout=deadline.cap(VERSION_TIMEOUT))
    text = result.stdout + "\n" + result.stderr
    return tuple(_version_in(program, result, pattern.search(text)) for pattern in patterns)


def _version_in(program: str, result: CommandResult, match: re.Match[str] | None) -> Probed[str]:
    if not result.ok or not match:
        return ProbeFailed(f"cannot read the version of {program}", detail=result.describe())
    return Found(match.group(1))


def _toolkit_config(host: Host) -> Probed[ToolkitConfig]:
    text = host.read_text(TOOLKIT_CONFIG, limit=MAX_CONFIG_BYTES)
    if not isinstance(text, Found):
        return text
    try:
        return Found(toolkit_config(text.value, TOOLKIT_CONFIG))
    except ConfigError as exc:
        return ProbeFailed(str(exc))


def _engine(
    host: Host, name: str, paths: tuple[str, ...], deadline: Deadline, *, fast: bool
) -> EngineFacts | None:
    program = next((p for p in paths if isinstance(host.stat(p), Found)), None)
    if program is None:
        return None
    if name == "docker":
        return _docker(host, program)
    if name == "containerd":
        release = None if fast else _containerd_release(host, program, deadline)
        return EngineFacts(name, program, _containerd(host, release))
    if name == "cri-o":
        return EngineFacts(name, program, _crio(host))
    return EngineFacts(name, program, Absent("podman gives containers GPUs through CDI specs"))


def _docker(host: Host, program: str) -> EngineFacts:
    snap = program == DOCKER_SNAP or isinstance(host.stat(DOCKER_SNAP), Found)
    uid = host.identity().uid
    env = host.env()
    socket = f"/run/user/{uid}/docker.sock"
    rootless = uid != 0 and (
        env.get("DOCKER_HOST", "") == f"unix://{socket}" or isinstance(host.stat(socket), Found)
    )
    if program == DOCKER_SNAP:
        path = "/var/snap/docker/current/config/daemon.json"
    elif rootless:
        base = env.get("XDG_CONFIG_HOME") or f"{env.get('HOME', '~')}/.config"
        path = f"{base}/docker/daemon.json"
    else:
        path = "/etc/docker/daemon.json"
    config: Probed[EngineConfig]
    text = host.read_text(path, limit=MAX_CONFIG_BYTES)
    if isinstance(text, Absent):
        config = Absent(f"{path} does not exist: Docker's defaults apply (runc only)")
    elif not isinstance(text, Found):
        config = text
    else:
        try:
            config = Found(docker_config(text.value, path))
        except ConfigError as exc:
            config = ProbeFailed(str(exc))
    return EngineFacts("docker", program, config, snap=snap, rootless=rootless)


def _read_toml(host: Host, path: str) -> dict[str, Any]:
    text = host.read_text(path, limit=MAX_CONFIG_BYTES)
    if not isinstance(text, Found):
        raise ConfigError(f"{path}: {why_missing(text)}")
    return parse_toml(text.value, path)


def _containerd_release(host: Host, program: str, deadline: Deadline) -> str | None:
    """containerd's own version ("1.6.20", "2.1.4") from ``containerd --version``, or None."""
    (found,) = _versions(host, program, deadline, _CONTAINERD_VERSION)
    return found.value if isinstance(found, Found) else None


def _containerd(host: Host, release: str | None = None) -> Probed[EngineConfig]:
    """config.toml merged with the drop-ins it imports, as containerd merges them: as 2.x does
    where ``containerd --version`` says 2 or later, or (unread: the probe tier) where the config
    is version 3; else as 1.x does. containerd 2.x reads version 2 files too."""
    if isinstance(host.stat(CONTAINERD_CONFIG), Absent):
        return Absent(f"{CONTAINERD_CONFIG} does not exist: containerd's defaults apply (runc)")
    try:
        data = _read_toml(host, CONTAINERD_CONFIG)
        files = [CONTAINERD_CONFIG]
        version = containerd_version(data, CONTAINERD_CONFIG)
        major = whole(release.split(".")[0]) if release else None
        two = major >= 2 if major is not None else version >= 3
        # containerd reads each file's own imports after it, a relative path from that file's
        # directory; containerd 1.x globs a relative pattern from its own working directory
        # (the daemon's is /), 2.x from the file's (resolveImports in server/config)
        loaded = [(CONTAINERD_CONFIG, data)]
        pending = list(loaded) if version >= 2 else []
        while pending:
            parent, parsed = pending.pop(0)
            directory = parent.rpartition("/")[0] or "/"
            for pattern in containerd_imports(parsed):
                glob_base = directory if two else "/"
                for path in _glob(host, pattern, base=directory, glob_base=glob_base):
                    if path not in files and len(files) <= MAX_DROP_INS:
                        imported = _read_toml(host, path)
                        files.append(path)
                        loaded.append((path, imported))
                        pending.append((path, imported))
        merged = merge_files(loaded, by_key=two)
        merge = ("key" if two else "section") if len(files) > 1 else ""
        return Found(containerd_config(merged, tuple(files), merge=merge, release=release or ""))
    except ConfigError as exc:
        return ProbeFailed(str(exc))


def _crio(host: Host) -> Probed[EngineConfig]:
    files: list[str] = []
    data: dict[str, Any] = {}
    try:
        if isinstance(host.stat(CRIO_CONFIG), Found):
            data = _read_toml(host, CRIO_CONFIG)
            files.append(CRIO_CONFIG)
        listing = host.list_dir(CRIO_DROP_INS)
        for name in listing.value[:MAX_DROP_INS] if isinstance(listing, Found) else ():
            path = f"{CRIO_DROP_INS}/{name}"
            data = merge_tables(data, _read_toml(host, path))
            files.append(path)
    except ConfigError as exc:
        return ProbeFailed(str(exc))
    if not files:
        return Absent(f"neither {CRIO_CONFIG} nor {CRIO_DROP_INS} exists: CRI-O's defaults apply")
    return Found(crio_config(data, tuple(files)))


def _glob(host: Host, pattern: str, *, base: str, glob_base: str | None = None) -> list[str]:
    """A containerd ``imports`` entry: a path, or a glob in its last component only; a
    relative path is taken from ``base``, a relative glob from ``glob_base`` (``base``)."""
    if not pattern.startswith("/"):
        globbing = "*" in pattern.rpartition("/")[2]
        root = (glob_base or base) if globbing else base
        pattern = posixpath.normpath(f"{root.rstrip('/')}/{pattern}")
    directory, _, name = pattern.rpartition("/")
    if "*" not in name:  # containerd globs a pattern with "*" only
        return [pattern] if isinstance(host.stat(pattern), Found) else []
    listing = host.list_dir(directory or "/")
    names = listing.value if isinstance(listing, Found) else ()
    return [f"{directory}/{n}" for n in names if fnmatchcase(n, name)][:MAX_DROP_INS]


# --- inside a container ---------------------------------------------------------------------


def probe_inside(
    host: Host,
    *,
    host_facts: HostFacts,
    kernel: KernelFacts,
    nvml: Probed[NvmlSystem],
    deadline: Deadline,
) -> InsideFacts:
    env = host.env()
    require = sorted(
        (k, printable(v))
        for k, v in env.items()
        if k.startswith(REQUIRE_PREFIX) or k in REQUIRE_OTHERS
    )[:32]
    return InsideFacts(
        opens=_opens(host, host_facts, kernel, nvml, deadline),
        shm=_shm(host),
        require=tuple(require),
    )


def _opens(
    host: Host,
    host_facts: HostFacts,
    kernel: KernelFacts,
    nvml: Probed[NvmlSystem],
    deadline: Deadline,
) -> Probed[tuple[DeviceOpen, ...]]:
    """Open /dev/nvidiactl, /dev/nvidia-uvm and the first /dev/nvidiaN, only in a container
    whose NVML failed: there an EPERM the mode bits do not explain is the device cgroup's."""
    if not host_facts.containers:
        return Absent("not in a container")
    if not isinstance(nvml, ProbeFailed) or nvml.error in _NO_NODES:
        return Absent("NVML initialised, or failed before it reached the devices")
    nodes = kernel.device_nodes
    if not isinstance(nodes, Found):
        return Absent(f"the device nodes: {why_missing(nodes)}")
    chars = [n.path for n in nodes.value if n.is_char_device]
    wanted: list[str] = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm") if p in chars]
    wanted += [p for p in chars if GPU_NODE.fullmatch(p)][:1]
    if not wanted:
        return Absent("no NVIDIA device node to open")
    return Found(
        tuple(
            DeviceOpen(p, host.open_device(p, timeout=deadline.cap(OPEN_TIMEOUT))) for p in wanted
        )
    )


def _shm(host: Host) -> Probed[ShmMount]:
    text = host.read_text("/proc/self/mounts", limit=MAX_CONFIG_BYTES)
    if not isinstance(text, Found):
        return text
    found = None
    for line in text.value.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == SHM_PATH:
            found = parts  # the last mount on /dev/shm is the one in effect
    if found is None:
        return Absent(f"{SHM_PATH} is not a mount point here")
    match = re.search(_SHM_SIZE, found[3])
    size = 0
    if match:
        size = (
            int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2)]
        )
    return Found(ShmMount(fstype=found[2], size=size))
