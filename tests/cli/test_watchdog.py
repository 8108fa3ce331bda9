"""The watchdog: the command's output or the "unknown" verdict, never both and never half."""

from __future__ import annotations

import threading
import time

from envdoctor.cli.watchdog import EXIT_UNKNOWN, Watchdog


def test_a_claim_in_time_disarms_it() -> None:
    spoke: list[str] = []
    exits: list[int] = []
    watchdog = Watchdog(0.2, lambda: spoke.append("unknown"), hard_exit=exits.append).start()
    assert watchdog.claim()
    time.sleep(0.4)
    assert spoke == [] and exits == [] and not watchdog.fired


def test_a_late_claim_waits_until_the_unknown_output_is_written() -> None:
    """The command finishing just after the budget must not exit while the watchdog writes."""
    writing = threading.Event()
    events: list[str] = []
    exits: list[int] = []

    def slow_unknown_output() -> None:  # e.g. the metrics file, fsynced on a slow disk
        writing.set()
        time.sleep(0.3)
        events.append("unknown written")

    watchdog = Watchdog(0.05, slow_unknown_output, hard_exit=exits.append).start()
    assert writing.wait(5)
    assert not watchdog.claim()
    events.append("claim returned")
    assert events == ["unknown written", "claim returned"]
    assert exits == [EXIT_UNKNOWN]
