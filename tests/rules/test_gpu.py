"""Per-GPU checks agree on a machine whose NVML answers but lists no GPU."""

from __future__ import annotations

import pytest

from envdoctor.model.outcome import Outcome
from envdoctor.model.views import Intent
from tests import factories as fx
from tests.conftest import report_of


@pytest.mark.parametrize("name", ["torch.arch", "driver.gpu-support", "gpu.memory", "gpu.ecc"])
def test_an_nvml_that_lists_no_gpu_is_not_applicable_to_every_per_gpu_check(name: str) -> None:
    """NVML answers and lists none, without a count error: the architecture checks say what the
    GPU checks say, not "unknown: no GPU's compute capability could be read"."""
    facts = fx.facts(nvml=fx.nvml(gpus=()))
    report = report_of(facts, intent=Intent.of("gpu", None))
    (check,) = [c for c in report.checks if c.rule.name == name]
    assert check.outcome is Outcome.NOT_APPLICABLE, check.reason
    assert "NVML lists no GPU" in check.reason
