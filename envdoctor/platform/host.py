"""The Host protocol: every read of the machine goes through it, so tests can use fakes.

Probes receive a ``Host`` and nothing else. ``SystemHost`` is the real one; tests build a
``FakeHost`` from a scenario file. Every call is bounded: file reads by size, subprocesses and
NVML calls by a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from envdoctor.model.probed import Probed
from envdoctor.platform.nvml import NvmlSession

MAX_READ_BYTES = 1 << 20
MAX_KMSG_BYTES = 8 << 20
"""The most of the kernel's log buffer read (its default size is 128 KiB to 1 MiB; the largest
``log_buf_len`` boot option seen on servers is a few MiB)."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The outcome of one bounded subprocess.

    ``status`` is "ok" (it ran; look at ``returncode``), "not-found" (no such program),
    "timeout" (killed at the deadline), "overflow" (killed for printing more than the cap;
    ``error`` says how much; the output up to the cap is kept) or "error" (could not start;
    ``error`` says why).
    A negative ``returncode`` is the signal that ended the process.
    """

    argv: tuple[str, ...]
    status: str
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.returncode == 0

    def describe(self) -> str:
        """One line for evidence: what happened to this command."""
        cmd = " ".join(self.argv[:3]) + (" …" if len(self.argv) > 3 else "")
        if self.status == "ok":
            tail = self.stderr.strip().splitlines()[-1:] or [""]
            return f"`{cmd}` exited {self.returncode}" + (f": {tail[0]}" if tail[0] else "")
        if self.status == "timeout":
            return f"`{cmd}` did not finish within {self.seconds:.1f} s and was killed"
        if self.status == "overflow":
            return f"`{cmd}` {self.error} and was stopped"
        if self.status == "not-found":
            return f"`{self.argv[0]}` not found"
        return f"`{cmd}` could not start: {self.error}"


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What ``stat`` and ``access`` say about a path, for the current user."""

    is_char_device: bool
    is_dir: bool
    mode: int
    readable: bool
    writable: bool
    uid: int = -1
    gid: int = -1


@dataclass(frozen=True, slots=True)
class Identity:
    """Who and where envdoctor runs."""

    user: str
    uid: int
    machine: str
    kernel_release: str
    python: str


class Host(Protocol):
    """Narrow capabilities over one machine (live, faked, or a root directory)."""

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        """Contents of a file (at most ``limit`` bytes, decoded leniently)."""
        ...

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        """Raw contents of a binary file (at most ``limit`` bytes), e.g. the loader's cache."""
        ...

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        """Sorted entry names of a directory."""
        ...

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        """Every record in the kernel's log buffer (``/dev/kmsg``, one ``PRIO,SEQ,USEC,FLAGS;
        text`` record per line), read without ever waiting for new ones."""
        ...

    def stat(self, path: str) -> Probed[FileInfo]:
        """Type, mode and the current user's access to a path."""
        ...

    def realpath(self, path: str) -> str:
        """The path with symlinks resolved (the path itself when it cannot be resolved)."""
        ...

    def env(self) -> Mapping[str, str]:
        """The environment envdoctor runs in."""
        ...

    def which(self, program: str) -> str | None:
        """The program found on PATH, like ``shutil.which``."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run argv (never through a shell), killed with its process group at ``timeout``."""
        ...

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        """Initialise NVML; raises ``NvmlError`` with a precise kind when it cannot.

        ``timeout`` bounds each call, ``init_timeout`` nvmlInit (larger: without persistence
        mode it takes seconds); both shrink to ``remaining()`` (the deadline's) as it runs out."""
        ...

    def open_device(self, path: str, *, timeout: float) -> str:
        """Open a device node read-write (non-blocking) and close it at once: "ok", the errno's
        name ("EPERM" where a device cgroup refuses what the mode bits allow), or "timeout"."""
        ...

    def identity(self) -> Identity:
        """The current user, machine and interpreter."""
        ...


class Deadline:
    """A global time budget shared by all probes (``--timeout``)."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds
        self.seconds = seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def extend(self, seconds: float) -> None:
        """Push the end back by ``seconds``: time the caller spent on its own work, not on the
        machine (check's loading while the torch child starts)."""
        self._end += seconds

    def cap(self, seconds: float) -> float:
        """``seconds``, or less when the budget has less left (never below 50 ms)."""
        return max(0.05, min(seconds, self.remaining()))

    def expired(self) -> bool:
        return self.remaining() <= 0.0
