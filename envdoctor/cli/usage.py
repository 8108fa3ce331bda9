"""A bad command line in words: what is wrong (naming the option) and where the help is.

Typer (its vendored click) finds the mistake; the words are envdoctor's, one line each, as every
other error of envdoctor's is (``cli/boundary.py`` prints them and exits 2).
"""

from __future__ import annotations

from typing import Any

import typer

from envdoctor.terminal import safe_line

PROG = "envdoctor"


class Refused(typer.BadParameter):
    """A value the command cannot take, in a message that already names the option."""


def usage_error_text(exc: Any) -> str:
    """``envdoctor check: no such option --jsn (did you mean --json?)`` and, on a second line,
    ``Try 'envdoctor check --help'.``"""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else PROG
    return f"{where}: {safe_line(usage_message(exc))}\nTry '{where} --help'.\n"


def usage_message(exc: Any) -> str:
    """What is wrong with the command line, in one line, naming the option at fault."""
    from typer._click.exceptions import (
        BadOptionUsage,
        BadParameter,
        MissingParameter,
        NoSuchOption,
    )

    if isinstance(exc, NoSuchOption):
        close = sorted(exc.possibilities or ())
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        return f"no such option {exc.option_name}{hint}"
    if isinstance(exc, Refused):
        return exc.message
    if isinstance(exc, MissingParameter):
        return f"missing {_param_name(exc.param, exc.ctx) or exc.param_hint or 'a value'}"
    if isinstance(exc, BadParameter):
        name = _param_name(exc.param, exc.ctx)
        said = exc.message.removeprefix("Value error, ").rstrip(".")
        said = said[:1].lower() + said[1:]
        if not name:
            return said
        return f"{name} {said}" if said.startswith("needs ") else f"{name}: {said}"
    if isinstance(exc, BadOptionUsage):
        return exc.message.rstrip(".").replace("Option '", "").replace("' requires", " needs")
    message: str = exc.message.rstrip(".")
    if message.startswith("Got unexpected extra argument(s) ("):
        extra = message.removeprefix("Got unexpected extra argument(s) (").removesuffix(")")
        return f"unexpected argument {extra}"
    if message.startswith("No such command"):
        return (
            "no such command"
            + message.removeprefix("No such command").replace(". Did you mean", " (did you mean")
            + (")" if "Did you mean" in message else "")
        )
    return message[:1].lower() + message[1:]


def _param_name(param: Any, ctx: Any) -> str:
    """``--timeout`` for an option, ``FILE`` for an argument."""
    if param is None:
        return ""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")] or list(
        getattr(param, "opts", ())
    )
    if getattr(param, "param_type_name", "") == "argument":
        return str(param.metavar or str(param.name).upper()).strip("[]")
    return opts[0] if opts else str(param.name)
