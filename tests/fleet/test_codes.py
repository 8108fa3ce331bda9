"""The fleet codes (--require gates, node specs) are valid and documented like every other."""

from __future__ import annotations

import re
from pathlib import Path

from envdoctor.fleet import requirements, spec
from envdoctor.model.finding import is_valid_code
from envdoctor.rules import all_codes

DOC = (Path(__file__).parents[2] / "docs" / "findings.md").read_text(encoding="utf-8")
DOCUMENTED = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", DOC, flags=re.MULTILINE))
FLEET_CODES = (*requirements.CODES, *spec.CODES)


def test_fleet_codes_are_valid_unique_and_documented() -> None:
    assert all(is_valid_code(c) for c in FLEET_CODES)
    assert len(set(FLEET_CODES)) == len(FLEET_CODES)
    assert not set(FLEET_CODES) & set(all_codes())
    assert set(FLEET_CODES) - DOCUMENTED == set()


def test_rules_declare_the_codes_they_emit() -> None:
    parsed = requirements.parse_requirements(["gpus>=1"])
    assert requirements.requirements_rule(parsed).codes == requirements.CODES
    assert spec.spec_rule(spec.Spec()).codes == spec.CODES
