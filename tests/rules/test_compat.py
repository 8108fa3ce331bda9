"""The compatibility rules over facts built in memory: no host, no GPU."""

from __future__ import annotations

import pytest

from envdoctor.compat.loader import load_tables
from envdoctor.compat.tables import CompatTables
from envdoctor.engine import evaluate
from envdoctor.model.facts import Facts, Nvcc
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Absent, Found
from envdoctor.rules import compat
from tests import factories as f
from tests.compat.machines import machine, named, torch_build

TABLES = load_tables()
CU130 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")
CU128_211 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
CU126 = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
CU121 = CU126


def findings(facts: Facts, tables: CompatTables = TABLES) -> tuple[Finding, ...]:
    report = evaluate(facts, compat.RULES, tables)
    crashed = [x for x in report.findings if x.code == "envdoctor.rule-crashed"]
    assert not crashed, crashed
    return report.findings


def codes(facts: Facts, tables: CompatTables = TABLES) -> dict[str, Severity]:
    return {x.code: x.severity for x in findings(facts, tables)}


def only(facts: Facts, code: str) -> Finding:
    found = [x for x in findings(facts) if x.code == code]
    assert len(found) == 1, found
    return found[0]


def test_healthy_h100_with_cu130_is_silent() -> None:
    facts = named("h100-580", torch=torch_build("2.11.0+cu130", "13.0", CU130))
    assert findings(facts) == ()


def test_factories_default_machine_is_silent() -> None:
    assert findings(f.facts()) == ()


def test_sm61_gpu_with_a_cu130_wheel_has_no_kernels() -> None:
    facts = named("gtx1080-535", torch=torch_build("2.11.0+cu130", "13.0", CU130))
    arch = only(facts, "torch.arch-unsupported")
    assert arch.severity is Severity.ERROR
    assert "sm_61" in arch.title and "no kernel image" in arch.title
    assert arch.remediation is not None
    # the fix names a wheel that has Pascal kernels and that driver 535 runs
    assert any("whl/cu126" in step for step in arch.remediation.steps)
    # and the driver is too old for CUDA 13 as well
    assert codes(facts)["torch.driver-too-old"] is Severity.ERROR


def test_driver_535_with_a_cu128_wheel_runs_through_minor_version_compatibility() -> None:
    facts = named("a100-535", torch=torch_build("2.11.0+cu128", "12.8", CU128_211))
    finding = only(facts, "torch.driver-too-old")
    assert finding.severity is Severity.INFO
    assert "minor-version compatibility" in finding.title
    evidence = dict(finding.evidence)
    assert evidence["driver supports CUDA up to"] == "12.2"
    assert "525.60.13" in evidence["driver needed"] and "570.26" in evidence["driver needed"]
    assert "torch.arch-unsupported" not in codes(facts)


def test_driver_525_60_13_with_cu121_is_exactly_at_the_floor() -> None:
    facts = machine(
        "NVIDIA A100-SXM4-80GB",
        "8.0",
        "525.60.13",
        "12.0",
        "proprietary",
        torch=torch_build("2.5.1+cu121", "12.1", CU121),
    )
    finding = only(facts, "torch.driver-too-old")
    assert finding.severity is Severity.INFO
    assert "530.30.02" in dict(finding.evidence)["driver needed"]


def test_one_patch_below_the_floor_is_too_old_and_says_which_driver() -> None:
    facts = machine(
        "NVIDIA A100-SXM4-80GB",
        "8.0",
        "525.60.12",
        "12.0",
        "proprietary",
        torch=torch_build("2.5.1+cu121", "12.1", CU121),
    )
    finding = only(facts, "torch.driver-too-old")
    assert finding.severity is Severity.ERROR
    assert "≥ 525.60.13" in finding.title


def test_cu130_wheel_on_a_570_driver_is_too_old_across_a_major_version() -> None:
    facts = named("rtx5090-570", torch=torch_build("2.12.0+cu130", "13.0", CU130))
    finding = only(facts, "torch.driver-too-old")
    assert finding.severity is Severity.ERROR
    assert "580.65.06" in finding.title
    assert finding.remediation is not None
    steps = " ".join(finding.remediation.steps)
    assert (
        "torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 --index-url https://download.pytorch.org/whl/cu128"
        in steps
    )


def test_blackwell_with_a_cu126_wheel_has_no_kernels() -> None:
    facts = named("rtx5090-570", torch=torch_build("2.11.0+cu126", "12.6", CU126))
    arch = only(facts, "torch.arch-unsupported")
    assert arch.severity is Severity.ERROR and "sm_120" in arch.title
    assert "torch.driver-too-old" not in codes(facts)


def test_arch_list_falls_back_to_the_table_when_torch_reports_none() -> None:
    facts = named("rtx5090-570", torch=torch_build("2.11.0+cu126", "12.6", ()))
    arch = only(facts, "torch.arch-unsupported")
    assert any("compat table, cu126" in label for label, _ in arch.evidence)


def test_ptx_only_gpu_is_a_warning_and_blocked_under_minor_version_compatibility() -> None:
    ptx_only = ("sm_80", "compute_90")
    h100 = named("h100-580", torch=torch_build("2.11.0+cu130", "13.0", ptx_only))
    assert only(h100, "torch.arch-unsupported").severity is Severity.WARNING
    old = machine(
        "NVIDIA H100 80GB HBM3",
        "9.0",
        "535.104.05",
        "12.2",
        torch=torch_build("2.11.0+cu128", "12.8", ptx_only),
    )
    assert only(old, "torch.arch-unsupported").severity is Severity.ERROR


def test_rtx_5090_on_driver_560_is_unsupported_by_the_driver() -> None:
    facts = machine("NVIDIA GeForce RTX 5090", "12.0", "560.35.03", "12.6", "open")
    finding = only(facts, "driver.gpu-unsupported")
    assert finding.severity is Severity.ERROR
    assert "570.26" in finding.title
    assert "driver.open-modules-required" not in codes(facts)


def test_rtx_5090_on_the_proprietary_modules_needs_the_open_ones() -> None:
    facts = machine("NVIDIA GeForce RTX 5090", "12.0", "570.124.06", "12.8", "proprietary")
    finding = only(facts, "driver.open-modules-required")
    assert finding.remediation is not None and finding.remediation.needs_reboot
    assert any("nvidia-driver-570-open" in s for s in finding.remediation.steps)
    assert "driver.gpu-unsupported" not in codes(facts)


def test_gh200_on_the_proprietary_modules_needs_the_open_ones() -> None:
    facts = machine("NVIDIA GH200 480GB", "9.0", "580.105.08", "13.0", "proprietary")
    finding = only(facts, "driver.open-modules-required")
    assert finding.severity is Severity.ERROR
    assert "Grace Hopper, which runs only with the open NVIDIA kernel modules" in finding.title
    assert finding.remediation is not None
    assert any("nvidia-driver-580-open" in s for s in finding.remediation.steps)
    assert "driver.gpu-unsupported" not in codes(facts)


def test_h100_may_use_either_kernel_module_flavour() -> None:
    for flavor in ("proprietary", "open"):
        facts = machine("NVIDIA H100 80GB HBM3", "9.0", "580.105.08", "13.0", flavor)
        assert "driver.open-modules-required" not in codes(facts), flavor
    gh200_open = machine("NVIDIA GH200 480GB", "9.0", "580.105.08", "13.0", "open")
    assert "driver.open-modules-required" not in codes(gh200_open)


def test_hgx_b200_on_the_cuda_12_8_ga_driver_is_too_old() -> None:
    """NVIDIA's GPU Operator requires >= 570.133.20 for HGX B200, later than CUDA 12.8's 570.26."""
    facts = machine("NVIDIA B200", "10.0", "570.124.06", "12.8", "open")
    finding = only(facts, "driver.gpu-unsupported")
    assert "needs ≥ 570.133.20" in finding.title
    assert "driver.gpu-unsupported" not in codes(
        machine("NVIDIA B200", "10.0", "570.133.20", "12.8", "open")
    )


def test_pascal_on_r590_is_no_longer_supported() -> None:
    facts = machine("NVIDIA GeForce GTX 1080", "6.1", "590.44.01", "13.1", "proprietary")
    finding = only(facts, "driver.gpu-unsupported")
    assert "R580" in finding.title and "no longer" in finding.title


def test_pascal_on_the_open_modules_is_unsupported() -> None:
    facts = machine("Tesla V100-SXM2-32GB", "7.0", "580.95.05", "13.0", "open")
    assert (
        "open NVIDIA kernel modules do not support" in only(facts, "driver.gpu-unsupported").title
    )


def test_system_libcudnn8_shadowing_the_wheels_cudnn9() -> None:
    build = torch_build(
        "2.5.1+cu124",
        "12.4",
        CU126,
        cudnn_version=Found("8907"),
        loaded_libraries=(("libcudnn", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7"),),
        nvidia_wheels=(("nvidia-cudnn-cu12", "9.1.0.70"),),
    )
    facts = named(
        "a100-535", torch=build, env=f.env({"LD_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu"})
    )
    finding = only(facts, "cudnn.load-mismatch")
    assert finding.severity is Severity.ERROR
    assert "libcudnn.so.8.9.7" in finding.title
    assert ("LD_LIBRARY_PATH", "/usr/lib/x86_64-linux-gnu") in finding.evidence


def test_torch_refusing_its_cudnn_is_a_load_mismatch() -> None:
    build = torch_build(
        "2.12.0+cu130",
        "13.0",
        CU130,
        cudnn_version=Absent(
            "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 20, 0) "
            "but found runtime version (9, 13, 1). PyTorch already comes bundled with cuDNN."
        ),
    )
    finding = only(named("h100-580", torch=build), "cudnn.load-mismatch")
    assert "9.20.0" in finding.title and "9.13.1" in finding.title


def test_older_runtime_cudnn_minor_is_a_load_mismatch() -> None:
    build = torch_build(
        "2.11.0+cu130",
        "13.0",
        CU130,
        cudnn_version=Found("91000"),
        nvidia_wheels=(("nvidia-cudnn-cu13", "9.17.1.4"),),
    )
    assert only(named("h100-580", torch=build), "cudnn.load-mismatch").severity is Severity.ERROR


def test_matching_cudnn_is_silent() -> None:
    build = torch_build(
        "2.11.0+cu130",
        "13.0",
        CU130,
        cudnn_version=Found("91701"),
        loaded_libraries=(
            ("libcudnn", "/opt/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9"),
        ),
        nvidia_wheels=(("nvidia-cudnn-cu13", "9.17.1.4"),),
    )
    assert findings(named("h100-580", torch=build)) == ()


def test_cudnn_8_with_a_cuda_13_torch_is_incompatible() -> None:
    build = torch_build(
        "2.11.0+cu130", "13.0", CU130, cudnn_version=Found("8907"), nvidia_wheels=()
    )
    finding = [
        x for x in findings(named("h100-580", torch=build)) if x.code == "cudnn.cuda-incompatible"
    ]
    assert finding and "does not support CUDA 13.0" in finding[0].title


def test_cudnn_wheel_for_the_wrong_cuda_major() -> None:
    build = torch_build(
        "2.11.0+cu130", "13.0", CU130, nvidia_wheels=(("nvidia-cudnn-cu12", "9.17.1.4"),)
    )
    finding = [
        x for x in findings(named("h100-580", torch=build)) if x.code == "cudnn.cuda-incompatible"
    ]
    assert finding and "CUDA 12" in finding[0].title


def test_cudnn_917_does_not_run_on_pascal() -> None:
    build = torch_build(
        "2.10.0+cu126",
        "12.6",
        CU126,
        cudnn_version=Found("91701"),
        nvidia_wheels=(("nvidia-cudnn-cu12", "9.17.1.4"),),
    )
    finding = only(named("gtx1080-535", torch=build), "cudnn.cuda-incompatible")
    assert "compute capability 6.1" in finding.title and "7.5" in finding.title


def test_nvcc_newer_than_the_driver() -> None:
    facts = named("a100-535", nvcc=Found(Nvcc("/usr/local/cuda-13.0/bin/nvcc", "13.0")))
    finding = only(facts, "cuda.toolkit-driver-mismatch")
    assert finding.severity is Severity.WARNING
    assert "580.65.06" in dict(finding.evidence)["driver needed"]


def test_nvcc_within_minor_version_compatibility_is_info() -> None:
    facts = named("a100-535", nvcc=Found(Nvcc("/usr/local/cuda/bin/nvcc", "12.8")))
    assert only(facts, "cuda.toolkit-driver-mismatch").severity is Severity.INFO


def test_nvcc_older_than_the_driver_is_silent() -> None:
    facts = named("h100-580", nvcc=Found(Nvcc("/usr/local/cuda/bin/nvcc", "12.8")))
    assert findings(facts) == ()


@pytest.mark.parametrize(
    "facts",
    [
        pytest.param(
            f.facts(
                nvml=Absent("libnvidia-ml.so.1 not found"),
                kernel=f.kernel(driver=Absent("no module")),
            ),
            id="no-driver",
        ),
        pytest.param(f.facts(torch=f.torch(Absent("No module named 'torch'"))), id="no-torch"),
        pytest.param(
            f.facts(
                torch=f.torch(Found(f.torch_build(version="2.11.0+cpu", cuda="", arch_list=()))),
                nvml=Absent("no driver"),
                kernel=f.kernel(driver=Absent("no module")),
            ),
            id="cpu-torch-no-driver",
        ),
    ],
)
def test_missing_facts_emit_nothing(facts: Facts) -> None:
    assert findings(facts) == ()


def test_without_tables_the_rules_say_nothing_about_tables() -> None:
    build = torch_build("2.11.0+cu128", "12.8", CU128_211, nvidia_wheels=())
    got = codes(named("gtx1080-535", torch=build), CompatTables())
    assert "driver.gpu-unsupported" not in got and "cudnn.cuda-incompatible" not in got
    assert got.get("torch.arch-unsupported") is Severity.ERROR  # from torch's own arch list


def test_every_gpu_is_judged() -> None:
    facts = machine(
        "NVIDIA GeForce GTX 1080",
        "6.1",
        "535.104.05",
        "12.2",
        gpus=2,
        torch=torch_build("2.11.0+cu130", "13.0", CU130),
    )
    subjects = {x.subject for x in findings(facts) if x.code == "torch.arch-unsupported"}
    assert subjects == {"gpu0", "gpu1"}
