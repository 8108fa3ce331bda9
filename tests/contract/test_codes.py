"""Every code a check can emit is valid, unique to its rule and documented in docs/findings.md."""

from __future__ import annotations

import re
from pathlib import Path

from envdoctor.model.finding import is_valid_code
from envdoctor.rules import all_codes, all_rules

DOC = (Path(__file__).parents[2] / "docs" / "findings.md").read_text(encoding="utf-8")
FINDINGS_PART = DOC.split("\n## explain signatures", 1)[0]  # after it: explain's signature ids
DOCUMENTED = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", FINDINGS_PART, flags=re.MULTILINE))


def test_codes_are_valid_and_unique() -> None:
    codes = all_codes()
    assert all(is_valid_code(c) for c in codes)
    assert len(codes) == len(set(codes))
    assert len({r.name for r in all_rules()}) == len(all_rules())


def test_every_code_is_documented() -> None:
    assert set(all_codes()) - DOCUMENTED == set()


def test_issue_minimum_codes_exist() -> None:
    required = {
        "driver.not-installed",
        "driver.module-not-loaded",
        "driver.version-mismatch",
        "driver.nouveau-loaded",
        "device.node-missing",
        "device.permission-denied",
        "gpu.lost",
        "gpu.ecc-uncorrectable",
        "gpu.memory-held",
        "torch.not-installed",
        "torch.import-failed",
        "torch.cpu-build",
        "torch.cuda-unavailable",
        "env.cuda-visible-devices",
        "libs.shadowed",
    }
    assert required <= set(all_codes())
