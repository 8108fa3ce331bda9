"""The process seam: line reading with timeouts, whole-group kills, cleanup guarantees."""

from __future__ import annotations

import os
import signal

import pytest

from envdoctor.platform.processes import (
    ChildSet,
    Eof,
    Line,
    SpawnError,
    Terminated,
    Timeout,
    describe_exit,
    signal_name,
    sigterm_raises,
    spawn,
)
from tests.smoke.conftest import PYTHON, alive, wait_dead

ECHO = "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip(), flush=True)\n"
GRANDCHILD = (
    "import subprocess, time\n"
    "p = subprocess.Popen(['sleep', '60'])\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_lines_then_eof_and_the_exit_status() -> None:
    child = spawn([PYTHON, "-c", "import sys; print('a'); print('b'); sys.exit(3)"])
    assert child.read(10) == Line("a")
    assert child.read(10) == Line("b")
    assert isinstance(child.read(10), Eof)
    assert child.wait(10) == 3
    assert not child.killed


def test_send_and_close_stdin() -> None:
    child = spawn([PYTHON, "-c", ECHO])
    assert child.send("hello")
    assert child.read(10) == Line("got hello")
    child.close_stdin()
    assert isinstance(child.read(10), Eof)
    assert child.wait(10) == 0
    assert not child.send("too late")


def test_read_times_out_and_kill_takes_the_whole_group() -> None:
    child = spawn([PYTHON, "-c", GRANDCHILD])
    line = child.read(10)
    assert isinstance(line, Line)
    grandchild = int(line.text)
    assert isinstance(child.read(0.1), Timeout)
    child.kill()
    assert child.killed and child.returncode == -signal.SIGKILL
    assert wait_dead(grandchild)
    child.kill()  # twice is fine


def test_stderr_tail_and_environment() -> None:
    child = spawn(
        [
            PYTHON,
            "-c",
            "import os, sys; sys.stderr.write(os.environ.get('X', '-') + '\\n'); "
            "sys.stderr.write(str('HOME' in os.environ))",
        ],
        env={"X": "42", "HOME": None},
    )
    assert isinstance(child.read(10), Eof)
    child.wait(10)
    assert child.stderr_tail() == "42\nFalse"


def test_childset_kills_on_exception_and_after_close() -> None:
    with pytest.raises(KeyboardInterrupt), ChildSet() as children:
        child = children.spawn([PYTHON, "-c", "import time; time.sleep(60)"])
        raise KeyboardInterrupt
    assert wait_dead(child.pid)
    late = children.spawn([PYTHON, "-c", "import time; time.sleep(60)"])
    assert late.killed and not alive(late.pid)


def test_missing_program() -> None:
    with pytest.raises(SpawnError, match="no such file"):
        spawn(["/nonexistent/python3", "-c", "pass"])


def test_sigterm_raises_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated, match="SIGTERM"), sigterm_raises():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before


def test_exit_descriptions() -> None:
    assert describe_exit(-11) == "was killed by SIGSEGV"
    assert describe_exit(-6) == "was killed by SIGABRT"
    assert describe_exit(3) == "exited with status 3"
    assert signal_name(200) == "signal 200"
