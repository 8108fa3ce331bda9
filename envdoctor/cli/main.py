"""``envdoctor ARGS``: the Typer app (``cli/app.py``) run inside the one boundary that turns
every outcome into an exit code (``cli/boundary.py``).

``dispatch`` is the entry the console script and the tests share; tests pass an ``AppContext``
(a fake Host) that the commands read as ``invocation.app``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from envdoctor.cli.boundary import guarded, run_click

if TYPE_CHECKING:
    from envdoctor.cli.common import AppContext


def dispatch(argv: Sequence[str], app: AppContext | None = None) -> int:
    """Run the command ``argv`` names (without the program name); its exit code."""
    from envdoctor.errors import forget_private

    forget_private()  # (several commands in one process: the tests)
    return guarded(lambda: _dispatch(list(argv), app))


def _dispatch(argv: list[str], app: AppContext | None) -> int:
    import os

    from envdoctor.cli.completion import COMPLETE_VAR, click_command_for

    completing = bool(os.environ.get(COMPLETE_VAR))
    return run_click(click_command_for(argv), argv, app, completing=completing)
