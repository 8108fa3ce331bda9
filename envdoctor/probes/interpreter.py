"""How to start a target Python interpreter so that nothing in the current directory runs.

``python -c SRC`` and ``python -m MOD`` put the current directory first on ``sys.path``: a
``json.py`` another user dropped there would run inside the child, as root when root runs
envdoctor. Children therefore start in ``/`` (``Host.run`` does that for every child), and with
the safe-path flag ``-P`` (Python 3.11+) when the interpreter accepts it.

``run_python`` starts the child with ``-P`` and asks nothing first: an interpreter older than
3.11 refuses the flag while it parses its options, before it imports anything (not even
``site``), with "Unknown option: -P" and exit 2; only then is the child started again without
it. (Asking first, ``python -P -V``, cost every run a process start: ~17 ms of ``check``.)
"""

from __future__ import annotations

from collections.abc import Sequence

from envdoctor.platform.host import CommandResult, Host

SAFE_PATH_FLAG = "-P"


def run_python(host: Host, python: str, args: Sequence[str], *, timeout: float) -> CommandResult:
    """``python -P ARGS``, or ``python ARGS`` where the interpreter has no ``-P``."""
    result = host.run((python, SAFE_PATH_FLAG, *args), timeout=timeout)
    if refused_safe_path(result):
        result = host.run((python, *args), timeout=timeout)
    return result


def refused_safe_path(result: CommandResult) -> bool:
    """Whether the interpreter stopped at its options because it does not know ``-P``."""
    return (
        result.status == "ok"
        and result.returncode == 2
        and not result.stdout.strip()
        and f"Unknown option: {SAFE_PATH_FLAG}" in result.stderr
    )
