"""scripts/install-test-tools: shellcheck-clean, and a no-op when told to skip."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.shellcheck import shellcheck

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-test-tools"


def test_shellcheck_clean() -> None:
    assert shellcheck(SCRIPT) == ""


def test_opt_out_installs_nothing_and_succeeds() -> None:
    env = {**os.environ, "ENVDOCTOR_NO_INSTALL": "1"}
    result = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0
    assert "not installing anything" in result.stdout
