"""scripts/gpu-validate: ready for the first session that is lent a GPU (issue 16).

It runs here too (no GPU: every GPU step answers "not run"/inconclusive quickly), which is how
these tests check what the device tool needs: offline, bounded, at most 8 flat files under $OUT,
versions and modes first, smoke and both reproductions, nothing that changes the machine.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shellcheck import shellcheck
from tests.smoke.conftest import FAKE_TORCH

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-validate"
LIMIT = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu-validate-out")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "BUDGET": "300"}
    env.pop("PYTHONPATH", None)
    subprocess.run([str(SCRIPT)], env=env, cwd="/", capture_output=True, timeout=420, check=False)
    return out


def test_the_files_fit_what_the_device_tool_brings_back(validated: Path) -> None:
    files = sorted(p for p in validated.rglob("*"))
    assert len(files) <= 8
    for path in files:
        assert path.is_file() and path.parent == validated, path  # flat
        assert re.fullmatch(r"[A-Za-z0-9._-]+", path.name), path.name
        assert path.stat().st_size <= LIMIT
    names = {p.name for p in files}
    assert {
        "reference.txt",
        "log.txt",
        "check.json",
        "snapshot.json",
        "smoke.json",
        "reproduce-cublas-alloc.json",
        "reproduce-cudnn-init.json",
        "reproduce-in-process.jsonl",
    } == names


def test_smoke_and_both_reproductions_ran_from_the_checkout(validated: Path) -> None:
    smoke = json.loads((validated / "smoke.json").read_text())
    assert smoke["kind"] == "smoke"
    for kind in ("cublas-alloc", "cudnn-init"):
        data = json.loads((validated / f"reproduce-{kind}.json").read_text())
        assert (data["kind"], data["reproduce"], data["hold"]) == ("reproduce", kind, "raw")
    lines = (validated / "reproduce-in-process.jsonl").read_text().splitlines()
    assert [json.loads(line)["hold"] for line in lines] == ["torch-cache", "torch-cache"]
    assert json.loads((validated / "check.json").read_text())["schema_version"]


def test_versions_persistence_and_compute_mode_come_first(validated: Path) -> None:
    reference = (validated / "reference.txt").read_text()
    first_query = reference.index("$ nvidia-smi --query-gpu=")
    line = reference[first_query:].splitlines()[0]
    assert "persistence_mode" in line and "compute_mode" in line and "driver_version" in line
    # the real torch answered the one-liner (it costs the fixture a real `import torch`): a typo
    # in it would cost the GPU session its torch facts
    torch_part = reference.split("import torch; print(torch.__version__", 1)[1].split("\n$ ")[0]
    answer = torch_part.strip().splitlines()[-1]
    assert answer.startswith(importlib.metadata.version("torch") + " "), torch_part
    log = (validated / "log.txt").read_text()
    assert log.index("== check --json") < log.index("== smoke --json")
    assert "exit" in log.split("== smoke --reproduce cublas-alloc", 1)[1].splitlines()[1]


def test_it_never_installs_resets_or_unloads() -> None:
    text = SCRIPT.read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "pip install -e" not in code and "pip install --quiet -e" not in code
    assert "--no-index" in code  # wheels carried in ./.whl, never a package index
    for forbidden in ("rmmod", "modprobe", "--gpu-reset", "--apply"):
        assert forbidden not in code, forbidden
    # nvidia-smi only reads: no reset (-r), persistence (-pm) or compute-mode (-c) change
    assert not re.search(r"nvidia-smi[^\n]* -(r|pm|c|e|rgc|lgc|pl)\b", code)


def test_missing_dependencies_stop_it_with_one_clear_line(tmp_path: Path) -> None:
    bare = tmp_path / "python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')  # no site-packages
    bare.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": str(bare)}
    result = subprocess.run(
        [str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 2
    assert "envdoctor's dependencies are missing" in result.stdout
    assert not (out / "check.json").exists()


def test_the_budget_stops_new_steps(tmp_path: Path) -> None:
    # the fake torch answers the reference's `import torch` line (the real import is the
    # validated fixture's; here it would only add ~1.5 s before the steps this test is about)
    env = {
        **os.environ,
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "BUDGET": "10",
        "PYTHONPATH": FAKE_TORCH,
    }
    result = subprocess.run(
        [str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert "skipped, the 10 s budget is spent" in result.stdout


def test_shellcheck_clean() -> None:
    assert shellcheck(SCRIPT) == ""
