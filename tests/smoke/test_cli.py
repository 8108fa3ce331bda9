"""`envdoctor smoke` through the CLI, with the fake torch and facts from the factories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envdoctor.cli import smoke as smoke_cli
from envdoctor.model.facts import Facts
from envdoctor.model.probed import Absent, Found
from tests import factories
from tests.runner import invoke as cli_invoke
from tests.smoke.conftest import FAKE_TORCH, PYTHON, gpu_facts


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTHONPATH", FAKE_TORCH)
    monkeypatch.setenv("ENVDOCTOR_FAKE_STATE", str(tmp_path))
    monkeypatch.delenv("ENVDOCTOR_FAKE_TORCH", raising=False)

    def invoke(*args: str, facts: Facts | None = None, rules: str = "", **fake: str):  # type: ignore[no-untyped-def]
        monkeypatch.setattr(smoke_cli, "facts_for", lambda inv, **kw: facts or gpu_facts(1))
        monkeypatch.setenv("ENVDOCTOR_FAKE_TORCH", rules)
        for key, value in fake.items():
            monkeypatch.setenv(f"ENVDOCTOR_FAKE_{key.upper()}", value)
        return cli_invoke(["smoke", "--python", PYTHON, *args])

    return invoke


def test_healthy_gpu_exits_0_with_a_step_table(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--timeout", "10")
    assert result.exit_code == 0, result.output
    assert "GPU 0  NVIDIA H100 80GB HBM3" in result.output
    assert "gemm-bf16" in result.output and "conv-backward" in result.output
    assert "[smoke.passed]" in result.output


def test_failed_step_exits_1_and_names_the_cause(cli) -> None:  # type: ignore[no-untyped-def]
    facts = gpu_facts(1, free_mib=210, processes=((4242, "python train.py", 81000),))
    result = cli(
        facts=facts,
        rules="matmul=raise:cublas-alloc-failed",
        TOTAL_MIB="81920",
        USED_MIB="81000",
        CONTEXT_MIB="500",
    )
    assert result.exit_code == 1, result.output
    assert "[smoke.cublas-alloc-failed]" in result.output
    # the child's own reading after its context: 81920 - 81000 - 500 MiB
    assert "GPU 0 has 420 MiB free of 80.0 GiB; PID 4242 `python train.py` holds 79.1 GiB" in (
        result.output.replace("\n        ", " ")
    )
    assert "kill 4242" in result.output


def test_json_output(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--json", rules="conv=raise:cudnn-not-initialized")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert (data["schema_version"], data["kind"], data["exit_code"]) == (2, "smoke", 1)
    (run,) = data["runs"]
    conv = next(s for s in run["steps"] if s["step"] == "conv-forward")
    assert conv["error"] == "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
    assert {f["code"] for f in data["findings"]} == {"smoke.cudnn-not-initialized"}


def test_nothing_to_test_exits_2(cli) -> None:  # type: ignore[no-untyped-def]
    cpu = factories.torch_build(version="2.13.0+cpu", cuda="", cudnn_version=Absent("CPU build"))
    facts = factories.facts(
        nvml=Absent("NVML library not found"), torch=factories.torch(Found(cpu))
    )
    result = cli(facts=facts)
    assert result.exit_code == 2, result.output
    assert "[smoke.not-run]" in result.output


def test_reproduce_json(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli(
        "--reproduce",
        "cublas-alloc",
        "--leave",
        "1000",
        "--json",
        "--timeout",
        "10",
        TOTAL_MIB="81920",
        CONTEXT_MIB="500",
        CUBLAS_MIB="300",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["kind"], data["reproduce"], data["status"]) == (
        "reproduce",
        "cublas-alloc",
        "healthy",
    )
    assert [p["leave_mib"] for p in data["probes"]] == [None, 1000]
    assert [f["code"] for f in data["findings"]] == ["smoke.pressure-ruled-out"]


def test_reproduce_text_reports_the_threshold(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("--reproduce", "cudnn-init", "--gpu", "0", CONTEXT_MIB="500", CUDNN_MIB="300")
    assert result.exit_code == 1, result.output
    assert "asked to leave 512 MiB free after the context:" in result.output
    assert "[smoke.pressure-reproduces]" in result.output


def test_reproduce_refuses_a_busy_gpu_with_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    facts = gpu_facts(1, processes=((4242, "python train.py", 30000),))
    result = cli("--reproduce", "cublas-alloc", facts=facts)
    assert result.exit_code == 2, result.output
    assert "[smoke.reproduce-refused]" in result.output
    forced = cli(
        "--reproduce", "cublas-alloc", "--gpu", "0", "--force", "--leave", "1000", facts=facts
    )
    assert forced.exit_code == 0, forced.output
    assert "[smoke.pressure-ruled-out]" in forced.output


def test_help_warns_that_reproduce_fills_the_gpu() -> None:
    result = cli_invoke(["smoke", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert "WARNING: it fills the GPU's memory to the last MiB" in text
    assert "--gpu N --force" in text


def test_the_tf32_override_is_removed_and_reported(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    facts = gpu_facts(1, env={"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"})
    result = cli("--json", facts=facts)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (note,) = data["notes"]
    assert note.startswith("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 was removed from the smoke children")
    gemm = next(s for s in data["runs"][0]["steps"] if s["step"] == "gemm-fp32")
    assert gemm["info"]["tf32"] == "off"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--leave", "100"), "--leave only applies with --reproduce"),
        (("--force",), "--force only applies with --reproduce"),
        (("--in-process",), "--in-process only applies with --reproduce"),
        (("--reproduce", "cudnn-init", "--force"), "--force needs --gpu N"),
        (("--gpu", "7"), "no GPU 7: NVML sees GPU(s) 0"),
        (("--reproduce", "cudnn-init", "--gpu", "0", "--gpu", "1"), "works on one GPU"),
        (("--timeout", "0"), "must be a positive number of seconds"),
    ],
)
def test_usage_errors_exit_2(cli, args: tuple[str, ...], message: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args)
    assert result.exit_code == 2
    assert message in result.output
