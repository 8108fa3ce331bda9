"""Distribution families and the commands each uses to install the driver and rebuild initramfs.

The family comes from /etc/os-release (``ID``, ``ID_LIKE``) on a live run, else from the OS
name in the facts. Driver packages follow NVIDIA's Driver Installation Guide ("Kernel Modules",
https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html: open
modules are the default from R560 and the only ones for Blackwell; proprietary ones are needed
before Turing) and the distributions' own package names (Ubuntu ``nvidia-driver-BRANCH[-open]``,
Debian ``nvidia-driver`` + ``nvidia[-open]-kernel-dkms``, Arch ``nvidia-open`` (open modules
only), openSUSE ``nvidia-open-driver-G06-signed-kmp-default``). The RHEL family commands expect
NVIDIA's CUDA repository to be configured, as that guide describes.
"""

from __future__ import annotations

FAMILIES = ("ubuntu", "debian", "rhel", "fedora", "suse", "arch")

_BY_ID = {
    "ubuntu": "ubuntu",
    "pop": "ubuntu",
    "linuxmint": "ubuntu",
    "debian": "debian",
    "rhel": "rhel",
    "centos": "rhel",
    "rocky": "rhel",
    "almalinux": "rhel",
    "ol": "rhel",
    "amzn": "rhel",
    "fedora": "fedora",
    "suse": "suse",
    "opensuse": "suse",
    "sles": "suse",
    "opensuse-leap": "suse",
    "opensuse-tumbleweed": "suse",
    "arch": "arch",
}
_BY_NAME = (
    ("ubuntu", "ubuntu"),
    ("debian", "debian"),
    ("red hat", "rhel"),
    ("rocky", "rhel"),
    ("alma", "rhel"),
    ("centos", "rhel"),
    ("oracle linux", "rhel"),
    ("amazon linux", "rhel"),
    ("fedora", "fedora"),
    ("suse", "suse"),
    ("arch linux", "arch"),
)


def family(os_ids: tuple[str, ...], os_name: str) -> str:
    """ "ubuntu", "debian", "rhel", "fedora", "suse", "arch", or "" when unknown."""
    for os_id in os_ids:  # ID first, then ID_LIKE from the most specific
        if os_id in _BY_ID:
            return _BY_ID[os_id]
    lowered = os_name.lower()
    for needle, fam in _BY_NAME:
        if needle in lowered:
            return fam
    return ""


def initramfs_command(fam: str) -> tuple[str, ...] | None:
    """The command that rebuilds the initramfs (so a blacklist applies at boot)."""
    if fam in ("ubuntu", "debian"):
        return ("update-initramfs", "-u")
    if fam in ("rhel", "fedora", "suse"):
        return ("dracut", "--force")
    if fam == "arch":
        return ("mkinitcpio", "-P")
    return None


def driver_install_commands(
    fam: str, branch: str, *, open_modules: bool
) -> tuple[tuple[str, ...], ...]:
    """Commands that install the NVIDIA driver (``branch`` like "580", or "" for the newest).

    () when the family is unknown: the plan then says what to do instead of guessing.
    """
    flavour = "open" if open_modules else "dkms"
    if fam == "ubuntu":
        if not branch:
            return (("ubuntu-drivers", "install"),)
        package = f"nvidia-driver-{branch}" + ("-open" if open_modules else "")
        return (("apt-get", "update"), ("apt-get", "install", "-y", package))
    if fam == "debian":
        kernel = "nvidia-open-kernel-dkms" if open_modules else "nvidia-kernel-dkms"
        return (("apt-get", "update"), ("apt-get", "install", "-y", "nvidia-driver", kernel))
    if fam == "rhel":
        stream = f"nvidia-driver:{branch}-{flavour}" if branch else f"nvidia-driver:{flavour}-dkms"
        if not branch and not open_modules:
            stream = "nvidia-driver:latest-dkms"
        package = "nvidia-open" if open_modules else "cuda-drivers"
        return (("dnf", "module", "enable", "-y", stream), ("dnf", "install", "-y", package))
    if fam == "fedora":
        return (("dnf", "install", "-y", "nvidia-open" if open_modules else "cuda-drivers"),)
    if fam == "suse":
        package = (
            "nvidia-open-driver-G06-signed-kmp-default"
            if open_modules
            else "nvidia-driver-G06-kmp-default"
        )
        return (("zypper", "--non-interactive", "install", package),)
    if fam == "arch" and open_modules:  # Arch ships only the open modules (pre-Turing: AUR)
        return (("pacman", "-S", "--needed", "--noconfirm", "nvidia-open"),)
    return ()
