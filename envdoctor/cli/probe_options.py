"""The options of ``envdoctor probe``, parsed by hand.

A startup probe starts a fresh interpreter every few seconds, so its start-up is the product:
importing argparse and building its parser cost about 9 ms, more than the probe's own reading of
the machine. Seven options need no framework; Typer hands its arguments here too, so both
paths parse (and fail) the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from envdoctor.cli.watchdog import check_budget
from envdoctor.errors import EnvdoctorError
from envdoctor.model.record import record

DEFAULT_TIMEOUT = 1.0
FORMATS = ("text", "json", "prometheus")
EXPECTS = ("gpu", "cpu")

HELP = """\
usage: envdoctor probe [--timeout SECONDS] [--format {text,json,prometheus}] [--json]
                       [-o FILE] [--require EXPR]... [--expect {gpu,cpu}] [--strict] [-v]

Fast health probe (NVML, /proc, /dev, the loader's cache; never torch). The first output line
is the verdict (at most 80 bytes). Exit 0 healthy, 1 unhealthy, 2 could not determine.

options:
  --timeout SECONDS  hard budget; past it the verdict is 'unknown' and the exit code 2
                     (default: 1)
  --format FORMAT    text (default), json, or the Prometheus textfile format
  --json             shortcut for --format json
  -o, --output FILE  write the output to FILE (atomically: temp file + rename); stdout gets
                     the verdict
  --require EXPR     a gate such as gpus>=8, driver>=550, cuda>=12.4, memory_free>=70GiB,
                     model~=H100 (repeatable; every gate must hold)
  --expect WHAT      gpu: no usable NVIDIA GPU is an error; cpu: no GPU is right
                     (default: $ENVDOCTOR_EXPECT, else judged from what is here)
  --strict           warnings fail too (exit 1)
  -v, --verbose      after the verdict, one line per finding
  -h, --help         show this help and exit
"""


class UsageError(EnvdoctorError):
    """A bad command line (exit 2); the message names the option and points at --help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="see envdoctor probe --help")


@record
class ProbeOptions:
    """The parsed command line."""

    timeout: float = DEFAULT_TIMEOUT
    format: str = "text"
    output: str | None = None
    require: tuple[str, ...] = ()
    strict: bool = False
    verbose: bool = False
    help: bool = False
    expect: str | None = None


# Option name -> field. Long names may be abbreviated to any unique prefix, and short ones
# clustered (-vo FILE), as argparse allowed: manifests written for it keep working.
_LONG_VALUED = {"--timeout": "timeout", "--format": "format", "--output": "output"}
_LONG_VALUED |= {"--require": "require", "--expect": "expect"}
_LONG_FLAGS = {"--json": "json", "--strict": "strict", "--verbose": "verbose", "--help": "help"}
_SHORT_VALUED = {"o": "output"}
_SHORT_FLAGS = {"v": "verbose", "h": "help"}
_NEGATIVE_NUMBER = r"-\d+(\.\d*)?|-\.\d+"


def parse_options(argv: Sequence[str]) -> ProbeOptions:
    """``argv`` (without ``probe``) as options; ``UsageError`` for anything else.

    ``-h``/``--help`` anywhere wins over every error, as with argparse.
    """
    try:
        return _parse(list(argv))
    except UsageError:
        if any(_asks_for_help(arg) for arg in argv):
            return ProbeOptions(help=True)
        raise


def _parse(args: list[str]) -> ProbeOptions:
    values: dict[str, str] = {}
    flags: set[str] = set()
    require: list[str] = []

    def take(field: str, option: str, value: str | None) -> None:
        if value is None:  # the value is the next argument, which must not be an option
            if not args or (
                args[0].startswith("-") and not re.fullmatch(_NEGATIVE_NUMBER, args[0])
            ):
                raise UsageError(f"{option} needs a value")
            value = args.pop(0)
        if field == "require":
            require.append(value)
        else:
            values[field] = value

    while args:
        arg = args.pop(0)
        if arg.startswith("--"):
            typed, equals, value = arg.partition("=")
            name = _long_name(typed)
            if name in _LONG_VALUED:
                take(_LONG_VALUED[name], name, value if equals else None)
            elif equals:
                raise UsageError(f"{name} takes no value ({arg!r})")
            else:
                flags.add(_LONG_FLAGS[name])
        elif arg.startswith("-") and len(arg) > 1:
            _short_cluster(arg, flags, take)
        else:
            raise UsageError(f"unrecognized argument {arg!r}")
    fmt = values.get("format", "text")
    if fmt not in FORMATS:
        raise UsageError(f"--format: invalid choice {fmt!r} (choose from {', '.join(FORMATS)})")
    expect = values.get("expect")
    if expect is not None and expect.lower() not in EXPECTS:
        raise UsageError(f"--expect: invalid choice {expect!r} (choose from {', '.join(EXPECTS)})")
    return ProbeOptions(
        timeout=_timeout(values.get("timeout")),
        format="json" if "json" in flags else fmt,
        output=values.get("output"),
        require=tuple(require),
        strict="strict" in flags,
        verbose="verbose" in flags,
        help="help" in flags,
        expect=expect.lower() if expect else None,
    )


def _long_name(typed: str) -> str:
    """The long option ``typed`` names: itself, or the one option it is a prefix of."""
    names = (*_LONG_VALUED, *_LONG_FLAGS)
    matches = [name for name in names if name.startswith(typed)]
    if typed in names or len(matches) == 1:
        return typed if typed in names else matches[0]
    raise UsageError(f"unrecognized argument {typed!r}")


def _short_cluster(arg: str, flags: set[str], take: Callable[[str, str, str | None], None]) -> None:
    """``-v``, ``-vh``, ``-o FILE``, ``-oFILE``, ``-o=FILE``, ``-vo FILE``."""
    for at, letter in enumerate(arg[1:], start=1):
        if letter in _SHORT_FLAGS:
            flags.add(_SHORT_FLAGS[letter])
        elif letter in _SHORT_VALUED:
            rest = arg[at + 1 :].removeprefix("=")
            take(_SHORT_VALUED[letter], f"-{letter}", rest or None)
            return
        else:
            raise UsageError(f"unrecognized argument {arg!r}")


def _asks_for_help(arg: str) -> bool:
    if arg.startswith("--"):
        return len(arg) > 2 and "--help".startswith(arg)
    return arg.startswith("-") and "h" in arg[1:].split("o", 1)[0]


def _timeout(text: str | None) -> float:
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        raise UsageError(f"--timeout: invalid float value {text!r}") from None
    try:
        return check_budget(seconds)  # the check every command shares: finite, > 0, <= a day
    except EnvdoctorError as exc:
        raise UsageError(exc.message) from None
