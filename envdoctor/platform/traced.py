"""A Host that remembers what it is doing, so that a watchdog's timeout says where it hung
("stuck reading /proc/driver/nvidia/version", "stuck initialising NVML")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

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

P = ParamSpec("P")
T = TypeVar("T")


class TracedHost:
    """A Host that remembers what it is doing, so a watchdog timeout can say where it hung.

    ``doing`` is what was started last (a watchdog's "stuck …"); ``busy()`` is every call still
    running, oldest first (``collect`` reads the machine while the torch child runs on another
    thread: its progress line shows both).
    """

    def __init__(self, host: Host) -> None:
        self._host = host
        self.doing = "starting"
        self._busy: dict[int, str] = {}
        self._calls = itertools.count()  # next() is atomic: threads get distinct keys

    def busy(self) -> tuple[str, ...]:
        """What the calls in progress are doing, oldest first."""
        return tuple(self._busy.copy().values())

    def _call(self, what: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        self.doing = what
        key = next(self._calls)
        self._busy[key] = what
        try:
            return call(*args, **kwargs)
        finally:
            del self._busy[key]

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        return self._call(f"reading {path}", self._host.read_text, path, limit=limit)

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        return self._call(f"reading {path}", self._host.read_bytes, path, limit=limit)

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        return self._call("reading /dev/kmsg", self._host.read_kmsg, limit=limit)

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        return self._call(f"listing {path}", self._host.list_dir, path)

    def stat(self, path: str) -> Probed[FileInfo]:
        return self._call(f"checking {path}", self._host.stat, path)

    def realpath(self, path: str) -> str:
        return self._call(f"resolving {path}", self._host.realpath, path)

    def env(self) -> Mapping[str, str]:
        return self._host.env()

    def which(self, program: str) -> str | None:
        return self._call(f"looking for {program}", self._host.which, program)

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        what = f"running {' '.join(argv[:2])}"
        return self._call(what, self._host.run, argv, timeout=timeout, env=env)

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        session = self._call(
            "initialising NVML",
            self._host.open_nvml,
            timeout=timeout,
            init_timeout=init_timeout,
            remaining=remaining,
        )
        self.doing = "querying NVML"
        return session

    def open_device(self, path: str, *, timeout: float) -> str:
        return self._call(f"opening {path}", self._host.open_device, path, timeout=timeout)

    def identity(self) -> Identity:
        # NSS: LDAP or sssd can block
        return self._call("looking up the current user", self._host.identity)
