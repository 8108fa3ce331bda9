"""The process seam: line reading with timeouts, whole-group kills, cleanup guarantees."""

from __future__ import annotations

import os
import signal

import pytest

from envdoctor.platform.processes import (
    ChildProcess,
    ChildSet,
    Eof,
    Line,
    SpawnError,
    Terminated,
    Timeout,
    descendants,
    describe_exit,
    process_state,
    signal_name,
    sigterm_raises,
    spawn,
    survivors,
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


def with_a_sleeper(prelude: str, **popen: bool) -> tuple[ChildProcess, int]:
    """A Python child that runs ``prelude``, starts ``sleep 60`` and prints the sleeper's PID."""
    source = (
        f"import ctypes, subprocess, sys, time\n{prelude}"
        f"p = subprocess.Popen(['sleep', '60'], **{popen!r})\n"
        "print(p.pid, flush=True)\ntime.sleep(60)\n"
    )
    child = spawn([PYTHON, "-c", source])
    line = child.read(10)
    assert isinstance(line, Line)
    return child, int(line.text)


def test_kill_reaches_a_descendant_that_left_the_group() -> None:
    child, escaped = with_a_sleeper("", start_new_session=True)
    assert escaped in descendants(child.pid)
    child.kill()
    assert wait_dead(escaped)
    assert child.survivors(grace=0.5) == ()


def test_survivors_are_re_checked_and_kept_with_their_state() -> None:
    states = {101: "D", 102: None, 103: "S"}
    assert survivors((101, 102, 103), grace=0.1, state_of=states.get) == ((101, "D"), (103, "S"))
    assert survivors((102,), grace=5.0, state_of=states.get) == ()  # returns at once


def test_process_state_of_a_live_a_dead_and_a_missing_process() -> None:
    child = spawn([PYTHON, "-c", "import time; time.sleep(60)"])
    assert process_state(child.pid) in {"R", "S"}
    child.kill()
    assert process_state(child.pid) is None
    assert process_state(2**22 + 12345) is None
    assert child.survivors(grace=0.2) == ()


def test_a_command_name_with_parentheses_keeps_its_state_and_children() -> None:
    # PR_SET_NAME: a name that reads like the end of stat's name field and more fields
    child, sleeper = with_a_sleeper("ctypes.CDLL(None).prctl(15, b') Z 1 1 (', 0, 0, 0)\n")
    assert process_state(child.pid) in {"R", "S"}  # not "Z" from the name
    assert sleeper in descendants(child.pid)
    child.kill()
    assert wait_dead(sleeper)
