"""GPU, library and torch rules over facts built directly."""

from __future__ import annotations

import pytest

from envdoctor.model.facts import (
    EccErrors,
    LibraryCopy,
    LibraryFamily,
    MigMode,
    PcieLink,
    RowRemap,
    TorchBroken,
)
from envdoctor.model.finding import Severity
from envdoctor.model.probed import Absent, Found
from tests import factories as f
from tests.conftest import report_of


def _codes(facts) -> list[tuple[str, Severity]]:  # type: ignore[no-untyped-def]  # local helper
    return [(x.code, x.severity) for x in report_of(facts).findings]


def test_healthy_factory_machine_is_healthy() -> None:
    report = report_of(f.facts())
    assert report.findings == () and report.exit_code == 0


def test_ecc_volatile_is_error_aggregate_is_warning() -> None:
    volatile = f.facts(nvml=f.nvml((f.gpu(0, ecc=Found(EccErrors(2, 2))),)))
    aggregate = f.facts(nvml=f.nvml((f.gpu(0, ecc=Found(EccErrors(0, 3))),)))
    assert _codes(volatile) == [("gpu.ecc-uncorrectable", Severity.ERROR)]
    assert _codes(aggregate) == [("gpu.ecc-uncorrectable", Severity.WARNING)]


def test_row_remap_pending_asks_for_a_reset() -> None:
    facts = f.facts(
        nvml=f.nvml((f.gpu(0, row_remap=Found(RowRemap(0, 1, pending=True, failure=False))),))
    )
    (finding,) = report_of(facts).findings
    assert "pending" in dict(finding.evidence)["row remapping"]


def test_mig_with_instances_is_only_informational() -> None:
    gpu = f.gpu(0, mig_mode=Found(MigMode(True, True)), mig_devices=Found(3))
    assert _codes(f.facts(nvml=f.nvml((gpu,)))) == [("gpu.mig-enabled", Severity.INFO)]


def test_pcie_width_degraded_warns_but_low_gen_alone_does_not() -> None:
    narrow = f.gpu(0, pcie=Found(PcieLink(gen=4, width=8, max_gen=5, max_width=16)))
    idle = f.gpu(0, pcie=Found(PcieLink(gen=1, width=16, max_gen=5, max_width=16)))
    assert _codes(f.facts(nvml=f.nvml((narrow,)))) == [("gpu.pcie-degraded", Severity.WARNING)]
    assert _codes(f.facts(nvml=f.nvml((idle,)))) == []


def test_thermal_slowdown_warns() -> None:
    hot = f.gpu(0, throttle_reasons=Found(("hw-thermal-slowdown", "sw-power-cap")))
    assert _codes(f.facts(nvml=f.nvml((hot,)))) == [("gpu.throttled", Severity.WARNING)]


def test_prohibited_compute_mode_is_an_error() -> None:
    assert _codes(f.facts(nvml=f.nvml((f.gpu(0, compute_mode=Found("prohibited")),)))) == [
        ("gpu.compute-mode", Severity.ERROR)
    ]


def _family(*copies: tuple[str, str, str]) -> Found[tuple[LibraryFamily, ...]]:
    return Found((LibraryFamily("libcudnn", tuple(LibraryCopy(p, p, v, o) for p, v, o in copies)),))


def test_two_cudnn_versions_shadow_each_other() -> None:
    libs = _family(
        ("/usr/local/cuda/lib64/libcudnn.so.8.9.7", "8.9.7", "LD_LIBRARY_PATH"),
        ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "9.1.0", "ldconfig"),
    )
    (finding,) = report_of(f.facts(libraries=libs)).findings
    assert finding.code == "libs.shadowed" and "8.9.7" in finding.title


def test_symlinks_to_one_file_are_not_shadowing() -> None:
    libs = _family(("/a/libcudnn.so.9", "9.1.0", "ldconfig"))
    assert report_of(f.facts(libraries=libs)).findings == ()


def test_import_failure_shows_the_error_and_suggests_unsetting_ld_library_path() -> None:
    broken = TorchBroken(
        Found("2.11.0"), "ImportError: libcudnn.so.9: cannot open shared object file", "tb"
    )
    (finding,) = report_of(f.facts(torch=f.torch(Found(broken)))).findings
    assert finding.code == "torch.import-failed"
    assert "LD_LIBRARY_PATH" in finding.remediation.steps[0]  # type: ignore[union-attr]  # set by the rule


def test_torch_not_installed_is_a_warning_not_an_error() -> None:
    report = report_of(
        f.facts(torch=f.torch(Absent("torch is not installed for /usr/bin/python3")))
    )
    assert [(x.code, x.severity) for x in report.findings] == [
        ("torch.not-installed", Severity.WARNING)
    ]
    assert report.exit_code == 0
    assert report_of(f.facts(torch=f.torch(Absent("x"))), strict=True).exit_code == 1


@pytest.mark.parametrize(
    ("error", "raise_budget"),
    [
        (
            "the torch probe did not finish within 30 s (import torch or CUDA initialisation hung)",
            True,
        ),
        ("the torch probe printed no result (exit 127)", False),
        ("the interpreter /opt/venv/bin/python does not exist", False),
        ("the torch probe crashed with SIGSEGV", False),
    ],
)
def test_only_a_probe_that_ran_out_of_time_is_told_to_raise_the_budget(
    error: str, raise_budget: bool
) -> None:
    """Issue 37: an interpreter that exits 127 (a wrapper whose target is gone) was told to
    "raise the budget"; more time fixes only a probe that ran out of it."""
    from envdoctor.model.probed import ProbeFailed

    facts = f.facts(torch=f.torch(ProbeFailed(error)))
    (finding,) = [x for x in report_of(facts).findings if x.code == "torch.probe-failed"]
    assert finding.remediation is not None
    steps = " ".join(finding.remediation.steps)
    assert ("--timeout" in steps) is raise_budget, steps
    if "127" in error or "does not exist" in error:
        assert "ls -l /opt/venv/bin/python" in steps
