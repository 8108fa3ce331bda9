"""`explain` on damaged input and `run` under a failing --save or a signal: what the user sees
is the exit code, one line on stderr, the command's own output, and never a traceback."""

from __future__ import annotations

import codecs
import gzip
import io
import json
import lzma
import os
import select
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from envdoctor.kb import load_default_kb, scan_bytes, scan_stream
from envdoctor.kb.matcher import Scanner
from envdoctor.kb.sources import LogStream
from tests.runner import invoke as cli_invoke
from tests.schemas import validate

ROOT = Path(__file__).resolve().parents[2]
ASSERT_LINE = "RuntimeError: CUDA error: device-side assert triggered"
TIMEOUT = 30.0


def _lines(first: int, last: int) -> bytes:
    return "".join(f"step {i} loss 0.{i % 97}\n" for i in range(first, last + 1)).encode()


def _explain(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = cli_invoke(["explain", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def _only_line(stderr: str) -> str:
    assert stderr.count("\n") == 1, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return stderr.strip()


# --- explain: damaged and misnamed compressed logs ----------------------------------------


def test_a_gzip_log_cut_in_half_is_explained_up_to_the_cut(tmp_path: Path) -> None:
    text = _lines(1, 20_000) + ASSERT_LINE.encode() + b"\n" + _lines(20_001, 100_000)
    whole = gzip.compress(text)
    cut = tmp_path / "train.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])

    code, stdout, stderr = _explain(str(cut), "--json")

    assert code == 1
    data = json.loads(stdout)
    validate(data)
    assert [c["id"] for c in data["causes"]] == ["cuda.device-assert"]
    assert data["causes"][0]["first_line"] == 20_001
    warning = _only_line(stderr)
    assert warning == (
        f"envdoctor: warning: {cut}: compressed data ends early (cut off, or still being "
        f"written); explained the first {data['lines']:,} lines"
    )
    assert 20_001 < data["lines"] < 100_001


def test_a_cut_log_where_nothing_is_found_is_not_called_healthy(tmp_path: Path) -> None:
    whole = gzip.compress(_lines(1, 100_000) + ASSERT_LINE.encode() + b"\n")
    cut = tmp_path / "train.log.gz"
    cut.write_bytes(whole[:20_000])

    code, stdout, stderr = _explain(str(cut))

    assert code == 2  # the part that would name the cause may be the part that is missing
    assert "no known signature" in stdout
    assert "note: read only up to line" in stdout
    assert "compressed data ends early" in _only_line(stderr)
    code, stdout, _ = _explain(str(cut), "--json")
    data = json.loads(stdout)
    validate(data)
    assert (code, data["exit_code"], data["status"], data["outcome"]) == (
        2,
        2,
        "unknown",
        "no-signature",
    )


def _gzip_with_a_bad_block(before: bytes, after: bytes) -> bytes:
    """A gzip file whose deflate stream is broken between ``before`` and ``after``: a block
    header of type 3, which does not exist (zlib: "invalid block type")."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    good = deflate.compress(before) + deflate.flush(zlib.Z_FULL_FLUSH)  # byte-aligned here
    return good + b"\x06" + deflate.compress(after) + deflate.flush()


def test_damage_in_the_middle_keeps_every_line_before_it(tmp_path: Path) -> None:
    before = _lines(1, 49_999) + ASSERT_LINE.encode() + b"\n"
    path = tmp_path / "train.log.gz"
    path.write_bytes(_gzip_with_a_bad_block(before, _lines(50_001, 100_000)))

    code, stdout, stderr = _explain(str(path), "--json")

    assert code == 1
    data = json.loads(stdout)
    assert data["lines"] == 50_000  # the error line, the very last one before the damage
    assert data["causes"][0]["first_line"] == 50_000
    assert _only_line(stderr) == (
        f"envdoctor: warning: {path}: compressed data is damaged (invalid block type); "
        "explained the first 50,000 lines"
    )


def test_flipped_bytes_in_the_middle_are_one_warning_not_a_crash(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(ASSERT_LINE.encode() + b"\n" + _lines(1, 100_000)))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path = tmp_path / "flipped.gz"
    path.write_bytes(bytes(data))

    code, stdout, stderr = _explain(str(path))

    assert code == 1
    assert "cuda.device-assert" in stdout
    assert "compressed data is damaged" in _only_line(stderr)


def test_a_wrong_crc_still_explains_the_whole_log(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(_lines(1, 1000) + ASSERT_LINE.encode() + b"\n"))
    data[-8:-4] = bytes(b ^ 0xFF for b in data[-8:-4])  # the CRC-32 in the trailer
    path = tmp_path / "crc.gz"
    path.write_bytes(bytes(data))

    code, stdout, stderr = _explain(str(path), "--json")

    assert code == 1
    assert json.loads(stdout)["lines"] == 1001
    assert "CRC does not match" in _only_line(stderr)


def test_a_plain_text_file_named_gz_is_read_as_text_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "notgz.log.gz"
    path.write_text(f"epoch 1\n{ASSERT_LINE}\n", encoding="utf-8")

    code, stdout, stderr = _explain(str(path))

    assert code == 1
    assert "cuda.device-assert" in stdout
    assert _only_line(stderr) == (
        f"envdoctor: warning: {path}: not gzip-compressed despite its name; read it as plain text"
    )


def test_an_xz_file_named_gz_is_a_one_line_error_with_the_command_to_use(tmp_path: Path) -> None:
    path = tmp_path / "train.log.gz"
    path.write_bytes(lzma.compress(ASSERT_LINE.encode()))

    code, stdout, stderr = _explain(str(path))

    assert code == 2
    assert stdout == ""
    line = _only_line(stderr)
    assert line.startswith(f"envdoctor: error: {path}: is xz-compressed")
    assert f"xz -dc {path} | envdoctor explain" in line


def test_concatenated_gzip_members_and_zero_padding_are_a_whole_log(tmp_path: Path) -> None:
    path = tmp_path / "rotated.gz"
    first = gzip.compress(_lines(1, 1000))
    second = gzip.compress(ASSERT_LINE.encode() + b"\n")
    path.write_bytes(first + second + b"\0" * 512)

    code, stdout, stderr = _explain(str(path), "--json")

    assert (code, stderr) == (1, "")
    data = json.loads(stdout)
    assert data["lines"] == 1001
    assert data["causes"][0]["first_line"] == 1001


def test_gzip_on_stdin_is_recognised_by_its_bytes() -> None:
    code, stdout, stderr = _explain("--json", stdin=gzip.compress(ASSERT_LINE.encode() + b"\n"))
    assert (code, stderr) == (1, "")
    assert json.loads(stdout)["causes"][0]["id"] == "cuda.device-assert"


def test_an_empty_gz_file_is_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "empty.log.gz"
    path.write_bytes(b"")
    assert _explain(str(path))[0::2] == (0, "")


def test_a_small_gzip_that_expands_hugely_is_read_in_bounded_pieces() -> None:
    bomb = gzip.compress(b"\n" * (64 << 20))  # 64 MiB from ~64 KiB
    stream = LogStream(io.BytesIO(bomb), "bomb.gz")
    sizes = []
    while piece := stream.read(1 << 20):
        sizes.append(len(piece))
    assert max(sizes) <= 1 << 20
    assert sum(sizes) == 64 << 20
    assert stream.damage == ""


# --- the undecodable flag -----------------------------------------------------------------


def test_undecodable_counts_every_line_not_only_the_matched_ones() -> None:
    log = b"epoch 1 caf\xe9\n" + ASSERT_LINE.encode() + b"\n"
    assert scan_bytes(log, load_default_kb()).undecodable


def test_valid_utf8_is_not_undecodable_even_split_between_pieces() -> None:
    text = ("épreuve ✓ � " + ASSERT_LINE + "\n").encode() * 3  # U+FFFD itself is valid text
    scanner = Scanner(load_default_kb())
    for i in range(len(text)):  # one byte at a time: every multi-byte character is split
        scanner.feed(text[i : i + 1])
    result = scanner.finish()
    assert not result.undecodable
    assert result.hits[0].count == 3


def test_a_log_cut_inside_a_character_is_undecodable() -> None:
    assert scan_bytes("ok\nlast é".encode()[:-1], load_default_kb()).undecodable


@pytest.mark.parametrize(
    ("units", "undecodable"),
    [("ok\n", False), ("ok \ud800 lone surrogate\n", True)],
)
def test_utf16_logs_report_their_own_undecodable_units(units: str, undecodable: bool) -> None:
    data = codecs.BOM_UTF16_LE + units.encode("utf-16-le", errors="surrogatepass")
    result = scan_stream(io.BytesIO(data), load_default_kb(), chunk_size=3)
    assert result.undecodable is undecodable


def test_the_report_says_so(tmp_path: Path) -> None:
    path = tmp_path / "latin1.log"
    path.write_bytes(b"Gr\xfc\xdfe\n" + ASSERT_LINE.encode() + b"\n")
    code, stdout, _ = _explain(str(path), "--json")
    assert code == 1
    assert json.loads(stdout)["undecodable"] is True
    assert "some bytes are not UTF-8" in _explain(str(path))[1]


# --- run --save on a full disk ------------------------------------------------------------

FULL = Path("/dev/full")  # every write fails with ENOSPC, as on a full disk
needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")


@needs_dev_full
@pytest.mark.parametrize("lines", [10, 100_000])  # fails at the last flush / mid-run
def test_a_save_file_that_cannot_be_written_does_not_stop_the_command(lines: int) -> None:
    code = f"for i in range({lines}): print(i)\nraise SystemExit(3)"
    result = cli_invoke(["run", "--save", str(FULL), "--", sys.executable, "-c", code])

    assert result.exit_code == 3
    assert result.stdout_bytes == "".join(f"{i}\n" for i in range(lines)).encode()
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"envdoctor: warning: {FULL}: cannot write (No space left on device); "
        "stopped saving the log, the command goes on"
    ]
    assert "internal error" not in result.stderr
    assert "full log:" not in result.stderr  # there is none to point at
    assert "exited with 3" in result.stderr


@needs_dev_full
def test_a_full_disk_as_a_real_process_keeps_stdout_and_the_exit_code() -> None:
    code = "for i in range(100000): print(i)\nraise SystemExit(0)"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "envdoctor",
            "run",
            "--save",
            str(FULL),
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0
    assert result.stdout.count(b"\n") == 100_000
    assert result.stderr.decode().count("\n") == 1
    assert b"No space left on device" in result.stderr


# --- run forwards the signals it receives -------------------------------------------------

TRAPPING = """
import os, signal, sys, time
name = sys.argv[1]
def on_signal(number, frame):
    print("got " + name, flush=True)
    sys.exit(3)
signal.signal(getattr(signal, "SIG" + name), on_signal)
print("ready", os.getpid(), flush=True)
time.sleep(60)
print("not interrupted", flush=True)
"""

SLEEPING = """
import os, time
print("ready", os.getpid(), flush=True)
time.sleep(60)
"""


def _read_until(proc: subprocess.Popen[bytes], marker: bytes) -> bytes:
    """stdout up to and including the line with ``marker``, or fail within TIMEOUT."""
    assert proc.stdout is not None
    seen = b""
    end = time.monotonic() + TIMEOUT
    while b"\n" not in seen.partition(marker)[2]:
        left = end - time.monotonic()
        assert left > 0, f"timed out waiting for {marker!r}: {seen!r}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"stdout closed before {marker!r}: {seen!r}"
            seen += chunk
    return seen


def _child_pid(output: bytes) -> int:
    return int(output.split(b"ready", 1)[1].split()[0])


# envdoctor run keeps a signal that it inherited as ignored ignored (nohup, `cmd &`), as a shell
# does: started from a suite run under nohup, the HUP case would test that instead. The child
# starts with every forwarded signal at its default, then runs `python -m envdoctor ARGS`.
DEFAULT_SIGNALS = (
    "import runpy, signal, sys\n"
    "for name in ('SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'):\n"
    "    signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


@contextmanager
def _envdoctor_run(*command: str) -> Iterator[subprocess.Popen[bytes]]:
    """envdoctor run in a session of its own (no controlling terminal, and a group that the
    cleanup can kill whole, the child included, whatever the test did)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", DEFAULT_SIGNALS, "-m", "envdoctor", "run", "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        cwd=ROOT,
    )
    try:
        yield proc
    finally:
        with suppress(ProcessLookupError):  # the group is empty when all went well
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("name", ["TERM", "INT", "HUP", "QUIT", "USR1", "USR2"])
def test_a_signal_sent_to_envdoctor_reaches_the_command(name: str) -> None:
    with _envdoctor_run(sys.executable, "-c", TRAPPING, name) as proc:
        _read_until(proc, b"ready")
        proc.send_signal(getattr(signal, "SIG" + name))
        stdout, stderr = proc.communicate(timeout=TIMEOUT)

    assert proc.returncode == 3, stderr.decode()
    assert f"got {name}\n".encode() in stdout
    assert b"not interrupted" not in stdout
    assert b"exited with 3" in stderr
    assert b"internal error" not in stderr and b"Traceback" not in stderr


# tgkill(2), to hand a signal to one thread of envdoctor as the kernel may (Python has no call)
TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


@pytest.mark.skipif(
    TGKILL is None, reason="tgkill's syscall number is known for x86_64 and aarch64"
)
def test_a_signal_the_kernel_hands_to_a_pump_thread_still_reaches_the_command() -> None:
    """The kernel delivers a signal sent to a process to any thread that does not block it.
    Given to one of envdoctor's output pumps, it used to wait until the command exited by
    itself: the main thread, blocked in waitpid, ran no handler (a rare timeout of the test
    above; `docker stop` would have waited out its grace period)."""
    import ctypes  # noqa: TID251 (tgkill, to signal one thread of another process: os has no call)

    libc = ctypes.CDLL(None, use_errno=True)
    with _envdoctor_run(sys.executable, "-c", TRAPPING, "USR1") as proc:
        _read_until(proc, b"ready")
        threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        assert threads, "envdoctor run pumps the output in threads of its own"
        assert libc.syscall(TGKILL, proc.pid, threads[0], signal.SIGUSR1) == 0
        stdout, stderr = proc.communicate(timeout=TIMEOUT)

    assert proc.returncode == 3, stderr.decode()
    assert b"got USR1\n" in stdout
    assert b"not interrupted" not in stdout


def test_docker_stop_ends_the_command_and_exits_143_as_a_shell_would() -> None:
    with _envdoctor_run(sys.executable, "-c", SLEEPING) as proc:
        child = _child_pid(_read_until(proc, b"ready"))
        try:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 128 + signal.SIGTERM
            assert b"killed by SIGTERM" in stderr
            assert _gone(child)  # not left running, orphaned
        finally:
            if not _gone(child):
                os.kill(child, signal.SIGKILL)


IGNORING_CHECK = """
import signal
print("SIGHUP ignored" if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else "SIGHUP handled")
"""


def _run_through(launcher: str, command: str) -> list[str]:
    """``envdoctor run -- python -c COMMAND``, started by a Python ``launcher`` that execs it."""
    return [
        sys.executable,
        "-c",
        launcher,
        "-m",
        "envdoctor",
        "run",
        "--",
        sys.executable,
        "-c",
        command,
    ]


def test_a_signal_ignored_by_whoever_started_envdoctor_stays_ignored_in_the_command() -> None:
    """`nohup envdoctor run -- …`: forwarding must not undo what nohup asked for."""
    launcher = (
        "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    result = subprocess.run(
        _run_through(launcher, IGNORING_CHECK),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        cwd=ROOT,
    )
    assert (result.returncode, result.stdout) == (0, b"SIGHUP ignored\n")


COUNTING = """
import signal, sys, time
count = 0
def on_int(number, frame):
    global count
    count += 1
signal.signal(signal.SIGINT, on_int)
print("ready 0", flush=True)
end = time.monotonic() + 30
while not count and time.monotonic() < end:
    time.sleep(0.01)
time.sleep(1.0)  # room for a second, forwarded copy to arrive
print(f"got INT x{count}", flush=True)
sys.exit(4)
"""

# Makes envdoctor a session leader whose controlling terminal is the pty on its stdin, so it is
# in that terminal's foreground group: Ctrl-C typed there goes to it and the child alike.
IN_TERMINAL = (
    "import os, sys; os.setsid(); os.close(os.open(os.ttyname(0), os.O_RDWR)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def test_ctrl_c_typed_in_the_terminal_reaches_the_command_once() -> None:
    try:
        master, slave = os.openpty()
    except OSError:
        pytest.skip("no pseudo-terminals here")
    proc = subprocess.Popen(
        _run_through(IN_TERMINAL, COUNTING),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    os.close(slave)
    try:
        _read_until(proc, b"ready")
        os.write(master, b"\x03")  # what the terminal sends for Ctrl-C
        stdout, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        with suppress(ProcessLookupError):  # the session IN_TERMINAL made: its group
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        os.close(master)
    assert proc.returncode == 4
    assert b"got INT x1\n" in stdout


def test_the_engine_writes_nothing_to_stderr_on_a_real_log(tmp_path: Path) -> None:
    """RE2 reports an automaton over its memory budget on stderr ("DFA out of memory") and
    falls back to a slow search: with the ~440 patterns of issue 38 the literal sweep did so on
    the first line of any log. A real process, since RE2 writes to the file descriptor."""
    log = tmp_path / "one.log"
    log.write_text(
        "ImportError: libcudart.so.9.0: cannot open shared object file: No such file or directory\n"
        'docker: Error response from daemon: could not select device driver "" with capabilities:'
        " [[gpu]].\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "envdoctor", "explain", "--no-cache", str(log)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
