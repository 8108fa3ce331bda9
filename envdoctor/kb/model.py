"""The knowledge base as data: signatures (one per cause), what a scan found, ranked causes.

Pure data, no I/O. ``loader`` builds a ``KnowledgeBase`` from YAML, ``matcher`` turns a log into
``ScanResult``, ``ranking`` turns that into an ``Explanation``.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

from envdoctor import exitcodes

REGEX_CACHE = 4096
"""Compiled regexes kept per process (per engine): several times every regex of the shipped
signatures (patterns and context rules, ~1030). A cache smaller than the knowledge base evicts
on every scanner built, and each then compiles all of them again: at 1025 regexes in a cache of
1024 the catalog tests went from minutes to hours (tests/kb/test_engines.py holds the margin)."""


@functools.lru_cache(maxsize=REGEX_CACHE)
def compiled(regex: str) -> re.Pattern[str]:
    """A signature regex compiled by Python's ``re``, once per process (``re``'s own cache holds
    512, fewer than the signatures have)."""
    return re.compile(regex)


class Role(enum.Enum):
    """How a signature relates to the errors around it (this drives the ranking).

    - ``error``: an error with its own cause (a collate failure, a missing library).
    - ``async``: an asynchronous CUDA error. CUDA reports these at a later API call, so the
      first one in a log is the root and later ones are consequences of it.
    - ``kernel-assert``: the kernel's own assertion message (``Assertion `t >= 0 && …`
      failed``). It names what the generic ``device-side assert triggered`` does not, so it is
      the root of the asynchronous errors around it.
    - ``follow-on``: an error that is often only a consequence of an earlier asynchronous
      failure (cuBLAS/cuDNN handle creation after a device-side assert); on its own it is a
      cause in its own right.
    - ``fallback``: a generic reading of a whole class of message (any shared library not
      found, any nvidia-container-cli failure) by what it names. It stands only on lines no
      other signature reads: there it becomes the consequence of the one that does.
    - ``benign``: a failure-shaped message its program prints and survives (an optional
      library probed for and not found). It is never a cause, and a line it reads is read by
      no other signature: the library's own name in it is not what stopped the run.
    """

    ERROR = "error"
    ASYNC = "async"
    KERNEL_ASSERT = "kernel-assert"
    FOLLOW_ON = "follow-on"
    FALLBACK = "fallback"
    BENIGN = "benign"


@dataclass(frozen=True, slots=True)
class Pattern:
    """One way a cause shows up in a log: a regex searched in a line.

    ``anchor`` is a literal every matching line contains (derived from the regex or given in
    the YAML). A line is tested against ``regex`` only when it contains the anchor, which is
    what lets the scanner skip most of a log with a few fast substring searches; ``literals``
    are the other literals the regex requires, checked before the (slower) regex runs.

    ``regex`` is the pattern's source, compiled where it is used (``compiled``): with RE2 a log
    is searched without Python ever compiling it, and a stored knowledge base (``kb/store.py``)
    is plain text. ``groups`` are its named groups in their order in the regex (the order of a
    match's captures; RE2 gives them by name).
    """

    regex: str
    anchor: str
    confidence: float
    examples: tuple[str, ...]
    line: int
    literals: tuple[str, ...] = ()  # every literal the regex requires (anchor included)
    groups: tuple[str, ...] = ()
    always: tuple[str, ...] = ()  # the groups every example captures (a non-empty text)


@dataclass(frozen=True, slots=True)
class ContextRule:
    """Text in the lines before a match that makes this cause more (or less) likely."""

    regex: str  # its source, as ``Pattern.regex``
    weight: float
    note: str
    # its named groups: what it captures from the line before joins the occurrence's captures
    # (an analyzer may set a value from an earlier line against one from the matched line)
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Signature:
    """One cause: how to recognise it, what it means, how to fix it, how to confirm it."""

    id: str
    title: str
    role: Role
    confidence: float
    patterns: tuple[Pattern, ...]
    summary: str
    explanation: str
    fix: tuple[str, ...]
    facts: tuple[str, ...] = ()
    see_also: tuple[str, ...] = ()
    context: tuple[ContextRule, ...] = ()
    analyzer: str = ""
    docs: tuple[str, ...] = ()
    explains: tuple[str, ...] = ()  # ids of less specific signatures this one accounts for
    # a line that says this cause only beside its context (``nvcc: command not found`` after a
    # CUDA *runtime* image's name): it stands only where a context rule with a positive weight
    # matched the lines before it, and is not read at all elsewhere
    needs_context: bool = False
    # benign signatures whose line after this one's last says the run went on fine (the
    # program's own check reporting success after its warning): then this one is harmless too
    cleared_by: tuple[str, ...] = ()
    source: str = ""  # "file:line" of the definition

    def captures_used(self) -> frozenset[str]:
        """Named groups of all patterns and context rules (the placeholders ``summary`` may
        use; a context rule's only in an optional ``[[…]]`` segment, as it may not match)."""
        names: set[str] = set()
        for pattern in self.patterns:
            names.update(pattern.groups)
        for rule in self.context:
            names.update(rule.groups)
        return frozenset(names)


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    """All signatures plus the prefilter literals the scanner searches for."""

    signatures: tuple[Signature, ...]
    triggers: tuple[str, ...]

    def get(self, signature_id: str) -> Signature:
        for signature in self.signatures:
            if signature.id == signature_id:
                return signature
        raise KeyError(signature_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.signatures)


# --- what a scan found ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Occurrence:
    """A line that matched: its number (1-based), text (shortened) and named captures."""

    line: int
    text: str
    captures: tuple[tuple[str, str], ...] = ()

    def capture(self, name: str) -> str | None:
        for key, value in self.captures:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Hit:
    """Everything the scan saw of one signature (bounded: the first few occurrences)."""

    signature_id: str
    count: int
    first_line: int
    last_line: int
    occurrences: tuple[Occurrence, ...]
    confidence: float  # best pattern confidence plus context weight, capped to [0, 0.99]
    context_notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The outcome of one pass over a log."""

    hits: tuple[Hit, ...]
    lines: int
    bytes: int
    binary: bool = False
    undecodable: bool = False
    truncated_lines: int = 0
    incomplete: str = ""  # why the log was not read to its end (damaged .gz …); "" when it was


# --- the explanation ------------------------------------------------------------------------


class Verdict(enum.Enum):
    CONFIRMS = "confirms"
    RULES_OUT = "rules-out"
    NEUTRAL = "neutral"


@dataclass(frozen=True, slots=True)
class HostCheck:
    """What a live fact says about a cause (``--with-host``)."""

    name: str
    verdict: Verdict
    note: str
    evidence: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Cause:
    """A ranked cause: the signature, how sure we are, where it was seen and why."""

    signature: Signature
    hit: Hit
    confidence: float
    summary: str
    consequence_of: str | None = None  # the id of the root cause that explains this one
    alternatives: tuple[str, ...] = ()  # other causes matched on the same line
    notes: tuple[str, ...] = ()
    host_checks: tuple[HostCheck, ...] = ()

    @property
    def id(self) -> str:
        return self.signature.id

    @property
    def is_root(self) -> bool:
        return self.consequence_of is None


CONFIDENT = 0.5  # below this a cause is only "possible"


@dataclass(frozen=True, slots=True)
class Explanation:
    """Ranked causes for one log; ``status`` says whether anything is known with confidence."""

    causes: tuple[Cause, ...]
    scan: ScanResult
    source: str = "-"
    # lines a benign signature read: failure-shaped messages their program survived, which
    # a reader is told are harmless rather than left to wonder (never causes)
    harmless: tuple[Cause, ...] = ()

    @property
    def top(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    @property
    def status(self) -> str:
        """ "explained" (a confident cause), "possible" (only weak ones) or "no-signature"."""
        if not self.causes:
            return "no-signature"
        top = self.causes[0]
        return "explained" if top.confidence >= CONFIDENT and top.is_root else "possible"

    @property
    def exit_code(self) -> int:
        """0 nothing known in the log, 1 a known error explained, 2 only possible causes, or
        nothing known in a log read only in part (its missing end is where errors are)."""
        if self.status == "no-signature" and self.scan.incomplete:
            return exitcodes.UNKNOWN
        return {
            "no-signature": exitcodes.HEALTHY,
            "explained": exitcodes.UNHEALTHY,
            "possible": exitcodes.UNKNOWN,
        }[self.status]


HOST_CHECK_NAMES = (
    "gpu-memory",
    "memory-holders",
    "driver-loaded",
    "driver-library-match",
    "driver-cuda",
    "gpu-count",
    "gpu-health",
    "uvm",
    "container",
    "module-holders",
    "libraries",
    "gpu-models",
    "nouveau",
)
"""The live checks a signature may list under ``facts:`` (``kb/hostcheck.py`` implements each:
a test keeps the two equal). Named here so that loading signatures does not import the machine's
facts model, which only ``--with-host`` needs."""
