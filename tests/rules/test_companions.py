"""torch, torchvision and torchaudio as one set, in the user's own installer (#37 item 2).

What a user sees: ``check`` flags a torchvision/torchaudio that does not belong with the torch
(another release, a CPU build beside a CUDA one), and every install envdoctor advises names the
whole set, from one index, with the environment's installer (pip, uv, conda then pip).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envdoctor.compat.loader import load_tables
from envdoctor.model.facts import Companion, InstallerFacts, TorchFacts
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.outcome import Outcome
from envdoctor.model.probed import Absent, Found
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes.torch_probe import probe_torch
from envdoctor.remedy.model import ReinstallTorch, RunCommand
from envdoctor.remedy.planner import PlanOptions, build_plan
from tests import factories as f
from tests.conftest import report_of, scenario_facts
from tests.remedy.cases import fix_facts

CODE = "torch.companions-mismatched"
TABLES = load_tables()


def findings(report: Any, code: str) -> list[Finding]:
    return [x for x in report.findings if x.code == code]


def with_companions(
    torchvision: str | None, torchaudio: str | None = None, *, torch_version: str = "2.11.0+cu130"
) -> Any:
    def one(name: str, version: str | None) -> Companion:
        return Companion(name, Found(version) if version else Absent("not installed"), "pip")

    base = f.facts()
    build = replace(base.torch.torch.value, version=torch_version)  # type: ignore[union-attr]
    companions = (one("torchvision", torchvision), one("torchaudio", torchaudio))
    installer = InstallerFacts(prefix="/opt/venv", pip=True, uv_venv=False, conda=False)
    torch = TorchFacts(
        python="/opt/venv/bin/python",
        torch=Found(build),
        companions=Found(companions),
        installer=Found(installer),
    )
    return replace(base, torch=torch)


# --- check: a mismatched set --------------------------------------------------------------------


def test_a_cpu_torchvision_beside_a_cuda_torch_is_an_error_with_the_whole_set_as_its_fix() -> None:
    report = report_of(scenario_facts("cpu_torchvision_cuda_torch"))
    (finding,) = findings(report, CODE)
    assert finding.severity is Severity.ERROR
    assert finding.title == (
        "torchvision 0.26.0+cpu is a CPU build beside the CUDA build torch 2.11.0+cu130: its "
        "operators have no CUDA kernels"
    )
    assert ("released with torch 2.11.0", "torchvision 0.26.0, torchaudio 2.11.0") in (
        finding.evidence
    )
    assert finding.remediation is not None
    assert finding.remediation.steps == (
        "/opt/venv/bin/python -m pip uninstall -y torch torchvision torchaudio",
        "/opt/venv/bin/python -m pip install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cu130",
    )
    assert report.exit_code == 1


@pytest.mark.parametrize(
    ("torchvision", "torchaudio", "severity", "says"),
    [
        ("0.25.0+cu130", "2.11.0+cu130", Severity.ERROR, "torchvision 0.25.0 was not released"),
        ("0.26.0+cu130", "2.10.0+cu130", Severity.ERROR, "torchaudio 2.10.0 was not released"),
        ("0.26.0+cu126", None, Severity.ERROR, "refuses to load across CUDA majors"),
        ("0.26.0+cu128", None, Severity.ERROR, "refuses to load across CUDA majors"),
    ],
)
def test_versions_not_released_together_or_another_cuda_are_flagged(
    torchvision: str, torchaudio: str | None, severity: Severity, says: str
) -> None:
    (finding,) = findings(report_of(with_companions(torchvision, torchaudio)), CODE)
    assert finding.severity is severity
    assert any(says in value for _, value in finding.evidence), finding.evidence


def test_a_pypi_cuda_torch_without_a_tag_beside_a_cpu_torchvision_is_an_error() -> None:
    facts = with_companions("0.26.0+cpu", torch_version="2.11.0")  # PyPI's: torch.version.cuda
    (finding,) = findings(report_of(facts), CODE)
    assert finding.severity is Severity.ERROR
    assert "is a CPU build beside the CUDA build torch 2.11.0" in finding.title
    assert finding.remediation is not None
    assert finding.remediation.steps[-1].endswith(
        "--index-url https://download.pytorch.org/whl/cu130"
    )


def test_a_patch_release_apart_is_a_warning() -> None:
    facts = with_companions("0.29.0+cu130", torch_version="2.14.1+cu130")
    (finding,) = findings(report_of(facts), CODE)
    assert finding.severity is Severity.WARNING
    assert "torchvision 0.29.0 was not released with torch 2.14.1 (its torchvision is 0.29.1)" in (
        finding.title
    )


@pytest.mark.parametrize(
    ("torchvision", "torchaudio"),
    [("0.26.0+cu130", "2.11.0+cu130"), ("0.26.0", "2.11.0"), (None, None)],
    ids=["same variant", "PyPI wheels without a tag", "not installed"],
)
def test_a_matched_set_passes(torchvision: str | None, torchaudio: str | None) -> None:
    report = report_of(with_companions(torchvision, torchaudio))
    assert not findings(report, CODE)
    (check,) = [c for c in report.checks if c.rule.name == "torch.companions"]
    assert check.outcome is Outcome.PASSED, check


# --- the user's installer -----------------------------------------------------------------------


def _steps(name: str, code: str) -> tuple[str, ...]:
    (finding,) = findings(report_of(scenario_facts(name)), code)
    assert finding.remediation is not None
    return finding.remediation.steps


def test_a_uv_venv_without_pip_is_fixed_with_uv() -> None:
    steps = _steps("uv_venv_cpu_wheel", "torch.cpu-build")
    assert not any("-m pip" in s for s in steps), steps  # "No module named pip" there
    assert steps[0] == "uv pip uninstall --python /opt/venv/bin/python torch torchvision torchaudio"
    assert steps[1].startswith(
        "uv pip install --python /opt/venv/bin/python torch==2.13.0 torchvision==0.28.0 "
        "torchaudio==2.11.0 --torch-backend cu130"
    )


def test_a_conda_installed_torch_is_removed_by_conda_before_the_envs_pip_installs_the_set() -> None:
    steps = _steps("conda_env_torch", "torch.cpu-build")
    assert steps[0].startswith(
        "conda remove --prefix /opt/conda/envs/train --force -y pytorch torchvision torchaudio"
    )
    assert steps[-1].startswith(
        "/opt/venv/bin/python -m pip install torch==2.13.0 torchvision==0.28.0 "
        "torchaudio==2.11.0 --index-url https://download.pytorch.org/whl/cu130"
    )


def test_fix_uses_the_environments_installer() -> None:
    def plan(name: str) -> Any:
        report = report_of(scenario_facts(name))
        return build_plan(report, fix_facts(), PlanOptions(tables=TABLES))

    uv = [s.action for s in plan("uv_venv_cpu_wheel").steps]
    assert not any(isinstance(a, ReinstallTorch) for a in uv)  # its pip -m pip has no pip
    (install,) = [
        a for a in uv if isinstance(a, RunCommand) and a.argv[:3] == ("uv", "pip", "install")
    ]
    assert install.argv[3:5] == ("--python", "/opt/venv/bin/python")
    assert "torchvision==0.28.0" in install.argv and install.argv[-2:] == (
        "--torch-backend",
        "cu130",
    )
    conda = [s.action for s in plan("conda_env_torch").steps]
    assert isinstance(conda[0], RunCommand) and conda[0].argv[:2] == ("conda", "remove")
    assert isinstance(conda[1], ReinstallTorch)
    assert isinstance(conda[2], RunCommand) and "torchvision==0.28.0" in conda[2].argv


# --- the real torch child, against this machine's CPU torch ---------------------------------------


def test_the_real_child_reports_companions_not_installed_and_this_venvs_pip() -> None:
    """The test venv has torch 2.13.0+cpu and neither torchvision nor torchaudio."""
    facts = probe_torch(SystemHost(), python=sys.executable, deadline=Deadline(60))
    assert isinstance(facts.torch, Found), facts.torch
    assert isinstance(facts.companions, Found), facts.companions
    by_name = {c.name: c.version for c in facts.companions.value}
    assert set(by_name) == {"torchvision", "torchaudio", "triton"}
    for name in ("torchvision", "torchaudio"):
        assert by_name[name] == Absent("not installed")
    assert isinstance(facts.installer, Found), facts.installer
    assert facts.installer.value.pip is True and facts.installer.value.conda is False
    report = report_of(replace(f.facts(), torch=facts))
    (check,) = [c for c in report.checks if c.rule.name == "torch.companions"]
    assert check.reason == "neither torchvision nor torchaudio is installed: nothing to match"


def test_the_child_reads_a_uv_venv_and_the_dist_info_of_a_cpu_torchvision(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cfg = venv / "pyvenv.cfg"
    cfg.write_text(cfg.read_text() + "uv = 0.9.2\n")
    site = tmp_path / "site"
    dist = site / "torchvision-0.28.0+cpu.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0+cpu\n"
    )
    (dist / "INSTALLER").write_text("uv\n")
    python = str(venv / "bin" / "python")
    env = {**os.environ, "PYTHONPATH": str(site)}
    from envdoctor.probes.torch_build import child_source, decode_environment, last_json

    done = subprocess.run(
        [python, "-c", child_source()], capture_output=True, text=True, env=env, check=False
    )
    parsed = decode_environment(last_json(done.stdout))
    installer, companions = parsed["installer"], parsed["companions"]
    assert isinstance(installer, Found) and isinstance(companions, Found), parsed
    assert installer.value.uv_venv and installer.value.uv_version == "0.9.2"
    assert installer.value.pip is False
    assert Companion("torchvision", Found("0.28.0+cpu"), "uv") in companions.value


def test_a_snapshot_from_before_the_companions_loads_and_is_not_judged() -> None:
    from envdoctor.model.codec import decode, encode
    from envdoctor.model.facts import NOT_REPORTED, Facts

    data = encode(f.facts())
    for key in ("companions", "installer"):
        del data["torch"][key]
    facts = decode(Facts, data)
    assert facts.torch.companions == NOT_REPORTED and facts.torch.installer == NOT_REPORTED
    report = report_of(facts)
    (check,) = [c for c in report.checks if c.rule.name == "torch.companions"]
    assert check.outcome is Outcome.NOT_APPLICABLE
    assert "snapshot from an older envdoctor" in check.reason


def test_fix_reinstalls_the_cpu_torchvision_from_torchs_cuda_index() -> None:
    report = report_of(scenario_facts("cpu_torchvision_cuda_torch"))
    plan = build_plan(report, fix_facts(), PlanOptions(tables=TABLES))
    assert CODE in plan.addressed
    actions = [s.action for s in plan.steps]
    assert isinstance(actions[0], ReinstallTorch) and actions[0].requirement == "torch==2.11.0"
    assert isinstance(actions[1], RunCommand)
    assert actions[1].argv == (
        "/opt/venv/bin/python",
        "-m",
        "pip",
        "install",
        "--force-reinstall",
        "--no-deps",
        "torchvision==0.26.0",
        "torchaudio==2.11.0",
        "--index-url",
        "https://download.pytorch.org/whl/cu130",
    )


def test_the_report_names_torchs_companions_and_the_installer_it_advises() -> None:
    from envdoctor.render.summary import machine_lines

    lines = dict(machine_lines(scenario_facts("uv_venv_cpu_wheel")))
    assert lines["with"] == "torchvision 0.28.0+cpu"
    assert lines["install"] == "uv: a venv made by uv 0.9.2 (pyvenv.cfg)"
    assert "with" not in dict(machine_lines(scenario_facts("healthy_h100")))  # not reported
