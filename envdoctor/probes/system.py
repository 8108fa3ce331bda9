"""Host facts: OS, kernel, container runtime, cgroup, the user, and NVIDIA PCI functions."""

from __future__ import annotations

from collections.abc import Mapping

from envdoctor.model.facts import HostFacts, PciDevice
from envdoctor.model.probed import Absent, Found, Probed
from envdoctor.platform.host import Host

NVIDIA_VENDOR = "0x10de"
MAX_PCI_DEVICES = 512


def probe_host(host: Host) -> HostFacts:
    ident = host.identity()
    env = host.env()
    osrelease = host.read_text("/proc/sys/kernel/osrelease")
    release_text = osrelease.value if isinstance(osrelease, Found) else ident.kernel_release
    return HostFacts(
        os_name=_os_name(host),
        kernel=Found(release_text.strip() or ident.kernel_release),
        machine=ident.machine,
        hostname=_strip(host.read_text("/proc/sys/kernel/hostname")),
        user=ident.user,
        uid=ident.uid,
        containers=_containers(host, env),
        wsl="microsoft" in release_text.lower() or "WSL_DISTRO_NAME" in env,
        cgroup_version=_cgroup_version(host),
        nvidia_pci=_nvidia_pci(host),
    )


def _strip(probed: Probed[str]) -> Probed[str]:
    return Found(probed.value.strip()) if isinstance(probed, Found) else probed


def _os_name(host: Host) -> Probed[str]:
    text = host.read_text("/etc/os-release")
    if not isinstance(text, Found):
        return text
    fields = {}
    for line in text.value.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    name = fields.get("PRETTY_NAME") or fields.get("NAME")
    return Found(name) if name else Absent("/etc/os-release has no PRETTY_NAME or NAME")


def _containers(host: Host, environ: Mapping[str, str]) -> tuple[str, ...]:
    found: list[str] = []
    if isinstance(host.stat("/.dockerenv"), Found):
        found.append("docker")
    if isinstance(host.stat("/run/.containerenv"), Found) or environ.get("container") == "podman":
        found.append("podman")
    cgroup = host.read_text("/proc/1/cgroup")
    text = cgroup.value if isinstance(cgroup, Found) else ""
    if "docker" in text and "docker" not in found:
        found.append("docker")
    if "containerd" in text or "cri-containerd" in text:
        found.append("containerd")
    if "KUBERNETES_SERVICE_HOST" in environ or "kubepods" in text:
        found.append("kubernetes")
    return tuple(found)


def _cgroup_version(host: Host) -> Probed[int]:
    if isinstance(host.stat("/sys/fs/cgroup/cgroup.controllers"), Found):
        return Found(2)
    if isinstance(host.stat("/sys/fs/cgroup"), Found):
        return Found(1)
    return Absent("/sys/fs/cgroup is not mounted")


def _nvidia_pci(host: Host) -> Probed[tuple[PciDevice, ...]]:
    listing = host.list_dir("/sys/bus/pci/devices")
    if not isinstance(listing, Found):
        return listing
    devices = []
    for address in listing.value[:MAX_PCI_DEVICES]:
        base = f"/sys/bus/pci/devices/{address}"
        vendor = host.read_text(f"{base}/vendor")
        if not (isinstance(vendor, Found) and vendor.value.strip() == NVIDIA_VENDOR):
            continue
        pci_class = _strip(host.read_text(f"{base}/class"))
        cls = pci_class.value if isinstance(pci_class, Found) else ""
        if not cls.startswith("0x03"):
            continue  # display/3D controllers only: skip the GPU's audio and NVSwitch bridges
        device = _strip(host.read_text(f"{base}/device"))
        driver_link = f"{base}/driver"
        driver: Probed[str]
        if isinstance(host.stat(driver_link), Found):
            driver = Found(host.realpath(driver_link).rsplit("/", 1)[-1])
        else:
            driver = Absent("no kernel driver is bound to this device")
        devices.append(
            PciDevice(
                address=address,
                device_id=device.value if isinstance(device, Found) else "?",
                pci_class=cls,
                driver=driver,
            )
        )
    return Found(tuple(devices))
