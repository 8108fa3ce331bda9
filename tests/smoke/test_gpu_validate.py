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

from tests.native.conftest import NO_COMPILER, build_standin
from tests.shellcheck import shellcheck
from tests.smoke.conftest import FAKE_TORCH

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-validate"
LIMIT = 16 * 1024 * 1024


# nvidia-smi on the dry run: what it would print for the stand-in's two GPUs, but GPU 1 at 60 C
# (the stand-in says 33), so that the comparison has one difference to find
FAKE_SMI = """#!{python}
import sys
query = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--query-gpu=")), None)
if query is None:
    print("fake nvidia-smi for the gpu-validate dry run")
    sys.exit(0)
values = {{
    "index": ["0", "1"], "name": ["NVIDIA H100 80GB HBM3"] * 2,
    "uuid": ["GPU-00000000-1111-2222-3333-444455556666", "GPU-00000001-1111-2222-3333-444455556666"],
    "pci.bus_id": ["00000000:18:00.0", "00000000:28:00.0"], "driver_version": ["580.159.04"] * 2,
    "persistence_mode": ["Enabled"] * 2, "compute_mode": ["Default"] * 2,
    "mig.mode.current": ["Disabled"] * 2, "memory.total": ["143771"] * 2,
    "memory.used": ["0"] * 2, "memory.reserved": ["600"] * 2, "memory.free": ["143171"] * 2,
    "temperature.gpu": ["33", "60"], "enforced.power.limit": ["700.00"] * 2,
    "pcie.link.width.current": ["16"] * 2, "ecc.errors.uncorrected.volatile.total": ["0"] * 2,
}}
for gpu in range(2):
    print(", ".join(values.get(f, ["[N/A]"] * 2)[gpu] for f in query.split(",")))
"""


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dry run: NVML is tests/native's stand-in (two GPUs), nvidia-smi a fake beside it."""
    out = tmp_path_factory.mktemp("gpu-validate-out")
    tools = tmp_path_factory.mktemp("gpu-validate-tools")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "BUDGET": "300"}
    env.pop("PYTHONPATH", None)
    lib = build_standin(tools)
    if lib is not None:
        (tools / "scenario.txt").write_text("gpus=2\n", encoding="utf-8")
        smi = tools / "nvidia-smi"
        smi.write_text(FAKE_SMI.format(python=sys.executable), encoding="utf-8")
        smi.chmod(0o755)
        env["LD_LIBRARY_PATH"] = str(lib)
        env["NVML_STANDIN_SCENARIO"] = str(tools / "scenario.txt")
        env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
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
        "reproduce.jsonl",
        "reproduce-in-process.jsonl",
        "comparison.md",
    } == names


def test_smoke_and_both_reproductions_ran_from_the_checkout(validated: Path) -> None:
    smoke = json.loads((validated / "smoke.json").read_text())
    assert smoke["kind"] == "smoke"
    raw = [json.loads(line) for line in (validated / "reproduce.jsonl").read_text().splitlines()]
    assert [(d["kind"], d["reproduce"], d["hold"]) for d in raw] == [
        ("reproduce", kind, "raw") for kind in ("cublas-alloc", "cudnn-init")
    ]
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
    assert re.search(r"\n   smoke --reproduce cublas-alloc: exit \d+ after", log), log


def test_the_dry_run_compares_envdoctor_with_nvidia_smi_and_pynvml(validated: Path) -> None:
    """Against the stand-in, envdoctor, nvidia-smi (the fake) and a direct pynvml reading agree
    on every fact but the one temperature the fake says otherwise; torch (a CPU build) has no
    GPU to say anything about."""
    if not (validated / "comparison.md").exists() and build_standin(validated.parent) is None:
        pytest.skip(NO_COMPILER)
    table = (validated / "comparison.md").read_text()
    rows = {
        (cells[1], cells[2]): cells
        for line in table.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.split("|")])[1].isdigit()
    }
    assert rows[("0", "name")][3:8] == ["NVIDIA H100 80GB HBM3"] * 3 + ["—", "same"]
    assert rows[("1", "temperature_c")][3:8] == ["33", "60", "33", "—", "differs"]
    assert rows[("1", "memory_reserved_mib")][-2] == "same"
    differs = [key for key, cells in rows.items() if cells[-2] == "differs"]
    assert differs == [("1", "temperature_c")], table
    assert "torch: CUDA is not available" in table


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
