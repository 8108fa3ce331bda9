"""Issue 13, item 3: a signal reaches only the process the plan saw.

A PID is a number the kernel hands out again. Before the fix the script checked only that the
PID still held the GPU with the same argv, so another process started under that PID with the
same command line (the next run of the same job, another user's copy of it) was signalled.
Now, immediately before SIGTERM and again before SIGKILL, the script compares the PID's start
time (/proc/PID/stat field 22), real uid and argv with the plan's.

The stat line is hostile input: its second field is the command name, which any process can
set (prctl PR_SET_NAME) to spaces, parentheses and digits. Tests here use real processes with
such names, read through the real /proc, and signalled by the script with the real kill.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.platform.system import SystemHost
from envdoctor.probes.holders import start_time_of
from envdoctor.remedy import Plan, Step, render_script
from envdoctor.remedy.model import Terminate, Verify
from tests.remedy.cases import PYTHON_ARGV, PYTHON_PID
from tests.remedy.sandbox import START_TIME, Sandbox, stat_line

HOSTILE_COMMS = ("x) 1 2 (y", "a b) R 9 9", ")", "((", "3 4 5 6 7)", "new\nline)")


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    """A fake machine the generated scripts run in (tests/remedy/sandbox.py)."""
    return Sandbox(tmp_path / "sandbox")


@pytest.mark.parametrize("comm", HOSTILE_COMMS)
def test_start_time_is_read_past_any_command_name(comm: str) -> None:
    assert start_time_of(stat_line(123, comm, 987_654)) == 987_654


@pytest.mark.parametrize("text", ["", "123 (python", "123 python) S 1", "123 (x) S 1 2 3\n"])
def test_a_stat_line_that_is_not_one_gives_no_start_time(text: str) -> None:
    assert start_time_of(text) == -1


# --- real processes -------------------------------------------------------------------------

CHILD = """
import ctypes, sys, time
sys.stdin.readline()
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME
print("renamed", flush=True)
time.sleep(120)
"""


@pytest.fixture
def renamed() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A real process named "x) 1 2 (y", and its start time read before it renamed itself."""
    yield from _spawn([])


def _spawn(prefix: list[str]) -> Iterator[tuple[subprocess.Popen[str], int]]:
    with subprocess.Popen(
        [*prefix, sys.executable, "-c", CHILD, HOSTILE_COMMS[0]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            before = Path(f"/proc/{proc.pid}/stat").read_text()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "renamed\n"
            yield proc, start_time_of(before)
        finally:
            proc.kill()


def test_the_real_stat_of_a_hostile_name_parses(
    renamed: tuple[subprocess.Popen[str], int],
) -> None:
    proc, start = renamed
    text = SystemHost().read_text(f"/proc/{proc.pid}/stat")
    assert f"({HOSTILE_COMMS[0]})" in getattr(text, "value", "")
    assert start > 0 and start_time_of(getattr(text, "value", "")) == start


def _mirror(box: Sandbox, pid: int) -> None:
    """The sandbox's /proc/PID: the real process's stat, status and cmdline, plus an fd on a
    fake /dev/nvidia0 (the script signals only GPU holders)."""
    proc = box.root / "proc" / str(pid)
    (proc / "fd").mkdir(parents=True)
    (proc / "fd" / "3").symlink_to("/dev/nvidia0")
    for name in ("stat", "status", "cmdline"):
        (proc / name).symlink_to(f"/proc/{pid}/{name}")
    # The kill shim sends the real signal; a process it ends lets go of the "GPU".
    (box.base / "behaviour" / "kill").write_text(
        'kill -s "$2" "$3" || rc=$?\nif [ "$rc" = 0 ]; then rm -rf "$ROOT/proc/$3/fd"; fi\n'
    )


def _terminate(box: Sandbox, proc: subprocess.Popen[str], uid: int, start: int) -> Plan:
    argv = tuple(Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")[:-1])
    step = Step("Terminate", Terminate(proc.pid, argv, uid, start))
    return Plan(steps=(step, Step("Verify", Verify(box.verify))))


def test_the_same_process_is_signalled(
    box: Sandbox, renamed: tuple[subprocess.Popen[str], int]
) -> None:
    proc, start = renamed
    _mirror(box, proc.pid)
    run = box.run(render_script(_terminate(box, proc, os.getuid(), start)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert ("kill", "-s", "TERM", str(proc.pid)) in run.calls
    assert f"PID {proc.pid} released the GPU after SIGTERM" in run.stdout


@pytest.mark.parametrize(
    ("uid_delta", "start_delta", "why"),
    [
        (0, -1, "it was started at another time (the PID was reused)"),
        (0, +1, "it was started at another time (the PID was reused)"),
        (1, 0, "it now runs as uid"),
    ],
)
def test_another_process_under_the_same_pid_is_not_signalled(
    box: Sandbox,
    renamed: tuple[subprocess.Popen[str], int],
    uid_delta: int,
    start_delta: int,
    why: str,
) -> None:
    proc, start = renamed
    _mirror(box, proc.pid)
    plan = _terminate(box, proc, os.getuid() + uid_delta, start + start_delta)
    run = box.run(render_script(plan), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert not any(c[0] == "kill" for c in run.calls)
    assert f"PID {proc.pid} is not the process this plan saw: {why}" in run.stderr
    assert proc.poll() is None  # still running


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv")
def test_root_signals_another_users_process_only_as_planned(box: Sandbox) -> None:
    """As root (CI runs as root): a plan for uid 0 does not kill nobody's process; a plan for
    nobody does."""
    assert SETPRIV is not None
    drop = [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"]
    for planned_uid, signalled in ((0, False), (65534, True)):
        sandbox = Sandbox(box.base.parent / f"as-{planned_uid}")
        for proc, start in _spawn(drop):
            assert (Path(f"/proc/{proc.pid}/status").read_text().split("Uid:")[1].split()[0]) == (
                "65534"
            )
            _mirror(sandbox, proc.pid)
            run = sandbox.run(
                render_script(_terminate(sandbox, proc, planned_uid, start)), "--apply", "--yes"
            )
            assert run.returncode == 0, run.stderr
            if signalled:
                assert proc.wait(timeout=30) == -signal.SIGTERM
            else:
                assert proc.poll() is None
                assert "it now runs as uid 65534, not 0" in run.stderr


# --- a PID reused while the script waits between SIGTERM and SIGKILL ----------------------------


def test_a_pid_reused_during_the_wait_gets_no_sigkill(box: Sandbox) -> None:
    """SIGTERM ends the process; before the wait is over a new one (same argv, still holding
    the GPU) has that PID: its start time differs, so it is not sent SIGKILL."""
    box.process(PYTHON_PID, PYTHON_ARGV, uid=1000)
    (box.base / "behaviour" / "kill").write_text(
        'if [ "$2" = TERM ]; then\n'
        '    printf "%s" "$(cat "$SANDBOX/reborn")" >"$ROOT/proc/$3/stat"\n'
        "fi\n"
    )
    (box.base / "reborn").write_text(stat_line(PYTHON_PID, "python", START_TIME + 500))
    plan = Plan(
        steps=(
            Step("Terminate", Terminate(PYTHON_PID, PYTHON_ARGV, 1000, START_TIME)),
            Step("Verify", Verify(box.verify)),
        )
    )
    run = box.run(render_script(plan), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    kills = [c for c in run.calls if c[0] == "kill"]
    assert kills == [("kill", "-s", "TERM", str(PYTHON_PID))]
    assert f"PID {PYTHON_PID} is not the process this plan saw: it was started at another" in (
        run.stderr
    )
    assert "not sent SIGKILL" in run.stderr


def test_the_dry_run_says_what_is_checked(box: Sandbox) -> None:
    plan = Plan(steps=(Step("Terminate", Terminate(PYTHON_PID, PYTHON_ARGV, 1000, START_TIME)),))
    run = box.run(render_script(plan))
    assert run.calls == []
    assert (
        f"each only while PID {PYTHON_PID} is the process seen: uid 1000, start time "
        f"{START_TIME}, the same command line" in run.stdout
    )
