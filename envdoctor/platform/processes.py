"""Long-lived child processes with handles: spawn, read line by line with timeouts, kill.

``Host.run`` covers "run a command, wait, collect its output". The smoke tests need more: a
child that reports one line per step while it runs, a second child held alive while a third one
runs, and the certainty that none of them outlives envdoctor. This module is the only place
(with ``platform/system.py``) that touches ``subprocess``, ``os`` and ``signal`` for that.

Every child starts in its own session (``start_new_session``), so it is the leader of its own
process group: a timeout, Ctrl-C or the end of a ``ChildSet`` kills the whole group with
SIGKILL, grandchildren included, and a Ctrl-C typed in the terminal reaches envdoctor only.
Descendants that left the group (``setsid``) are found through ``/proc`` before the kill and
killed by PID. Afterwards every one of them is re-checked: a process still there after SIGKILL
(uninterruptible sleep, "D", inside a driver call) is reported by ``survivors()``, never
silently assumed gone.
Every child's stdin is a pipe that envdoctor holds open: a child can watch it and exit when it
reads end-of-file, which happens when envdoctor closes it or dies for any reason.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

STDERR_TAIL_LINES = 40
MAX_LINE_CHARS = 1 << 20
SURVIVOR_GRACE_S = 2.0
PROC = "/proc"


@dataclass(frozen=True, slots=True)
class Line:
    """One line the child wrote on stdout (without its newline)."""

    text: str


@dataclass(frozen=True, slots=True)
class Timeout:
    """Nothing arrived within the time asked for; the child may still be running."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Eof:
    """The child closed its stdout: it exited (or closed it on purpose)."""


Event = Line | Timeout | Eof


class SpawnError(Exception):
    """The child could not be started (no such interpreter, permission denied …)."""


class ChildProcess:
    """A running child: its stdout as a queue of lines, a bounded tail of its stderr."""

    def __init__(self, popen: subprocess.Popen[bytes], argv: Sequence[str]) -> None:
        self._popen = popen
        self.argv = tuple(argv)
        self.pid = popen.pid
        self.started = time.monotonic()
        self._lines: queue.Queue[Event] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._killed = False
        self._tree: tuple[int, ...] = ()
        self._threads = [
            threading.Thread(target=self._pump_stdout, name=f"child-{self.pid}-out", daemon=True),
            threading.Thread(target=self._pump_stderr, name=f"child-{self.pid}-err", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump_stdout(self) -> None:
        stream = self._popen.stdout
        assert stream is not None
        for raw in _lines_of(stream):
            self._lines.put(Line(raw))
        stream.close()
        self._lines.put(Eof())

    def _pump_stderr(self) -> None:
        stream = self._popen.stderr
        assert stream is not None
        for raw in _lines_of(stream):
            self._stderr.append(raw)
        stream.close()

    def read(self, timeout: float) -> Event:
        """The next stdout line, ``Eof`` once the child closed stdout, or ``Timeout``."""
        try:
            return self._lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return Timeout(timeout)

    def send(self, text: str) -> bool:
        """Write one line to the child's stdin; False when the child no longer reads it."""
        stdin = self._popen.stdin
        if stdin is None or stdin.closed:
            return False
        try:
            stdin.write(text.rstrip("\n").encode() + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def close_stdin(self) -> None:
        """Tell the child envdoctor is done with it (it reads end-of-file)."""
        stdin = self._popen.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):  # the child is already gone
                stdin.close()

    def poll(self) -> int | None:
        code = self._popen.poll()
        if code is not None:
            self.close_stdin()
        return code

    def wait(self, timeout: float) -> int | None:
        """The exit status (negative: the signal that ended it), or None if still running."""
        try:
            code = self._popen.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None
        self.close_stdin()
        return code

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def killed(self) -> bool:
        """True once envdoctor killed this child (rather than it ending by itself)."""
        return self._killed

    def kill(self) -> None:
        """SIGKILL the child's whole process group and every descendant that left it, then
        reap the child. Safe to call twice."""
        if self._popen.poll() is None:
            self._killed = True
            self._tree = descendants(self.pid)
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._popen.kill()
            for pid in self._tree:  # those in another group or session (setsid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self.close_stdin()
        with contextlib.suppress(subprocess.TimeoutExpired):  # uninterruptible sleep
            self._popen.wait(timeout=5.0)

    def survivors(self, grace: float = SURVIVOR_GRACE_S) -> tuple[tuple[int, str], ...]:
        """After ``kill``: the (PID, state letter) of the child and its descendants that are
        still there ``grace`` seconds later ("D": stuck in the kernel)."""
        if not self._killed:
            return ()
        return survivors((self.pid, *self._tree), grace=grace)

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        """The last lines the child wrote on stderr (waits briefly for the pump to drain)."""
        if self._popen.poll() is not None:
            self._threads[1].join(timeout=1.0)
        return "\n".join(list(self._stderr)[-lines:])

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
) -> ChildProcess:
    """Start ``argv`` (never through a shell) in a new session with piped stdin/stdout/stderr.

    ``env`` adjusts envdoctor's own environment for the child: a ``None`` value unsets the
    variable. Raises ``SpawnError`` when the program cannot be started.
    """
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            cwd="/",  # as Host.run: nothing from the caller's directory is imported or run
            start_new_session=True,
        )
    except FileNotFoundError:
        raise SpawnError(f"{argv[0]}: no such file") from None
    except PermissionError:
        raise SpawnError(f"{argv[0]}: permission denied") from None
    except OSError as exc:
        raise SpawnError(f"{argv[0]}: {exc.strerror or exc}") from None
    return ChildProcess(popen, argv)


class ChildSet:
    """Children that must not outlive a block: ``with ChildSet() as children: children.spawn(…)``.

    Leaving the block by any path — normal end, exception, Ctrl-C (``KeyboardInterrupt``) or
    SIGTERM (see ``sigterm_raises``) — kills every child still running, process groups included.
    """

    def __init__(self) -> None:
        self._children: list[ChildProcess] = []
        self._lock = threading.Lock()
        self._closed = False

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str | None] | None = None
    ) -> ChildProcess:
        child = spawn(argv, env=env)
        with self._lock:
            self._children.append(child)
            closed = self._closed
        if closed:  # the block is being left (Ctrl-C): this child must not outlive it
            child.kill()
        return child

    @property
    def children(self) -> tuple[ChildProcess, ...]:
        with self._lock:
            return tuple(self._children)

    def kill_all(self) -> None:
        with self._lock:
            self._closed = True
        for child in self.children:
            child.kill()

    def __enter__(self) -> ChildSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill_all()


class Terminated(BaseException):
    """SIGTERM arrived while ``sigterm_raises`` was active (like KeyboardInterrupt for SIGINT)."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` in the main thread so cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise Terminated(f"received {signal_name(signum)}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_name(number: int) -> str:
    """The signal's name ("SIGSEGV" for 11), or "signal 64" when it has none."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(returncode: int) -> str:
    """How a child ended: "was killed by SIGSEGV" for -11, "exited with status 3" for 3."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with status {returncode}"


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """/proc/PID/stat from field 3 (the state) on, or None when it cannot be read. Field 2, the
    command name in parentheses, may hold spaces and ")" itself: the fields follow the last ")"."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            return handle.read(4096).rpartition(b")")[2].split()
    except OSError:
        return None


def process_state(pid: int) -> str | None:
    """The state letter /proc gives (R, S, D, T …), or None once the process is gone (a zombie
    has released everything: it counts as gone)."""
    fields = _stat_fields(pid)
    state = fields[0].decode("ascii", "replace") if fields else ""
    return None if state in ("", "Z", "X") else state


def descendants(root: int) -> tuple[int, ...]:
    """Every process below ``root`` in the parent tree, read from /proc (best effort)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return ()
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields and len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo and len(found) < 10_000:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.append(child)
                todo.append(child)
    return tuple(found)


def survivors(
    pids: Sequence[int],
    *,
    grace: float = SURVIVOR_GRACE_S,
    state_of: Callable[[int], str | None] = process_state,
) -> tuple[tuple[int, str], ...]:
    """Those of ``pids`` still there after ``grace`` seconds, with their state letter."""
    end = time.monotonic() + grace
    while True:
        left = tuple((pid, state) for pid in pids if (state := state_of(pid)) is not None)
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.05)


def _lines_of(stream: IO[bytes]) -> Iterator[str]:
    try:
        for raw in iter(lambda: stream.readline(MAX_LINE_CHARS), b""):
            yield raw.decode("utf-8", errors="replace").rstrip("\r\n")
    except (OSError, ValueError):
        return
