"""Another user, for the hostile tests that need one: as root, a child drops to ``nobody``
(uid 65534) before it runs; otherwise those tests are skipped with the reason.

``shared_dir`` is a directory such as ``/tmp``: owned by root, mode 1777, in a 0755 parent
outside pytest's 0700 ``tmp_path``, so that the other user can reach it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

OTHER_UID = 65534  # nobody
OTHER_GID = 65534
IS_ROOT = os.geteuid() == 0

needs_root = pytest.mark.skipif(
    not IS_ROOT,
    reason="needs root: the attack is another user's against root (CI runs these as root)",
)


def _drop() -> None:  # pragma: no cover (runs in the child)
    os.setgroups([])
    os.setgid(OTHER_GID)
    os.setuid(OTHER_UID)


def as_other(
    argv: Sequence[str], *, cwd: Path | str = "/", timeout: float = 60, input: str = ""
) -> subprocess.CompletedProcess[str]:
    """``argv`` run as the other user (nobody), from ``cwd``; fails the test if it fails."""
    run = subprocess.run(
        list(argv),
        cwd=cwd,
        preexec_fn=_drop,
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run


def sh_as_other(script: str, *, cwd: Path | str = "/") -> None:
    """A shell script run as the other user: what the attacker does."""
    as_other(["/bin/sh", "-ec", script], cwd=cwd)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A world-writable sticky directory like /tmp, reachable by the other user."""
    base = Path(tempfile.mkdtemp(prefix="envdoctor-hostile-", dir="/tmp"))
    base.chmod(0o755)
    shared = base / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    try:
        yield shared
    finally:
        shutil.rmtree(base, ignore_errors=True)
