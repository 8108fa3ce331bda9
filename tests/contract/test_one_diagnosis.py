"""One diagnosis, told the same way by every command (issue 12).

For every recorded machine (every file in tests/scenarios, and the intent variants below) this
runs check, probe, slurm-healthcheck, recommend, fix and a node spec of the machine itself, and
holds them to one answer:

- the same verdict class: probe and slurm-healthcheck report what check reports, restricted to
  the findings their tier can see (neither reads torch; slurm-healthcheck judges no tables and
  runs no nvcc without torch);
- recommend is blocked only where check is unhealthy, and a healthy machine gets its wheel;
- the torch that recommend picks is the one in check's remediation and in fix's step;
- no command advises a step another calls wrong: no CPU wheel where check wants a CUDA build,
  no torch reinstall while recommend says the driver must be fixed first, nothing to fix on a
  healthy machine, no ``kill`` for a process this PID namespace cannot see;
- no "passed" without evidence: every check has an outcome and a reason, and none is left
  without a verdict.

A new scenario file is covered by adding it to tests/scenarios: nothing here names it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.engine import NO_VERDICT
from envdoctor.rules import all_codes, core_rules
from tests.conftest import PYTHON
from tests.fakes.host import SCENARIOS, FakeHost
from tests.fleet.slurm_fakes import FakeSlurm, SlurmHost
from tests.runner import invoke as cli_invoke

EXPECT_GPU = {"env": {"ENVDOCTOR_EXPECT": "gpu"}}
CASES: list[tuple[str, dict[str, Any]]] = [
    *((p.stem, {}) for p in sorted(SCENARIOS.glob("*.yaml"))),
    ("cpu_only", EXPECT_GPU),
    ("container_no_gpu", EXPECT_GPU),
]
IDS = [name + ("+expect-gpu" if over else "") for name, over in CASES]

CORE_CODES = frozenset(code for rule in core_rules() for code in rule.codes)
ALL_CODES = frozenset(all_codes())
# What the tiers that never read torch (probe, slurm-healthcheck) can see of check's findings.
# torch's facts decide these too (the CUDA of the torch, a CUDA build's strictness)
TORCH_DEPENDENT = {"cuda.nvcc-torch-mismatch", "cuda.cuda-home-invalid", "env.alloc-conf-invalid"}
NO_TORCH = frozenset(c for c in CORE_CODES if not c.startswith("torch.")) - TORCH_DEPENDENT
# slurm-healthcheck runs nvcc only next to torch (--python): a toolkit without a driver is no drain.
SLURM_VISIBLE = NO_TORCH - {"cuda.nvcc-without-driver"}
# The probe starts no process: no nvcc, no systemctl or nv-fabricmanager (an HGX A100 shows a
# failed fabric manager by its service alone: the probe's fabric check is then "unknown").
PROBE_VISIBLE = NO_TORCH - {
    "cuda.nvcc-without-driver",
    "cuda.nvcc-torch-mismatch",
    "cuda.cuda-home-invalid",
    "fabric.manager-version",
    # the interconnect (NVLink, P2P, PCIe counters, ACS, IOMMU) is read by check's full tier
    # only: two readings of the counters and every pair of GPUs do not fit the probe's 1 s
    # (pcie.link-degraded is judged on the GPU's own facts, which the probe reads too)
    *(
        code
        for code in ALL_CODES
        if code.startswith(("nvlink.", "p2p.", "pcie.")) and code != "pcie.link-degraded"
    ),
}


def _probe_blind(finding: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Findings check draws from what only its full tier reads: an HGX A100's fabric manager
    service (systemctl), Xids that only the journal holds (journalctl)."""
    if finding["code"] == "fabric.not-ready":
        return "nvidia-fabricmanager service" in json.dumps(finding["evidence"])
    if finding["code"] == "gpu.xid-events":
        return _journal(facts)
    return False


def _journal(facts: dict[str, Any]) -> bool:
    log = facts.get("kernel_log", {}).get("found") or {}
    return "journal" in str(log.get("source", ""))


_PIP_FORM = re.compile(
    r"pip install (?:--python \S+ )?(?:--force-reinstall |--reinstall )?torch==(\S+)"
    r"(?: torchvision==\S+)?(?: torchaudio==\S+)? (?:--index-url|--torch-backend) (\S+)"
)


class _Pip:
    """A torch install in any installer envdoctor advises (pip, ``uv pip install --python``),
    the set's index as a URL (uv's ``--torch-backend cu130`` is PyTorch's cu130 index)."""

    def search(self, text: str) -> re.Match[str] | None:
        match = _PIP_FORM.search(text)
        if match is None or "://" in match.group(2):
            return match
        return _PIP_FORM.search(
            text.replace(
                f"--torch-backend {match.group(2)}",
                f"--index-url https://download.pytorch.org/whl/{match.group(2)}",
            )
        )


_PIP = _Pip()


@dataclass
class Run:
    code: int
    output: str

    def json(self) -> Any:
        return json.loads(self.output)


def _run(name: str, over: dict[str, Any], *args: str, host: FakeHost | None = None) -> Run:
    host = host or FakeHost.scenario(name, **over)
    result = cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))
    return Run(result.exit_code, result.output)


def _status(findings: list[dict[str, Any]]) -> str:
    severities = {f["severity"] for f in findings}
    if "error" in severities:
        return "unhealthy"
    if any(f["inconclusive"] for f in findings):
        return "unknown"
    return "healthy"


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every command's answer for every case, computed once."""
    out: dict[str, dict[str, Any]] = {}
    for (name, over), case in zip(CASES, IDS, strict=True):
        check = _run(name, over, "check", "--json")
        probe = _run(name, over, "probe", "--json")
        recommend = _run(name, over, "recommend", "--json")
        fix = _run(name, over, "fix", "--format", "json")
        root = tmp_path_factory.mktemp(case)
        slurm = FakeSlurm.create(root)
        host = SlurmHost(name, slurm.environ, **over)
        healthcheck = _run(name, over, "slurm-healthcheck", "--dry-run", host=host)
        spec = root / "node.yaml"
        _run(name, over, "spec", "init", "-o", str(spec))
        spec_check = _run(name, over, "check", "--json", "--spec", str(spec))
        out[case] = {
            "check": check,
            "probe": probe,
            "recommend": recommend,
            "fix": fix,
            "slurm": healthcheck,
            "spec": spec_check,
        }
    return out


@pytest.mark.parametrize("case", IDS)
def test_every_check_has_an_outcome_and_a_reason(
    diagnosis: dict[str, dict[str, Any]], case: str
) -> None:
    data = diagnosis[case]["check"].json()
    found = {f["code"] for f in data["findings"]}
    for check in data["checks"]:
        assert check["reason"] and check["reason"] != NO_VERDICT, check
        if check["outcome"] == "failed" and not check["codes"]:
            # failed, and another check's finding says so: it names that finding
            named = {code for code in ALL_CODES if code in check["reason"]}
            assert named and named <= found, check
    passed = {c["name"] for c in data["checks"] if c["outcome"] == "passed"}
    assert set(data["passed"]) == passed


@pytest.mark.parametrize("case", IDS)
def test_probe_and_slurm_say_what_check_says_for_what_they_read(
    diagnosis: dict[str, dict[str, Any]], case: str
) -> None:
    runs = diagnosis[case]
    check = runs["check"].json()
    visible = [f for f in check["findings"] if f["code"] in PROBE_VISIBLE]
    blind = {f["code"] for f in visible if _probe_blind(f, check["facts"])}
    probe = runs["probe"].json()
    found = {f["code"] for f in probe["findings"]}
    # The probe may say it could not read what check read with a process (the journal).
    unchecked = {"gpu.xid-unchecked"} if _journal(check["facts"]) else set()
    assert {f["code"] for f in visible} - blind <= found <= {f["code"] for f in visible} | unchecked
    assert probe["status"] == _status([f for f in visible if f["code"] in found])
    slurm_seen = [f for f in check["findings"] if f["code"] in SLURM_VISIBLE]
    verdict = runs["slurm"].output.splitlines()[0]  # "healthy (1 warning): …", "unhealthy: …"
    assert verdict.split(":", 1)[0].split(" ")[0] == _status(slurm_seen), runs["slurm"].output


@pytest.mark.parametrize("case", IDS)
def test_recommend_agrees_with_check(diagnosis: dict[str, dict[str, Any]], case: str) -> None:
    runs = diagnosis[case]
    check = runs["check"].json()
    codes = {f["code"] for f in check["findings"]}
    rec = runs["recommend"].json()
    if runs["recommend"].code != 0:
        assert runs["check"].code == 1, "recommend is blocked where check sees nothing wrong"
    if runs["check"].code == 0:
        assert runs["recommend"].code == 0
    if rec["outcome"] == "cpu-only":
        assert "torch.cpu-build" not in codes
        assert codes & {"machine.cpu-only", "container.no-gpu-access"}
    if "torch.cpu-build" in codes:
        assert rec["outcome"] != "cpu-only"


def _pick(rec: dict[str, Any]) -> tuple[str, str] | None:
    choice = rec["recommendation"]
    if not choice:
        return None
    match = _PIP.search(choice["command"])
    assert match, choice["command"]
    return match.group(1), match.group(2)


@pytest.mark.parametrize("case", IDS)
def test_one_torch_everywhere(diagnosis: dict[str, dict[str, Any]], case: str) -> None:
    runs = diagnosis[case]
    pick = _pick(runs["recommend"].json())
    check = runs["check"].json()
    advised = {
        m.groups()
        for f in check["findings"]
        for step in (f["remediation"] or {}).get("steps", [])
        for m in [_PIP.search(step)]
        if m and "cpu" not in m.group(2)
    }
    steps = runs["fix"].json()["steps"]
    reinstall = [s for s in steps if s["kind"] == "reinstall-torch"]
    if pick is None:
        assert not advised, f"check advises {advised}; recommend picks nothing"
        assert not reinstall, "fix reinstalls torch while recommend says the driver comes first"
        return
    assert advised <= {pick}, f"check advises {advised}; recommend picks {pick}"
    for step in reinstall:
        argv = step["commands"][0]
        assert f"torch=={pick[0]}" in argv and pick[1] in argv, (argv, pick)


@pytest.mark.parametrize("case", IDS)
def test_fix_has_nothing_to_do_where_check_is_healthy(
    diagnosis: dict[str, dict[str, Any]], case: str
) -> None:
    runs = diagnosis[case]
    plan = runs["fix"].json()
    if runs["check"].code == 0 and not runs["check"].json()["summary"]["warning"]:
        assert [s["kind"] for s in plan["steps"]] in ([], ["verify"]), plan["steps"]
        assert not plan["addressed"]
    check_codes = {f["code"] for f in runs["check"].json()["findings"]}
    assert set(plan["addressed"]) <= check_codes


@pytest.mark.parametrize("case", IDS)
def test_no_signal_to_a_process_this_namespace_cannot_see(
    diagnosis: dict[str, dict[str, Any]], case: str
) -> None:
    runs = diagnosis[case]
    facts = runs["check"].json()["facts"]
    nvml = facts["nvml"].get("found") or {"gpus": []}
    hidden = {
        p["pid"]
        for gpu in nvml["gpus"]
        for p in (gpu["processes"].get("found") or [])
        if "found" not in p["name"]
    }
    for finding in runs["check"].json()["findings"]:
        for step in (finding["remediation"] or {}).get("steps", []):
            assert not any(f"kill {pid}" in step for pid in hidden), step
    for step in runs["fix"].json()["steps"]:
        if step["kind"] == "terminate":
            assert not any(str(pid) in " ".join(step["commands"][0]) for pid in hidden)


@pytest.mark.parametrize("case", IDS)
def test_a_spec_of_the_machine_itself_changes_nothing(
    diagnosis: dict[str, dict[str, Any]], case: str
) -> None:
    runs = diagnosis[case]
    with_spec = runs["spec"].json()
    assert runs["spec"].code == runs["check"].code
    outcome = {c["name"]: c for c in with_spec["checks"]}["spec"]
    assert outcome["outcome"] == "passed", outcome


def test_every_scenario_is_covered() -> None:
    assert {p.stem for p in Path(SCENARIOS).glob("*.yaml")} <= {name for name, _ in CASES}
