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

import sys


def main() -> None:
    if sys.argv[1:2] == ["probe"]:
        import gc

        gc.disable()
        from envdoctor.cli.probe import main as probe_main

        probe_main(sys.argv[2:])
    from envdoctor.cli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
