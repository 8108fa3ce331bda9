"""`envdoctor explain` and `envdoctor run` through Typer's runner and as real commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from envdoctor.model.facts import Facts, LibraryCopy, LibraryFamily
from envdoctor.model.probed import Found, ProbeFailed
from tests import factories
from tests.kb.helpers import CORPUS
from tests.kb.test_decor import WATCHDOG
from tests.runner import invoke as cli_invoke
from tests.schemas import validate

OOM_LOG = CORPUS / "cuda.out-of-memory" / "dcrnn-6.txt"
ASSERT_LOG = CORPUS / "cuda.assert-target-out-of-range" / "seed-000.txt"


def test_explain_a_file(tmp_path: Path) -> None:
    result = cli_invoke(["explain", str(ASSERT_LOG)])
    assert result.exit_code == 1
    assert "cuda.assert-target-out-of-range" in result.output
    assert "fix:" in result.output
    assert "Consequences" in result.output


def test_explain_stdin_json_matches_schema() -> None:
    result = cli_invoke(["explain", "--json"], input=OOM_LOG.read_bytes())
    assert result.exit_code == 1
    data = json.loads(result.output)
    validate(data)
    assert data["source"] == "<stdin>"
    assert data["causes"][0]["id"] == "cuda.out-of-memory"
    assert data["causes"][0]["captures"]["requested"] == "20.00 MiB"
    assert any("Allocator numbers" in n for n in data["causes"][0]["notes"])


def test_explain_markdown_redacts_home_dirs(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(
        '  File "/home/alice/proj/train.py", line 3\n'
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
        "ImportError: /home/alice/venv/lib/libtorch_cuda.so: undefined symbol: cudaLaunchKernelExC\n",
        encoding="utf-8",
    )
    result = cli_invoke(["explain", str(log), "--format", "markdown"])
    assert result.exit_code == 1
    assert "/home/<user>/" in result.output
    assert "alice" not in result.output
    assert "#### `" in result.output


def test_healthy_log_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\ndone\n", encoding="utf-8")
    result = cli_invoke(["explain", str(log)])
    assert result.exit_code == 0
    assert "no known signature" in result.output


# Paddle 2.x's TensorRT probe at start-up (PaddlePaddle/Paddle#28218, judged harmless there)
PADDLE_TENSORRT = (
    "TensorRT dynamic library (libnvinfer.so) that Paddle depends on is not configured "
    "correctly. (error code is libnvinfer.so: cannot open shared object file: No such file or "
    "directory)\n"
    "  Suggestions:\n"
    "  1. Check if TensorRT is installed correctly and its version is matched with "
    "paddlepaddle you installed.\n"
)


def test_a_harmless_line_is_said_to_be_harmless_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "paddle.log"
    log.write_text(PADDLE_TENSORRT + "epoch 1 loss 0.3\n", encoding="utf-8")
    result = cli_invoke(["explain", str(log)])
    assert result.exit_code == 0
    assert "Harmless here" in result.output
    assert "went on without it (line 1)" in result.output
    assert "libs.missing-library" not in result.output
    data = json.loads(cli_invoke(["explain", "--json", str(log)]).output)
    validate(data)
    assert data["outcome"] == "no-signature"
    assert data["causes"] == []
    assert [h["id"] for h in data["harmless"]] == ["paddle.tensorrt-optional"]


def test_a_harmless_line_beside_a_real_error_is_listed_after_it(tmp_path: Path) -> None:
    log = tmp_path / "paddle.log"
    log.write_bytes(PADDLE_TENSORRT.encode() + OOM_LOG.read_bytes())
    result = cli_invoke(["explain", str(log)])
    assert result.exit_code == 1
    assert result.output.index("cuda.out-of-memory") < result.output.index("Harmless here")


def test_binary_file_is_handled(tmp_path: Path) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(256)) * 1000 + b"\nRuntimeError: CUDA error: out of memory\n")
    result = cli_invoke(["explain", str(blob)])
    assert result.exit_code == 1
    assert "looks binary" in result.output
    assert "Traceback" not in result.output


def test_gzip_log(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "train.log.gz"
    with gzip.open(path, "wb") as f:
        f.write(OOM_LOG.read_bytes())
    result = cli_invoke(["explain", str(path), "--json"])
    assert json.loads(result.output)["causes"][0]["id"] == "cuda.out-of-memory"


@pytest.mark.parametrize("target", ["missing.log", "."])
def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path, target: str) -> None:
    path = tmp_path / target if target != "." else tmp_path
    result = cli_invoke(["explain", str(path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "envdoctor: error:" in result.output


def test_list_signatures() -> None:
    result = cli_invoke(["explain", "--list-signatures"])
    assert result.exit_code == 0
    assert "cuda.out-of-memory" in result.output
    assert len(result.output.splitlines()) >= 40


def test_with_host_adds_live_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    import envdoctor.cli.explain as cli_explain

    def fake_facts(ctx: object, **kwargs: object) -> Facts:
        assert kwargs.get("include_torch") is False
        lib = "/lib/x86_64-linux-gnu/libnvidia-ml.so.590.44.01"  # upgraded, module not reloaded
        copy = LibraryCopy("/lib/x86_64-linux-gnu/libnvidia-ml.so.1", lib, "590.44.01", "ldconfig")
        return factories.facts(
            nvml=ProbeFailed("LibRmVersionMismatch", "Driver/library version mismatch"),
            libraries=Found((LibraryFamily("libnvidia-ml", (copy,)),)),
        )

    monkeypatch.setattr(cli_explain, "facts_for", fake_facts)
    log = b"Failed to initialize NVML: Driver/library version mismatch\n"
    result = cli_invoke(["explain", "--with-host", "--json"], input=log)
    data = json.loads(result.output)
    validate(data)
    checks = data["causes"][0]["host_checks"]
    assert checks[0]["name"] == "driver-library-match"
    assert checks[0]["verdict"] == "confirms"


# --- envdoctor run --------------------------------------------------------------------------

FAILING = (
    "import sys\n"
    "print('epoch 1 loss 0.5', flush=True)\n"
    "sys.stderr.write('Traceback (most recent call last):\\n')\n"
    "sys.stderr.write('RuntimeError: CUDA error: device-side assert triggered\\n')\n"
    "import os; print('blocking=' + os.environ.get('CUDA_LAUNCH_BLOCKING', 'unset'), flush=True)\n"
    "sys.exit(3)\n"
)


def test_run_passes_output_through_keeps_exit_code_and_explains(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    result = cli_invoke(
        ["run", "--blocking", "--save", str(log), "--", sys.executable, "-c", FAILING]
    )
    assert result.exit_code == 3
    assert "epoch 1 loss 0.5" in result.stdout
    assert "blocking=1" in result.stdout
    assert "RuntimeError: CUDA error: device-side assert triggered" in result.stderr
    assert "exited with 3" in result.stderr
    assert "cuda.device-assert" in result.stderr
    saved = log.read_text(encoding="utf-8")
    assert "epoch 1 loss 0.5" in saved and "device-side assert" in saved


WRAPPED_IN_TWO_WRITES = (
    "import sys, time\n"
    f"WATCHDOG = {WATCHDOG!r}\n"
    "print(WATCHDOG[:137], flush=True)  # a terminal's wrap: the rest comes on the next line\n"
    "time.sleep(0.3)  # and in another read of the pipe\n"
    "print(WATCHDOG[137:], flush=True)\n"
    "sys.exit(1)\n"
)


def test_run_joins_a_wrapped_line_that_arrives_in_two_reads() -> None:
    """The pieces of a command's output are scanned as they arrive; a cut line waits for the
    lines it may be joined with, so a wrap split between two reads is still one error."""
    argv = ["run", "--format", "json", "--", sys.executable, "-c", WRAPPED_IN_TWO_WRITES]
    result = cli_invoke(argv)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["causes"][0]["id"] == "nccl.timeout"


def test_run_success_is_silent_and_exit_0() -> None:
    result = cli_invoke(["run", sys.executable, "-c", "print('fine')"])
    assert result.exit_code == 0
    assert result.stdout == "fine\n"
    assert result.stderr == ""


def test_run_json_is_alone_on_stdout_and_the_commands_output_goes_to_stderr() -> None:
    result = cli_invoke(["run", "--format", "json", "--", sys.executable, "-c", FAILING])
    assert result.exit_code == 3
    data = json.loads(result.stdout)  # the document and nothing else
    validate(data)
    assert (data["kind"], data["status"], data["exit_code"]) == ("run", "unhealthy", 3)
    assert (data["returncode"], data["signal"], data["outcome"]) == (3, None, "explained")
    assert data["causes"][0]["id"] == "cuda.device-assert"
    assert "device-side assert" in data["stderr_tail"]
    assert "epoch 1 loss 0.5" in result.stderr and "blocking=unset" in result.stderr


def test_run_json_when_the_command_succeeds_says_healthy() -> None:
    argv = ["run", "--format", "json", "--", sys.executable, "-c", "print('fine')"]
    result = cli_invoke(argv)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    validate(data)
    assert (data["status"], data["exit_code"], data["outcome"]) == ("healthy", 0, "no-signature")
    assert result.stderr == "fine\n"


def test_run_unknown_failure_shows_stderr_tail() -> None:
    code = "import sys; sys.stderr.write('ValueError: something odd\\n'); sys.exit(1)"
    result = cli_invoke(["run", sys.executable, "-c", code])
    assert result.exit_code == 1
    assert "no known signature" in result.stderr
    assert "Last lines of stderr" in result.stderr


def test_run_signal_exit_code() -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    result = cli_invoke(["run", sys.executable, "-c", code])
    assert result.exit_code == 128 + 15
    assert "SIGTERM" in result.stderr


def test_run_missing_command_is_127() -> None:
    result = cli_invoke(["run", "--", "no-such-program-envdoctor-test"])
    assert result.exit_code == 127
    assert "command not found" in result.stderr


def test_run_binary_output_is_passed_through_unchanged() -> None:
    code = "import sys; sys.stdout.buffer.write(bytes(range(256))); sys.exit(2)"
    result = cli_invoke(["run", sys.executable, "-c", code])
    assert result.exit_code == 2
    assert result.stdout_bytes == bytes(range(256))
