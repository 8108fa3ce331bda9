"""Writing a rendered report, snapshot, spec or script to a file: atomically, never half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from envdoctor.errors import EnvdoctorError


def write_atomic(
    path: Path, text: str, *, mode: int = 0o644, what: str = "the output file"
) -> None:
    """Write ``text`` to ``path`` via a temp file beside it, fsync, then rename.

    A reader (node_exporter's textfile collector, a provisioning script) never sees a partial
    file; the temp name ends in ``.tmp``, never in ``.prom``. Failure is an ``EnvdoctorError``.
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd = -1
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fd = -1  # owned by the file object now
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
        raise EnvdoctorError(
            f"cannot write {what}: {exc.strerror or exc}", where=str(path)
        ) from None
