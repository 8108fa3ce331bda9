"""The text report, exactly, at a fixed width: re-bless with ENVDOCTOR_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envdoctor.render.text import render_text
from tests.conftest import report_of, scenario_facts

GOLDEN = Path(__file__).parent / "golden"
CASES = ("healthy_h100", "driver_mismatch", "memory_held", "no_driver")


@pytest.mark.parametrize("name", CASES)
def test_text_report(name: str) -> None:
    text = render_text(report_of(scenario_facts(name)), width=100)
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("ENVDOCTOR_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
    assert max(len(line) for line in text.splitlines()) <= 100
