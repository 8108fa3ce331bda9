"""Commands and their options as data: one parser (getopt's rules), one help renderer, one place
where a bad command line becomes a usage error.

Every command declares its options once (``cli/registry.py``). The declarations serve the
parser here, ``-h``/``--help``, shell completion and the docs, and cost nothing to import: a
command starts without loading a CLI framework (a startup probe runs every few seconds, and a
person waits for ``check``). Spellings follow argparse's, which existing manifests and scripts
use: unique long-option prefixes (``--form json``), ``--opt=value``, clustered short flags
(``-vo FILE``), ``-oFILE``; a value that is itself one of the command's options is refused
rather than swallowed (``-o --json``), and ``-h`` anywhere wins over every error.
"""

from __future__ import annotations

from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import quoted

# `--help` must start about as fast as Python itself (issue 15: within 3x of `python -c pass`),
# so nothing here imports at module level what help does not need: typing (~5 ms) and re come
# in with the first parse.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

HELP_WIDTH = 80
MAX_DIGITS = 9  # an integer option of more digits is a usage error, never a 5000-digit int
_NEGATIVE_NUMBER = r"-(\d+(\.\d*)?|\.\d+)"


class UsageError(EnvdoctorError):
    """A bad command line (exit 2); the message names the option and points at --help."""

    def __init__(self, message: str, command: str = "") -> None:
        where = f"envdoctor {command}".rstrip()
        super().__init__(message, hint=f"see {where} --help")


class _Declaration:
    """An immutable declaration with equality and repr over its slots: what ``@record`` gives,
    without generating code at import (help starts before dataclasses would be imported)."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({inner})"


class Option(_Declaration):
    """One option: its spellings (``--format``, ``-f``), where its value goes, and its help.

    ``kind``: a ``flag``; a ``text``, ``path``, ``number`` (a float), ``seconds`` (a time
    budget: positive, at most a day) or ``integer`` value; one of ``choices``; or a repeatable
    ``list`` of texts / ``integers``. ``minimum``/``maximum`` bound numbers (a usage error
    outside them).
    """

    __slots__ = (
        "choices",
        "default",
        "dest",
        "flags",
        "help",
        "kind",
        "maximum",
        "metavar",
        "minimum",
    )
    flags: tuple[str, ...]
    dest: str
    help: str
    kind: str
    metavar: str
    choices: tuple[str, ...]
    default: Any
    minimum: float | None
    maximum: float | None

    def __init__(
        self,
        flags: tuple[str, ...],
        dest: str,
        help: str,
        kind: str = "text",
        metavar: str = "",
        choices: tuple[str, ...] = (),
        default: Any = None,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> None:
        self._set(
            flags=flags,
            dest=dest,
            help=help,
            kind=kind,
            metavar=metavar,
            choices=choices,
            default=default,
            minimum=minimum,
            maximum=maximum,
        )

    @property
    def takes_value(self) -> bool:
        return self.kind != "flag"

    @property
    def long(self) -> str:
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])

    def shown_metavar(self) -> str:
        if self.metavar:
            return self.metavar
        if self.kind == "choice":
            return "{" + ",".join(self.choices) + "}"
        return {"seconds": "SECONDS", "integer": "N", "integers": "N", "path": "FILE"}.get(
            self.kind, self.dest.upper()
        )


class Argument(_Declaration):
    """A positional argument; ``many`` takes every argument left (``run -- CMD ARGS…``).

    ``metavar`` is what help shows (``FILE``, ``CMD [ARGS]...``); usage adds the brackets of an
    optional one. ``completions``: the words shell completion offers (the parser does not
    restrict to them).
    """

    __slots__ = ("completions", "default", "dest", "help", "many", "metavar", "required")
    dest: str
    metavar: str
    help: str
    required: bool
    many: bool
    default: str | None
    completions: tuple[str, ...]

    def __init__(
        self,
        dest: str,
        metavar: str,
        help: str,
        required: bool = True,
        many: bool = False,
        default: str | None = None,
        completions: tuple[str, ...] = (),
    ) -> None:
        self._set(
            dest=dest,
            metavar=metavar,
            help=help,
            required=required,
            many=many,
            default=default,
            completions=completions,
        )


class Command(_Declaration):
    """A command: what it is for, its options and arguments, and the module that runs it
    (``run(invocation) -> exit code``); or a group of ``subcommands``.

    ``interspersed`` False: options end at the first argument (``run --blocking -- python
    train.py -v``).
    """

    __slots__ = (
        "arguments",
        "description",
        "epilog",
        "interspersed",
        "module",
        "name",
        "options",
        "subcommands",
        "summary",
    )
    name: str
    summary: str
    description: str
    options: tuple[Option, ...]
    arguments: tuple[Argument, ...]
    module: str
    subcommands: tuple[Command, ...]
    interspersed: bool
    epilog: str

    def __init__(
        self,
        name: str,
        summary: str,
        description: str = "",
        options: tuple[Option, ...] = (),
        arguments: tuple[Argument, ...] = (),
        module: str = "",
        subcommands: tuple[Command, ...] = (),
        interspersed: bool = True,
        epilog: str = "",
    ) -> None:
        self._set(
            name=name,
            summary=summary,
            description=description,
            options=options,
            arguments=arguments,
            module=module,
            subcommands=subcommands,
            interspersed=interspersed,
            epilog=epilog,
        )


class Args:
    """Parsed values, by ``dest``, typed by accessor; the declared default where not given."""

    def __init__(self, command: Command, values: dict[str, Any], where: str) -> None:
        self.command = command
        self.where = where  # "check", "spec init" …: the command as typed
        self._values = values

    def given(self, dest: str) -> bool:
        return dest in self._values

    def _get(self, dest: str) -> Any:
        if dest in self._values:
            return self._values[dest]
        for option in self.command.options:
            if option.dest == dest:
                return option.default
        for argument in self.command.arguments:
            if argument.dest == dest:
                return argument.default
        raise KeyError(f"{self.where}: no option {dest!r}")  # a programming error

    def flag(self, dest: str) -> bool:
        return bool(self._get(dest))

    def text(self, dest: str) -> str | None:
        value = self._get(dest)
        return None if value is None else str(value)

    def path(self, dest: str) -> Path | None:
        value = self._get(dest)
        if value is None:  # no option given: no pathlib (with urllib.parse, ~4 ms) for nothing
            return None
        from pathlib import Path  # lazily: pathlib costs a few ms of a probe's start-up

        return Path(value)

    def number(self, dest: str) -> float:
        return float(self._get(dest))

    def integer(self, dest: str) -> int | None:
        value = self._get(dest)
        return None if value is None else int(value)

    def texts(self, dest: str) -> tuple[str, ...]:
        return tuple(self._get(dest) or ())

    def integers(self, dest: str) -> tuple[int, ...]:
        return tuple(self._get(dest) or ())


def asks_for_help(command: Command, argv: Sequence[str]) -> bool:
    """``-h``/``--help`` (or a prefix of it, or ``-h`` in a cluster) before ``--``, and, for a
    command whose options end at its first argument, before that argument too."""
    for arg in argv:
        if arg == "--":
            return False
        if arg.startswith("--"):
            if len(arg) > 2 and "--help".startswith(arg.partition("=")[0]):
                return True
        elif arg.startswith("-") and len(arg) > 1:
            if "h" in _cluster_flags(command, arg[1:]):
                return True
        elif not command.interspersed:
            return False
    return False


def _cluster_flags(command: Command, cluster: str) -> str:
    """The letters of ``-vho FILE`` up to the first one that takes a value."""
    valued = {f[1] for o in command.options if o.takes_value for f in o.flags if len(f) == 2}
    out = ""
    for letter in cluster:
        out += letter
        if letter in valued:
            break
    return out


def parse(command: Command, argv: Sequence[str], path: str = "") -> Args:
    """The command line as ``Args``, or a ``UsageError`` naming what is wrong."""
    path = path or command.name
    by_flag = _flags(command)
    pairs, rest = _split(command, argv, by_flag, path)
    values: dict[str, Any] = {}
    for flag, raw in pairs:
        option = by_flag[flag]
        if flag in ("-h", "--help"):
            continue
        if option.takes_value and _looks_like_option(raw, by_flag):
            raise UsageError(f"{flag} needs a value (got the option {raw!r})", path)
        _store(values, option, flag, raw, path)
    _arguments(command, rest, values, path)
    return Args(command, values, path)


def _flags(command: Command) -> dict[str, Option]:
    """Every spelling of every option, ``-h``/``--help`` included."""
    help_option = Option(("-h", "--help"), "help", "Show this help and exit.", kind="flag")
    by_flag = {"-h": help_option, "--help": help_option}
    by_flag.update((flag, option) for option in command.options for flag in option.flags)
    return by_flag


def _split(
    command: Command, argv: Sequence[str], by_flag: dict[str, Option], path: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """(flag, raw value) pairs and the arguments, as getopt splits them (``gnu_getopt`` for an
    interspersed command): ``--`` ends the options, and so does the first argument of a command
    whose options come first. Written here, not imported: getopt imports gettext and locale
    (~2 ms of every start-up) for messages that are reworded anyway."""
    pairs: list[tuple[str, str]] = []
    rest: list[str] = []
    args = list(argv)
    at = 0
    while at < len(args):
        arg = args[at]
        at += 1
        if arg == "--":
            rest.extend(args[at:])
            break
        if arg.startswith("--"):
            typed, has_value, value = arg.partition("=")
            flag = _long_flag(typed, by_flag, path)
            if not by_flag[flag].takes_value:
                if has_value:
                    raise UsageError(f"{flag} takes no value", path)
                value = ""
            elif not has_value:
                if at == len(args):
                    raise UsageError(f"{flag} needs a value", path)
                value = args[at]
                at += 1
            pairs.append((flag, value))
        elif arg.startswith("-") and arg != "-":
            at = _shorts(arg, args, at, by_flag, pairs, path)
        elif command.interspersed:
            rest.append(arg)
        else:
            rest.extend(args[at - 1 :])
            break
    return pairs, rest


def _long_flag(typed: str, by_flag: dict[str, Option], path: str) -> str:
    """The long option ``typed`` names: itself, or the one long option it is a prefix of."""
    if typed in by_flag:
        return typed
    matches = [flag for flag in by_flag if flag.startswith("--") and flag.startswith(typed)]
    if len(matches) == 1:
        return matches[0]
    why = "ambiguous" if matches else "unrecognized"
    raise UsageError(f"{why} option {typed!r}", path)


def _shorts(
    arg: str,
    args: list[str],
    at: int,
    by_flag: dict[str, Option],
    pairs: list[tuple[str, str]],
    path: str,
) -> int:
    """The flags of one cluster (``-vo FILE``, ``-oFILE``); returns where the next argument is."""
    for index in range(1, len(arg)):
        flag = f"-{arg[index]}"
        option = by_flag.get(flag)
        if option is None:
            raise UsageError(f"unrecognized option {flag!r}", path)
        if not option.takes_value:
            pairs.append((flag, ""))
            continue
        if index + 1 < len(arg):
            pairs.append((flag, arg[index + 1 :]))
        elif at < len(args):
            pairs.append((flag, args[at]))
            at += 1
        else:
            raise UsageError(f"{flag} needs a value", path)
        break
    return at


def _looks_like_option(raw: str, by_flag: dict[str, Option]) -> bool:
    import re

    if not raw.startswith("-") or raw == "-" or re.fullmatch(_NEGATIVE_NUMBER, raw):
        return False
    name = raw.partition("=")[0]
    if name.startswith("--"):
        return any(flag.startswith(name) for flag in by_flag if flag.startswith("--"))
    return name[:2] in by_flag


def _store(values: dict[str, Any], option: Option, flag: str, raw: str, path: str) -> None:
    if option.kind == "flag":
        values[option.dest] = True
    elif option.kind == "list":
        values.setdefault(option.dest, []).append(raw)
    elif option.kind == "integers":
        values.setdefault(option.dest, []).append(_integer(option, flag, raw, path))
    elif option.kind == "integer":
        values[option.dest] = _integer(option, flag, raw, path)
    elif option.kind == "number":
        values[option.dest] = _number(option, flag, raw, path)
    elif option.kind == "seconds":
        values[option.dest] = _seconds(flag, raw, path)
    elif option.kind == "choice":
        chosen = raw.lower()
        if chosen not in option.choices:
            raise UsageError(
                f"{flag}: invalid choice {raw!r} (choose from {', '.join(option.choices)})", path
            )
        values[option.dest] = chosen
    else:
        if not raw:
            raise UsageError(f"{flag} needs a value (got an empty one)", path)
        values[option.dest] = raw


def _integer(option: Option, flag: str, raw: str, path: str) -> int:
    text = raw.strip()
    digits = text.lstrip("+-")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > MAX_DIGITS:
        raise UsageError(f"{flag}: expected a whole number, got {quoted(raw)}", path)
    return int(_bounded(option, flag, float(int(text)), path))


def _number(option: Option, flag: str, raw: str, path: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{flag}: expected a number, got {quoted(raw)}", path) from None
    import math

    if not math.isfinite(value):
        raise UsageError(f"{flag}: expected a finite number, got {quoted(raw)}", path)
    return _bounded(option, flag, value, path)


def _seconds(flag: str, raw: str, path: str) -> float:
    """A time budget every timer can hold (the one check every command shares)."""
    from envdoctor.cli.watchdog import check_budget

    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{flag}: expected a number of seconds, got {quoted(raw)}", path) from None
    try:
        return check_budget(value, flag)
    except EnvdoctorError as exc:
        raise UsageError(exc.message, path) from None


def _bounded(option: Option, flag: str, value: float, path: str) -> float:
    if option.minimum is not None and value < option.minimum:
        raise UsageError(f"{flag} must be at least {option.minimum:g}", path)
    if option.maximum is not None and value > option.maximum:
        raise UsageError(f"{flag} must be at most {option.maximum:g}", path)
    return value


def _arguments(command: Command, rest: list[str], values: dict[str, Any], path: str) -> None:
    if rest[:1] == ["--"]:
        rest = rest[1:]
    for argument in command.arguments:
        if argument.many:
            if argument.required and not rest:
                dashes = "" if command.interspersed else "-- "
                raise UsageError(f"missing {dashes}{argument.metavar}", path)
            values[argument.dest] = tuple(rest)
            rest = []
        elif rest:
            values[argument.dest] = rest.pop(0)
        elif argument.required:
            raise UsageError(f"missing argument {argument.metavar}", path)
    if rest:
        raise UsageError(f"unexpected argument {quoted(rest[0])}", path)


# --- help ---------------------------------------------------------------------------------------


def render_help(command: Command, path: str, width: int = HELP_WIDTH) -> str:
    """``envdoctor PATH --help``: usage, what the command does, its options and arguments."""
    import textwrap  # only help needs it: kept off the start-up path

    lines = [_usage(command, path), ""]
    if command.description or command.summary:
        for para in (command.description or command.summary).split("\n\n"):
            lines.extend(textwrap.wrap(" ".join(para.split()), width) or [""])
            lines.append("")
    if command.subcommands:
        lines.append("commands:")
        lines.extend(_rows([(s.name, s.summary) for s in command.subcommands], width))
        lines.append("")
    if command.arguments:
        lines.append("arguments:")
        lines.extend(_rows([(a.metavar, a.help) for a in command.arguments], width))
        lines.append("")
    rows = [(_spelling(o), _option_help(o)) for o in command.options]
    rows.append(("-h, --help", "Show this help and exit."))
    lines.append("options:")
    lines.extend(_rows(rows, width))
    if command.epilog:
        lines.append("")
        for para in command.epilog.split("\n\n"):
            lines.extend(textwrap.wrap(" ".join(para.split()), width) or [""])
    return "\n".join(lines).rstrip() + "\n"


def _usage(command: Command, path: str) -> str:
    program = f"usage: envdoctor {path}".rstrip()
    if command.subcommands:
        return f"{program} COMMAND [OPTIONS]"
    parts = [program, "[OPTIONS]"]
    for argument in command.arguments:
        shown = argument.metavar if argument.required else f"[{argument.metavar}]"
        # a command's own arguments follow `--` where its options end at the first one
        parts.append(f"-- {shown}" if argument.many and not command.interspersed else shown)
    return " ".join(parts)


def _spelling(option: Option) -> str:
    shorts = [f for f in option.flags if not f.startswith("--")]
    longs = [f for f in option.flags if f.startswith("--")]
    text = ", ".join([*shorts, *longs])
    return f"{text} {option.shown_metavar()}" if option.takes_value else text


def _option_help(option: Option) -> str:
    text = option.help
    if option.kind in ("list", "integers"):
        text += " Repeatable."
    if option.default not in (None, False, ()) and "default" not in text:
        default = f"{option.default:g}" if isinstance(option.default, float) else option.default
        text += f" (default: {default})"
    return text


def _rows(rows: list[tuple[str, str]], width: int) -> list[str]:
    import textwrap

    left = min(30, max((len(name) for name, _ in rows), default=0) + 4)
    out = []
    for name, text in rows:
        body = textwrap.wrap(" ".join(text.split()), max(20, width - left)) or [""]
        if len(name) + 4 > left:
            out.append(f"  {name}")
            out.extend(" " * left + line for line in body)
        else:
            out.append(f"  {name:<{left - 2}}{body[0]}")
            out.extend(" " * left + line for line in body[1:])
    return out
