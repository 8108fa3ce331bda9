"""The options of ``envdoctor probe``, parsed by hand.

A startup probe starts a fresh interpreter every few seconds, so its start-up is the product:
importing argparse and building its parser cost about 9 ms, more than the probe's own reading of
the machine. Seven options need no framework; Typer hands its arguments here too, so both
paths parse (and fail) the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from envdoctor.errors import EnvdoctorError

DEFAULT_TIMEOUT = 1.0
FORMATS = ("text", "json", "prometheus")

HELP = """\
usage: envdoctor probe [--timeout SECONDS] [--format {text,json,prometheus}] [--json]
                       [-o FILE] [--require EXPR]... [--strict] [-v]

Fast health probe (NVML, /proc, /dev; no child process, never torch). The first output line
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
  --strict           warnings fail too (exit 1)
  -v, --verbose      after the verdict, one line per finding
  -h, --help         show this help and exit
"""


class UsageError(EnvdoctorError):
    """A bad command line (exit 2); the message names the option and points at --help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="see envdoctor probe --help")


class ProbeOptions(NamedTuple):
    """The parsed command line. A NamedTuple: built in a tenth of a frozen dataclass's time."""

    timeout: float = DEFAULT_TIMEOUT
    format: str = "text"
    output: str | None = None
    require: tuple[str, ...] = ()
    strict: bool = False
    verbose: bool = False
    help: bool = False


_VALUED = {"--timeout": "timeout", "--format": "format", "-o": "output", "--output": "output"}
_VALUED |= {"--require": "require"}
_FLAGS = {"--json": "json", "--strict": "strict", "-v": "verbose", "--verbose": "verbose"}
_FLAGS |= {"-h": "help", "--help": "help"}


def parse_options(argv: Sequence[str]) -> ProbeOptions:
    """``argv`` (without ``probe``) as options; ``UsageError`` for anything else."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    require: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            has_value = bool(equals)
        elif arg.startswith("-o") and len(arg) > 2:  # -oFILE
            name, has_value, value = "-o", True, arg[2:]
        else:
            name, has_value, value = arg, False, ""
        if name in _FLAGS and not has_value:
            flags.add(_FLAGS[name])
            continue
        if name not in _VALUED:
            raise UsageError(f"unrecognized argument {arg!r}")
        if not has_value:
            if not args:
                raise UsageError(f"{name} needs a value")
            value = args.pop(0)
        if _VALUED[name] == "require":
            require.append(value)
        else:
            values[_VALUED[name]] = value
    fmt = values.get("format", "text")
    if fmt not in FORMATS:
        raise UsageError(f"--format: invalid choice {fmt!r} (choose from {', '.join(FORMATS)})")
    return ProbeOptions(
        timeout=_timeout(values.get("timeout")),
        format="json" if "json" in flags else fmt,
        output=values.get("output"),
        require=tuple(require),
        strict="strict" in flags,
        verbose="verbose" in flags,
        help="help" in flags,
    )


def _timeout(text: str | None) -> float:
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        raise UsageError(f"--timeout: invalid float value {text!r}") from None
    if not seconds > 0:  # also refuses nan
        raise UsageError("--timeout must be a positive number of seconds")
    return seconds
