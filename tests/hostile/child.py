"""The real CLI in a child process, for the hostile tests that need one (a crash, a memory or
file-size limit, a real stdout, an encoding)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def envdoctor(
    *args: str,
    env: dict[str, str] | None = None,
    limit: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m envdoctor ARGS`` from the checkout; ``limit`` runs in the child before it
    starts (``resource.setrlimit``). Output is decoded leniently: a test looks for what a bad
    encoding did, it must not fail on it."""
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,  # a hang or a bomb would blow far past this; a normal run takes ~1 s
        cwd=ROOT,
        # Under a limit (RLIMIT_FSIZE) a bytecode file the child writes into the checkout may be
        # cut short, and CPython's importlib renames a short write into place: a later import
        # fails with "marshal data too short". A limited child writes none.
        env={**os.environ, **({"PYTHONDONTWRITEBYTECODE": "1"} if limit else {}), **(env or {})},
        preexec_fn=limit,
        check=False,
    )
