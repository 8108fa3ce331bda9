"""The real ``envdoctor`` in a real terminal (a pseudo-terminal), and the same command piped:
colour and progress appear in the terminal only."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

COLOUR = "\x1b["


def _environ(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")
    }
    env.update({"TERM": "xterm-256color", **extra})
    return env


def in_terminal(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``envdoctor ARGS`` with stdout and stderr on a pseudo-terminal: its exit code and what
    the terminal received."""
    main, child = os.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "envdoctor", *args],
            stdin=subprocess.DEVNULL,
            stdout=child,
            stderr=child,
            env=env or _environ(),
        )
    finally:
        os.close(child)
    received = bytearray()
    try:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError as exc:  # EIO: the last writer closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            received += data
    finally:
        os.close(main)
    return process.wait(60), received.decode("utf-8", errors="replace")


def piped(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env or _environ(),
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_check_in_a_terminal_is_coloured_and_piped_is_not() -> None:
    code, shown = in_terminal("check")
    result = piped("check")
    assert code == result.returncode
    assert COLOUR in shown
    assert "\x1b[1m" in shown  # a section title in bold, whatever this machine's health
    assert "\x1b" not in result.stdout and "\x1b" not in result.stderr
    assert result.stdout.startswith("envdoctor ")


def test_no_color_and_a_dumb_terminal_turn_it_off() -> None:
    assert COLOUR not in in_terminal("check", env=_environ(NO_COLOR="1"))[1]
    assert COLOUR not in in_terminal("check", env=_environ(TERM="dumb"))[1]


def _slow_log(path: Path, seconds: float) -> threading.Thread:
    """A FIFO written over ``seconds``: long enough for the first progress line."""
    os.mkfifo(path)

    def write() -> None:
        with path.open("wb") as out:
            end = time.monotonic() + seconds
            while time.monotonic() < end:  # about 4 MiB a second: explain reads 1 MiB at a time
                out.write(b"epoch 1 loss 0.3\n" * 12_000)
                out.flush()
                time.sleep(0.05)
            out.write(b"RuntimeError: CUDA error: out of memory\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_explain_shows_progress_in_a_terminal_only(tmp_path: Path, terminal: bool) -> None:
    log = tmp_path / "train.log"
    writer = _slow_log(log, 1.8)
    if terminal:
        code, shown = in_terminal("explain", str(log))
        report = shown
    else:
        result = piped("explain", str(log))
        code, shown, report = result.returncode, result.stderr, result.stdout
    writer.join(10)
    assert code == 1 and "cuda.out-of-memory" in report
    if terminal:
        # "read 3.0 MiB of /tmp/…/train.log", cut at the terminal's 100 columns
        assert re.search(r"\renvdoctor: read [\d.]+ (bytes|KiB|MiB) of /", shown), shown[:300]
        # cleared before the report: the report (its conclusion first, the mark in colour)
        # starts on a clean line
        answer = shown.index("The GPU ran out of memory (line")
        assert re.search(r"\r(?:\x1b\[[\d;]*m)?✗(?:\x1b\[0m)? $", shown[:answer]), shown[:answer]
    else:
        assert shown == "" and "\r" not in report
