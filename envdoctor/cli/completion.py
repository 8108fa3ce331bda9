"""Shell completion: Typer's, over a Typer app built from the command registry.

envdoctor parses its own command lines (``cli/options.py``) so that a command starts without a
CLI framework; completion is where Typer still serves: ``--install-completion`` and
``--show-completion`` (bash, zsh, fish, PowerShell) write and print Typer's scripts, and those
scripts call ``envdoctor`` back with ``_ENVDOCTOR_COMPLETE`` set, which lands here too. The app
is built from the same declarations as the parser and the help, so a new option completes
without being written twice; its commands are never run (a completion request exits first).

No ``from __future__ import annotations`` here: Typer reads the annotations of the functions
made below at run time.
"""

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envdoctor.cli import registry
from envdoctor.cli.options import Argument, Command, Option, UsageError

PROG = "envdoctor"  # Typer names the variable its scripts set after it: main.COMPLETE_VAR

_ANNOTATION: dict[str, Any] = {
    "flag": bool,
    "text": str | None,
    "choice": str | None,
    "path": Path | None,
    "number": float | None,
    "seconds": float | None,
    "integer": int | None,
    "list": list[str] | None,
    "integers": list[int] | None,
}


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")  # what Typer writes scripts for
SHELL_GIVEN = "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"
"""With it set, Typer's ``--install-completion``/``--show-completion`` take the shell as their
value instead of detecting it (Typer's own switch; its name says "test" but it only selects
which of its two option sets it builds)."""


def complete(argv: list[str]) -> int:
    """Answer a completion request, or install/show the completion script; the exit code.

    ``--show-completion zsh`` (or ``=zsh``) names the shell; without one Typer detects it.
    """
    import os

    flag, _, value = argv[0].partition("=") if argv else ("", "", "")
    if not value and len(argv) > 1 and not argv[1].startswith("-"):
        value = argv[1]
    from envdoctor.cli.main import COMPLETION_FLAGS  # loaded already: it routed here

    given = bool(value) and flag in COMPLETION_FLAGS
    if given and value not in SHELLS:
        raise UsageError(f"{flag}: no completion for {value!r} (shells: {', '.join(SHELLS)})")
    args = [flag, value] if given else argv
    app = typer_app()
    saved = os.environ.get(SHELL_GIVEN)
    if given:
        os.environ[SHELL_GIVEN] = "1"
    try:
        app(args, prog_name=PROG)
    except SystemExit as exc:  # Typer (click) always ends with sys.exit
        return exc.code if isinstance(exc.code, int) else 0
    finally:
        if given and saved is None:
            os.environ.pop(SHELL_GIVEN, None)
    return 0


def typer_app() -> Any:
    """A Typer app with every command, option and argument of the registry (never run)."""
    import typer

    app = typer.Typer(name=PROG, help=registry.TOP.summary, add_completion=True)
    _add_group(app, registry.TOP)
    return app


def _add_group(app: Any, group: Command) -> None:
    import typer

    for command in group.subcommands:
        if command.subcommands:
            sub = typer.Typer(name=command.name, help=command.summary, add_completion=False)
            _add_group(sub, command)
            app.add_typer(sub, name=command.name)
        else:
            app.command(command.name, help=command.summary)(_signature_of(command))


def _signature_of(command: Command) -> Callable[..., None]:
    """A function whose signature Typer reads as ``command``'s options and arguments."""
    params = [_argument(a) for a in command.arguments] + [_option(o) for o in command.options]

    def never_run(**_: object) -> None:
        """Completion exits before any command runs; ``dispatch`` runs the real one."""

    never_run.__name__ = command.name.replace("-", "_")
    never_run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # read by Typer
    return never_run


def _option(option: Option) -> inspect.Parameter:
    import typer

    flags = (option.long, *(f for f in option.flags if f != option.long))
    extra: dict[str, Any] = {}
    if option.kind == "choice":
        extra["autocompletion"] = _choices(option.choices)
    default: Any = False if option.kind == "flag" else None
    return inspect.Parameter(
        option.dest,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(default, *flags, help=option.help, show_default=False, **extra),
        annotation=_ANNOTATION[option.kind],
    )


def _argument(argument: Argument) -> inspect.Parameter:
    import typer

    extra: dict[str, Any] = {}
    if argument.completions:
        extra["autocompletion"] = _choices(argument.completions)
    return inspect.Parameter(
        argument.dest,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=typer.Argument(None, metavar=argument.metavar, help=argument.help, **extra),
        annotation=list[str] | None if argument.many else (str | None if extra else Path | None),
    )


def _choices(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    def matching(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return matching
