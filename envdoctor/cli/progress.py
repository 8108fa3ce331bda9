"""A progress line on stderr for work that takes a while: only on a terminal, only after a second.

``with Progress(describe):`` runs the work; when stderr is a terminal, a thread shows
``envdoctor: <describe()>`` on one line from the first second on, redrawn every half second, and
clears it before the block ends, so the report printed next starts on a clean line. Piped or
redirected, it does nothing at all (no thread either): a log file or a script sees only the
report. ``describe`` is called on that thread: it reads counters the work updates, never
changes them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from envdoctor.terminal import is_terminal, safe_line

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from types import TracebackType
    from typing import TextIO

DELAY = 1.0  # work done within a second shows no progress at all
INTERVAL = 0.5


class Progress:
    """One status line on stderr while a block runs (see the module's docstring)."""

    def __init__(
        self,
        describe: Callable[[], str],
        *,
        stream: TextIO | None = None,
        delay: float | None = None,
        interval: float | None = None,
    ) -> None:
        self._describe = describe
        self._stream = stream if stream is not None else sys.stderr
        self._delay = DELAY if delay is None else delay
        self._interval = INTERVAL if interval is None else interval
        self._shown = 0  # the width of what is on the line now
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self.enabled = is_terminal(self._stream)

    def __enter__(self) -> Progress:
        if self.enabled:
            import threading  # only on a terminal: a pipe starts no thread

            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, name="envdoctor-progress", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._thread is None or self._stop is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _run(self) -> None:
        assert self._stop is not None
        if self._stop.wait(self._delay):
            return
        while True:
            self._draw(self._describe())
            if self._stop.wait(self._interval):
                return

    def _draw(self, status: str) -> None:
        text = safe_line(f"envdoctor: {status}")[: _columns(self._stream) - 1]
        self._write("\r" + text + " " * max(0, self._shown - len(text)))
        self._shown = len(text)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # stderr went away: the work goes on without a line
            self.enabled = False


def _columns(stream: TextIO) -> int:
    """The terminal's width: a line longer than that would wrap, and ``\\r`` could not clear it."""
    import os

    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):  # not a real terminal (a test's stream)
        return 80
    return max(20, columns) if columns else 80  # 0: a terminal that does not say


def elapsed(started: float) -> str:
    """Seconds since ``started`` (``time.monotonic()``), as a progress line shows them."""
    import time

    return f"{time.monotonic() - started:.0f} s"


class SmokeSteps:
    """Which step each GPU's smoke child is in (``SmokeOptions.on_step``), as a progress line:
    ``smoke tests (12 s): GPU 0: cublas, GPU 1: conv; 2 of 4 done``."""

    def __init__(self) -> None:
        import time

        self._started = time.monotonic()
        self._now: dict[str, str] = {}

    def __call__(self, label: str, step: str) -> None:
        self._now[label] = step

    def describe(self) -> str:
        now = self._now.copy()
        running = ", ".join(f"{label}: {step}" for label, step in now.items() if step != "done")
        done = sum(1 for step in now.values() if step == "done")
        finished = f"{done} of {len(now)} done" if done else ""
        what = "; ".join(part for part in (running, finished) if part) or "starting"
        return f"smoke tests ({elapsed(self._started)}): {what}"
