"""Shell completion: Typer's own ``--install-completion`` and ``--show-completion`` (bash, zsh,
fish, PowerShell), and the requests their scripts make (``_ENVDOCTOR_COMPLETE`` set).

Typer gives those two options a shell name to take only when its detection is switched off
(``_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION``; "test" in the name, but it only selects which
of its two option sets it builds). ``envdoctor --show-completion zsh`` names the shell, so the
app is built with the switch set for such a command line; without a name, Typer detects it.
"""

from __future__ import annotations

import functools
import os
from typing import Any

COMPLETE_VAR = "_ENVDOCTOR_COMPLETE"
"""Set by Typer's completion scripts (``_{PROG}_COMPLETE``) when they ask for completions."""
COMPLETION_FLAGS = ("--install-completion", "--show-completion")
SHELL_GIVEN = "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"


def names_a_shell(argv: list[str]) -> bool:
    """``--show-completion zsh`` / ``--install-completion=bash``: a shell named, not detected."""
    if not argv:
        return False
    flag, has_value, _ = argv[0].partition("=")
    if flag not in COMPLETION_FLAGS:
        return False
    return bool(has_value) or (len(argv) > 1 and not argv[1].startswith("-"))


def click_command_for(argv: list[str]) -> Any:
    """The click command for ``argv``: built once, or with named shells for a line that names
    one."""
    if names_a_shell(argv) and not os.environ.get(SHELL_GIVEN):
        os.environ[SHELL_GIVEN] = "1"
        try:
            return _built()
        finally:
            os.environ.pop(SHELL_GIVEN, None)
    return _cached()


@functools.cache
def _cached() -> Any:
    return _built()


def _built() -> Any:
    from envdoctor.cli.app import click_command

    return click_command()
