"""Console-script entry point (``envdoctor``, ``python -m envdoctor``).

The cyclic garbage collector's passes during a command's imports free nothing: modules, tables
and facts live until the exit. At Python's default (a pass every 700 new objects) they were
22-45 passes and 3-10 ms of every command (``check`` 5-6 ms of its ~76 ms). So the first pass
comes after 100,000 new objects (Typer and the pydantic it coerces values with make about 60,000
at start-up): a short command makes none, and a long one (``explain`` of a
large log, ``run``) still frees its cycles, only in larger batches (their peak memory is the
same: they make no cycles per line). ``envdoctor probe`` runs every few seconds under a 1 s
budget, so it runs without the collector at all and ends with ``os._exit`` once its output is
flushed (the interpreter's teardown is about 8 ms).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn


def main() -> NoReturn:
    _replace_unencodable()
    argv = sys.argv[1:]
    probe = argv[:1] == ["probe"]
    import gc

    if probe:
        gc.disable()
    else:
        gc.set_threshold(100_000, 10, 10)
    from envdoctor.cli.main import dispatch

    code = dispatch(argv)
    if probe:
        from envdoctor.cli.boundary import flush_std_streams

        flush_std_streams()
        os._exit(code)
    sys.exit(code)


def _replace_unencodable() -> None:
    """Text that the terminal's encoding cannot show becomes ``?``, not an error.

    With ``PYTHONIOENCODING=latin-1`` (or a C locale on an old Python) the em dash of every
    report raised UnicodeEncodeError. Escapes are no use here: a replacement keeps JSON valid.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # closed, or not ours to change
                reconfigure(errors="replace")


if __name__ == "__main__":
    main()
