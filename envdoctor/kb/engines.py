"""The two ways explain matches a log: RE2 when it is installed, Python's ``re`` otherwise.

Both are linear in the size of the log; a log line shapes how long a regex runs, so that is a
property to guarantee, not to hope for.

- **RE2** (PyPI ``google-re2``, the ``re2`` extra; wheels for glibc Linux x86_64/aarch64 and
  CPython 3.10 to 3.14) runs in time linear in the text by construction, whatever the pattern. It
  also finds the candidate lines of every signature in one pass: one automaton for the
  distinctive literal of every pattern, searched over whole blocks of the log, instead of one
  substring search per prefilter trigger (over the block's distinct line templates, or over
  its bytes where most lines are distinct: ``candidates``). docs/explain.md ("Benchmark") compares
  the two.
- **Python's re** backtracks, so the fallback keeps to patterns whose search it can bound: the
  loader admits only the POSIX ERE subset (``ere.to_ere``: no backreferences or lookarounds);
  a pattern that starts with a literal followed by a gap that takes the rest of the line
  (``rror[^\\n]*?…``, the idiom the docs recommend) is tried once, at the first occurrence of
  that literal, because a match from any later occurrence implies one from the first; and every
  pattern of every signature must pass ``tests/hostile/test_explain_regex_budget.py`` under
  both engines (lines built from its own literals, per-line time budget), so a pattern that
  backtracks catastrophically cannot be added unnoticed.

``ENVDOCTOR_RE2=0`` forces the fallback (benchmarks, or a broken RE2 build).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol

from envdoctor.kb.anchor import leading_gap_literal
from envdoctor.kb.model import REGEX_CACHE, compiled

RE2 = "re2"
PYTHON_RE = "re"


class LineMatch(Protocol):
    """What the scanner uses of a match (``re.Match`` and RE2's match both have it)."""

    def groupdict(self) -> dict[str, Any]: ...

    def start(self) -> int: ...


LineSearch = Callable[[str], "LineMatch | None"]
BlockSearch = Callable[[bytes, int, int], int]  # (block, pos, end) -> first hit or -1


@functools.lru_cache(maxsize=1)
def _re2() -> ModuleType | None:
    """google-re2, or None when it is not installed or its native part does not load."""
    if os.environ.get("ENVDOCTOR_RE2", "1") == "0":
        return None
    try:
        import re2  # type: ignore[import-untyped,import-not-found,unused-ignore]  # optional, no stubs
    except Exception:  # noqa: BLE001 (ImportError, or an OSError from a broken shared library)
        return None
    module: ModuleType = re2
    return module


def default_engine() -> str:
    """``re2`` when it can be used, else ``re``."""
    return RE2 if _re2() is not None else PYTHON_RE


def available_engines() -> tuple[str, ...]:
    return (RE2, PYTHON_RE) if _re2() is not None else (PYTHON_RE,)


def line_search(source: str, engine: str) -> LineSearch:
    """A function that finds the regex ``source`` in one line of text, in time linear in the
    line."""
    if engine == RE2:
        _need_re2()  # before the cache: RE2 may have been turned off since (ENVDOCTOR_RE2=0)
        return _re2_search(source)
    regex = compiled(source)
    lead = leading_gap_literal(source)
    if lead is None:
        return regex.search
    match = regex.match
    find = str.find

    def first_occurrence(text: str) -> re.Match[str] | None:
        # ``lead`` is followed by a gap that takes any rest of the line: a match that starts at
        # a later occurrence implies one from this occurrence, and ``search`` would return
        # exactly this one; trying the later ones is what made such patterns quadratic
        at = find(text, lead)
        return None if at < 0 else match(text, at)

    return first_occurrence


@functools.lru_cache(maxsize=REGEX_CACHE)
def _re2_search(pattern: str) -> LineSearch:
    """RE2's search for ``pattern``, compiled once per process: a process that explains log
    after log (a library user, the test suite: thousands of scanners) built every one of the
    signatures' patterns again for each log. RE2's compiled patterns are immutable and safe to
    share between threads; those kept (with their automata's memory) stay for the life of the
    process."""
    search: LineSearch = _need_re2().compile(pattern).search
    return search


SWEEP_MAX_MEM = 64 << 20
"""RE2's memory budget for the literal sweep's automaton (bytes)."""


def literal_sweep(literals: Sequence[str]) -> BlockSearch:
    """RE2 only: the position of the first of ``literals`` in ``block[pos:end]`` (-1: none),
    one automaton for all of them, over raw bytes (a literal is matched as its UTF-8 bytes)."""
    _need_re2()
    return _literal_sweep(tuple(sorted(set(literals), key=lambda lit: (-len(lit), lit))))


@functools.lru_cache(maxsize=8)
def _literal_sweep(literals: tuple[str, ...]) -> BlockSearch:
    """``literal_sweep`` for distinct literals, longest first, built once per process."""
    module = _need_re2()
    options = module.Options()
    options.encoding = module.Options.Encoding.LATIN1
    # RE2's default budget (8 MiB) held the automaton of ~400 patterns' key literals; at ~440
    # its DFA ran out of it on the first line, and RE2 fell back to its slow NFA and wrote
    # "DFA out of memory" to stderr for every block. The states are made lazily, so a log
    # that meets few of them uses little of this (peak RSS: docs/explain.md, Benchmark).
    options.max_mem = SWEEP_MAX_MEM
    alternation = b"|".join(re.escape(lit.encode("utf-8")) for lit in literals)
    compiled = module.compile(alternation, options)
    search = compiled.search

    def first(block: bytes, pos: int, end: int) -> int:
        m = search(block, pos, end)
        return -1 if m is None else int(m.start())

    return first


def _need_re2() -> ModuleType:
    module = _re2()
    if module is None:
        raise RuntimeError("RE2 (google-re2) is not available")
    return module
