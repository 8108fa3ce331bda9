"""The exit codes, for every command: one definition that scripts and schedulers can rely on.

- 0 healthy: nothing that needs fixing (notes and, without ``--strict``, warnings may remain);
- 1 unhealthy: an error (or a warning with ``--strict``); for ``explain``, a known error
  explained; for ``smoke --reproduce``, the failure reproduced;
- 2 could not determine, or a usage error (a bad option, an unreadable input file);
- 130 interrupted (Ctrl-C), as shells report SIGINT.
"""

from __future__ import annotations

HEALTHY = 0
UNHEALTHY = 1
UNKNOWN = 2
INTERRUPTED = 130

BY_STATUS = {"healthy": HEALTHY, "unhealthy": UNHEALTHY, "unknown": UNKNOWN}


def for_status(status: str) -> int:
    """The exit code of a status ("healthy", "unhealthy", "unknown")."""
    return BY_STATUS[status]
