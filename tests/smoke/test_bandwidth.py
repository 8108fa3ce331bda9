"""The multi-GPU smoke steps (issue 39, item 9): the all-reduce's bus bandwidth and every pair's
peer copy, judged against the links between the GPUs. The child runs against the fake torch
(which takes as long as the configured bandwidth would); the judging is also tested on the
child's reports directly, hostile ones included. A real H200 runs the child later."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from envdoctor.model.facts import Facts
from envdoctor.model.interconnect import GpuInterconnect, LinkErrors, NvLink, NvlinkFacts
from envdoctor.model.probed import Absent, Found
from envdoctor.smoke import SmokeOptions, run_smoke, smoke_findings
from envdoctor.smoke.bandwidth import allreduce_nominal, bandwidth_findings, pair_nominal
from envdoctor.smoke.model import PASSED, ChildRun, StepResult, Target
from tests.smoke.conftest import PYTHON, gpu_facts, uuid

EnvMaker = Callable[..., dict[str, str | None]]
NCCL = Target("GPUs 0,1,2", nvml_indices=(0, 1, 2), visible="a,b,c", devices=3)


def hgx(count: int, *, links: dict[int, int] | None = None) -> Facts:
    """``count`` H100 SXM5s, each with 18 links to NVSwitches (``links``: GPU → fewer)."""
    facts = gpu_facts(count)
    assert isinstance(facts.nvml, Found)
    wired = tuple(
        GpuInterconnect(
            index=i,
            links=Found(
                tuple(
                    NvLink(n, True, "nvswitch", "00000000:A0:00.0", Found(LinkErrors(0, 0, 0, 0)))
                    for n in range((links or {}).get(i, 18))
                )
            ),
            errors_later=Absent("not read"),
            pcie_replays=Found(0),
            pcie_replays_later=Absent("not read"),
            peers=Found(()),
        )
        for i in range(count)
    )
    nvml = replace(facts.nvml.value, interconnect=Found(NvlinkFacts(wired, 0.1)))
    return replace(facts, nvml=Found(nvml))


def child(*steps: StepResult, target: Target = NCCL) -> ChildRun:
    all_steps = (StepResult("import", PASSED), StepResult("context", PASSED), *steps)
    return ChildRun(target, PYTHON, all_steps, "completed", 1.0)


def allreduce(busbw: str, algbw: str = "1") -> StepResult:
    return StepResult("nccl-bandwidth", PASSED, info=(("busbw_gbps", busbw), ("algbw_gbps", algbw)))


def copies(*lines: str) -> StepResult:
    return StepResult("p2p-bandwidth", PASSED, info=(("pairs", "\n".join(lines)),))


# --- nominal --------------------------------------------------------------------------------


def test_the_nominal_follows_the_links() -> None:
    assert pair_nominal(hgx(2), 0, 1) == (450.0, "NVLink through NVSwitches: 18 links × 25 GB/s")
    # a GPU with links down holds the all-reduce to its own links
    assert allreduce_nominal(hgx(3, links={2: 12}), (0, 1, 2)) == (
        300.0,
        "NVLink through NVSwitches: 12 links × 25 GB/s",
    )
    pcie = pair_nominal(gpu_facts(2), 0, 1)  # no NVLink read: the PCIe links, Gen5 x16
    assert pcie is not None and round(pcie[0]) == 63 and pcie[1].startswith("PCIe")


# --- judging the child's reports --------------------------------------------------------------


def test_a_slow_all_reduce_is_measured_against_the_links() -> None:
    (slow,) = bandwidth_findings(hgx(3), child(allreduce("120.5", "80.3")))
    assert slow.code == "smoke.allreduce-slow" and slow.subject == "GPUs 0,1,2"
    assert "120 GB/s of bus bandwidth, 27% of the 450 GB/s" in slow.title
    assert dict(slow.evidence)["bus bandwidth (nccl-tests' busbw)"] == (
        "120.5 GB/s = algbw × 2(3-1)/3"
    )
    assert bandwidth_findings(hgx(3), child(allreduce("380"))) == []


def test_the_one_slow_pair_is_named_and_the_others_are_not() -> None:
    lines = [f"{a}>{b} 380.00 p2p" for a in range(3) for b in range(3) if a != b]
    lines[3] = "1>2 61.00 p2p"
    (slow,) = bandwidth_findings(hgx(3), child(copies(*lines)))
    assert slow.code == "smoke.p2p-slow"
    assert slow.title == "GPUs 0,1,2: peer copies are slow on GPU 1→2"
    assert slow.subject == "1>2"
    assert "61.0 GB/s (P2P); nominal 450 GB/s" in dict(slow.evidence)["GPU 1 → GPU 2"]


def test_every_pair_slow_points_at_the_path() -> None:
    lines = [f"{a}>{b} 9.5 host" for a in range(3) for b in range(3) if a != b]
    (slow,) = bandwidth_findings(gpu_facts(3), child(copies(*lines)))
    assert "every peer copy is slow" in slow.title
    assert "through host memory" in dict(slow.evidence)["GPU 0 → GPU 1"]


def test_a_pair_far_below_the_others_is_slow_even_without_a_nominal() -> None:
    facts = replace(gpu_facts(3), nvml=Absent("not read"))  # nothing known of the links
    lines = ["0>1 40", "0>2 41", "1>0 40", "1>2 4", "2>0 39", "2>1 40"]
    lines = [f"{line} p2p" for line in lines]
    (slow,) = bandwidth_findings(facts, child(copies(*lines)))
    assert slow.subject == "1>2" and "no nominal known" in str(slow.evidence)


def test_hostile_reports_are_ignored_not_believed() -> None:
    garbage = copies("0>1 nan p2p", "x>y 3 p2p", "0>9 1 p2p", "0>0 1 p2p", "1>0 -4 p2p", "")
    assert bandwidth_findings(hgx(3), child(allreduce("nan"), garbage)) == []
    assert bandwidth_findings(hgx(3), child(allreduce("inf"), copies("0>1 1e999 p2p"))) == []
    one = Target("GPU 0", nvml_indices=(0,))
    assert bandwidth_findings(hgx(1), child(allreduce("1"), target=one)) == []


# --- the child, against the fake torch ----------------------------------------------------------


def test_two_gpus_measure_and_a_slow_pair_is_named(fake_env: EnvMaker) -> None:
    """PCIe Gen5 x16 facts (63 GB/s a direction): the all-reduce at 10 GB/s of bus bandwidth
    and the 0→1 copy at 5 GB/s are slow, the 1→0 copy at 60 GB/s is not."""
    facts = gpu_facts(2)
    env = fake_env(
        BUSBW_GBPS="10",
        COPY_GBPS="60",
        COPY_GBPS_0_1="5",
    )
    result = run_smoke(facts, SmokeOptions(python=PYTHON, env=env, timeout=30, step_timeout=20))
    nccl = result.runs[-1]
    assert nccl.target.visible == f"{uuid(0)},{uuid(1)}"
    step = nccl.step("nccl-bandwidth")
    assert step is not None and step.status == PASSED, step
    busbw = float(step.get("busbw_gbps") or 0)
    assert 2 < busbw <= 10.5  # the fake's sleep is a floor on the time: never faster
    assert step.get("bytes") == str(256 << 20)
    pairs = nccl.step("p2p-bandwidth")
    assert pairs is not None and pairs.status == PASSED, pairs
    findings = {f.code: f for f in smoke_findings(facts, result)}
    assert findings["smoke.allreduce-slow"].subject == "GPUs 0,1"
    assert findings["smoke.p2p-slow"].subject == "0>1"
    assert "GPU 0→1" in findings["smoke.p2p-slow"].title


def test_one_gpu_says_why_the_multi_gpu_steps_did_not_run(fake_env: EnvMaker) -> None:
    result = run_smoke(gpu_facts(1), SmokeOptions(python=PYTHON, env=fake_env(), timeout=20))
    assert [r.target.label for r in result.runs] == ["GPU 0"]
    (passed,) = smoke_findings(gpu_facts(1), result)
    assert dict(passed.evidence)["multi-GPU steps"] == (
        "skipped: one GPU, no all-reduce or peer copy to measure"
    )
    cpu = run_smoke(gpu_facts(1), SmokeOptions(python=PYTHON, env=fake_env(), device="cpu"))
    (passed,) = smoke_findings(gpu_facts(1), cpu)
    assert "the CPU run" in dict(passed.evidence)["multi-GPU steps"]


def test_a_peer_copy_that_hangs_is_killed_within_its_step_limit(fake_env: EnvMaker) -> None:
    env = fake_env("peer-copy=hang")  # only the multi-GPU child copies between devices
    result = run_smoke(
        gpu_facts(2), SmokeOptions(python=PYTHON, env=env, timeout=30, step_timeout=4)
    )
    nccl = result.runs[-1]
    assert nccl.ending == "timeout" and nccl.seconds < 20
    bandwidth = nccl.step("nccl-bandwidth")
    assert bandwidth is not None and bandwidth.status == PASSED  # measured before: kept
    (timeout,) = [f for f in smoke_findings(gpu_facts(2), result) if f.code == "smoke.timeout"]
    assert "`p2p-bandwidth`" in dict(timeout.evidence)["failed step"]
