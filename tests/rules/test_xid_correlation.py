"""Xids correlated (issue 39): side effects and the recovery notice attributed to their cause,
an application's fault storm reported once as such, the driver's current verdict over Xid 154."""

from __future__ import annotations

from envdoctor.catalogs.xid import xid_catalog
from envdoctor.engine import evaluate
from envdoctor.model.facts import Facts, KernelLog, XidEvents
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Found
from envdoctor.rules import core_rules
from tests import factories as fx

GPU0, GPU1 = "0000:18:00", "0000:19:00"
RESET = "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"


def ev(code: int, device: str = GPU0, count: int = 1, first: float = 100.0, last: float = 200.0,
       message: str = "") -> XidEvents:  # fmt: skip
    return XidEvents(
        device, code, count, first, last, message or f"NVRM: Xid (PCI:{device}): {code}, x"
    )


def report(*events: XidEvents, **gpu0: object) -> list[Finding]:
    facts: Facts = fx.facts(
        nvml=fx.nvml((fx.gpu(0, **gpu0), fx.gpu(1))),
        kernel_log=Found(KernelLog("/dev/kmsg", events, True)),
    )
    codes = ("gpu.xid-events", "gpu.xid-app-faults")
    return [f for f in evaluate(facts, core_rules()).findings if f.code in codes]


def test_xid_45_after_79_is_attributed_to_79_and_adds_no_step() -> None:
    (finding,) = report(ev(79, first=50.0), ev(45, count=3, first=51.0))
    evidence = dict(finding.evidence)
    assert evidence["Xid 45 ×3, first 51 s after boot"].endswith(
        "a side effect, attributed to Xid 79"
    )
    assert finding.remediation is not None
    steps = " ".join(finding.remediation.steps)
    assert "fabric manager" not in steps  # 45's solo action is not given beside 79
    assert f"Xid 79: {xid_catalog()[79].action}" in finding.remediation.steps
    assert "(Xid 79; the others follow from it)" in finding.remediation.summary
    entry = xid_catalog()[79]  # NVIDIA's resolution buckets, as the catalog names them
    assert (
        "Xid 79 resolution (NVIDIA)",
        f"{entry.immediate} → {entry.investigatory}",
    ) in finding.evidence
    assert not any(label.startswith("Xid 45 resolution") for label, _ in finding.evidence)


def test_xid_45_alone_keeps_its_own_action() -> None:
    (finding,) = report(ev(45))
    assert finding.remediation is not None
    assert f"Xid 45: {xid_catalog()[45].action}" in finding.remediation.steps


def test_xid_154_is_attributed_to_its_cause_and_the_reset_it_asks_is_an_error() -> None:
    (finding,) = report(ev(48, first=10.0), ev(154, first=11.0, last=11.0, message=RESET))
    assert finding.severity == Severity.ERROR
    assert finding.title.endswith("the driver says it needs a GPU reset")
    evidence = dict(finding.evidence)
    assert (
        "the driver's recovery notice, attributed to Xid 48"
        in evidence["Xid 154, first 11 s after boot"]
    )
    assert ("UUID", "GPU-00000000-0000-0000-0000-000000000000") in finding.evidence


def test_xid_154_is_history_when_nvml_reports_no_recovery_now() -> None:
    (finding,) = report(ev(48), ev(154, message=RESET), recovery_action=Found(0))
    assert finding.severity == Severity.WARNING  # Xid 48's own class, no longer the reset
    assert "needs" not in finding.title
    assert (
        "NVML reports no recovery needed now"
        in dict(finding.evidence)["recovery the driver asked for"]
    )


def test_an_application_storm_is_one_note_with_the_count_and_the_span() -> None:
    line = (
        "NVRM: Xid (PCI:0000:18:00): 31, pid=1942, name=llama-bench, channel 0x00000002, MMU Fault"
    )
    found = report(
        ev(31, count=120, first=7200.0, last=7700.0, message=line),
        ev(13, count=80, first=7210.0, last=7650.0),
        ev(43, GPU1, count=40, first=7300.0, last=7690.0),
    )
    (finding,) = found  # no per-GPU hardware finding beside it
    assert finding.code == "gpu.xid-app-faults"
    assert finding.severity == Severity.INFO
    assert finding.subject == "0,1"
    assert "240 Xid events (Xid 13/31/43) on GPU 0, GPU 1" in finding.title
    evidence = dict(finding.evidence)
    assert evidence["count"] == "240"
    assert evidence["time span"] == "between 2 h 00 min and 2 h 08 min after boot (over 8 min)"
    assert evidence["program"] == "llama-bench (PID 1942)"


def test_application_faults_beside_a_hardware_xid_stay_with_that_gpu() -> None:
    found = report(ev(79, first=5.0), ev(13, count=9, first=6.0), ev(31, GPU1, count=2))
    by_code = {f.code: f for f in found}
    assert set(by_code) == {"gpu.xid-events", "gpu.xid-app-faults"}
    hardware = by_code["gpu.xid-events"]
    assert hardware.subject == "0"
    assert dict(hardware.evidence)["Xid 13 ×9, first 6 s after boot"].endswith(
        "an application's fault, attributed to Xid 79"
    )
    assert by_code["gpu.xid-app-faults"].subject == "1"  # the other GPU's faults: the app's


def test_the_clean_up_after_an_applications_fault_is_part_of_that_fault() -> None:
    """Xid 13 then Xid 45 for the same program: the driver tore its channels down."""
    (finding,) = report(ev(13, count=4, first=30.0), ev(45, count=4, first=31.0))
    assert finding.code == "gpu.xid-app-faults"
    assert "8 Xid events (Xid 13/45)" in finding.title
    assert dict(finding.evidence)["GPU 0: Xid 45 ×4, first 31 s after boot"].endswith(
        "a side effect of these faults"
    )
    assert finding.remediation is not None
    assert not any(s.startswith("Xid 45:") for s in finding.remediation.steps)
