"""`envdoctor diff`: two snapshots, only what differs, records keyed by what names them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from envdoctor.fleet.diff import MISSING, diff_facts, flatten_facts
from envdoctor.model.facts import Facts, MemoryInfo, Nvcc
from envdoctor.model.probed import Absent, Found
from envdoctor.snapshot import dump_snapshot
from tests import factories as fx
from tests.conftest import scenario_facts
from tests.runner import invoke as cli_invoke


def paths(a: Facts, b: Facts, *, volatile: bool = False) -> dict[str, tuple[str, str]]:
    return {d.path: (d.a, d.b) for d in diff_facts(a, b) if volatile or not d.volatile}


def test_identical_facts_have_no_differences() -> None:
    facts = scenario_facts("healthy_h100")
    assert diff_facts(facts, facts) == ()


def test_driver_mismatch_node_against_healthy_node() -> None:
    got = paths(scenario_facts("healthy_h100"), scenario_facts("driver_mismatch"))
    assert got["kernel.driver.version"] == ("580.159.04", "580.95.05")
    assert "nvml" in got  # NVML failed on B: one line, not one per GPU field
    assert got["nvml"][1].startswith("probe failed: LibRmVersionMismatch")
    assert not any(p.startswith("nvml.gpus[") for p in got)


def test_records_are_keyed_by_name_and_one_sided_records_are_one_line() -> None:
    a = fx.facts()
    b = fx.facts(kernel=fx.kernel(modules=fx.modules("nvidia", "nvidia_drm", "nvidia_modeset")))
    assert paths(a, b) == {"kernel.modules[nvidia_uvm]": ("present: refcount=0", MISSING)}


def test_gpus_are_keyed_by_index_and_bytes_are_readable() -> None:
    a = fx.facts(nvml=fx.nvml(gpus=(fx.gpu(0), fx.gpu(1))))
    smaller = MemoryInfo(total=40 << 30, used=1 << 30, free=39 << 30)
    b = fx.facts(nvml=fx.nvml(gpus=(fx.gpu(0, memory=Found(smaller)),)))
    got = paths(a, b)
    gone, missing = got["nvml.gpus[1]"]
    assert missing == MISSING and gone.startswith("present: name=NVIDIA H100 80GB HBM3, uuid=")
    assert gone.endswith(" more")  # four facts shown, the count of the rest
    assert got["nvml.gpus[0].memory.total"] == ("85899345920 (80.0 GiB)", "42949672960 (40.0 GiB)")
    assert "nvml.gpus[0].memory.free" not in got  # volatile: hidden by default
    assert "nvml.gpus[0].memory.free" in paths(a, b, volatile=True)


def test_a_part_only_one_side_has_says_what_is_in_it() -> None:
    """A lost GPU is not just "present": the reason its facts failed is the point."""
    got = paths(scenario_facts("healthy_h100"), scenario_facts("gpu_lost"))
    assert got["nvml.gpus[1]"] == (
        MISSING,
        "present; 26 of 28 facts probe failed: GPUIsLost; others: mig_devices=absent: MIG is off, "
        "mig_instances=absent: MIG is off",
    )
    with_nvcc = fx.facts(
        env=fx.env({}, nvcc=Found(Nvcc(path="/usr/local/cuda/bin/nvcc", version="12.4")))
    )
    assert paths(fx.facts(), with_nvcc)["env.nvcc"][1] == (
        "present: path=/usr/local/cuda/bin/nvcc, version=12.4"
    )


def test_environment_variables_by_name() -> None:
    a = fx.facts(env=fx.env({"CUDA_VISIBLE_DEVICES": "0,1"}))
    b = fx.facts(env=fx.env({"CUDA_VISIBLE_DEVICES": "", "LD_PRELOAD": "/x.so"}))
    assert paths(a, b) == {
        "env.variables[CUDA_VISIBLE_DEVICES]": ("0,1", ""),
        "env.variables[LD_PRELOAD]": (MISSING, "/x.so"),
    }


def test_absent_and_failed_values_keep_their_reason() -> None:
    flat = flatten_facts(fx.facts(nvml=Absent("NVML library not found")))
    assert flat["nvml"] == "absent: NVML library not found"


def write(tmp_path: Path, name: str, facts: Facts) -> Path:
    path = tmp_path / name
    path.write_text(dump_snapshot(facts), encoding="utf-8")
    return path


def test_cli_side_by_side(tmp_path: Path) -> None:
    a = write(tmp_path, "node-a.json", scenario_facts("healthy_h100"))
    b = write(tmp_path, "node-b.json", scenario_facts("uvm_missing"))
    result = cli_invoke(["diff", str(a), str(b)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("node-a.json and node-b.json: ")
    header = lines[2].split()
    assert header == ["fact", "node-a.json", "node-b.json"]
    assert any(line.startswith("kernel.modules[nvidia_uvm]") for line in lines)


def test_cli_identical_exits_0_and_json(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", scenario_facts("healthy_h100"))
    result = cli_invoke(["diff", str(a), str(a)])
    assert result.exit_code == 0
    assert "no differences" in result.output
    b = write(tmp_path, "b.json", scenario_facts("memory_held"))
    result = cli_invoke(["diff", "--json", str(a), str(b)])
    data = json.loads(result.stdout)
    # memory in use differs, and only that: every difference is listed, none counts (no --all)
    assert (data["kind"], data["status"], data["exit_code"], result.exit_code) == (
        "diff",
        "healthy",
        0,
        0,
    )
    assert data["differences"] and all(d["volatile"] for d in data["differences"])
    assert {"path", "a", "b", "volatile"} <= set(data["differences"][0])


def test_cli_bad_snapshot_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    result = cli_invoke(["diff", str(bad), str(bad)])
    assert result.exit_code == 2
    assert "bad.json:1: not valid JSON" in result.output


def test_cli_wraps_long_values_to_the_terminal(tmp_path: Path) -> None:
    """Issue 37: a long value (a library path, an NVML error) ran off an 80-column terminal;
    each line now fits, and the whole value is still there, over the lines that follow."""
    long = "/opt/conda/envs/training-with-a-long-name/lib/python3.12/site-packages/" * 2
    a_facts = scenario_facts("healthy_h100")
    b_facts = replace(a_facts, torch=replace(a_facts.torch, python=long + "bin/python"))
    a = write(tmp_path, "node-a.json", a_facts)
    b = write(tmp_path, "node-b.json", b_facts)
    result = cli_invoke(["diff", str(a), str(b)], env={"COLUMNS": "80"})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines[2:]), lines
    column = lines[2].index("node-b.json")  # the right-hand column, whole over its lines
    assert (long + "bin/python") in "".join(line[column:].strip() for line in lines[3:])


def test_the_sm_clock_and_the_daemons_pid_are_volatile_its_running_is_not() -> None:
    """Issue 39's facts: the SM clock follows the load and the daemon's PID each restart; a
    daemon that stopped is a real difference."""
    gpu = {"uuid": "GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21", "sm_clocks": [1980, 1980]}
    restarted = {
        "/run/nvidia-persistenced/nvidia-persistenced.pid": "1999\n",
        "/proc/1999/comm": "nvidia-persiste\n",
    }
    a = scenario_facts("healthy_h100")
    # collected at the same moment: two collections a second apart differ in collected_at
    b = replace(
        scenario_facts("healthy_h100", files=restarted, nvml={"gpus": [gpu]}),
        collected_at=a.collected_at,
    )
    assert {d.path: d.volatile for d in diff_facts(a, b)} == {
        "nvml.gpus[0].sm_clock.current": True,
        "persistenced.pid": True,
    }
    stopped = replace(
        scenario_facts("healthy_h100", files={"/proc/1873/comm": "bash\n"}),
        collected_at=a.collected_at,
    )
    assert [(d.path, d.volatile) for d in diff_facts(a, stopped)] == [
        ("persistenced.running", False)
    ]
