"""The streaming scanner: a log of any size in, the signatures it contains out, in bounded memory.

How it stays fast: the log is read in blocks of complete lines, and ``candidates`` finds in
each the few lines worth trying (RE2's automaton of every pattern's key literal, or a substring
search per *trigger*, over the bytes or over the block's distinct line shapes). Only those
lines are decoded and tested against the full regexes, in time linear in the line; a line
tries only the patterns its shape can match, and an error logged in a loop is matched once
(``_match_line``). Line numbers come from counting newlines between hits.

How it stays small: it keeps one partial line (at most ``MAX_LINE`` bytes pending: a longer "line"
— binary data, NUL bytes, progress bars without a newline — is scanned in ``MAX_LINE`` pieces as
it arrives and counted once in ``truncated_lines``) and the few complete lines before it that
wait for the lines they may be joined with (``WINDOW`` bytes), the last ``CONTEXT_BYTES`` of the log for
the context rules, and per signature a count plus the first ``max_occurrences`` occurrences.

Bytes are never decoded wholesale: undecodable input is replaced character by character, so
binary files, Latin-1 logs and truncated UTF-8 are scanned, never a traceback. A UTF-16 log
(PowerShell ``>``) is recognised by its byte-order mark and transcoded on the fly.
``undecodable`` is about the whole log, not only the lines that were matched: every block is
validated as it arrives, in 64 KiB pieces: pure-ASCII pieces at C speed, the rest with a strict
incremental decoder (a character split between two pieces is not mistaken for a bad one), until
the first invalid byte.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

from envdoctor.kb import decor
from envdoctor.kb.anchor import trigger_for
from envdoctor.kb.candidates import DIGIT_BYTES, CandidateFinder
from envdoctor.kb.engines import (
    PYTHON_RE,
    RE2,
    LineMatch,
    LineSearch,
    default_engine,
    line_search,
    literal_sweep,
)
from envdoctor.kb.model import (
    Hit,
    KnowledgeBase,
    Occurrence,
    Pattern,
    Role,
    ScanResult,
    Signature,
)

CHUNK = 1 << 20
MAX_LINE = 1 << 20
CONTEXT_BYTES = 16 << 10
CONTEXT_LINES = 80
LONG_LINE = 8 << 10
WINDOW = 2 << 10
LINE_TEXT = 500
MAX_OCCURRENCES = 8
CONTEXT_SAMPLES = 3
_BINARY_PROBE = 8 << 10
_CACHED_LINE = 2 << 10  # lines up to this long: their matches and shortlists are cached
WRAP_ANCHOR = 8  # an anchor this long may stand in for a key literal a wrap moved on (_wraps)
_MEMO_SIZE = 1024  # entries per cache at most (then forgotten all at once)
_UTF8_PIECE = 64 << 10


class _Acc:
    """What the scan found of one signature so far (a plain class: ``dataclasses``, with
    ``inspect``, is ~8 ms of every ``explain`` and ``run``)."""

    __slots__ = (
        "confidence",
        "context_samples",
        "count",
        "first_line",
        "last_line",
        "notes",
        "occurrences",
        "signature",
    )

    def __init__(self, signature: Signature, first_line: int) -> None:
        self.signature = signature
        self.count = 0
        self.first_line = first_line
        self.last_line = 0
        self.occurrences: list[Occurrence] = []
        self.confidence = 0.0
        self.context_samples = 0
        self.notes: list[str] = []


_Entry = tuple[Signature, Pattern, LineSearch]


class Scanner:
    """Feed it bytes in any pieces; ``finish()`` returns what it found.

    ``engine`` is ``"re2"`` or ``"re"`` (``engines``); by default RE2 when it is installed."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        max_occurrences: int = MAX_OCCURRENCES,
        engine: str | None = None,
    ) -> None:
        self._kb = kb
        self._max_occurrences = max_occurrences
        self.engine = engine or default_engine()
        if self.engine not in (RE2, PYTHON_RE):
            raise ValueError(f"unknown regex engine {self.engine!r}")
        self._triggers = [t.encode() for t in kb.triggers]
        self._by_trigger: list[list[_Entry]] = [[] for _ in kb.triggers]
        for signature in kb.signatures:
            for pattern in signature.patterns:
                index = kb.triggers.index(trigger_for(pattern.anchor, kb.triggers))
                search = line_search(pattern.regex, self.engine)
                self._by_trigger[index].append((signature, pattern, search))
        self._context_search = {
            (signature.id, i): line_search(rule.regex, self.engine)
            for signature in kb.signatures
            for i, rule in enumerate(signature.context)
        }
        # RE2: one automaton for the most distinctive literal of every pattern finds the
        # candidate lines; a healthy line that merely contains "error" or "NCCL" costs nothing
        sweep = (
            literal_sweep([k for s in kb.signatures for p in s.patterns for k in candidate_keys(p)])
            if self.engine == RE2
            else None
        )
        key_literals = [
            {k.encode() for _, p, _ in g for k in candidate_keys(p)} for g in self._by_trigger
        ]
        self._finder = CandidateFinder(self._triggers, key_literals, sweep)
        self._pending = bytearray()
        self._cutting = False  # inside a line longer than MAX_LINE (already counted)
        self._tail = b""
        self._newlines = 0
        self._bytes = 0
        self._ended_with_newline = True
        self._binary = False
        self._probed = 0  # bytes of the log looked at for NUL (binary)
        self._undecodable = False
        self._utf8 = codecs.getincrementaldecoder("utf-8")()  # strict: it only validates
        self._truncated = 0
        self._acc: dict[str, _Acc] = {}
        self._context_tries: dict[str, int] = {}  # per ``needs_context`` signature
        # the last line of a message a benign signature read across a wrap: the lines it
        # joined are that message too, and no other signature reads them either
        self._benign_through = 0
        # a remembered line's matches, and how many lines after it a benign reading joined
        self._memo: dict[
            bytes | tuple[bytes, tuple[bytes, ...]],
            tuple[tuple[tuple[Signature, Pattern, LineMatch, str], ...], int],
        ] = {}
        self._reads_on: set[bytes] = set()  # remembered lines whose matches read the next ones
        self._shortlists: dict[bytes, tuple[_Entry, ...]] = {}
        self._seen_once: set[bytes] = set()  # line shapes seen once (no shortlist yet)
        # the triggers and each pattern's key literal without digits, for _shortlist
        self._bare_triggers = [t.translate(None, DIGIT_BYTES) for t in self._triggers]
        self._bare_keys = [
            [
                tuple(k.encode().translate(None, DIGIT_BYTES) for k in candidate_keys(p))
                for _, p, _ in group
            ]
            for group in self._by_trigger
        ]

    # --- input ------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Scan more of the log. Complete lines are scanned now, except the last few, which
        wait until the lines a cut one may be joined with have arrived (``_held_from``: the
        result does not depend on how the log is cut into pieces), and a trailing partial line
        (at most ``MAX_LINE`` bytes of it are kept: time and memory stay linear and flat
        whatever the input, 400 MB of NUL bytes without a newline included)."""
        if not data:
            return
        self._bytes += len(data)
        if not self._undecodable:
            self._validate(data)
        if self._probed < _BINARY_PROBE:  # the log's first bytes, in however many pieces
            head = data[: _BINARY_PROBE - self._probed]
            self._binary = self._binary or b"\x00" in head
            self._probed += len(head)
        self._ended_with_newline = data.endswith(b"\n")
        pending = self._pending
        begin = 0
        if pending:
            nl = data.find(b"\n")
            if nl < 0:
                pending += data  # amortized: fed a byte at a time, nothing is copied again
                self._cut_long_line()
                return
            # The lines held back and the one this data completes, with the start of the data
            # after them to join a cut line with (a copy of the whole block would double the
            # memory: only the part a join can read is copied)
            head = bytes(pending) + data[: nl + 1 + WINDOW]
            done = len(pending) + nl + 1
            ready = min(done, _held_from(head, 0, head.rfind(b"\n") + 1, len(head)))
            self._process(head, 0, ready, lookahead=len(head))
            self._cutting = False
            if ready < done:  # the head is all the data there is: some lines still wait
                pending[:] = head[ready:]
                self._cut_long_line()
                return
            pending.clear()
            begin = nl + 1
        cut = data.rfind(b"\n") + 1
        if cut > begin:
            held = _held_from(data, begin, cut, len(data))
            self._process(data, begin, held, lookahead=len(data))
            self._cutting = False
            begin = held
        pending += memoryview(data)[begin:]
        self._cut_long_line()

    def _cut_long_line(self) -> None:
        """At most ``MAX_LINE`` bytes of a partial line are kept: a "line" this long is binary
        data or an endless progress bar, scanned in pieces as it arrives and counted once. The
        complete lines held before it are scanned first (it gives them all a join can read)."""
        pending = self._pending
        partial = pending.rfind(b"\n") + 1
        if len(pending) - partial <= MAX_LINE:
            return
        if partial:
            head = bytes(pending)
            self._process(head, 0, partial, lookahead=len(head))
            del pending[:partial]
        while len(pending) > MAX_LINE:
            if not self._cutting:
                self._cutting = True
                self._truncated += 1
            piece = bytes(pending[:MAX_LINE])
            del pending[:MAX_LINE]
            self._process(piece, 0, len(piece))

    def finish(self) -> ScanResult:
        """Scan what is left and return the result (the scanner can not be fed afterwards)."""
        if self._pending:
            rest = bytes(self._pending)
            self._pending.clear()
            if rest.endswith(b"\n"):
                self._process(rest, 0, len(rest))
            else:
                # the last line is complete at the end of the log: a cut line before it may be
                # joined with it, as with a log that ends with a newline (not counted twice)
                self._process(rest + b"\n", 0, len(rest) + 1)
                self._newlines -= 1
        if not self._undecodable:
            self._validate(b"", final=True)  # the log ends inside a multi-byte character
        lines = self._newlines + (0 if self._ended_with_newline or not self._bytes else 1)
        hits = tuple(
            Hit(
                signature_id=acc.signature.id,
                count=acc.count,
                first_line=acc.first_line,
                last_line=acc.last_line,
                occurrences=tuple(acc.occurrences),
                confidence=round(acc.confidence, 3),
                context_notes=tuple(acc.notes),
            )
            for acc in sorted(self._acc.values(), key=lambda a: (a.first_line, a.signature.id))
        )
        return ScanResult(
            hits=hits,
            lines=lines,
            bytes=self._bytes,
            binary=self._binary,
            undecodable=self._undecodable,
            truncated_lines=self._truncated,
        )

    def note_undecodable(self) -> None:
        """The caller transcoded the log (UTF-16) and had to replace bytes it could not decode."""
        self._undecodable = True

    # --- the work ---------------------------------------------------------------------------

    def _validate(self, data: bytes, *, final: bool = False) -> None:
        """Is this piece of the log still UTF-8? (Decoded only to be checked, then dropped.)
        Pure-ASCII pieces are skipped at C speed: a log with a few accented words or emoji
        lines is checked 2-3x faster than by decoding whole blocks."""
        utf8 = self._utf8
        try:
            for at in range(0, len(data), _UTF8_PIECE):
                piece = data[at : at + _UTF8_PIECE]
                if piece.isascii() and not utf8.getstate()[0]:
                    continue
                utf8.decode(piece)
            if final:
                utf8.decode(b"", True)
        except UnicodeDecodeError:
            self._undecodable = True

    def _process(
        self, block: bytes, begin: int, limit: int, *, lookahead: int | None = None
    ) -> None:
        """Scan ``block[begin:limit]`` (complete lines, or a forced cut of an endless line);
        a cut line may be joined with the lines after it up to ``lookahead`` (by default
        ``limit``)."""
        if begin >= limit:
            return
        candidates = self._finder.find(block, begin, limit)
        counted = begin
        newlines = 0
        for start in sorted(candidates):
            newlines += block.count(b"\n", counted, start)
            counted = start
            end, triggers = candidates[start]
            line_no = self._newlines + newlines + 1
            self._match_line(block, begin, start, end, line_no, triggers, lookahead or limit)
        self._newlines += newlines + block.count(b"\n", counted, limit)
        self._tail = (
            block[limit - CONTEXT_BYTES : limit]
            if limit - begin >= CONTEXT_BYTES
            else (self._tail + block[begin:limit])[-CONTEXT_BYTES:]
        )

    def _match_line(
        self,
        block: bytes,
        begin: int,
        start: int,
        end: int,
        line_no: int,
        triggers: set[int],
        limit: int,
    ) -> None:
        """Record what the line matches. A short line (up to ``_CACHED_LINE``, one segment)
        tries the patterns of its shortlist and its matches are remembered; a longer one tries
        the patterns of ``triggers`` in each of its segments."""
        line = block[start:end]
        remember = len(line) <= _CACHED_LINE
        if remember:
            key: bytes | tuple[bytes, tuple[bytes, ...]] = line
            if line in self._reads_on:
                key = (line, _following(block, end, limit))
            remembered = self._memo.get(key)
            if remembered is not None:
                known, span = remembered
                for signature, pattern, m, matched_text in self._unreserved(known, line_no, span):
                    self._record(signature, pattern, m, line_no, matched_text, block, begin, start)
                if span:
                    self._benign_through = max(self._benign_through, line_no + span)
                return
        else:
            # a long line is searched around its triggers' hits (_segments): found the same
            # way whichever path made it a candidate, or the windows and captures would depend
            # on the path (templates keep triggers whose literal only the digit-free line holds)
            triggers = self._finder.line_triggers(line)
        found_here: list[tuple[Signature, Pattern, LineMatch, str]] = []
        matched: set[str] = set()
        following: tuple[bytes, ...] | None = None  # the lines after it, where they were read
        span = 0  # lines after it that a benign reading joined to it
        for segment in self._segments(line, triggers):
            text = segment.decode("utf-8", errors="replace").strip("\r")
            joined = _Continuation(block, end, limit, text)
            entries = self._shortlist(line, triggers) if remember else self._entries(triggers)
            for signature, pattern, search in entries:
                if signature.id in matched:
                    continue
                if pattern.literals[0] not in text and not _key_wrapped(pattern, text, joined):
                    continue  # the key literal first: _search needs it either way
                found = _search(pattern, search, text, joined)
                if found is None:
                    continue
                m, matched_text = found
                if signature.role is Role.FALLBACK and decor.logged_as_info(
                    matched_text[: m.start()]
                ):
                    continue  # a shape on a line its program logged as information
                matched.add(signature.id)
                found_here.append((signature, pattern, m, matched_text))
                if signature.role is Role.BENIGN and matched_text != text and joined.following:
                    span = max(span, decor.continuation_count(_decoded(joined.following)))
            following = joined.following
        if any(signature.role is Role.BENIGN for signature, _, _, _ in found_here):
            # a message its program survives: no other reading of the line is a cause
            found_here = [f for f in found_here if f[0].role is Role.BENIGN]
        for signature, pattern, m, matched_text in self._unreserved(found_here, line_no, span):
            self._record(signature, pattern, m, line_no, matched_text, block, begin, start)
        if span:
            self._benign_through = max(self._benign_through, line_no + span)
        if remember:
            # A line repeated (an error logged in a loop) is matched once: what it matched
            # depends on the line alone, or on the line and the few after it that a cut line
            # may be joined with (whether it reads them depends on the line alone)
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
                self._reads_on.clear()
            if following is not None:
                self._reads_on.add(line)
                self._memo[line, following] = (tuple(found_here), span)
            else:
                self._memo[line] = (tuple(found_here), span)

    def _unreserved(
        self,
        found: Iterable[tuple[Signature, Pattern, LineMatch, str]],
        line_no: int,
        span: int,
    ) -> Iterable[tuple[Signature, Pattern, LineMatch, str]]:
        """What a line matched, less the readings a benign one rules out: on a line that
        continues a message a benign signature read (and that did not start one of its own),
        only benign readings count."""
        if span or line_no > self._benign_through:
            return found
        return [f for f in found if f[0].role is Role.BENIGN]

    def _entries(self, triggers: set[int]) -> Iterator[_Entry]:
        """The patterns of ``triggers``, in the order they are tried."""
        for index in sorted(triggers):
            yield from self._by_trigger[index]

    def _shortlist(self, line: bytes, triggers: set[int]) -> Iterable[_Entry]:
        """The patterns a line of this shape can match, in the order they are tried: those
        whose trigger and key literal are in the line without its digits (removing digits
        hides no literal; a literal with digits is looked for without them). A line logged in
        a loop with other numbers then tries a few patterns, not the ~80 of its triggers. A
        pattern of a trigger the line lacks never matches it (its anchor holds the trigger),
        so trying them in trigger order gives the same matches as trying the line's own. The
        list is made for a shape seen before (where the line's triggers are known): a log
        whose every line has a shape of its own would only pay for it."""
        template = line.translate(None, DIGIT_BYTES)
        entries = self._shortlists.get(template)
        if entries is not None:
            return entries
        if len(self._shortlists) + len(self._seen_once) >= _MEMO_SIZE:
            self._shortlists.clear()
            self._seen_once.clear()
        if triggers and template not in self._seen_once:
            self._seen_once.add(template)
            return self._entries(triggers)
        entries = tuple(
            entry
            for index, trigger in enumerate(self._bare_triggers)
            if trigger in template
            for entry, keys in zip(self._by_trigger[index], self._bare_keys[index], strict=True)
            if any(key in template for key in keys)
        )
        self._shortlists[template] = entries
        return entries

    def _segments(self, line: bytes, triggers: set[int]) -> Iterator[bytes]:
        """The line itself, or for a very long one the pieces around each trigger hit."""
        if len(line) <= LONG_LINE:
            yield line
            return
        seen: set[tuple[int, int]] = set()
        for index in triggers:
            needle = self._triggers[index]
            pos = line.find(needle)
            while pos >= 0:
                lo = max(line.rfind(b"\r", 0, pos) + 1, pos - WINDOW)
                hi_cr = line.find(b"\r", pos)
                hi = min(hi_cr if hi_cr >= 0 else len(line), pos + WINDOW)
                if (lo, hi) not in seen:
                    seen.add((lo, hi))
                    yield line[lo:hi]
                pos = line.find(needle, hi)

    def _record(
        self,
        signature: Signature,
        pattern: Pattern,
        m: LineMatch,
        line_no: int,
        text: str,
        block: bytes,
        begin: int,
        start: int,
    ) -> None:
        acc = self._acc.get(signature.id)
        weighed, sampled = _UNWEIGHED, False
        if signature.needs_context and acc is None:
            # read only beside its context: occurrences are weighed (a few at most) until one
            # stands, and one whose lines before it say nothing more is not this cause
            tries = self._context_tries.get(signature.id, 0)
            if tries >= CONTEXT_SAMPLES:
                return
            self._context_tries[signature.id] = tries + 1
            weighed = self._weigh(signature, block, begin, start)
            if not weighed.backed:
                return
        elif (
            signature.context
            and not signature.needs_context
            and (acc is None or acc.context_samples < CONTEXT_SAMPLES)
        ):
            # the first few occurrences are weighed; later ones add no new notes
            weighed, sampled = self._weigh(signature, block, begin, start), True
        if acc is None:
            acc = self._acc[signature.id] = _Acc(signature, line_no)
        acc.context_samples += sampled
        acc.count += 1
        acc.last_line = line_no
        if len(acc.occurrences) < self._max_occurrences:
            found = m.groupdict()  # RE2 orders it by name: keep the pattern's order
            captures = tuple((k, found[k]) for k in pattern.groups if found.get(k) is not None)
            own = {k for k, _ in captures}
            captures += tuple((k, v) for k, v in weighed.captures if k not in own)
            acc.occurrences.append(Occurrence(line_no, text[:LINE_TEXT], captures))
        weight, notes = weighed.weight, weighed.notes
        for note in notes:
            if note not in acc.notes:
                acc.notes.append(note)
        confidence = pattern.confidence + weight
        acc.confidence = max(acc.confidence, min(0.99, max(0.0, confidence)))

    def _weigh(self, signature: Signature, block: bytes, begin: int, start: int) -> _Weighed:
        """What the context rules the lines before ``start`` match say: their weight, notes,
        captures, and whether one with a positive weight matched."""
        context = self._context(block, begin, start)
        weight, notes, backed = 0.0, [], False
        captures: list[tuple[str, str]] = []
        for i, rule in enumerate(signature.context):
            found = self._context_search[signature.id, i](context)
            if found:
                weight += rule.weight
                notes.append(rule.note)
                backed = backed or rule.weight > 0
                if rule.groups:
                    values = found.groupdict()
                    captures += ((k, values[k]) for k in rule.groups if values.get(k) is not None)
        return _Weighed(weight, tuple(notes), backed, tuple(captures))

    def _context(self, block: bytes, begin: int, start: int) -> str:
        """The lines before ``start`` (bounded by bytes and by lines), decoded leniently; what
        came before ``begin`` is in ``_tail``."""
        before = block[max(begin, start - CONTEXT_BYTES) : start]
        if len(before) < CONTEXT_BYTES:
            before = self._tail[-(CONTEXT_BYTES - len(before)) :] + before
        lines = before.split(b"\n")[-CONTEXT_LINES:]
        return b"\n".join(lines).decode("utf-8", errors="replace")


class _Weighed(NamedTuple):
    """What an occurrence's context rules said (``Scanner._weigh``)."""

    weight: float
    notes: tuple[str, ...]
    backed: bool
    captures: tuple[tuple[str, str], ...]


_UNWEIGHED = _Weighed(0.0, (), False, ())


class _Continuation:
    """The lines after a candidate line, joined to it only when a pattern needs them."""

    def __init__(self, block: bytes, end: int, limit: int, text: str) -> None:
        self._block, self._end, self._limit, self._text = block, end, limit, text
        self._variants: tuple[str, ...] | None = None
        self.following: tuple[bytes, ...] | None = None
        """The lines after this one (``_following``) once they were read: a match may then
        depend on them."""

    def variants(self) -> tuple[str, ...]:
        if self._variants is None:
            self._variants = ()
            if len(self._text) <= LONG_LINE and decor.looks_cut(self._text):
                following = self.following = _following(self._block, self._end, self._limit)
                self._variants = decor.continued(self._text, _decoded(following))
        return self._variants


def _decoded(lines: Iterable[bytes]) -> Iterator[str]:
    return (line.decode("utf-8", errors="replace") for line in lines)


def _held_from(block: bytes, begin: int, cut: int, available: int) -> int:
    """Where the complete lines of ``block[begin:cut]`` start to need more of the log than
    the ``available`` bytes: a cut line is joined with at most ``decor.MAX_CONTINUATION``
    complete lines within ``WINDOW`` bytes after it (``_following``), so a line is ready when
    ``WINDOW`` bytes or that many complete lines follow it. The lines not ready wait for the
    next piece of the log (or its end), so that a join never depends on where the log was cut
    into pieces."""
    ends = [cut - 1]  # the last lines' newlines, newest first
    while len(ends) <= decor.MAX_CONTINUATION:
        at = block.rfind(b"\n", begin, ends[-1])
        if at < 0:
            break
        ends.append(at)
    waiting = cut
    for i, end in enumerate(ends[: decor.MAX_CONTINUATION]):  # line i has i lines after it
        if end + 1 + WINDOW <= available:
            break
        waiting = ends[i + 1] + 1 if i + 1 < len(ends) else begin
    return waiting


def _following(block: bytes, end: int, limit: int) -> tuple[bytes, ...]:
    """The lines after the one that ends at ``end`` that a cut line may be joined with: at
    most ``decor.MAX_CONTINUATION`` (continued() reads no more), complete ones only, within
    ``WINDOW`` bytes (sliced before splitting: a copy of the rest of the block per cut line
    was quadratic in a block of near-miss lines)."""
    tail = block[end + 1 : min(limit, end + 1 + WINDOW)].split(b"\n")
    return tuple(tail[: min(len(tail) - 1, decor.MAX_CONTINUATION)])


def _wraps(pattern: Pattern) -> bool:
    """Whether the anchor may stand in for the key literal: it differs from it and is
    distinctive enough that a line holding it is worth joining with the lines after it."""
    return pattern.literals[0] != pattern.anchor and len(pattern.anchor) >= WRAP_ANCHOR


def candidate_keys(pattern: Pattern) -> tuple[str, ...]:
    """The literals that make a line a candidate for ``pattern``: its key literal (the
    longest), and its anchor where a wrap can have moved the key literal to the next line
    ("… Assertion `srcIndex < srcSel" / "ectDimSize` failed")."""
    return (pattern.literals[0], pattern.anchor) if _wraps(pattern) else (pattern.literals[0],)


def _key_wrapped(pattern: Pattern, text: str, joined: _Continuation) -> bool:
    """For a line without the key literal: the line holds the pattern's distinctive anchor and
    the key literal is where a wrap put it, on the lines after or across the break."""
    return (
        _wraps(pattern)
        and pattern.anchor in text
        and any(pattern.literals[0] in variant for variant in joined.variants())
    )


def _search(
    pattern: Pattern, search: LineSearch, text: str, joined: _Continuation
) -> tuple[LineMatch, str] | None:
    """A match of ``pattern`` (with ``search``, the engine's) in the line, or in the line joined
    with the lines that continue it when the line holds the pattern's anchor and key literal
    but is cut short (a wrap). The caller has seen the key literal in the line (both ways need
    it; most patterns are passed over on that test alone)."""
    literals = pattern.literals
    if all(literal in text for literal in literals):
        m = search(text)
        if m is not None:
            return m, text
    elif pattern.anchor not in text:
        return None
    for variant in joined.variants():
        if all(literal in variant for literal in literals):
            m = search(variant)
            if m is not None and m.start() < len(text):
                return m, variant
    return None


_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class ByteSource(Protocol):
    """Anything with ``read(n) -> bytes``: a file, stdin's buffer, a gzip stream."""

    def read(self, size: int = ..., /) -> bytes: ...

    def close(self) -> None: ...


def scan_stream(
    stream: ByteSource, kb: KnowledgeBase, *, chunk_size: int = CHUNK, engine: str | None = None
) -> ScanResult:
    """Scan a binary stream to its end, ``chunk_size`` bytes at a time."""
    scanner = Scanner(kb, engine=engine)
    first = stream.read(chunk_size)
    if first[:2] in _BOMS:
        decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
        # the replacing decoder cannot say whether it replaced anything (the log may contain
        # U+FFFD itself), so a strict twin checks the same bytes until its first error
        strict: codecs.IncrementalDecoder | None = codecs.getincrementaldecoder("utf-16")()
        data = first
        final = False
        while not final:
            final = not data
            if strict is not None:
                try:
                    strict.decode(data, final)
                except UnicodeDecodeError:
                    strict = None
                    scanner.note_undecodable()
            scanner.feed(decoder.decode(data, final).encode("utf-8"))
            if not final:
                data = stream.read(chunk_size)
        return scanner.finish()
    data = first
    while data:
        scanner.feed(data)
        data = stream.read(chunk_size)
    return scanner.finish()


def scan_bytes(data: bytes, kb: KnowledgeBase, *, engine: str | None = None) -> ScanResult:
    """Scan an in-memory log (tests, ``envdoctor run``'s tail)."""
    scanner = Scanner(kb, engine=engine)
    scanner.feed(data)
    return scanner.finish()
