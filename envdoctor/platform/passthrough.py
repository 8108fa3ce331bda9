"""Run a user's command with its output passed through (``envdoctor run``).

Unlike ``Host.run`` (bounded probes with a timeout and captured output), this runs a training
job for as long as it takes: stdin is inherited, stdout and stderr are read as they come and
handed to a callback chunk by chunk, unchanged. The caller decides what to do with them
(write them on, keep a tail, scan them).

Signals: the child runs in envdoctor's own process group, so it keeps the terminal (it can
read stdin, Ctrl-C reaches it directly). A signal sent to envdoctor alone (``kill PID``,
``docker stop`` on envdoctor as PID 1, a batch system's SIGTERM or SIGUSR1 before the time
limit) is forwarded to the child, to its PID only (the group is envdoctor's own too), and
envdoctor goes on passing its output through until it exits; the exit code is then the
child's, as a shell reports it. SIGINT and SIGQUIT typed in the terminal already reached the
child: they are not forwarded a second time (a second Ctrl-C kills the child), unless
envdoctor is not in the terminal's foreground process group, or the child left that group,
so that whoever sent them meant envdoctor alone.

A second signal: a second SIGINT typed in the terminal kills the command (SIGKILL), as the
first one already reached it directly; any other signal, and a second SIGINT that was not typed
in the terminal, is forwarded again, so the command decides (a second SIGTERM to a job that
traps the first one is passed on too). Once the command has exited, envdoctor's own handlers
are back: a signal during the short drain below acts on envdoctor itself.

The end: output is read until the command has exited and both pipes are closed, but a
background process it started (``sleep 15 &``, a daemon) inherits the pipes and may hold them
open for as long as it runs. So once the command has exited, envdoctor reads for at most
``DRAIN_SECONDS`` more, then stops reading: what the command itself wrote is in the pipes
already and is read at once; an orphan that writes later loses its output (and gets SIGPIPE on
its next write, as in a shell pipeline whose reader has ended).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO, Any

READ_SIZE = 1 << 16
DRAIN_SECONDS = 0.5

# ("stdout" | "stderr", data) -> True once the reader of what the command writes there is gone
OnOutput = Callable[[str, bytes], "bool | None"]


@dataclass(frozen=True, slots=True)
class PassthroughResult:
    """How the command ended. ``returncode`` follows the shell: 128+N when killed by signal N,
    127 when the program does not exist, 126 when it cannot be executed."""

    returncode: int
    signal: int | None = None
    error: str = ""

    @property
    def started(self) -> bool:
        return not self.error


def run_passthrough(
    argv: Sequence[str],
    on_output: OnOutput,
    *,
    env_overrides: Mapping[str, str] | None = None,
    env_defaults: Mapping[str, str] | None = None,
) -> PassthroughResult:
    """Run ``argv``; every chunk of its stdout/stderr goes to ``on_output`` (one at a time)."""
    env = dict(os.environ)
    for key, value in (env_defaults or {}).items():
        env.setdefault(key, value)
    env.update(env_overrides or {})
    # Inherited as ignored (a parent that set SIGCHLD to SIG_IGN), the kernel reaps the child
    # itself: waitpid finds no status, and a command that exited 7 looked like one that exited 0
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    forwarder = _Forwarder()
    forwarder.install()  # before the child exists: a signal meant for it is kept, not lost
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
    except FileNotFoundError:
        forwarder.restore()
        return PassthroughResult(127, error=f"{argv[0]}: command not found")
    except PermissionError:
        forwarder.restore()
        return PassthroughResult(126, error=f"{argv[0]}: permission denied")
    except OSError as exc:
        forwarder.restore()
        return PassthroughResult(126, error=f"{argv[0]}: {exc.strerror or exc}")
    except BaseException:
        forwarder.restore()
        raise
    try:
        forwarder.attach(proc)
        returncode = _pump_and_wait(proc, on_output, forwarder.restore)
    finally:
        forwarder.restore()
    if returncode < 0:
        return PassthroughResult(128 - returncode, signal=-returncode)
    return PassthroughResult(returncode)


def _pump_and_wait(
    proc: subprocess.Popen[bytes], on_output: OnOutput, exited: Callable[[], None]
) -> int:
    """Pass the output on until the child has exited and closed both pipes, or exited and
    ``DRAIN_SECONDS`` have passed; its status. ``exited`` is called as soon as the child is
    gone, before the drain: from then on a signal is envdoctor's own again."""
    lock = threading.Lock()
    failures: list[BaseException] = []
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover (PIPE always gives both)
        raise RuntimeError("the child's output pipes are missing")
    stop_read, stop_write = os.pipe()  # closing stop_write tells both pumps to stop
    piped: list[bool] = []

    def reader_gone() -> None:
        """``on_output`` said its stdout's reader is gone (`envdoctor run -- yes | head -1`):
        the command gets SIGPIPE, once, as it would writing into the closed pipe itself."""
        if not piped and proc.returncode is None:
            piped.append(True)
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGPIPE)

    pumps = [
        threading.Thread(
            target=_pump,
            args=(proc.stdout, "stdout", on_output, lock, failures, stop_read, reader_gone),
            daemon=True,
        ),
        threading.Thread(
            target=_pump,
            args=(proc.stderr, "stderr", on_output, lock, failures, stop_read, None),
            daemon=True,
        ),
    ]
    for pump in pumps:
        pump.start()
    interrupts = 0
    while True:
        try:
            returncode = _wait(proc)
            break
        except KeyboardInterrupt:
            # only off the main thread, where no forwarder is installed: the child got the
            # same SIGINT from the terminal; wait for it
            interrupts += 1
            if interrupts > 1:
                proc.kill()
    exited()
    deadline = time.monotonic() + DRAIN_SECONDS
    for pump in pumps:
        pump.join(max(0.0, deadline - time.monotonic()))
    os.close(stop_write)  # pumps still reading (a grandchild holds the pipe) stop now
    for pump in pumps:
        pump.join()
    os.close(stop_read)
    if failures:
        raise failures[0]
    return returncode


WAIT_POLL_MS = 200
"""The longest the wait sleeps before it looks again whether the child has exited and runs the
handlers of signals that came meanwhile (a pidfd and the wakeup fd end it sooner)."""


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """``proc.wait()`` that a signal wakes whichever thread the kernel gave it to.

    Python runs signal handlers in the main thread only. A signal the kernel delivers to a pump
    thread does not interrupt the main thread's ``waitpid``: the forwarder would hold it until
    the child exited on its own (a ``docker stop`` waited out its grace period). So the main
    thread waits in ``poll`` on Python's wakeup fd, which every signal writes to, and on a pidfd
    of the child. Every wait is bounded too (``WAIT_POLL_MS``), so a handler runs within that
    time whatever was missed, and also where no descriptor is left for the pipe (EMFILE)."""
    if threading.current_thread() is not threading.main_thread():
        return proc.wait()
    try:
        wake_read, wake_write = os.pipe()
    except OSError:  # out of descriptors (EMFILE): a plain proc.wait() would hold a handler
        while (code := proc.poll()) is None:  # until the child exits; sleeping does not
            time.sleep(WAIT_POLL_MS / 1000)
        return code
    pidfd = -1
    try:
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        previous = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        try:
            poller = select.poll()
            poller.register(wake_read, select.POLLIN)
            pidfd = _pidfd(proc.pid)
            if pidfd >= 0:
                poller.register(pidfd, select.POLLIN)
            while (code := proc.poll()) is None:
                poller.poll(WAIT_POLL_MS)
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)  # the handlers run once this frame goes on
            return code
        finally:
            signal.set_wakeup_fd(previous)
    finally:
        for fd in (wake_read, wake_write, pidfd):
            if fd >= 0:
                os.close(fd)


def _pidfd(pid: int) -> int:
    """A pidfd of ``pid`` (readable once it exits), or -1: Linux before 5.3, or a seccomp
    profile that refuses pidfd_open."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return -1
    try:
        fd: int = opener(pid)
    except OSError:
        return -1
    return fd


FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
_KEYBOARD = frozenset(getattr(signal, n) for n in ("SIGINT", "SIGQUIT") if hasattr(signal, n))

_Handler = Callable[[int, FrameType | None], Any] | int | None


class _Forwarder:
    """Handlers that pass the signals envdoctor receives on to the child while it runs.

    Python runs them in the main thread, between bytecodes (``_wait`` goes on after them), so
    they may do ordinary work. Off the main thread handlers cannot be set: nothing
    is forwarded there, as before."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self._previous: dict[int, _Handler] = {}
        self._interrupts = 0

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for number in FORWARDED:
            # An ignored signal stays ignored (nohup, `cmd &` in a script): the child inherits
            # that, whereas a handled one is reset to its default action by exec.
            if signal.getsignal(number) != signal.SIG_IGN:
                self._previous[number] = signal.signal(number, self._handle)

    def attach(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        pending, self._pending = self._pending, []
        for number in pending:
            self._forward(number)

    def restore(self) -> None:
        """Back to the handlers envdoctor had (as soon as the child has been waited for)."""
        previous, self._previous = self._previous, {}
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        del frame
        if self._proc is None:
            self._pending.append(number)
        else:
            self._forward(number)

    def _forward(self, number: int) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        if number in _KEYBOARD and _typed_in_terminal(proc.pid):
            if number == signal.SIGINT:
                self._interrupts += 1
                if self._interrupts > 1:
                    proc.kill()
            return
        # send_signal skips a child already waited for, so its PID is never someone else's
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(number)


def _typed_in_terminal(pid: int) -> bool:
    """Did a keyboard signal reach the child directly? It did when it was typed in the terminal
    whose foreground process group is envdoctor's, and the child is still in that group."""
    try:
        group = os.getpgrp()
        if os.getpgid(pid) != group:
            return False
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:  # no controlling terminal (a container, nohup, CI): nothing was typed
        return False
    try:
        return os.tcgetpgrp(tty) == group
    except OSError:
        return False
    finally:
        os.close(tty)


def _pump(
    stream: IO[bytes],
    name: str,
    on_output: OnOutput,
    lock: threading.Lock,
    failures: list[BaseException],
    stop: int,
    reader_gone: Callable[[], None] | None,
) -> None:
    """Read one pipe to its end, or until ``stop`` becomes readable (its writer closed). A
    failing callback must not stop the reading: the child would block on a full pipe. The first
    failure is kept and raised once the child has exited."""
    fd = stream.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(stop, select.POLLIN)
    while True:
        try:
            ready = {f for f, _ in poller.poll()}
            if stop in ready:
                break  # told to stop: an orphan that floods the pipe does not keep us here
            data = os.read(fd, READ_SIZE)
        except InterruptedError:  # pragma: no cover (poll is retried by Python since 3.5)
            continue
        except OSError:
            break
        if not data:
            break
        with lock:
            if failures:
                continue
            try:
                gone = on_output(name, data)
            except BaseException as exc:  # noqa: BLE001 (re-raised by run_passthrough)
                failures.append(exc)
                continue
        if gone is True and reader_gone is not None:
            reader_gone()
    stream.close()


def signal_name(number: int) -> str:
    """SIGKILL for 9 (or "signal 9" when unknown)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
