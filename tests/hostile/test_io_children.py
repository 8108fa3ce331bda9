"""Issue 13 item 9: every child's output is read with a byte cap, the time budget enforced while
reading.

A ``--python`` interpreter whose start-up prints without end grew envdoctor to 24 GB before the
OOM killer came; under a memory limit ``check`` ended in "internal error: MemoryError". Now the
child is stopped at the cap and the run ends with a ``torch.probe-failed`` finding. These tests
run the real CLI in a child under ``RLIMIT_AS`` and the real ``SystemHost`` on real programs.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envdoctor.platform.system import MAX_OUTPUT_BYTES, SystemHost
from tests.hostile.child import envdoctor

# Far below what collecting the flood would take (the cap is 4 MiB a stream; `yes` prints ~1 GB a
# second), and above what check's address space needs: ~180-200 MiB, plus 64 MiB for each malloc
# arena glibc opens when threads allocate at once. At 256 MiB, check ended in MemoryError in one
# whole-suite run on a busy machine (2026-11-24); run alone at 184 MiB, in 2 runs of 4.
MEMORY_LIMIT = 512 << 20


def interpreter(tmp_path: Path, body: str) -> Path:
    """A fake ``--python``: a shell script that ignores its arguments and does ``body``."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def check(python: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return envdoctor("check", "--json", "--python", str(python), *extra, limit=limit)


def torch_finding(result: subprocess.CompletedProcess[str]) -> str:
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert result.returncode == report["exit_code"] in (1, 2), result.stderr  # judged, not crashed
    findings = report["findings"]
    failed = [f for f in findings if f["code"] == "torch.probe-failed"]
    assert len(failed) == 1, [f["code"] for f in findings]
    return " ".join(e["value"] for e in failed[0]["evidence"])


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_an_interpreter_that_prints_forever_is_a_finding_not_a_memory_error(
    tmp_path: Path, stream: str
) -> None:
    redirect = " >&2" if stream == "stderr" else ""
    python = interpreter(tmp_path, f'exec yes "spam spam spam spam"{redirect}')
    evidence = torch_finding(check(python))
    assert f"printed more than {MAX_OUTPUT_BYTES >> 20} MiB of output and was stopped" in evidence


def test_a_slow_endless_printer_is_stopped_at_the_budget(tmp_path: Path) -> None:
    python = interpreter(tmp_path, "while :; do echo tick; sleep 0.05; done")
    evidence = torch_finding(check(python, "--timeout", "1.5"))
    assert "did not finish within" in evidence


# A --python that answers with the torch child's mark and a result no parser should trust: each
# of these ended `check` in "internal error" (ValueError from json's 4300-digit limit,
# OverflowError from int(Infinity)); the probe now fails with the reason, the rest of check runs.
RESULT = (
    '{"installed": true, "version": "2.11.0+cu130", "location": "/x", "cuda": "13.0", '
    '"hip": null, "cudnn_version": {"found": "91500"}, "nccl_version": {"found": "2.27.7"}, '
    '"arch_list": ["sm_90"], "cuda_available": true, "unavailable_reason": "", '
    '"device_count": {"found": COUNT}, "loaded_libraries": [], "nvidia_wheels": []}'
)


@pytest.mark.parametrize(
    ("count", "reason"),
    [
        ("9" * 5000, "printed no result"),  # json.loads refuses the number: no result line
        ("Infinity", "device_count is not a count of GPUs"),
        ('"\\u00b2"', "device_count is not a count of GPUs"),
        ("-1", "device_count is not a count of GPUs"),
        ("[" * 100_000, "printed no result"),  # nesting deeper than the parser's recursion
    ],
    ids=["5000-digits", "infinity", "superscript-two", "negative", "deep-nesting"],
)
def test_a_torch_result_with_an_odd_count_is_a_probe_failure(
    tmp_path: Path, count: str, reason: str
) -> None:
    from envdoctor.model.probed import ProbeFailed
    from envdoctor.platform.host import Deadline
    from envdoctor.probes.torch_probe import probe_torch

    line = "ENVDOCTOR-TORCH-JSON " + RESULT.replace("COUNT", count)
    (tmp_path / "result").write_text(line + "\n")
    python = interpreter(tmp_path, f"cat '{tmp_path / 'result'}'")
    facts = probe_torch(SystemHost(), python=str(python), deadline=Deadline(30))
    assert isinstance(facts.torch, ProbeFailed), facts.torch
    assert reason in facts.torch.error


# --- SystemHost.run itself ----------------------------------------------------------------------


def test_run_keeps_at_most_the_cap_and_stops_the_child() -> None:
    result = SystemHost().run(["yes", "y"], timeout=60)
    assert result.status == "overflow"
    assert len(result.stdout) == MAX_OUTPUT_BYTES
    assert result.returncode < 0  # killed, not ended by itself
    assert "printed more than 4 MiB" in result.describe()


def test_run_does_not_wait_for_a_grandchild_holding_the_pipe() -> None:
    result = SystemHost().run(["sh", "-c", "sleep 30 & echo $!; echo done"], timeout=20)
    assert result.status == "ok" and result.returncode == 0  # not "timeout" after 20 s
    pid, done = result.stdout.split()
    assert done == "done"
    assert _gone_soon(int(pid)), "the grandchild was left running"


def test_run_still_collects_a_normal_command_whole() -> None:
    result = SystemHost().run(
        ["sh", "-c", "printf 'out\\n'; printf 'err\\n' >&2; exit 3"], timeout=20
    )
    assert (result.status, result.returncode, result.stdout, result.stderr) == (
        "ok",
        3,
        "out\n",
        "err\n",
    )


def _gone_soon(pid: int) -> bool:
    """Whether ``pid`` is gone (or a zombie) within 5 s: SIGKILL takes a moment to land."""
    for _ in range(500):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.01)
    return False


def test_the_memory_limit_is_real() -> None:
    """The limit the CLI runs under above would stop a child that collected the flood."""
    code = "b = bytearray(512 << 20)"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limit, timeout=60
    )
    assert result.returncode != 0 and "MemoryError" in result.stderr
    assert os.sysconf("SC_PAGE_SIZE") > 0
