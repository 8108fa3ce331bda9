"""Run a user's command with its output passed through (``envdoctor run``).

Unlike ``Host.run`` (bounded probes with a timeout and captured output), this runs a training
job for as long as it takes: stdin is inherited, stdout and stderr are read as they come and
handed to a callback chunk by chunk, unchanged. The caller decides what to do with them
(write them on, keep a tail, scan them). Ctrl-C reaches the child (same process group) and
envdoctor waits for it to finish; a second Ctrl-C kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from envdoctor.model.record import record

READ_SIZE = 1 << 16

OnOutput = Callable[[str, bytes], None]  # ("stdout" | "stderr", data)


@record
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
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
    except FileNotFoundError:
        return PassthroughResult(127, error=f"{argv[0]}: command not found")
    except PermissionError:
        return PassthroughResult(126, error=f"{argv[0]}: permission denied")
    except OSError as exc:
        return PassthroughResult(126, error=f"{argv[0]}: {exc.strerror or exc}")
    lock = threading.Lock()
    failures: list[BaseException] = []
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover (PIPE always gives both)
        raise RuntimeError("the child's output pipes are missing")
    pumps = [
        threading.Thread(
            target=_pump, args=(proc.stdout, "stdout", on_output, lock, failures), daemon=True
        ),
        threading.Thread(
            target=_pump, args=(proc.stderr, "stderr", on_output, lock, failures), daemon=True
        ),
    ]
    for pump in pumps:
        pump.start()
    interrupts = 0
    while True:
        try:
            returncode = proc.wait()
            break
        except KeyboardInterrupt:
            interrupts += 1  # the child got the same SIGINT from the terminal; wait for it
            if interrupts > 1:
                proc.kill()
    for pump in pumps:
        pump.join()
    if failures:
        raise failures[0]
    if returncode < 0:
        return PassthroughResult(128 - returncode, signal=-returncode)
    return PassthroughResult(returncode)


def _pump(
    stream: IO[bytes],
    name: str,
    on_output: OnOutput,
    lock: threading.Lock,
    failures: list[BaseException],
) -> None:
    """Read one pipe to its end. A failing callback must not stop the reading: the child would
    block on a full pipe. The first failure is kept and raised once the child has exited."""
    fd = stream.fileno()
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:
            break
        if not data:
            break
        with lock:
            if failures:
                continue
            try:
                on_output(name, data)
            except BaseException as exc:  # noqa: BLE001 (re-raised by run_passthrough)
                failures.append(exc)
    stream.close()


def signal_name(number: int) -> str:
    """SIGKILL for 9 (or "signal 9" when unknown)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
