"""NVSwitches and the NVIDIA fabric manager (HGX/DGX systems).

On an NVSwitch system CUDA cannot start (error 802, "system not yet initialized") until the
fabric manager has set up the NVLink fabric, and the fabric manager refuses to start unless its
version is exactly the driver's. The NVSwitches are listed by the driver in
``/proc/driver/nvidia-nvswitch/devices``; the service state comes from ``systemctl show`` and
the version from ``nv-fabricmanager --version`` (both readable without root). Those two
programs run only where there is a fabric to manage, and never in the probe tier.
"""

from __future__ import annotations

import re

from envdoctor.model.facts import FabricFacts, FabricManager, NvmlSystem
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Deadline, Host

NVSWITCH_DIR = "/proc/driver/nvidia-nvswitch/devices"
SERVICE = "nvidia-fabricmanager.service"
DAEMON = "nv-fabricmanager"
DAEMON_PATHS = ("/usr/bin/nv-fabricmanager", "/usr/sbin/nv-fabricmanager")
COMMAND_TIMEOUT = 5.0
_VERSION = r"Fabric Manager version is\s*:\s*(\d+(?:\.\d+)+)"
NO_FABRIC = "no NVSwitch and no GPU on an NVLink fabric: no fabric manager is needed"


def probe_nvswitches(host: Host) -> Probed[tuple[str, ...]]:
    """The NVSwitches' PCI addresses as the driver lists them (no process: probe tier too)."""
    listing = host.list_dir(NVSWITCH_DIR)
    if isinstance(listing, Absent):
        return Absent(f"{NVSWITCH_DIR} does not exist (no NVSwitch, or no NVIDIA driver)")
    return listing


def probe_fabric(host: Host, nvml: Probed[NvmlSystem], *, deadline: Deadline) -> FabricFacts:
    """The NVSwitches, and the fabric manager where there is a fabric to manage."""
    nvswitches = probe_nvswitches(host)
    manager: Probed[FabricManager]
    if (isinstance(nvswitches, Found) and nvswitches.value) or _on_fabric(nvml):
        manager = Found(
            FabricManager(service=_service(host, deadline), version=_version(host, deadline))
        )
    else:
        manager = Absent(NO_FABRIC)
    return FabricFacts(nvswitches=nvswitches, manager=manager)


def _on_fabric(nvml: Probed[NvmlSystem]) -> bool:
    """Whether NVML says some GPU takes part in an NVLink fabric (Hopper and later)."""
    if not isinstance(nvml, Found):
        return False
    return any(
        isinstance(gpu.fabric, Found) and gpu.fabric.value.state != "not-supported"
        for gpu in nvml.value.gpus
    )


def _service(host: Host, deadline: Deadline) -> Probed[str]:
    if host.which("systemctl") is None:
        return Absent("systemctl is not installed (no systemd here)")
    argv = ("systemctl", "show", SERVICE, "--property=LoadState,ActiveState,SubState")
    result = host.run(argv, timeout=deadline.cap(COMMAND_TIMEOUT))
    if not result.ok:
        return ProbeFailed("cannot ask systemd", detail=result.describe())
    props = dict(line.partition("=")[::2] for line in result.stdout.splitlines() if "=" in line)
    if props.get("LoadState") == "not-found":
        return Absent(f"the {SERVICE} unit is not installed")
    if not props.get("ActiveState"):
        return ProbeFailed("systemctl show printed no ActiveState", detail=result.stdout[:200])
    sub = props.get("SubState", "")
    return Found(f"{props['ActiveState']} ({sub})" if sub else props["ActiveState"])


def _version(host: Host, deadline: Deadline) -> Probed[str]:
    path = host.which(DAEMON) or next(
        (p for p in DAEMON_PATHS if isinstance(host.stat(p), Found)), None
    )
    if path is None:
        return Absent(f"{DAEMON} is not installed (not on PATH, not in /usr/bin or /usr/sbin)")
    result = host.run((path, "--version"), timeout=deadline.cap(COMMAND_TIMEOUT))
    match = re.search(_VERSION, result.stdout + result.stderr)
    if match is None:
        return ProbeFailed(f"cannot read the version of {path}", detail=result.describe())
    return Found(match.group(1))
