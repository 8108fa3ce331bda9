"""Node specs: written from a machine, read back with file:line errors, drift as spec.* codes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.errors import EnvdoctorError
from envdoctor.fleet import spec as ns
from envdoctor.model.facts import Facts, MigMode, TorchBroken
from envdoctor.model.finding import Severity
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.snapshot import dump_snapshot
from tests import factories as fx
from tests.conftest import PYTHON, SCENARIO_NAMES, scenario_facts
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke


def eight_h100(**gpu: object) -> Facts:
    return fx.facts(nvml=fx.nvml(gpus=tuple(fx.gpu(i, **gpu) for i in range(8))))


def own_spec(facts: Facts) -> ns.Spec:
    spec, _notes = ns.spec_from_facts(facts)
    return ns.parse_spec(ns.dump_spec(spec), source="node.yaml")


def codes(facts: Facts, spec: ns.Spec) -> list[str]:
    return [f.code for f in ns.spec_findings(facts, spec)]


def test_spec_of_eight_h100_reads_back_the_same() -> None:
    facts = eight_h100()
    spec, notes = ns.spec_from_facts(facts)
    assert notes == ()
    assert spec == ns.Spec(
        gpu_count=8,
        gpu_model="NVIDIA H100 80GB HBM3",
        persistence_mode=True,
        ecc=True,
        mig="off",
        driver_branch="580",
        cuda="13.0",
        torch_version="2.11.0+cu130",
        cudnn="9.15.0",
    )
    text = ns.dump_spec(spec, hostname="gpu-node-01", created="2026-05-01T12:00:00+00:00")
    assert 'branch: "580"' in text and "mig: off" in text
    assert ns.parse_spec(text, source="n.yaml") == replace(spec, source="n.yaml")


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_every_machine_meets_its_own_spec(scenario: str) -> None:
    facts = scenario_facts(scenario)
    assert ns.spec_findings(facts, own_spec(facts)) == ()


def test_mig_layout_per_gpu() -> None:
    gpus = (
        fx.gpu(0, mig_mode=Found(MigMode(True, True)), mig_devices=Found(7)),
        fx.gpu(1),
        fx.gpu(2, mig_mode=Absent("not supported by this GPU or driver (NVML NotSupported)")),
    )
    facts = fx.facts(nvml=fx.nvml(gpus=gpus))
    spec = own_spec(facts)
    assert spec.mig == (7, None, None)
    assert "mig: [7, off, off]" in ns.dump_spec(spec)
    fewer = (replace(gpus[0], mig_devices=Found(3)), *gpus[1:])
    (finding,) = ns.spec_findings(fx.facts(nvml=fx.nvml(gpus=fewer)), spec)
    assert finding.code == ns.MIG
    assert "GPU 0: MIG on with 3 devices, expected on with 7 devices" in finding.title


DRIFTS = [
    (
        "gpu count",
        eight_h100(),
        {"nvml": fx.nvml(gpus=tuple(fx.gpu(i) for i in range(7)))},
        ns.GPU_COUNT,
    ),
    (
        "no driver at all",
        eight_h100(),
        {
            "nvml": Absent("NVML library not found"),
            "kernel": fx.kernel(driver=Absent("/proc/driver/nvidia/version does not exist")),
        },
        ns.GPU_COUNT,
    ),
    (
        "model",
        eight_h100(),
        {
            "nvml": fx.nvml(
                gpus=(
                    *(fx.gpu(i) for i in range(7)),
                    fx.gpu(7, name=Found("NVIDIA A100-SXM4-80GB")),
                )
            )
        },
        ns.GPU_MODEL,
    ),
    (
        "driver branch",
        eight_h100(),
        {
            "nvml": fx.nvml(
                gpus=tuple(fx.gpu(i) for i in range(8)), driver_version=Found("570.195.03")
            )
        },
        ns.DRIVER_BRANCH,
    ),
    (
        "cuda",
        eight_h100(),
        {
            "nvml": fx.nvml(
                gpus=tuple(fx.gpu(i) for i in range(8)), cuda_driver_version=Found("12.8")
            )
        },
        ns.CUDA_VERSION,
    ),
    (
        "torch",
        eight_h100(),
        {"torch": fx.torch(Found(fx.torch_build(version="2.10.0+cu128")))},
        ns.TORCH_VERSION,
    ),
    (
        "torch missing",
        eight_h100(),
        {"torch": fx.torch(Absent("No module named 'torch'"))},
        ns.TORCH_VERSION,
    ),
    (
        "cudnn",
        eight_h100(),
        {"torch": fx.torch(Found(fx.torch_build(cudnn_version=Found("90100"))))},
        ns.CUDNN_VERSION,
    ),
    (
        "persistence",
        eight_h100(),
        {"nvml": fx.nvml(gpus=tuple(fx.gpu(i, persistence_mode=Found(i != 5)) for i in range(8)))},
        ns.PERSISTENCE,
    ),
    (
        "ecc off",
        eight_h100(),
        {
            "nvml": fx.nvml(
                gpus=tuple(
                    fx.gpu(i, ecc=Absent("not supported (NVML NotSupported)")) for i in range(8)
                )
            )
        },
        ns.ECC,
    ),
    (
        "mig on",
        eight_h100(),
        {
            "nvml": fx.nvml(
                gpus=(
                    fx.gpu(0, mig_mode=Found(MigMode(True, True)), mig_devices=Found(0)),
                    *(fx.gpu(i) for i in range(1, 8)),
                )
            )
        },
        ns.MIG,
    ),
]


@pytest.mark.parametrize(("what", "base", "change", "code"), DRIFTS, ids=[d[0] for d in DRIFTS])
def test_each_drift_is_one_error_finding(
    what: str, base: Facts, change: dict[str, Any], code: str
) -> None:
    spec = own_spec(base)
    findings = ns.spec_findings(replace(base, **change), spec)
    assert code in [f.code for f in findings]
    for finding in findings:
        assert finding.severity == Severity.ERROR, what
        assert finding.evidence[0] == ("spec", "node.yaml")
        assert finding.remediation is not None and finding.remediation.steps


def test_driver_version_pin_and_branch() -> None:
    spec = ns.parse_spec('schema_version: 1\ndriver:\n  branch: "580"\n  version: 580.95.05\n')
    assert codes(eight_h100(), spec) == [ns.DRIVER_VERSION]
    assert codes(fx.facts(nvml=ProbeFailed("LibRmVersionMismatch", "x")), spec) == [
        ns.DRIVER_VERSION
    ]


def test_torch_spec_without_local_part_matches_any_build() -> None:
    spec = ns.parse_spec("schema_version: 1\ntorch:\n  version: 2.11.0\n  cudnn: 9.15\n")
    assert codes(eight_h100(), spec) == []


@pytest.mark.parametrize(
    ("expected", "drift"),
    [("2.11", False), ("2.11.0+cu130", False), ("2.1", True), ("2.11.0+cu126", True), ("2", False)],
)
def test_torch_version_matches_on_the_parts_given(expected: str, drift: bool) -> None:
    spec = ns.parse_spec(f"schema_version: 1\ntorch:\n  version: {expected}\n")
    assert codes(eight_h100(), spec) == ([ns.TORCH_VERSION] if drift else [])


def test_cannot_verify_is_inconclusive_not_drift() -> None:
    spec = own_spec(eight_h100())
    failed = fx.facts(nvml=ProbeFailed("Timeout", "NVML did not answer"))
    findings = ns.spec_findings(failed, spec)
    assert {f.code for f in findings} == {ns.UNVERIFIABLE}
    assert all(f.inconclusive and f.severity == Severity.WARNING for f in findings)
    not_probed = replace(
        eight_h100(), torch=fx.torch(Absent("not probed (torch is skipped by this command)"))
    )
    assert codes(not_probed, spec) == [ns.UNVERIFIABLE, ns.UNVERIFIABLE]
    broken = TorchBroken(version=Found("2.11.0+cu130"), error="ImportError: libcudnn", traceback="")
    assert codes(replace(eight_h100(), torch=fx.torch(Found(broken))), spec) == [ns.UNVERIFIABLE]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("gpus:\n  count: 8\n", 1, "the spec: missing key 'schema_version'"),
        ("schema_version: 2\n", 1, "schema_version: must be 1"),
        ("schema_version: 1\nkind: something\n", 2, "kind: must be 'envdoctor-spec'"),
        ("schema_version: 1\ngpus:\n  count: eight\n", 3, "gpus.count: expected a whole number"),
        ("schema_version: 1\ngpus:\n  count: -1\n", 3, "gpus.count: '-1' is out of range"),
        (
            "schema_version: 1\ngpus:\n  cnt: 8\n",
            3,
            "gpus: unknown key 'cnt' (known keys: count, model",
        ),
        (
            "schema_version: 1\ngpu:\n  count: 8\n",
            2,
            "the spec: unknown key 'gpu' (known keys: schema_version",
        ),
        ("schema_version: 1\ngpus:\n  count: 8\n  count: 9\n", 4, "duplicate key 'count'"),
        ("schema_version: 1\ngpus: [8]\n", 2, "gpus: expected a mapping"),
        ("schema_version: 1\ngpus:\n  ecc: maybe\n", 3, "gpus.ecc: expected true or false"),
        (
            "schema_version: 1\ngpus:\n  mig: [7, sometimes]\n",
            3,
            "gpus.mig[1]: expected off or the number of MIG devices",
        ),
        ("schema_version: 1\ngpus:\n  mig: on\n", 3, "gpus.mig: expected off or a list"),
        (
            "schema_version: 1\ndriver:\n  branch: 580.95\n",
            3,
            "driver.branch: expected a major version",
        ),
        ("schema_version: 1\ndriver:\n  cuda: twelve\n", 3, "driver.cuda: expected a version"),
        ("schema_version: 1\ntorch:\n  version: [2]\n", 3, "expected a single value"),
        (
            "schema_version: 1\ntorch:\n  version: not a version!\n",
            3,
            "torch.version: expected a version",
        ),
        ("schema_version: 1\nhost:\n  os: Windows 95\n", 2, "the spec: unknown key 'host'"),
        ("schema_version: 1\ngpus: {count: 8\n", 3, "invalid YAML"),
        ("schema_version: 1\n\tgpus: 1\n", 2, "invalid YAML"),
        ("", 0, "the spec is empty"),
    ],
)
def test_malformed_spec_names_file_and_line(text: str, line: int, message: str) -> None:
    with pytest.raises(EnvdoctorError) as info:
        ns.parse_spec(text, source="node.yaml")
    where = f"node.yaml:{line}" if line else "node.yaml"
    assert info.value.where == where
    assert message in info.value.message


def test_versions_keep_their_text() -> None:
    spec = ns.parse_spec("schema_version: 1\ndriver:\n  cuda: 12.10\ntorch:\n  version: 2.10\n")
    assert spec.cuda == "12.10" and spec.torch_version == "2.10"


def test_unreadable_spec_file(tmp_path: Path) -> None:
    with pytest.raises(EnvdoctorError) as info:
        ns.load_spec(tmp_path / "missing.yaml")
    assert info.value.where.endswith("missing.yaml")


@pytest.mark.parametrize(
    ("raw", "dotted"),
    [("91500", "9.15.0"), ("90100", "9.1.0"), ("8902", "8.9.2"), ("9.1.0", "9.1.0")],
)
def test_cudnn_versions(raw: str, dotted: str) -> None:
    assert ns.cudnn_dotted(raw) == dotted


def test_spec_rule_runs_beside_the_other_rules() -> None:
    from envdoctor.compat.tables import CompatTables
    from envdoctor.engine import evaluate
    from envdoctor.rules import all_rules

    facts = eight_h100()
    spec = ns.parse_spec("schema_version: 1\ngpus:\n  count: 16\n", source="n.yaml")
    report = evaluate(facts, (*all_rules(), ns.spec_rule(spec)), CompatTables())
    assert report.exit_code == 1
    assert ns.GPU_COUNT in [f.code for f in report.findings]


# --- the CLI ------------------------------------------------------------------------------------


def invoke(*args: str, scenario: str = "healthy_h100"):  # type: ignore[no-untyped-def]  # click's Result
    host = FakeHost.scenario(scenario)
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


def test_spec_init_writes_a_spec_that_validates(tmp_path: Path) -> None:
    out = tmp_path / "node.yaml"
    result = invoke("spec", "init", "-o", str(out))
    assert result.exit_code == 0, result.output
    spec = ns.load_spec(out)
    assert spec.gpu_count == 1 and spec.driver_branch == "580" and spec.torch_version
    assert ns.spec_findings(scenario_facts("healthy_h100"), spec) == ()
    checked = invoke("spec", "validate", str(out))
    assert checked.exit_code == 0
    assert "valid; checks gpu_count, gpu_model" in checked.output


def test_spec_init_no_torch_and_from_snapshot(tmp_path: Path) -> None:
    result = invoke("spec", "init", "--no-torch")
    assert result.exit_code == 0
    assert "torch:" not in result.stdout
    snap = tmp_path / "snap.json"
    snap.write_text(dump_snapshot(eight_h100(), redact=False), encoding="utf-8")
    result = invoke("spec", "init", "--snapshot", str(snap))
    assert "count: 8" in result.stdout


def test_spec_validate_reports_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "node.yaml"
    bad.write_text("schema_version: 1\ngpus:\n  count: eight\n", encoding="utf-8")
    result = invoke("spec", "validate", str(bad))
    assert result.exit_code == 2
    assert f"{bad}:3: gpus.count: expected a whole number" in result.output
