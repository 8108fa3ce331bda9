"""Fixtures for the remediation tests: a fresh sandbox machine per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.remedy.sandbox import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")
