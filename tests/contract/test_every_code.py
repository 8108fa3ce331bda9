"""Every finding code is exercised, and the codes the fix planner names exist (issue 17).

A code a rule declares (``all_codes()``) is emitted either by a recorded machine (a file in
tests/scenarios, judged with no intent and with ``--expect gpu``) or by its entry in
``TRIGGERS``: the facts of a machine that must produce it, and the documented severity it must
have there. A new code with neither fails here by name, and so does a ``TRIGGERS`` entry whose
code no rule declares any more.

Every finding these machines produce is held to what docs/findings.md says of its code (its
severity; "inconclusive" only where documented) and to what every finding promises: evidence
that says what was read, a remediation with a summary.

The remedy package spells the codes it acts on as strings; each one must be a code some rule
or the smoke classifier can emit, so a renamed code cannot leave ``envdoctor fix`` silently
matching nothing. Likewise the smoke package names only codes of its table, and each of them
somewhere outside it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import envdoctor.remedy
import envdoctor.smoke
from envdoctor.model.facts import (
    EccErrors,
    Facts,
    LibraryCopy,
    LibraryFamily,
    Nvcc,
    PcieLink,
)
from envdoctor.model.finding import Finding, Severity, is_valid_code
from envdoctor.model.probed import Absent, Found
from envdoctor.model.views import NO_INTENT, Intent
from envdoctor.rules import all_codes
from envdoctor.smoke.codes import CODES as SMOKE_CODES
from tests import factories as f
from tests.compat.machines import machine, named, torch_build
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
INTENTS = {"no intent": NO_INTENT, "--expect gpu": Intent.of("gpu", None)}


def _documented() -> dict[str, str]:
    """code → its severity cell, from the tables whose first column is ``code`` (the explain
    signature tables, whose first column is ``id``, are not finding codes)."""
    out: dict[str, str] = {}
    first = ""
    for line in DOC.splitlines():
        if not line.startswith("|"):
            first = ""
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not first:
            first = cells[0]
            continue
        code = re.fullmatch(r"`([a-z0-9.-]+)`", cells[0])
        if first == "code" and code:
            out[code.group(1)] = cells[1]
    return out


DOCUMENTED = _documented()


def documented_severities(code: str) -> set[str]:
    """ "error / warning (inconclusive)" → {"error", "warning"}."""
    cell = DOCUMENTED.get(code, "").replace("(inconclusive)", "")
    return {s.strip() for s in cell.split("/") if s.strip()}


# --- the triggers: a machine for each code no recorded scenario emits --------------------------


@dataclasses.dataclass(frozen=True)
class Trigger:
    """Facts on which a rule must emit its code, with the (documented) severity it must have."""

    severity: Severity
    facts: Callable[[], Facts]


CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")
CU126 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
NVCC_13 = "Cuda compilation tools, release 13.0, V13.0.88\n"


def _one_gpu(**over: object) -> Facts:
    """The healthy H100 of tests/factories.py with one GPU field changed."""
    return f.facts(nvml=f.nvml((f.gpu(0, **over),)))


def _daemon_json_with_a_trailing_comma() -> Facts:
    text = '{\n  "runtimes": {\n    "nvidia": {"path": "nvidia-container-runtime", "args": []},\n  }\n}\n'
    return scenario_facts("host_toolkit_missing", files={"/etc/docker/daemon.json": text})


def _toolkit_without_a_driver() -> Facts:
    return scenario_facts(
        "no_driver",
        which={"nvcc": "/usr/local/cuda-13.0/bin/nvcc"},
        files={"/usr/local/cuda-13.0/bin/nvcc": ""},
        commands=[{"argv": ["nvcc", "--version"], "stdout": NVCC_13}],
    )


def _two_cudnns() -> Facts:
    copies = (
        ("/usr/local/cuda/lib64/libcudnn.so.8.9.7", "8.9.7", "LD_LIBRARY_PATH"),
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "9.1.0", "ldconfig"),
    )
    family = LibraryFamily("libcudnn", tuple(LibraryCopy(p, p, v, o) for p, v, o in copies))
    return f.facts(libraries=Found((family,)))


TRIGGERS: dict[str, Trigger] = {
    "container.config-invalid": Trigger(Severity.ERROR, _daemon_json_with_a_trailing_comma),
    # CUDA_HOME left pointing at a toolkit that was removed
    "cuda.cuda-home-invalid": Trigger(
        Severity.WARNING,
        lambda: scenario_facts("healthy_h100", env={"CUDA_HOME": "/usr/local/cuda-12.4"}),
    ),
    "cuda.nvcc-without-driver": Trigger(Severity.WARNING, _toolkit_without_a_driver),
    "cuda.toolkit-driver-mismatch": Trigger(
        Severity.WARNING,
        lambda: named("a100-535", nvcc=Found(Nvcc("/usr/local/cuda-13.0/bin/nvcc", "13.0"))),
    ),
    # a system cuDNN 8 where torch's CUDA 13 needs cuDNN 9
    "cudnn.cuda-incompatible": Trigger(
        Severity.ERROR,
        lambda: named(
            "h100-580",
            torch=torch_build(
                "2.11.0+cu130", "13.0", CU130, cudnn_version=Found("8907"), nvidia_wheels=()
            ),
        ),
    ),
    "cudnn.load-mismatch": Trigger(
        Severity.ERROR,
        lambda: named(
            "h100-580",
            torch=torch_build(
                "2.12.0+cu130",
                "13.0",
                CU130,
                cudnn_version=Absent(
                    "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against "
                    "(9, 20, 0) but found runtime version (9, 13, 1)."
                ),
            ),
        ),
    ),
    # Blackwell needs >= 570.26
    "driver.gpu-unsupported": Trigger(
        Severity.ERROR,
        lambda: machine("NVIDIA GeForce RTX 5090", "12.0", "560.35.03", "12.6", "open"),
    ),
    "driver.open-modules-required": Trigger(
        Severity.ERROR,
        lambda: machine("NVIDIA GeForce RTX 5090", "12.0", "570.124.06", "12.8", "proprietary"),
    ),
    "env.alloc-conf-invalid": Trigger(
        Severity.ERROR,
        lambda: f.facts(env=f.env({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:abc"})),
    ),
    "env.cuda-launch-blocking": Trigger(
        Severity.WARNING,
        lambda: scenario_facts("healthy_h100", env={"CUDA_LAUNCH_BLOCKING": "1"}),
    ),
    "gpu.compute-mode": Trigger(Severity.ERROR, lambda: _one_gpu(compute_mode=Found("prohibited"))),
    "gpu.ecc-uncorrectable": Trigger(
        Severity.ERROR,
        lambda: _one_gpu(ecc=Found(EccErrors(volatile_uncorrectable=2, aggregate_uncorrectable=2))),
    ),
    # issue 39: two data-centre GPUs in persistence mode, and no nvidia-persistenced
    "gpu.persistenced-not-running": Trigger(
        Severity.INFO,
        lambda: scenario_facts(
            "memory_held_some_gpus",
            files={"/run/nvidia-persistenced/nvidia-persistenced.pid": None},
        ),
    ),
    "gpu.pcie-degraded": Trigger(
        Severity.WARNING,
        lambda: _one_gpu(pcie=Found(PcieLink(gen=4, width=8, max_gen=5, max_width=16))),
    ),
    "gpu.throttled": Trigger(
        Severity.WARNING,
        lambda: _one_gpu(throttle_reasons=Found(("hw-thermal-slowdown", "sw-power-cap"))),
    ),
    "libs.shadowed": Trigger(Severity.WARNING, _two_cudnns),
    # an RTX 5090 (sm_120) with a cu126 wheel, which stops at sm_90
    "torch.arch-unsupported": Trigger(
        Severity.ERROR,
        lambda: named("rtx5090-570", torch=torch_build("2.11.0+cu126", "12.6", CU126)),
    ),
    "torch.not-installed": Trigger(
        Severity.WARNING,
        lambda: f.facts(torch=f.torch(Absent("torch is not installed for /usr/bin/python3"))),
    ),
}


# --- what the scenarios and triggers emit --------------------------------------------------------


@functools.cache
def scenario_findings() -> tuple[tuple[str, Finding], ...]:
    """(where, finding) for every finding of every recorded scenario, under each intent."""
    out: list[tuple[str, Finding]] = []
    for name in SCENARIO_NAMES:
        facts = scenario_facts(name)
        for label, intent in INTENTS.items():
            out.extend((f"{name} ({label})", x) for x in report_of(facts, intent=intent).findings)
    return tuple(out)


@functools.cache
def trigger_findings(code: str) -> tuple[Finding, ...]:
    return report_of(TRIGGERS[code].facts()).findings


def all_findings() -> list[tuple[str, Finding]]:
    return [
        *scenario_findings(),
        *((f"TRIGGERS[{code!r}]", x) for code in TRIGGERS for x in trigger_findings(code)),
    ]


def test_every_code_has_a_scenario_or_a_trigger() -> None:
    by_scenario = {x.code for _, x in scenario_findings()}
    declared = set(all_codes())
    missing = sorted(declared - by_scenario - set(TRIGGERS))
    stale = sorted(set(TRIGGERS) - declared)
    undeclared = sorted(by_scenario - declared)
    assert not (missing or stale or undeclared), (
        f"no scenario emits {missing} and TRIGGERS has no entry for it (add a machine to "
        f"tests/scenarios, or a trigger); TRIGGERS names {stale}, which no rule declares "
        f"(renamed?); scenarios emit {undeclared}, which no rule declares"
    )


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_each_trigger_emits_its_code_with_its_documented_severity(code: str) -> None:
    trigger = TRIGGERS[code]
    assert trigger.severity.label in documented_severities(code), (
        f"docs/findings.md gives {code} {DOCUMENTED.get(code)!r}, not {trigger.severity.label}"
    )
    emitted = [x.severity for x in trigger_findings(code) if x.code == code]
    assert emitted, [x.code for x in trigger_findings(code)]
    assert set(emitted) == {trigger.severity}


def test_every_finding_has_its_documented_severity() -> None:
    wrong = [
        (where, x.code, x.severity.label)
        for where, x in all_findings()
        if x.severity.label not in documented_severities(x.code)
    ]
    assert not wrong, wrong
    vague = [
        (where, x.code)
        for where, x in all_findings()
        if x.inconclusive and "(inconclusive)" not in DOCUMENTED[x.code]
    ]
    assert not vague, f"inconclusive, but docs/findings.md does not say the code can be: {vague}"


def test_every_finding_has_evidence_and_a_remediation() -> None:
    for where, x in all_findings():
        assert x.title.strip(), (where, x.code)
        assert x.evidence, f"{x.code} in {where} has no evidence"
        assert all(label.strip() and value.strip() for label, value in x.evidence), (
            where,
            x.code,
            x.evidence,
        )
        assert x.remediation is not None and x.remediation.summary.strip(), (
            f"{x.code} in {where} has no remediation summary"
        )


# --- the codes the remedy package names -------------------------------------------------------

EMITTABLE = frozenset(all_codes()) | frozenset(SMOKE_CODES)
NAMESPACES = frozenset(code.split(".", 1)[0] for code in EMITTABLE)


def code_literals(package: Path) -> list[tuple[str, str]]:
    """(file:line, text) of every string constant in the package's source that has the shape
    of a finding code in a namespace real codes use ("driver.…", "smoke.…"): a file name such
    as "script.sh.in" or a key such as "nvidia-container-cli.no-cgroups" is not one."""
    found: list[tuple[str, str]] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if is_valid_code(node.value) and node.value.split(".", 1)[0] in NAMESPACES:
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return found


def test_the_remedy_package_names_only_codes_that_are_emitted() -> None:
    literals = code_literals(Path(envdoctor.remedy.__file__).parent)
    assert literals, "found no finding code in envdoctor/remedy: is the walk looking there?"
    unknown = sorted((where, code) for where, code in literals if code not in EMITTABLE)
    assert not unknown, (
        f"envdoctor/remedy names codes no rule and no smoke step emits: {unknown} "
        "(renamed? the planner would never match them)"
    )


def test_every_smoke_code_is_produced_and_no_other_is_named() -> None:
    """The smoke package names each code of its table (envdoctor/smoke/codes.py) somewhere else
    too (a classifier row, an emitted finding), and names no smoke code the table lacks."""
    package = Path(envdoctor.smoke.__file__).parent
    table = f"{(package / 'codes.py').relative_to(ROOT)}:"
    named = {
        code
        for where, code in code_literals(package)
        if code.startswith("smoke.") and not where.startswith(table)
    }
    assert not named - set(SMOKE_CODES), f"not in smoke's table: {sorted(named - set(SMOKE_CODES))}"
    assert not set(SMOKE_CODES) - named, f"nothing produces {sorted(set(SMOKE_CODES) - named)}"
