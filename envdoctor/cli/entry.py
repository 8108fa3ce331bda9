"""Console-script entry point (``envdoctor``, ``python -m envdoctor``).

``envdoctor probe`` runs every few seconds under a 1 s budget, so it also runs without the
cyclic garbage collector (everything it allocates lives until its exit: the collector's passes
during the imports free nothing and cost about 3 ms) and ends with ``os._exit`` once its output
is flushed (the interpreter's teardown is about 8 ms).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing, contextlib: ~10 ms that `--help` and the probe do not pay
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> NoReturn:
    _replace_unencodable()
    argv = sys.argv[1:]
    probe = argv[:1] == ["probe"]
    if probe:
        import gc

        gc.disable()
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
            try:  # noqa: SIM105 (as above: no contextlib on the start-up path)
                reconfigure(errors="replace")
            except (ValueError, OSError):  # closed, or not ours to change
                pass


if __name__ == "__main__":
    main()
