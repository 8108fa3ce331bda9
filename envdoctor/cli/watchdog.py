"""A hard time limit for a whole command: past it, say "unknown" and end the process.

Probes already bound each subprocess and NVML call, but a read of ``/proc`` or ``/dev`` can block
in the kernel, and a Kubernetes or node-problem-detector probe must answer within its budget.
The watchdog is a daemon thread: when the budget runs out before the command has claimed its
output, it writes the command's "unknown" verdict, flushes, and calls ``os._exit`` (no cleanup
can hang the exit). The exit code is 2, "could not determine".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from envdoctor import exitcodes
from envdoctor.cli.boundary import flush_std_streams
from envdoctor.errors import EnvdoctorError

EXIT_UNKNOWN = exitcodes.UNKNOWN
# The longest budget a command accepts. A day is far beyond any probe, smoke run or health
# check, and far below what ``threading.Timer``, ``Event.wait`` and ``subprocess`` can wait for
# (an infinite or 1e10 s wait overflows the platform's time_t in the watchdog's thread).
MAX_BUDGET_S = 86400.0


def check_budget(seconds: float, option: str = "--timeout") -> float:
    """``seconds`` when it is a time budget every timer can hold, else an ``EnvdoctorError``.

    Every command's ``--timeout`` goes through here: ``timeout <= 0`` alone lets NaN through
    (every comparison with it is false), which then reads as "hung within 0 s".
    """
    if not seconds > 0:  # also refuses nan
        raise EnvdoctorError(f"{option} must be a positive number of seconds")
    if seconds > MAX_BUDGET_S:  # also refuses inf
        raise EnvdoctorError(f"{option} must be at most {MAX_BUDGET_S:g} seconds (one day)")
    return seconds


class Watchdog:
    """``start()`` arms it; ``claim()`` disarms it, or reports that it already fired."""

    def __init__(
        self,
        seconds: float,
        on_expire: Callable[[], None],
        *,
        hard_exit: Callable[[int], object] = os._exit,
    ) -> None:
        self.seconds = check_budget(seconds)  # a bad budget must fail here, not in the timer
        self._on_expire = on_expire
        self._hard_exit = hard_exit
        self._lock = threading.Lock()
        self._claimed = False
        self.fired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.name = "envdoctor-watchdog"

    def start(self) -> Watchdog:
        self._timer.start()
        return self

    def claim(self) -> bool:
        """Called when the command is ready to print: True if it may (the watchdog is disarmed).

        False once the watchdog has fired, and only after it has finished writing its "unknown"
        output: a caller that went on to exit could otherwise cut that output short. In a real
        process the watchdog ends the process first, so this call never returns.
        """
        with self._lock:
            fired = self.fired
            if not fired:
                self._claimed = True
        if not fired:
            self._timer.cancel()
            return True
        if threading.current_thread() is not self._timer:
            self._timer.join()
        return False

    def _expire(self) -> None:
        with self._lock:
            if self._claimed:
                return
            self.fired = True
        try:
            self._on_expire()
        finally:
            flush_std_streams()  # a closed, broken or missing stream must not keep it alive
            self._hard_exit(EXIT_UNKNOWN)
