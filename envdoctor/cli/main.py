"""``envdoctor ARGS``: find the command, parse its options, run it, return its exit code.

Nothing here loads a CLI framework or a command it does not run: help and usage errors come from
the declarations in ``cli/registry.py``, and a command's module is imported only to run it.
"""

from __future__ import annotations

import importlib
import os

from envdoctor import __version__, exitcodes
from envdoctor.cli import registry
from envdoctor.cli.boundary import emit, guarded
from envdoctor.cli.options import Command, UsageError, asks_for_help, parse, render_help

TYPE_CHECKING = False  # typing costs ~5 ms: `--help` goes without it
if TYPE_CHECKING:
    from collections.abc import Sequence

    from envdoctor.cli.common import AppContext


def dispatch(argv: Sequence[str], app: AppContext | None = None) -> int:
    """Run the command ``argv`` names (without the program name); its exit code."""
    from envdoctor.errors import forget_private

    forget_private()  # (several commands in one process: the tests)
    return guarded(lambda: _dispatch(list(argv), app))


def _dispatch(argv: list[str], app: AppContext | None) -> int:
    if os.environ.get(COMPLETE_VAR) or (argv[:1] and argv[0].split("=")[0] in COMPLETION_FLAGS):
        from envdoctor.cli.completion import complete  # Typer: only for completion

        return complete(argv)
    if not argv:
        emit(render_help(registry.TOP, ""), err=True)
        return exitcodes.UNKNOWN
    first = argv[0]
    if first in ("-h", "--help"):
        emit(render_help(registry.TOP, ""))
        return exitcodes.HEALTHY
    if first == "--version":
        emit(f"envdoctor {__version__} (gpu-envdoctor)\n")
        return exitcodes.HEALTHY
    command, path, rest = _find(registry.TOP, "", argv)
    if command.subcommands:  # a group given no subcommand, or asked for help
        emit(render_help(command, path), err=not rest)
        return exitcodes.HEALTHY if rest else exitcodes.UNKNOWN
    if asks_for_help(command, rest):
        emit(render_help(command, path))
        return exitcodes.HEALTHY
    args = parse(command, rest, path)
    from envdoctor.cli.common import AppContext, Invocation  # the machine: only to run

    module = importlib.import_module(command.module)
    code: int = module.run(Invocation(args, app if app is not None else AppContext()))
    return code


COMPLETE_VAR = "_ENVDOCTOR_COMPLETE"
"""Set by Typer's completion scripts (``_{PROG}_COMPLETE``) when they ask for completions."""
COMPLETION_FLAGS = ("--install-completion", "--show-completion")


def _find(group: Command, path: str, argv: list[str]) -> tuple[Command, str, list[str]]:
    """The (sub)command ``argv`` names, its path ("spec init"), and the arguments left."""
    while argv and group.subcommands:
        name = argv[0]
        if name in ("-h", "--help"):
            return group, path, argv
        if name.startswith("-"):
            raise UsageError(f"unrecognized option {name!r}", path)
        command = registry.find(name, group)
        if command is None:
            names = [c.name for c in group.subcommands]
            import difflib  # only for a mistyped command

            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"no such command {name!r}{hint}", path)
        group, path, argv = command, f"{path} {name}".strip(), argv[1:]
    return group, path, argv
