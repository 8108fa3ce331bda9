"""Console-script entry point: ``envdoctor probe`` starts without importing Typer.

A startup probe runs every few seconds under a 1 s budget, so its start-up cost matters: Typer
and the other commands' modules cost more than the probe's own work. Everything except
``probe`` goes to the Typer application unchanged.

The probe also runs without the cyclic garbage collector: everything it allocates (modules,
classes, facts) lives until its exit, so the collector's passes during the imports free nothing
and cost about 3 ms, 6 % of a probe. The process is short by construction: its watchdog ends it
at the budget.
"""

from __future__ import annotations

import contextlib
import sys


def main() -> None:
    _replace_unencodable()
    if sys.argv[1:2] == ["probe"]:
        import gc

        gc.disable()
        from envdoctor.cli.probe import main as probe_main

        probe_main(sys.argv[2:])
    from envdoctor.cli.app import main as app_main

    app_main()


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
