"""A Background call: its result, or its exception, reaches the caller; nothing is lost."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.platform.background import Background


def test_the_result_of_the_call_reaches_the_caller() -> None:
    started = threading.Event()

    def work(a: int, *, b: int) -> int:
        started.set()
        return a * b

    call = Background(work, 6, b=7)
    assert started.wait(10)
    assert call.result() == 42
    assert call.result() == 42  # asking twice gives the same answer


def test_what_the_call_raised_is_raised_to_the_caller() -> None:
    def fail() -> None:
        raise EnvdoctorError("the tables are broken", where="x.yaml:3")

    call = Background(fail)
    call.join()  # waiting does not raise: result() does
    with pytest.raises(EnvdoctorError, match="the tables are broken"):
        call.result()


def test_the_interpreter_waits_for_a_call_still_running_at_exit(tmp_path: Path) -> None:
    """A probe's child process is waited for, never orphaned, when the main thread ends first."""
    marker = tmp_path / "finished"
    script = (
        "import pathlib, time\n"
        "from envdoctor.platform.background import Background\n"
        "def work():\n"
        "    time.sleep(0.3)\n"
        f"    pathlib.Path({str(marker)!r}).write_text('done')\n"
        "Background(work)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, check=False)
    assert done.returncode == 0 and marker.read_text() == "done"
