"""Log decorations: what launchers, loggers, terminals and issue trackers put around a message.

Signature regexes search anywhere in a line, so a prefix such as ``[rank3]:``, ``3: ``, a
timestamp, a log level, a ``>>`` quote marker or an ``app-1  | `` container tag in front of an
error does not hide it. What does hide it is a message cut in two: a terminal or an issue
tracker wraps a long line, a logger wraps a long message onto indented lines (``The detected CUDA
version (11.8) mismatches the version that was used to compile`` / ``PyTorch (12.4)…``), and
every continuation line may carry its own decoration. ``continued`` rebuilds such a message:
the cut line followed by the next few lines, each stripped of its decorations.

Everything here is bounded (a few lines, a few KiB) and uses regexes anchored at the start of a
line with no nested unbounded repetition, so it runs in linear time on any input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from itertools import islice

MAX_CONTINUATION = 3  # lines joined after a cut line
MIN_CUT_LENGTH = 40  # shorter lines are complete messages, not wrapped ones
MAX_JOINED = 4096  # characters

_DECORATION = re.compile(
    r"""
    (?:
        [ \t]+                                            # indentation
      | >+[ \t]?                                          # e-mail / Markdown quote: > and >>
      | \*\*|`+|_                                        # Markdown emphasis around a message
      | \[\s*\d{1,7}\.\d{1,6}\]                           # dmesg: [ 1097.650222]
      | \[(?:rank|Rank|RANK)?\s?\d{1,5}\]:?               # [rank3]: [3]
      | (?:rank|Rank)\s?\d{1,5}:                          # rank3:
      | \[\d{1,5},\d{1,5}\]<std(?:out|err)>:              # mpirun: [1,3]<stdout>:
      | \[default\d{1,5}\]:                               # torchrun --tee: [default0]:
      | \([\w.-]{1,64}\ pid=\d{1,9}(?:,\ ip=[\d.]{1,40})?\)  # Ray/vLLM: (Worker pid=123)
      | \d{1,6}:[ \t]                                     # torchrun rank prefix: 3:
      | \d{1,6}[ \t]                                      # an editor's line number
      | \[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?  # ISO time
      | \[?\d\d/\d\d/\d{4}\ \d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]?                      # 04/24/2025 …
      | \[?\d\d-\d\d\ \d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]?                           # vLLM: 04-27 12:56:07
      | \[?\d\d:\d\d:\d\d(?:[.,-]\d{1,9})?\]?                                      # 17:22:43-020113
      | [A-Z][a-z]{2}\ [ \d]\d\ \d\d:\d\d:\d\d\ [\w.-]{1,64}\ [\w.@/-]{1,64}(?:\[\d{1,9}\])?:  # syslog
      | [IWEF]\d{4}\ \d\d:\d\d:\d\d\.\d{1,9}\ {1,8}\d{1,9}\ [\w.-]{1,128}:\d{1,7}\]  # glog
      | \[[IWEF]\d{4}\ \d\d:\d\d:\d\d\.\d{1,9}\ [\w.-]{1,128}:\d{1,7}\]           # torch c10d
      | \[\w{1,16}\|[\w.-]{1,128}:\d{1,7}\]\ [\d\- :,]{0,40}>>                   # [INFO|trainer.py:2128] … >>
      | \[\w{1,32}\.(?:py|cpp|cc|go):\d{1,7}\]                                   # [core.py:936]
      | (?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|NOTICE)[ \t]*[:|\]-]?[ \t]     # levels
      | \[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\]:?                   # [ERROR]
      | [\w.-]{1,64}[ \t]{1,16}\|[ \t]                                           # compose: web  |
      | [|│]                                                                      # a box border
    )
    """,
    re.VERBOSE,
)
_MAX_ROUNDS = 16

# a line that starts a new record rather than continuing the previous one
_NEW_RECORD = re.compile(
    r"(?:Traceback \(most recent call last\)|File \"|During handling of the above exception"
    r"|The above exception was the direct cause|[\w.]{1,128}(?:Error|Exception|Warning):)"
)


# a logger's mark that the line is information, not a failure: NCCL's "NCCL INFO", a level
# word or logfmt's level=info, glog's "I0531 03:55:57" and TensorFlow's ": I tensorflow/…"
_INFO_LEVEL = re.compile(
    r"(?:^|[\s\[|(])(?:NCCL INFO|INFO|level=(?:info|INFO))(?:$|[\s\]:|)-])"
    r"|(?:^|\s)I\d{4} \d\d:\d\d:\d\d"
    r"|\d: I (?:tensorflow|external|xla)/"
)
INFO_PREFIX_LIMIT = 512  # characters before a match that are read for the level


def logged_as_info(prefix: str) -> bool:
    """Was the line whose message starts after ``prefix`` written at a logger's INFO level?

    A program that logs a failure-shaped text at INFO (NCCL probing for an optional network
    plugin, a library looking for an optional dependency) has handled it; a fallback, which
    reads a message by its shape alone, must not call it a cause.
    """
    return _INFO_LEVEL.search(prefix[-INFO_PREFIX_LIMIT:]) is not None


def strip(line: str) -> str:
    """``line`` without the decorations in front of the message (bounded, never raises)."""
    pos = 0
    for _ in range(_MAX_ROUNDS):
        m = _DECORATION.match(line, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
    return line[pos:]


def looks_cut(line: str) -> bool:
    """Could this line be the first part of a message that goes on on the next line?"""
    return len(line.rstrip()) >= MIN_CUT_LENGTH


def _continuations(following: Iterable[str]) -> Iterator[tuple[bool, str]]:
    """The lines of ``following`` that continue a cut line, each with whether its break had
    white space; an iterator: it reads no further than needed."""
    for raw in islice(following, MAX_CONTINUATION):
        text = strip(raw.rstrip("\r"))
        if not text.strip() or _NEW_RECORD.match(text):
            return
        yield raw[:1].isspace() or text != raw.lstrip(), text.strip()


def continuation_count(following: Iterable[str]) -> int:
    """How many of ``following`` continue a cut line: those ``continued`` joins to it."""
    return sum(1 for _ in _continuations(following))


def continued(line: str, following: Iterable[str]) -> tuple[str, ...]:
    """``line`` joined with the lines that continue it, in the two ways a wrap can be undone.

    A terminal cuts mid-word (join with nothing); a logger or an issue tracker breaks at a
    space it removes or moves to the next line's indentation (join with one space). The first
    variant joins with nothing where neither side of the break has white space, the second
    always with a space. Empty when no following line can be a continuation.
    """
    parts = list(_continuations(following))
    if not parts:
        return ()
    tight = line.rstrip("\r")
    loose = tight.rstrip()
    for spaced, text in parts:
        sep = " " if spaced or tight[-1:].isspace() else ""
        tight = tight.rstrip() + sep + text
        loose = loose + " " + text
    variants = (tight[:MAX_JOINED], loose[:MAX_JOINED])
    return variants if variants[0] != variants[1] else variants[:1]
