"""How to start a target Python interpreter so that nothing in the current directory runs.

``python -c SRC`` and ``python -m MOD`` put the current directory first on ``sys.path``: a
``json.py`` another user dropped there would run inside the child, as root when root runs
envdoctor. Children therefore start in ``/`` (``Host.run`` does that for every child), and with
the safe-path flag ``-P`` (Python 3.11+) when the interpreter accepts it.

Whether it does is asked with ``python -P -V``: CPython parses its options and prints the
version before it imports anything (not even ``site``), and an interpreter older than 3.11
refuses ``-P`` at that same stage ("Unknown option: -P", exit 2). No code runs either way.
"""

from __future__ import annotations

from envdoctor.platform.host import Deadline, Host

SAFE_PATH_FLAG = "-P"
_ASK_TIMEOUT = 5.0


def safe_path_flags(host: Host, python: str, *, deadline: Deadline) -> tuple[str, ...]:
    """``("-P",)`` when ``python`` accepts the safe-path flag, else ``()``."""
    result = host.run((python, SAFE_PATH_FLAG, "-V"), timeout=deadline.cap(_ASK_TIMEOUT))
    return (SAFE_PATH_FLAG,) if result.ok else ()
