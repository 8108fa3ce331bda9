"""The commands as Typer built them (click objects), walked for tests that cover every one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from envdoctor.cli.app import click_command


def tree(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[list[str], Any]]:
    """(path, command) for the top command, every group and every command under them."""
    command = command if command is not None else click_command()
    yield list(path), command
    for name, sub in getattr(command, "commands", {}).items():
        yield from tree(sub, (*path, name))


def leaves() -> list[tuple[str, Any]]:
    """("spec init", command) for every command that runs (not the groups)."""
    return [(" ".join(p), c) for p, c in tree() if not getattr(c, "commands", None)]


def options(command: Any) -> list[Any]:
    """The command's declared options (not ``-h``/``--help``, which every command takes)."""
    return [p for p in command.params if p.param_type_name == "option"]


def spellings(command: Any) -> set[str]:
    """Every spelling of every option the command takes (``--output``, ``-o``, ``-h`` …)."""
    names = {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    return names | {"-h", "--help"}


def find(path: list[str]) -> Any:
    command = click_command()
    for name in path:
        command = command.commands[name]
    return command
