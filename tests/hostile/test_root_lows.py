"""Issue 35's low findings about processes and input sizes, each made to happen again.

- a GPU holder with a non-UTF-8 argv could never be stopped (its argv was decoded with
  replacement, the script compared bytes); a lone surrogate in a value crashed the quoting;
- `envdoctor run -- yes | head -1` kept running after its reader was gone;
- with SIGCHLD inherited as ignored, `run` returned 0 for a command that exited 7;
- SIGTERM to `check` left the torch probe child running;
- a 64 MiB snapshot of `[]` took 1.7 GB before it was refused.

Where another user is the attacker (a process of theirs), the test starts one as nobody: as
root, else it is skipped.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.platform.system import SystemHost
from envdoctor.probes.holders import _describe, start_time_of
from envdoctor.remedy import render_script
from envdoctor.remedy.model import Plan, Step, Verify
from envdoctor.remedy.planner import _terminate
from envdoctor.remedy.quoting import sh_quote
from tests.hostile.child import ROOT, envdoctor
from tests.hostile.users import OTHER_UID, needs_root
from tests.remedy.sandbox import Sandbox
from tests.shellcheck import BASH_STRICT, shellcheck

RAW_ARG = b"\xff\xfe-\xc3(-not-utf-8"


def _drop() -> None:  # pragma: no cover (runs in the child)
    os.setgroups([])
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """Another user's process whose argv is not UTF-8."""
    with subprocess.Popen(
        [b"/bin/sh", b"-c", b"sleep 120; :", RAW_ARG],  # sh stays, with this argv
        preexec_fn=_drop,
    ) as proc:
        try:
            deadline = time.monotonic() + 10
            while RAW_ARG not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                assert time.monotonic() < deadline, "the child did not start"
                time.sleep(0.02)
            yield proc
        finally:
            proc.kill()


@needs_root
def test_a_holder_with_a_non_utf8_argv_is_stopped(
    holder: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    pid = holder.pid
    found = _describe(SystemHost(), pid, ["/dev/nvidia0"], ("fd",), {})
    assert os.fsencode(found.argv[-1]) == RAW_ARG  # the bytes, as surrogates
    assert found.start_time == start_time_of(Path(f"/proc/{pid}/stat").read_text())
    box = Sandbox(tmp_path / "sandbox")
    proc_dir = box.root / "proc" / str(pid)
    (proc_dir / "fd").mkdir(parents=True)
    (proc_dir / "fd" / "3").symlink_to("/dev/nvidia0")
    for name in ("stat", "status", "cmdline"):
        (proc_dir / name).symlink_to(f"/proc/{pid}/{name}")
    (box.base / "behaviour" / "kill").write_text(
        'kill -s "$2" "$3" || rc=$?\nif [ "$rc" = 0 ]; then rm -rf "$ROOT/proc/$3/fd"; fi\n'
    )
    plan = Plan(steps=(Step("Terminate", _terminate(found)), Step("Verify", Verify(box.verify))))
    script = render_script(plan)
    assert shellcheck(script, *BASH_STRICT) == ""
    run = box.run(script, "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert holder.wait(timeout=30) == -signal.SIGTERM
    assert f"PID {pid} released the GPU after SIGTERM" in run.stdout


@pytest.mark.parametrize("value", ["a\udcffb", "x\ud800y", "\udc80"])
def test_a_lone_surrogate_is_quoted_not_a_crash(value: str) -> None:
    word = sh_quote(value)
    assert word.startswith("$'") and word.isascii()


def test_fix_from_a_snapshot_full_of_surrogates_writes_a_clean_script(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    made = envdoctor("collect", "-o", str(snap))
    assert made.returncode == 0, made.stderr
    text = snap.read_text()
    # every string value of the snapshot ends in a non-UTF-8 byte, as a name read from /proc may
    snap.write_text(text.replace('": "', '": "\\udcff'))
    out = tmp_path / "fix.sh"
    result = envdoctor("fix", "--snapshot", str(snap), "-o", str(out))
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    if result.returncode == 0:
        assert shellcheck(out.read_text(), *BASH_STRICT) == ""


def test_run_stops_when_its_reader_is_gone() -> None:
    started = time.monotonic()
    pipeline = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m envdoctor run -- yes | head -1; echo ${{PIPESTATUS[0]}}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert pipeline.stdout.splitlines() == ["y", "141"]  # 128 + SIGPIPE, as a shell's
    assert time.monotonic() - started < 30


def test_run_reports_the_status_with_sigchld_ignored() -> None:
    """A parent that ignores SIGCHLD passes that on: the kernel then reaps children itself."""
    wrapper = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'envdoctor', 'run', '--',"
        " 'sh', '-c', 'exit 7'])\n"
    )
    shell = subprocess.run(
        ["bash", "-c", f'{sys.executable} -c "$0"; echo "status=$?"', wrapper],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "status=7" in shell.stdout, shell.stdout + shell.stderr


def test_sigterm_to_check_ends_the_torch_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    python = tmp_path / "python3"
    python.write_text(f"#!/bin/sh\necho $$ >{pidfile}\nexec sleep 300\n")
    python.chmod(0o755)
    with subprocess.Popen(
        [sys.executable, "-m", "envdoctor", "check", "--python", str(python), "--timeout", "120"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as check:
        try:
            deadline = time.monotonic() + 60
            while not pidfile.exists() or not pidfile.read_text().strip():
                assert time.monotonic() < deadline, "the torch child never started"
                assert check.poll() is None
                time.sleep(0.05)
            child = int(pidfile.read_text())
            check.send_signal(signal.SIGTERM)
            assert check.wait(timeout=30) == -signal.SIGTERM
        finally:
            check.kill()
    deadline = time.monotonic() + 10
    while _alive(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            pytest.fail(
                f"the torch child outlived check: {Path(f'/proc/{child}/stat').read_text()[:80]}"
            )
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_snapshot_of_millions_of_values_is_refused_in_little_memory(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text("[" + "[]," * 21_000_000 + "[]]")  # 63 MiB: under the size limit

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))

    result = envdoctor("check", "--snapshot", str(snap), limit=limit)
    assert result.returncode == 2, result.stderr
    assert "not a snapshot: more than 2,000,000 values" in result.stderr


def _scan_seconds(data: bytes) -> float:
    from envdoctor.kb import Scanner, load_default_kb

    kb = load_default_kb()
    best = float("inf")
    for _ in range(2):  # best of two: a busy machine does not fail it
        scanner = Scanner(kb)
        started = time.process_time()
        scanner.feed(data)
        scanner.finish()
        best = min(best, time.process_time() - started)
    return best


def test_lines_packed_with_trigger_words_cost_linear_time() -> None:
    """Argued, not fixed (docs/security.md): a crafted line costs about 1 s of CPU per MB,
    30 times plain text, but never more per byte as it grows. The bound here fails on any
    superlinear path (a quadratic one: a 2 MB line 16 times a 0.5 MB one)."""
    words = b"CUDA error: out of memory RuntimeError NCCL error Xid illegal memory access "
    one = (words * (500_000 // len(words) + 1))[:500_000] + b"\n"
    small, large = _scan_seconds(one), _scan_seconds(one * 4)
    assert small < 2.0, f"{small:.2f} s for 0.5 MB"
    assert large < 4 * small * 1.6 + 0.5, f"{small:.2f} s for 0.5 MB, {large:.2f} s for 2 MB"
