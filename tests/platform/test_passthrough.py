"""envdoctor run's wait for the command (envdoctor/platform/passthrough.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from envdoctor.platform import passthrough


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_the_wait_returns_the_exit_status_with_or_without_a_pidfd(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where pidfd_open is refused (Linux < 5.3, a seccomp profile), the wait still ends when
    the command does, within a poll interval; where it works, the wait used it."""
    opened: list[int] = []
    real = passthrough._pidfd
    if pidfd:
        if not hasattr(os, "pidfd_open"):
            pytest.skip("this Python has no os.pidfd_open")

        def spy(pid: int) -> int:
            opened.append(real(pid))
            return opened[-1]

        monkeypatch.setattr(passthrough, "_pidfd", spy)
    else:
        monkeypatch.setattr(passthrough, "_pidfd", lambda pid: -1)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(7)"]
    )
    start = time.monotonic()
    assert passthrough._wait(proc) == 7
    assert time.monotonic() - start < 0.3 + 2 * passthrough.WAIT_POLL_MS / 1000 + 1.0
    if pidfd:
        if opened == [-1]:
            pytest.skip("pidfd_open is refused here (an old kernel or a seccomp profile)")
        assert len(opened) == 1 and opened[0] >= 0  # the wait used the child's pidfd


def test_a_signal_to_another_thread_runs_its_handler_during_the_wait() -> None:
    """Given to a thread other than the main one, a signal's handler runs while the child is
    still alive (it ran only once waitpid returned, when the child had exited)."""
    seen: list[float] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(time.monotonic()))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        other = threading.Thread(target=time.sleep, args=(0.5,))
        other.start()
        threading.Timer(0.2, signal.pthread_kill, (other.ident, signal.SIGUSR1)).start()
        assert passthrough._wait(proc) == 0
        ended = time.monotonic()
        other.join()
    finally:
        signal.signal(signal.SIGUSR1, previous)
        proc.kill()
        proc.wait()
    assert seen and seen[0] < ended - 0.5, (seen, ended)


def test_out_of_descriptors_the_wait_still_runs_a_handler_while_the_child_lives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no descriptor left for the wakeup pipe (EMFILE), the wait fell back to a plain
    ``proc.wait()``: a signal given to another thread waited until the child exited by itself
    (a rare 30 s timeout of `envdoctor run`'s signal test). Now it sleeps in bounded steps."""

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    seen: list[float] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(time.monotonic()))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    try:
        other = threading.Thread(target=time.sleep, args=(0.5,))
        other.start()
        threading.Timer(0.2, signal.pthread_kill, (other.ident, signal.SIGUSR1)).start()
        monkeypatch.setattr(os, "pipe", no_pipe)
        assert passthrough._wait(proc) == 0
        monkeypatch.undo()
        ended = time.monotonic()
        other.join()
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGUSR1, previous)
        proc.kill()
        proc.wait()
    assert seen and seen[0] < ended - 1.0, (seen, ended)
