"""Per-GPU health (issue 39): memory repair, the driver's recovery verdict, temperature against
the GPU's thresholds, clock events with their cost, and persistence on multi-GPU nodes."""

from __future__ import annotations

import re
from dataclasses import replace

from envdoctor.engine import evaluate
from envdoctor.model.facts import (
    EccErrors,
    Facts,
    NvmlErrorKind,
    PersistenceDaemon,
    RetiredPages,
    RowRemap,
    SmClock,
)
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.outcome import Outcome
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.probes.persistenced import probe_persistenced
from envdoctor.rules import core_rules
from tests import factories as fx
from tests.fakes.host import FakeHost

VOLTA = {
    "name": Found("Tesla V100-SXM2-16GB"),
    "compute_capability": Found("7.0"),
    "row_remap": Absent("not supported by this GPU or driver (NVML NotSupported)"),
}


def one(**over: object) -> Facts:
    return fx.facts(nvml=fx.nvml((fx.gpu(0, **over),)))


def codes(facts: Facts) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in evaluate(facts, core_rules()).findings]


def only(facts: Facts, code: str) -> Finding:
    (finding,) = [f for f in evaluate(facts, core_rules()).findings if f.code == code]
    return finding


def text(finding: Finding) -> str:
    """Everything a person reads of a finding."""
    fix = finding.remediation
    return " ".join(
        (
            finding.title,
            *(f"{k} {v}" for k, v in finding.evidence),
            fix.summary if fix else "",
            *(fix.steps if fix else ()),
        )
    )


def verdict(facts: Facts, rule: str) -> tuple[Outcome, str]:
    report = evaluate(facts, core_rules())
    (check,) = [c for c in report.checks if c.rule.name == rule]
    return check.outcome, check.reason


# --- memory ---------------------------------------------------------------------------------


def test_a_pending_page_retirement_on_volta_says_neither_uncorrectable_nor_remapper() -> None:
    """The bug of issue 39: a pending retirement read as "uncorrectable memory errors", with
    advice naming a row remapper that Volta does not have."""
    facts = one(
        **VOLTA,
        retired_pages_pending=Found(True),
        retired_pages=Found(RetiredPages(single_bit=2, double_bit=0)),
    )
    assert codes(facts) == [("gpu.memory-repair-pending", Severity.WARNING)]
    finding = only(facts, "gpu.memory-repair-pending")
    said = text(finding).lower()
    assert "uncorrectable" not in said
    assert "remap" not in said
    assert "2 for repeated single-bit errors, 0 for double-bit errors: 2 of the 64" in said
    assert finding.remediation is not None
    assert "sudo nvidia-smi -r -i 00000000:18:00.0" in " ".join(finding.remediation.steps)
    assert not re.search(r"\brma\b", said)


def test_a_pending_row_remap_asks_for_a_reset_not_a_replacement() -> None:
    facts = one(row_remap=Found(RowRemap(1, 0, pending=True, failure=False)))
    finding = only(facts, "gpu.memory-repair-pending")
    assert finding.severity == Severity.WARNING
    assert "uncorrectable errors" not in finding.title
    assert "RMA" not in text(finding)
    assert ("rows remapped", "1 for correctable errors, 0 for uncorrectable errors") in (
        finding.evidence
    )


def test_a_failed_row_remap_is_an_error_that_asks_for_an_rma() -> None:
    finding = only(
        one(row_remap=Found(RowRemap(3, 8, pending=False, failure=True))),
        "gpu.memory-repair-failed",
    )
    assert finding.severity == Severity.ERROR
    assert finding.remediation is not None and "RMA" in finding.remediation.summary


def test_a_gpu_that_has_retired_its_last_page_must_be_replaced() -> None:
    facts = one(**VOLTA, retired_pages=Found(RetiredPages(single_bit=40, double_bit=24)))
    finding = only(facts, "gpu.memory-repair-failed")
    assert finding.severity == Severity.ERROR and "64" in finding.title
    below = one(**VOLTA, retired_pages=Found(RetiredPages(single_bit=40, double_bit=23)))
    assert codes(below) == []


def test_uncorrectable_is_said_only_where_counted_and_by_when() -> None:
    since_load = only(one(ecc=Found(EccErrors(2, 5))), "gpu.ecc-uncorrectable")
    assert since_load.severity == Severity.ERROR
    assert "2 uncorrectable ECC errors since the driver was loaded" in since_load.title
    lifetime = only(one(ecc=Found(EccErrors(0, 5))), "gpu.ecc-uncorrectable")
    assert lifetime.severity == Severity.WARNING
    assert "(none since the driver was loaded)" in lifetime.title
    assert lifetime.remediation is not None and not lifetime.remediation.needs_root


# --- the driver's verdict -------------------------------------------------------------------


def test_a_gpu_the_driver_says_must_be_reset_is_an_error_when_all_else_is_clean() -> None:
    facts = one(recovery_action=Found(1))
    assert codes(facts) == [("gpu.recovery-required", Severity.ERROR)]
    finding = only(facts, "gpu.recovery-required")
    assert "needs a GPU reset" in finding.title
    assert ("NVML recovery action", "1 (gpu-reset)") in finding.evidence
    assert evaluate(facts, core_rules()).exit_code == 1


def test_each_recovery_action_gets_its_own_fix() -> None:
    reboot = only(one(recovery_action=Found(2)), "gpu.recovery-required")
    assert reboot.remediation is not None and reboot.remediation.needs_reboot
    assert any("sudo reboot" in s for s in reboot.remediation.steps)
    p2p = only(one(recovery_action=Found(3)), "gpu.recovery-required")
    assert p2p.severity == Severity.WARNING
    assert p2p.remediation is not None
    assert p2p.remediation.steps[0].startswith("start no new multi-GPU job")
    unknown = only(one(recovery_action=Found(42)), "gpu.recovery-required")
    assert unknown.severity == Severity.WARNING and "recovery action 42" in unknown.title


def test_no_recovery_passes_and_a_driver_that_cannot_say_is_not_an_error() -> None:
    status, detail = verdict(one(recovery_action=Found(0)), "gpu.recovery")
    assert status == Outcome.PASSED and "no recovery" in detail
    old = one(
        recovery_action=ProbeFailed(
            NvmlErrorKind.FUNCTION_NOT_FOUND, "these nvidia-ml-py bindings do not know it"
        )
    )
    assert codes(old) == []
    status, detail = verdict(old, "gpu.recovery")
    assert status == Outcome.NOT_APPLICABLE and "bindings do not know it" in detail


def test_a_reset_required_return_code_alone_makes_the_gpu_an_error() -> None:
    facts = one(
        recovery_action=Absent("not supported by this GPU or driver (NVML NotSupported)"),
        power_draw=ProbeFailed(NvmlErrorKind.RESET_REQUIRED, "GPU requires reset"),
    )
    finding = only(facts, "gpu.recovery-required")
    assert finding.severity == Severity.ERROR
    assert ("NVML answered ResetRequired", "power draw: GPU requires reset") in finding.evidence


def test_in_a_container_the_reset_is_the_hosts_to_do() -> None:
    facts = replace(one(recovery_action=Found(1)), host=fx.host(containers=("docker",)))
    finding = only(facts, "gpu.recovery-required")
    assert finding.remediation is not None
    assert any(s.startswith("on the host (a container") for s in finding.remediation.steps)
    assert any(s.startswith("Slurm: ") for s in finding.remediation.steps)
    pod = replace(one(recovery_action=Found(1)), host=fx.host(containers=("kubernetes",)))
    steps = only(pod, "gpu.recovery-required").remediation.steps  # type: ignore[union-attr]  # has one
    assert any("kubectl cordon $NODE" in s for s in steps)
    assert not any(s.startswith("Slurm: ") for s in steps)


# --- temperature and clocks -------------------------------------------------------------------

HOT = {
    "temperature": Found(92),
    "shutdown_temperature": Found(92),
    "slowdown_temperature": Found(89),
    "max_operating_temperature": Found(87),
    "power_draw": Found(412_000),
    "power_limit": Found(700_000),
}


def test_a_gpu_at_its_shutdown_temperature_is_an_error_with_the_thresholds() -> None:
    """The bug of issue 39: a warning that gave neither the temperature nor the thresholds."""
    finding = only(one(**HOT), "gpu.temperature")
    assert finding.severity == Severity.ERROR
    evidence = dict(finding.evidence)
    assert evidence["temperature"] == "92 °C"
    assert evidence["shutdown threshold"] == "92 °C (reached)"
    assert evidence["slowdown threshold"] == "89 °C (3 °C past it)"
    assert evidence["max operating temperature"] == "87 °C (5 °C past it)"
    assert evidence["power"] == "412 W of the 700 W enforced limit (59%)"


def test_the_slowdown_threshold_warns_and_below_it_nothing_is_said() -> None:
    warm = only(one(**{**HOT, "temperature": Found(89)}), "gpu.temperature")
    assert warm.severity == Severity.WARNING
    assert dict(warm.evidence)["shutdown threshold"] == "92 °C (3 °C below it)"
    assert codes(one(**{**HOT, "temperature": Found(88)})) == []


def test_without_thresholds_the_temperature_rule_does_not_pass() -> None:
    facts = one(temperature=Found(95))  # thresholds not collected (an older snapshot)
    assert codes(facts) == []
    status, _ = verdict(facts, "gpu.temperature")
    assert status != Outcome.PASSED


def test_a_thermal_slowdown_names_the_clock_it_costs() -> None:
    facts = one(
        **HOT,
        throttle_reasons=Found(("sw-thermal-slowdown", "hw-thermal-slowdown")),
        sm_clock=Found(SmClock(current=660, highest=1980)),
    )
    finding = only(facts, "gpu.throttled")
    assert finding.title.endswith("its SM clock is 660 of 1980 MHz (33%)")
    evidence = dict(finding.evidence)
    assert evidence["SM clock"] == "660 MHz of 1980 MHz (33%)"
    assert evidence["shutdown threshold"] == "92 °C (reached)"


def test_a_power_brake_points_at_power_delivery() -> None:
    facts = one(
        throttle_reasons=Found(("hw-power-brake-slowdown",)),
        power_draw=Found(120_000),
        power_limit=Found(700_000),
    )
    finding = only(facts, "gpu.throttled")
    assert finding.remediation is not None and "power" in finding.remediation.summary
    assert dict(finding.evidence)["power"] == "120 W of the 700 W enforced limit (17%)"


# --- persistence --------------------------------------------------------------------------


def two(mode: bool, daemon: object, **host: object) -> Facts:
    gpus = (fx.gpu(0, persistence_mode=Found(mode)), fx.gpu(1, persistence_mode=Found(mode)))
    return fx.facts(nvml=fx.nvml(gpus), persistenced=daemon, host=fx.host(**host))


NO_DAEMON = Absent("nvidia-persistenced is not running (no PID file)")


def test_persistence_off_on_a_multi_gpu_node_warns_and_names_every_gpu() -> None:
    finding = only(two(False, NO_DAEMON), "gpu.persistence-off")
    assert finding.severity == Severity.WARNING
    assert finding.subject == "0,1"
    assert ("nvidia-persistenced", NO_DAEMON.reason) in finding.evidence
    assert finding.remediation is not None
    assert finding.remediation.steps[0].startswith("sudo systemctl enable --now")


def test_a_dead_daemon_is_restarted_and_a_container_asks_the_host() -> None:
    stale = Found(PersistenceDaemon("/run/nvidia-persistenced/nvidia-persistenced.pid", 77, False))
    dead = only(two(False, stale), "gpu.persistence-off")
    assert dead.remediation is not None
    assert "sudo systemctl restart nvidia-persistenced" in dead.remediation.steps
    inside = only(two(False, NO_DAEMON, containers=("docker",)), "gpu.persistence-off")
    assert inside.remediation is not None and inside.remediation.summary.endswith("on the host")


def test_persistence_set_without_the_daemon_is_a_note_and_with_it_nothing() -> None:
    def persistence(facts: Facts) -> list[tuple[str, Severity]]:
        return [c for c in codes(facts) if c[0].startswith("gpu.persist")]

    assert persistence(two(True, NO_DAEMON)) == [("gpu.persistenced-not-running", Severity.INFO)]
    running = Found(PersistenceDaemon("/run/nvidia-persistenced/nvidia-persistenced.pid", 9, True))
    assert persistence(two(True, running)) == []
    assert persistence(two(True, NO_DAEMON, containers=("docker",))) == []  # the host's one


def test_the_daemon_is_read_from_its_pid_file_and_proc() -> None:
    pid = "/run/nvidia-persistenced/nvidia-persistenced.pid"
    running = FakeHost({"files": {pid: "1873\n", "/proc/1873/comm": "nvidia-persiste\n"}})
    assert probe_persistenced(running) == Found(PersistenceDaemon(pid, 1873, True))
    reused = FakeHost({"files": {pid: "1873\n", "/proc/1873/comm": "bash\n"}})
    assert probe_persistenced(reused) == Found(PersistenceDaemon(pid, 1873, False))
    garbage = FakeHost({"files": {pid: "../../etc/passwd\n"}})
    assert probe_persistenced(garbage) == Found(PersistenceDaemon(pid, 0, False))
    none = probe_persistenced(FakeHost({}))
    assert isinstance(none, Absent) and "not running" in none.reason
