"""A Host that remembers what it is doing, so that a watchdog's timeout says where it hung
("stuck reading /proc/driver/nvidia/version", "stuck initialising NVML")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from envdoctor.model.probed import Probed
from envdoctor.platform.host import (
    MAX_KMSG_BYTES,
    MAX_READ_BYTES,
    CommandResult,
    FileInfo,
    Host,
    Identity,
)

if TYPE_CHECKING:
    from envdoctor.platform.nvml import NvmlSession


class TracedHost:
    """A Host that remembers what it is doing, so a watchdog timeout can say where it hung."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self.doing = "starting"

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        self.doing = f"reading {path}"
        return self._host.read_text(path, limit=limit)

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        self.doing = f"reading {path}"
        return self._host.read_bytes(path, limit=limit)

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        self.doing = "reading /dev/kmsg"
        return self._host.read_kmsg(limit=limit)

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        self.doing = f"listing {path}"
        return self._host.list_dir(path)

    def stat(self, path: str) -> Probed[FileInfo]:
        self.doing = f"checking {path}"
        return self._host.stat(path)

    def realpath(self, path: str) -> str:
        self.doing = f"resolving {path}"
        return self._host.realpath(path)

    def env(self) -> Mapping[str, str]:
        return self._host.env()

    def which(self, program: str) -> str | None:
        self.doing = f"looking for {program}"
        return self._host.which(program)

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        self.doing = f"running {' '.join(argv[:2])}"
        return self._host.run(argv, timeout=timeout, env=env)

    def open_nvml(self, *, timeout: float) -> NvmlSession:
        self.doing = "initialising NVML"
        session = self._host.open_nvml(timeout=timeout)
        self.doing = "querying NVML"
        return session

    def open_device(self, path: str, *, timeout: float) -> str:
        self.doing = f"opening {path}"
        return self._host.open_device(path, timeout=timeout)

    def identity(self) -> Identity:
        self.doing = "looking up the current user"  # NSS: LDAP or sssd can block
        return self._host.identity()
