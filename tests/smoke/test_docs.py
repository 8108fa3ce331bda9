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


def test_the_guide_states_the_safety_rules_and_what_is_not_confirmed() -> None:
    guide = (DOCS / "smoke.md").read_text(encoding="utf-8")
    assert "**`--reproduce` fills a GPU's memory to the last MiB.**" in guide
    safety = guide.split("\n## Safety\n", 1)[1].split("\n## ", 1)[0]
    for rule in ("--gpu N --force", "CUDA_VISIBLE_DEVICES", "Prohibited", "exclusive"):
        assert rule in safety, rule
    unconfirmed = guide.split("\n## What is confirmed and what is not\n", 1)[1]
    assert unconfirmed.startswith("\nNothing in this guide has run on a real GPU yet")
    assert "torch.AcceleratorError" in guide


def test_nobody_claims_reproduce_confirms_pressure_unconditionally() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    for text in (readme, (DOCS / "smoke.md").read_text(encoding="utf-8")):
        assert "confirms memory pressure (" not in text
        assert "--reproduce cublas-alloc|cudnn-init` confirms memory pressure" not in text
