"""Environment rules over facts built directly (no host)."""

from __future__ import annotations

import pytest

from envdoctor.model.finding import Severity
from envdoctor.model.visible import visible_devices
from tests import factories as f
from tests.conftest import report_of

UUIDS = ("GPU-5f2b8c1e-3a47-9d02-6b1f-0e4c7a9d3b21", "GPU-00000000-0000-0000-0000-000000000001")


@pytest.mark.parametrize(
    ("value", "kept", "stops"),
    [
        pytest.param("0,1", ["0", "1"], "", id="valid"),
        pytest.param("1,0", ["1", "0"], "", id="reordered"),
        pytest.param("0,2,1", ["0"], "2 (there are only 2 GPUs", id="out-of-range-drops-the-rest"),
        pytest.param("abc", [], "'abc'", id="garbage"),
        pytest.param("-1", [], "-1 (negative", id="negative"),
        pytest.param("GPU-5f2b", ["GPU-5f2b"], "", id="uuid-prefix"),
        pytest.param("GPU-dead", [], "GPU-dead (no GPU", id="unknown-uuid"),
        pytest.param("0,0", ["0"], "0 (listed twice)", id="duplicate"),
        # CUDA reads ASCII digits; int() takes others, and raised on these two (a rule crash)
        pytest.param("\u00b2", [], "'\u00b2' (neither", id="superscript-two"),
        pytest.param("\u0661", [], "'\u0661' (neither", id="arabic-indic-one"),
        pytest.param("0," + "9" * 5000, ["0"], "99999", id="5000-digits"),
        pytest.param("-" + "9" * 5000, [], "-9999", id="5000-digits-negative"),
    ],
)
def test_cuda_visible_devices_reading(value: str, kept: list[str], stops: str) -> None:
    got_kept, got_stop = visible_devices(value, 2, UUIDS, mig=False)
    assert got_kept == kept
    assert got_stop.startswith(stops) if stops else got_stop == ""


def _env_report(variables: dict[str, str]):  # type: ignore[no-untyped-def]  # local helper
    facts = f.facts(
        nvml=f.nvml((f.gpu(0), f.gpu(1))),
        kernel=f.kernel(device_nodes=f.nodes(*f.DEFAULT_NODES, "/dev/nvidia1")),
        env=f.env(variables),
    )
    return report_of(facts)


@pytest.mark.parametrize("value", ["\u00b2", "9" * 5000, "0," + "9" * 5000, "-" + "9" * 5000])
def test_cvd_with_odd_digits_is_judged_and_named_briefly(value: str) -> None:
    report = _env_report({"CUDA_VISIBLE_DEVICES": value})
    assert [x.code for x in report.findings] == ["env.cuda-visible-devices"]
    (finding,) = report.findings
    assert len(dict(finding.evidence)["CUDA stops at"]) < 100  # named, not repeated 5000 times


def test_cvd_out_of_range_is_a_warning_when_some_gpu_stays() -> None:
    (finding,) = _env_report({"CUDA_VISIBLE_DEVICES": "1,5"}).findings
    assert (finding.code, finding.severity) == ("env.cuda-visible-devices", Severity.WARNING)
    assert dict(finding.evidence)["GPUs CUDA will use"] == "1"


@pytest.mark.parametrize(
    ("value", "title", "example"),
    [
        ("0,1", "uses only 0 and ignores entry 2 (1) and all after it", "=0 "),
        ("0,0", "uses only 0 and ignores entry 2 (0) and all after it", "=0 "),
    ],
)
def test_cvd_title_and_fix_never_suggest_the_value_they_flag(
    value: str, title: str, example: str
) -> None:
    facts = f.facts(nvml=f.nvml((f.gpu(0),)), env=f.env({"CUDA_VISIBLE_DEVICES": value}))
    (finding,) = [x for x in report_of(facts).findings if x.code == "env.cuda-visible-devices"]
    assert finding.remediation is not None
    assert finding.title.endswith(title)
    assert not any(f"={value}" in step for step in finding.remediation.steps)
    assert any(
        step.startswith("export CUDA_VISIBLE_DEVICES" + example)
        for step in finding.remediation.steps
    )
    assert (
        "there is only 1 GPU: index 0" in dict(finding.evidence)["CUDA stops at"] or value == "0,0"
    )


def test_cvd_hiding_everything_is_an_error() -> None:
    (finding,) = _env_report({"CUDA_VISIBLE_DEVICES": "7"}).findings
    assert finding.severity == Severity.ERROR and "hides every GPU" in finding.title


def test_launch_blocking_left_on_warns() -> None:
    codes = [x.code for x in _env_report({"CUDA_LAUNCH_BLOCKING": "1"}).findings]
    assert codes == ["env.cuda-launch-blocking"]
    assert _env_report({"CUDA_LAUNCH_BLOCKING": "0"}).findings == ()


def test_nvidia_visible_devices_outside_a_container_is_not_judged() -> None:
    """Only the NVIDIA container runtime reads it: on a host it changes nothing."""
    assert _env_report({"NVIDIA_VISIBLE_DEVICES": "void"}).findings == ()
