"""Helpers for the fleet tests: the real promtool when installed (scripts/install-test-tools)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def promtool_check(path: Path) -> None:
    """Run `promtool check metrics` on a file, or skip when promtool is not installed."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool is not installed (Debian package `prometheus`; scripts/install-test-tools "
            "installs it where it can)"
        )
    with path.open("rb") as handle:
        result = subprocess.run(
            [promtool, "check", "metrics"], stdin=handle, capture_output=True, timeout=60
        )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    assert not (result.stdout + result.stderr).strip(), "promtool printed lint warnings"
