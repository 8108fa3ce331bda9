"""Every smoke code is documented in docs/findings.md, and nothing stale is documented there."""

from __future__ import annotations

import re
from pathlib import Path

from envdoctor.model.finding import is_valid_code
from envdoctor.smoke import SMOKE_CODES
from envdoctor.smoke.model import GPU_STEPS, NCCL_STEPS

DOCS = Path(__file__).resolve().parents[2] / "docs"
FINDINGS = (DOCS / "findings.md").read_text(encoding="utf-8")
DOCUMENTED = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", FINDINGS, flags=re.MULTILINE))


def test_every_smoke_code_is_valid_and_documented() -> None:
    assert all(is_valid_code(code) for code in SMOKE_CODES)
    assert set(SMOKE_CODES) - DOCUMENTED == set()


def test_no_stale_smoke_code_is_documented() -> None:
    documented = {code for code in DOCUMENTED if code.startswith("smoke.")}
    assert documented - set(SMOKE_CODES) == set()


def test_the_smoke_guide_names_every_step() -> None:
    guide = (DOCS / "smoke.md").read_text(encoding="utf-8")
    for step in {*GPU_STEPS, *NCCL_STEPS}:
        assert f"`{step}`" in guide, step
