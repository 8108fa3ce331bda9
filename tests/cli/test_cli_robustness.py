"""Bad budgets, bad interpreters and a stdout that cannot be written: one line and exit 2.

Each case is what a user types or pipes (``--timeout nan``, ``--python /tmp``, ``| head -1``,
``> /dev/full``, ``>&-``); each must end with exit 2, at most one ``envdoctor: error:`` line on
stderr, and never a traceback or an "internal error".
"""

from __future__ import annotations

import errno
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from envdoctor.cli.boundary import emit, guarded
from envdoctor.cli.common import AppContext
from envdoctor.cli.watchdog import Watchdog
from envdoctor.errors import EnvdoctorError
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.fleet.slurm_fakes import FakeSlurm, SlurmHost
from tests.runner import invoke as cli_invoke
from tests.runner import run_probe

ROOT = Path(__file__).resolve().parents[2]
POSITIVE = "--timeout must be a positive number of seconds"
AT_MOST_A_DAY = "--timeout must be at most 86400 seconds (one day)"


def invoke(*args: str, scenario: str = "healthy_h100", **overrides: object):  # type: ignore[no-untyped-def]  # click's Result
    host = FakeHost.scenario(scenario, **overrides)
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


def assert_one_error_line(output: str, line: str) -> None:
    assert output == line + "\n", output
    assert "Traceback" not in output and "internal error" not in output


def usage_error(where: str, message: str) -> str:
    """A bad command line as users see it: what is wrong, then where the help is."""
    return f"envdoctor {where}: {message}\nTry 'envdoctor {where} --help'."


# --- --timeout ----------------------------------------------------------------------------------

COMMANDS = [
    ["check"],
    ["collect", "-o", "{tmp}/c.json"],
    ["spec", "init"],
    ["fix"],
    ["smoke"],
    ["explain", "--with-host", "{tmp}/train.log"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nan", POSITIVE),
        ("0", POSITIVE),
        ("-3", POSITIVE),
        ("inf", AT_MOST_A_DAY),
        ("1e10", AT_MOST_A_DAY),
        ("86401", AT_MOST_A_DAY),
    ],
)
def test_every_command_refuses_a_timeout_no_timer_can_hold(
    command: list[str], value: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "train.log").write_text("RuntimeError: CUDA error: out of memory\n")
    args = [a.format(tmp=tmp_path) for a in command]
    result = invoke(*args, "--timeout", value)
    assert result.exit_code == 2
    where = " ".join(a for a in command[:2] if not a.startswith("-"))
    assert_one_error_line(result.output, usage_error(where, message))
    assert not (tmp_path / "c.json").exists()


def test_nan_is_no_longer_a_torch_that_hung_within_0_s() -> None:
    result = invoke("check", "--timeout", "nan")
    assert "did not finish within 0 s" not in result.output


def test_smoke_step_timeout_is_checked_by_its_own_name() -> None:
    result = invoke("smoke", "--step-timeout", "nan")
    assert result.exit_code == 2
    assert_one_error_line(
        result.output, usage_error("smoke", "--step-timeout must be a positive number of seconds")
    )


def test_a_day_is_still_a_budget() -> None:
    assert invoke("check", "--timeout", "86400").exit_code == 0


def test_probe_in_process_refuses_an_infinite_budget() -> None:
    result = invoke("probe", "--timeout", "inf")
    assert result.exit_code == 2
    assert_one_error_line(result.output, usage_error("probe", AT_MOST_A_DAY))


def test_the_watchdog_refuses_a_budget_its_timer_would_overflow_on() -> None:
    with pytest.raises(EnvdoctorError):
        Watchdog(float("inf"), lambda: None)


@pytest.mark.parametrize("value", ["inf", "1e10"])
def test_real_probe_process_with_a_huge_budget_is_a_usage_error(value: str) -> None:
    """It used to print the verdict, then the watchdog thread's OverflowError traceback."""
    result = envdoctor("probe", "--timeout", value)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == usage_error("probe", AT_MOST_A_DAY) + "\n"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--timeout", "inf"], usage_error("slurm-healthcheck", AT_MOST_A_DAY)),
        (["--timeout", "nan"], usage_error("slurm-healthcheck", POSITIVE)),
        (
            ["--python", "/proc/driver/nvidia/version"],
            "envdoctor: error: --python /proc/driver/nvidia/version: not executable",
        ),
    ],
)
def test_slurm_never_touches_the_node_when_an_option_is_bad(
    tmp_path: Path, option: list[str], message: str
) -> None:
    fake = FakeSlurm.create(tmp_path)
    host = SlurmHost("gpu_lost", fake.environ)  # unhealthy: a valid run would drain it
    result = cli_invoke(
        ["slurm-healthcheck", "--node", "gpu-node-17", *option],
        obj=AppContext(host=host, python=PYTHON),
    )
    assert result.exit_code == 2
    assert_one_error_line(result.output, message)
    assert fake.calls == [] and fake.state["flags"] == []


# --- --python -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "python", "message"),
    [
        (["check"], "/proc/driver/nvidia", "not an interpreter (a directory)"),
        (["check"], "/proc/driver/nvidia/version", "not executable"),
        (["collect", "-o", "{tmp}/c.json"], "/proc/driver/nvidia/version", "not executable"),
        (["spec", "init"], "/proc/driver/nvidia/version", "not executable"),
        (["fix"], "/proc/driver/nvidia", "not an interpreter (a directory)"),
        (["smoke"], "/proc/driver/nvidia", "not an interpreter (a directory)"),
    ],
)
def test_a_python_that_cannot_be_run_is_a_usage_error(
    command: list[str], python: str, message: str, tmp_path: Path
) -> None:
    args = [a.format(tmp=tmp_path) for a in command]
    result = invoke(*args, "--python", python)
    assert result.exit_code == 2
    assert_one_error_line(result.output, f"envdoctor: error: --python {python}: {message}")
    assert not (tmp_path / "c.json").exists()


def test_an_executable_python_path_is_used_as_given() -> None:
    nodes = {"/opt/venv/bin/python3.12": {"char": False, "mode": "0755"}}
    result = invoke("check", "--python", "/opt/venv/bin/python3.12", nodes=nodes)
    assert result.exit_code == 0, result.output


def test_real_directory_and_non_executable_file_are_refused(tmp_path: Path) -> None:
    plain = tmp_path / "python"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    for args, python, what in [
        (["check"], tmp_path, "not an interpreter (a directory)"),
        (["collect", "-o", str(tmp_path / "c.json")], plain, "not executable"),
        (["spec", "init"], plain, "not executable"),
    ]:
        result = envdoctor(*args, "--python", str(python))
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"envdoctor: error: --python {python}: {what}\n"
    assert not (tmp_path / "c.json").exists()


def test_an_executable_that_is_not_python_stays_a_finding(tmp_path: Path) -> None:
    """A fact about the environment, not a mistake on the command line."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'not python' >&2\nexit 3\n")
    script.chmod(0o755)
    result = envdoctor("check", "--json", "--python", str(script), "--timeout", "20")
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert "torch.probe-failed" in codes


# --- stdout that cannot be written ------------------------------------------------------------


def envdoctor(*args: str, stdout: IO[str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a child process (its own stdout, its own exit)."""
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", *args],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def to_closed_pipe(*args: str) -> tuple[int, str]:
    """Run with stdout a pipe whose reader has already gone (``| head -1`` after its line)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envdoctor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the only reader: every write now fails with EPIPE
    with proc.stderr:
        stderr = proc.stderr.read().decode()
    return proc.wait(timeout=120), stderr


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "snap.json"
    assert invoke("collect", "-o", str(path), scenario="gpu_lost").exit_code == 0
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--list-checks"],
        ["check", "--snapshot", "{snap}"],
        ["check", "--snapshot", "{snap}", "--json"],
        ["explain", "--list-signatures"],
        ["probe", "--json"],
        ["probe", "--help"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_a_reader_that_went_away_ends_it_quietly(args: list[str], snapshot: Path) -> None:
    code, stderr = to_closed_pipe(*(a.format(snap=snapshot) for a in args))
    assert code == 2
    assert stderr == ""  # no "internal error", no "Exception ignored … BrokenPipeError"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "args",
    [
        ["check", "--list-checks"],
        ["check", "--snapshot", "{snap}"],
        ["explain", "--list-signatures"],
        ["probe"],
        ["probe", "--help"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_a_full_disk_is_one_line(args: list[str], snapshot: Path) -> None:
    with open("/dev/full", "w") as full:
        result = envdoctor(*(a.format(snap=snapshot) for a in args), stdout=full)
    assert result.returncode == 2
    assert result.stderr == "envdoctor: error: cannot write the output: No space left on device\n"


@pytest.mark.parametrize("args", [["probe"], ["probe", "--json"], ["probe", "--help"]])
def test_probe_with_stdout_closed_says_so_and_exits_2(args: list[str]) -> None:
    result = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert result.stderr == "envdoctor: error: cannot write the output: stdout is closed\n"


class _FailingRaw(io.RawIOBase):
    def __init__(self, error: OSError) -> None:
        self.error = error

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise self.error


def _stdout_failing_with(error: OSError) -> io.TextIOWrapper:
    return io.TextIOWrapper(_FailingRaw(error), encoding="utf-8")  # type: ignore[arg-type]  # a raw stream is what BufferedWriter would wrap


def test_probe_run_turns_a_failed_write_into_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    host = FakeHost.scenario("healthy_h100")
    broken = _stdout_failing_with(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    assert run_probe([], host=host, python=PYTHON, stdout=broken) == 2
    full = _stdout_failing_with(OSError(errno.ENOSPC, "No space left on device"))
    assert run_probe([], host=host, python=PYTHON, stdout=full) == 2
    assert capsys.readouterr().err == (
        "envdoctor: error: cannot write the output: No space left on device\n"
    )


def test_boundary_tells_a_failed_stdout_from_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", _stdout_failing_with(OSError(errno.EIO, "I/O error")))

    def report() -> int:
        emit("the report")
        return 0

    assert guarded(report) == 2
    assert capsys.readouterr().err == "envdoctor: error: cannot write the output: I/O error\n"

    def bug() -> int:
        raise OSError(errno.EIO, "I/O error")  # not a write to stdout: a bug to report

    assert guarded(bug) == 2
    assert "internal error: OSError" in capsys.readouterr().err
