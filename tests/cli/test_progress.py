"""Progress on stderr for long work: only when stderr is a terminal, only after the first
second, cleared before the report; a pipe sees none of it."""

from __future__ import annotations

import io
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.cli import progress
from envdoctor.cli import smoke as smoke_cli
from envdoctor.cli.common import AppContext
from envdoctor.cli.progress import Progress, SmokeSteps
from tests.conftest import PYTHON as FAKE_PYTHON
from tests.fakes.host import FakeHost
from tests.runner import Result, invoke
from tests.smoke.conftest import FAKE_TORCH, PYTHON, gpu_facts


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress from the first moment, redrawn often: a test's work takes a fraction of the
    second a person would wait before seeing a line."""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "INTERVAL", 0.02)


def _lines(stderr: str) -> list[str]:
    """What the progress line showed, each drawing once (a drawing starts with \\r)."""
    return [part.strip() for part in stderr.split("\r") if part.strip()]


def test_a_line_while_the_work_runs_then_a_clean_line() -> None:
    stream = Terminal()
    with Progress(lambda: "working", stream=stream, delay=0.0, interval=0.01):
        time.sleep(0.2)
    out = stream.getvalue()
    assert out.startswith("\renvdoctor: working")
    assert out.endswith("\r" + " " * len("envdoctor: working") + "\r")  # cleared


def test_nothing_within_the_first_second() -> None:
    stream = Terminal()
    with Progress(lambda: "working", stream=stream) as shown:
        time.sleep(0.05)
    assert shown.enabled and stream.getvalue() == ""


def test_a_pipe_gets_nothing_and_no_thread() -> None:
    stream = io.StringIO()
    before = threading.active_count()
    with Progress(lambda: "working", stream=stream, delay=0.0) as shown:
        assert threading.active_count() == before
        time.sleep(0.05)
    assert not shown.enabled and stream.getvalue() == ""


def test_a_shorter_status_overwrites_a_longer_one() -> None:
    stream = Terminal()
    states = iter(["a long status line", "short"])
    with Progress(lambda: next(states, "short"), stream=stream, delay=0.0, interval=0.01):
        time.sleep(0.1)
    second = stream.getvalue().split("\r")[2]
    assert second == "envdoctor: short" + " " * (len("a long status line") - len("short"))


def test_untrusted_text_in_a_status_is_escaped() -> None:
    stream = Terminal()
    with Progress(lambda: "reading evil\x1b[2J.log", stream=stream, delay=0.0, interval=0.01):
        time.sleep(0.05)
    assert "\x1b" not in stream.getvalue() and "evil\\x1b[2J.log" in stream.getvalue()


@pytest.fixture
def slow_log(tmp_path: Path) -> Iterator[Path]:
    """A FIFO that a writer fills over about half a second: explain reads as the log grows."""
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as out:
            for _ in range(10):
                out.write(b"epoch 1 loss 0.3\n" * 1000)
                out.flush()
                time.sleep(0.05)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield fifo
    writer.join(5)


@pytest.mark.usefixtures("quick")
def test_explain_shows_what_it_has_read_then_clears_before_the_report(slow_log: Path) -> None:
    result = invoke(["explain", str(slow_log)], tty=("stderr",))
    assert result.exit_code == 0
    shown = _lines(result.stderr)
    assert shown and all(re.match(r"envdoctor: read [\d.]+ (bytes|KiB) of /", s) for s in shown)
    assert "%" not in result.stderr  # a FIFO has no size: bytes, no percentage
    # the line was cleared before the report began
    before_report = result.output[: result.output.index("envdoctor explain:")]
    assert before_report.endswith("\r")
    assert "\r" not in result.stdout


@pytest.mark.usefixtures("quick")
def test_explain_of_a_file_shows_a_percentage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"epoch 1 loss 0.3\n" * 200_000)
    from envdoctor.kb import matcher

    real = matcher.Scanner.feed

    def slow_feed(self: matcher.Scanner, data: bytes) -> None:
        time.sleep(0.01)
        real(self, data)

    monkeypatch.setattr(matcher.Scanner, "feed", slow_feed)
    result = invoke(["explain", str(log)], tty=("stderr",))
    shown = _lines(result.stderr)
    assert any(
        re.match(r"envdoctor: read [\d.]+ (bytes|KiB|MiB) of 3\.2 MiB \(\d+%\) of /", s)
        for s in shown
    ), shown


@pytest.mark.usefixtures("quick")
def test_explain_piped_shows_no_progress(slow_log: Path) -> None:
    result = invoke(["explain", str(slow_log)])
    assert result.stderr == ""


@pytest.mark.usefixtures("quick")
def test_collect_shows_what_it_is_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost.scenario("healthy_h100")
    real = host.run

    def slow_run(argv, *, timeout, env=None):  # type: ignore[no-untyped-def]
        time.sleep(0.3)  # the torch child
        return real(argv, timeout=timeout, env=env)

    monkeypatch.setattr(host, "run", slow_run)
    result = invoke(["collect"], obj=AppContext(host=host, python=FAKE_PYTHON), tty=("stderr",))
    assert result.exit_code == 0
    shown = _lines(result.stderr)
    assert any(s.startswith("envdoctor: reading this machine (") for s in shown), shown
    assert any(f"running {FAKE_PYTHON}" in s for s in shown), shown
    assert result.stdout.startswith("{")


def _smoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tty: tuple[str, ...]) -> Result:
    monkeypatch.setenv("PYTHONPATH", FAKE_TORCH)
    monkeypatch.setenv("ENVDOCTOR_FAKE_STATE", str(tmp_path))
    monkeypatch.setenv("ENVDOCTOR_FAKE_TORCH", "matmul=sleep:0.4")
    monkeypatch.setattr(smoke_cli, "facts_for", lambda inv, **kw: gpu_facts(2))
    argv = ["smoke", "--python", PYTHON, "--timeout", "30"]
    return invoke(argv, tty=tty)


@pytest.mark.usefixtures("quick")
def test_smoke_shows_each_gpus_step(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = _smoke(monkeypatch, tmp_path, ("stderr",))
    assert result.exit_code == 0, result.output
    shown = _lines(result.stderr)
    assert any("GPU 0: gemm" in s and "GPU 1: gemm" in s for s in shown), shown
    assert all(s.startswith("envdoctor: smoke tests (") for s in shown)


@pytest.mark.usefixtures("quick")
def test_smoke_piped_shows_no_progress(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = _smoke(monkeypatch, tmp_path, ())
    assert result.exit_code == 0 and result.stderr == ""


def test_smoke_steps_describe_running_and_finished_children() -> None:
    steps = SmokeSteps()
    assert steps.describe().endswith(": starting")
    steps("GPU 0", "context")
    steps("GPU 1", "conv")
    steps("GPU 1", "done")
    assert steps.describe().endswith(": GPU 0: context; 1 of 2 done")


@pytest.mark.usefixtures("quick")
def test_check_deep_shows_the_gpus_step(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", FAKE_TORCH)
    monkeypatch.setenv("ENVDOCTOR_FAKE_STATE", str(tmp_path))
    monkeypatch.setenv("ENVDOCTOR_FAKE_TORCH", "matmul=sleep:0.4")
    host = FakeHost.scenario("healthy_h100")
    result = invoke(
        ["check", "--deep", "--timeout", "30"],
        obj=AppContext(host=host, python=PYTHON),
        tty=("stderr",),
    )
    shown = _lines(result.stderr)
    assert any(re.match(r"envdoctor: smoke tests \(\d+ s\): GPU 0: gemm", s) for s in shown), shown
    assert "[smoke.passed]" in result.stdout and "\r" not in result.stdout
