"""Kernel side: loaded modules, /proc/driver/nvidia/version, and the /dev/nvidia* nodes."""

from __future__ import annotations

import re

from envdoctor.model.facts import DeviceNode, KernelDriver, KernelFacts, KernelModule, SysModule
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Host

_NVRM = r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)"

SYS_MODULE_NAMES = (
    "nvidia",
    "nvidia_uvm",
    "nvidia_modeset",
    "nvidia_drm",
    "nvidia_peermem",
    "nouveau",
)
"""The modules whose /sys/module entry is read: built-in ones appear only there."""


def probe_kernel(host: Host) -> KernelFacts:
    return KernelFacts(
        modules=parse_modules(host.read_text("/proc/modules")),
        driver=parse_driver_version(host.read_text("/proc/driver/nvidia/version")),
        device_nodes=_device_nodes(host),
        sys_modules=_sys_modules(host),
    )


def _sys_modules(host: Host) -> Probed[tuple[SysModule, ...]]:
    """/sys/module/NAME for the NVIDIA-related names that exist there."""
    listing = host.list_dir("/sys/module")
    if not isinstance(listing, Found):
        return listing
    present = set(listing.value)
    out = []
    for name in SYS_MODULE_NAMES:
        if name not in present:
            continue
        base = f"/sys/module/{name}"
        state = host.read_text(f"{base}/initstate", limit=64)
        refcnt = host.read_text(f"{base}/refcnt", limit=64)
        holders = host.list_dir(f"{base}/holders")
        count: Probed[int]
        if isinstance(refcnt, Found) and refcnt.value.strip().isdigit():
            count = Found(int(refcnt.value.strip()))
        elif isinstance(refcnt, Found):
            count = ProbeFailed(f"unreadable {base}/refcnt", detail=refcnt.value[:64])
        else:
            count = refcnt
        out.append(
            SysModule(
                name=name,
                initstate=state.value.strip() if isinstance(state, Found) else "",
                refcount=count,
                holders=holders.value if isinstance(holders, Found) else (),
            )
        )
    return Found(tuple(out))


def parse_modules(text: Probed[str]) -> Probed[tuple[KernelModule, ...]]:
    """Parse /proc/modules: "name size refcount used_by,… state address"."""
    if not isinstance(text, Found):
        return text
    modules = []
    for line in text.value.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        used_by = tuple(m for m in parts[3].split(",") if m and m != "-")
        refcount = int(parts[2]) if parts[2].isdigit() else 0
        modules.append(KernelModule(name=parts[0], refcount=refcount, used_by=used_by))
    return Found(tuple(modules))


def parse_driver_version(text: Probed[str]) -> Probed[KernelDriver]:
    """The kernel module's version and flavour (open or proprietary) from /proc."""
    if isinstance(text, Absent):
        return Absent(
            "/proc/driver/nvidia/version does not exist (the nvidia module is not loaded)"
        )
    if not isinstance(text, Found):
        return text
    first = text.value.strip().splitlines()[0] if text.value.strip() else ""
    match = re.search(_NVRM, first)  # compiled on first use, by re's cache
    if not match:
        return ProbeFailed("unrecognised /proc/driver/nvidia/version", detail=first)
    flavor = "open" if "Open Kernel Module" in first else "proprietary"
    return Found(KernelDriver(version=match.group(1), flavor=flavor, raw=first))


def _device_nodes(host: Host) -> Probed[tuple[DeviceNode, ...]]:
    listing = host.list_dir("/dev")
    if not isinstance(listing, Found):
        return listing
    paths = [f"/dev/{name}" for name in listing.value if name.startswith("nvidia")]
    caps = host.list_dir("/dev/nvidia-caps")
    if isinstance(caps, Found):
        paths.extend(f"/dev/nvidia-caps/{name}" for name in caps.value)
    nodes = []
    for path in paths:
        info = host.stat(path)
        if not isinstance(info, Found) or info.value.is_dir:
            continue
        nodes.append(
            DeviceNode(
                path=path,
                is_char_device=info.value.is_char_device,
                mode=f"{info.value.mode:04o}",
                readable=info.value.readable,
                writable=info.value.writable,
                uid=info.value.uid,
                gid=info.value.gid,
            )
        )
    return Found(tuple(nodes))
