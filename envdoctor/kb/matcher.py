"""The streaming scanner: a log of any size in, the signatures it contains out, in bounded memory.

How it stays fast: the log is read in blocks of complete lines. With RE2 (``engines``) one
automaton finds, block by block, the lines that contain the distinctive literal of some pattern;
without it the scanner runs one substring search per *trigger* (a handful of literals such as
``rror`` or ``CUDA`` that every pattern's anchor contains) and filters the lines it finds. Those
searches run over the block's distinct line *templates* (its lines with their digits removed: a
training log repeats a few line shapes with other numbers), or over the bytes themselves where
most lines are distinct; RE2 takes the templates too where candidate lines are many. Either way
only the candidate lines are decoded and tested against the full regexes, in time linear in the
line, and an error logged in a loop is matched once (``_match_line``). Line numbers come from
counting newlines between hits.

How it stays small: it keeps one partial line (at most ``MAX_LINE`` bytes pending: a longer "line"
— binary data, NUL bytes, progress bars without a newline — is scanned in ``MAX_LINE`` pieces as
it arrives and counted once in ``truncated_lines``), the last ``CONTEXT_BYTES`` of the log for
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
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate
from typing import Protocol

from envdoctor.kb import decor
from envdoctor.kb.anchor import trigger_for
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
_DIGIT_BYTES = b"0123456789"
_DIGITS = frozenset(_DIGIT_BYTES)
_TEMPLATE_SPAN = 256 << 10  # a window: its lines' objects are a few MiB at most
_TEMPLATE_MIN = 64 << 10  # a few lines (the one left from the last block) go the direct way
_TEMPLATE_WINDOW = 4 << 20  # and so does a longer stretch without a newline
_TEMPLATE_BACKOFF = 64  # windows, at most, before templates are tried again
_DENSE = 256  # candidate lines in a window beyond which RE2 leaves its sweep for templates
_BENIGN_CACHE = 4096
_CACHED_LINE = 2 << 10  # lines up to this long: their matches and shortlists are cached
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

    _dense = False
    """RE2: the last window had many candidate lines (``_candidates``); set per scanner."""

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
        self._sweep = (
            literal_sweep([p.literals[0] for s in kb.signatures for p in s.patterns])
            if self.engine == RE2
            else None
        )
        # Python's re: the triggers find the candidate lines (built only for this engine)
        self._searchers: list[Callable[..., re.Match[bytes] | None]] = []
        self._second: list[Callable[..., re.Match[bytes] | None]] = []
        self._digit_literals: list[tuple[bytes, ...]] = []
        self._benign: list[set[bytes]] = []
        # either engine: the line templates' stages, built with the first window of templates
        self._template_second: list[Callable[..., re.Match[bytes] | None]] = []
        self._skip_templates = 0  # windows to scan the direct way before trying templates
        self._template_backoff = 0
        if self._sweep is None:
            self._trigger_stages()
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
        self._memo: dict[
            bytes | tuple[bytes, tuple[bytes, ...]],
            tuple[tuple[Signature, Pattern, LineMatch, str], ...],
        ] = {}
        self._reads_on: set[bytes] = set()  # remembered lines whose matches read the next ones
        self._shortlists: dict[bytes, tuple[_Entry, ...]] = {}
        self._seen_once: set[bytes] = set()  # line shapes seen once (no shortlist yet)
        # the triggers and each pattern's key literal without digits, for _shortlist
        self._bare_triggers = [t.translate(None, _DIGIT_BYTES) for t in self._triggers]
        self._bare_keys = [
            [p.literals[0].encode().translate(None, _DIGIT_BYTES) for _, p, _ in group]
            for group in self._by_trigger
        ]

    # --- input ------------------------------------------------------------------------------

    def _key_literals(self) -> list[set[bytes]]:
        """Per trigger, the most distinctive literal of each of its patterns."""
        return [{p.literals[0].encode() for _, p, _ in group} for group in self._by_trigger]

    def _trigger_stages(self) -> None:
        """The Python-engine path's stages: a search per trigger, then a second literal test."""
        self._searchers = [re.compile(re.escape(t)).search for t in self._triggers]
        # second stage: a line found by a trigger is kept only if it also contains the most
        # distinctive literal of one of that trigger's patterns (one C-level search per line)
        distinct = self._key_literals()
        self._second = [
            _alternation(lit for lit in lits if not _DIGITS.intersection(lit)) for lits in distinct
        ]
        # Lines that trip a trigger without being errors are mostly one template repeated
        # with other numbers ("val_error_rate 0.0123"). The verdict of the digit-free literals
        # is cached under the line with its digits removed (removing digits cannot hide a
        # digit-free literal); the few literals with digits are searched for every time.
        self._digit_literals = [
            tuple(lit for lit in lits if _DIGITS.intersection(lit)) for lits in distinct
        ]
        self._benign = [set() for _ in self._triggers]  # per trigger

    def _template_stages(self) -> None:
        """The line templates' stages (either engine; RE2 builds them only for a log long
        enough to have a window of templates, so a short log compiles nothing with ``re``):
        a search per trigger, then the second test on a line with its digits removed. A
        literal with digits is looked for without them (a line that holds it holds it without
        its digits), so a template that passes none of these tests holds no literal of the
        trigger, whatever its digits."""
        if not self._searchers:
            self._searchers = [re.compile(re.escape(t)).search for t in self._triggers]
        self._template_second = [
            _alternation(lit.translate(None, _DIGIT_BYTES) for lit in lits)
            for lits in self._key_literals()
        ]

    def feed(self, data: bytes) -> None:
        """Scan more of the log. Complete lines are scanned now, a trailing partial line later
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
        cut = data.rfind(b"\n") + 1
        if cut:
            begin = 0
            if pending:
                # the pending line ends at the first newline: scan it alone, then the rest of
                # the block in place (a copy of the whole block would double the memory)
                begin = data.find(b"\n") + 1
                pending += memoryview(data)[:begin]
                line = bytes(pending)
                pending.clear()
                self._process(line, 0, len(line))
            self._process(data, begin, cut)
            self._cutting = False
            pending += memoryview(data)[cut:]
        else:
            pending += data  # amortized: fed a byte at a time, nothing is copied again
        while len(pending) > MAX_LINE:
            # a "line" this long is binary data or an endless progress bar: scan it in pieces,
            # count it once
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
            self._process(rest, 0, len(rest))
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

    def _process(self, block: bytes, begin: int, limit: int) -> None:
        """Scan ``block[begin:limit]`` (complete lines, or a forced cut of an endless line)."""
        candidates = self._candidates(block, begin, limit)
        counted = begin
        newlines = 0
        for start in sorted(candidates):
            newlines += block.count(b"\n", counted, start)
            counted = start
            end, triggers = candidates[start]
            line_no = self._newlines + newlines + 1
            self._match_line(block, begin, start, end, line_no, triggers, limit)
        self._newlines += newlines + block.count(b"\n", counted, limit)
        self._tail = (
            block[limit - CONTEXT_BYTES : limit]
            if limit - begin >= CONTEXT_BYTES
            else (self._tail + block[begin:limit])[-CONTEXT_BYTES:]
        )

    @staticmethod
    def _line_start(block: bytes, begin: int, at: int) -> int:
        return block.rfind(b"\n", begin, at) + 1 or begin

    def _sweep_candidates(
        self, block: bytes, begin: int, limit: int, candidates: dict[int, tuple[int, set[int]]]
    ) -> None:
        """RE2: the lines that contain a pattern's distinctive literal, with the triggers in
        them (each line is looked at once, however many literals it holds); a line short
        enough for a shortlist (``_match_line``) needs no trigger set."""
        assert self._sweep is not None
        sweep = self._sweep
        pos = begin
        while pos < limit:
            hit = sweep(block, pos, limit)
            if hit < 0:
                break
            start = self._line_start(block, begin, hit)
            end = block.find(b"\n", hit, limit)
            if end < 0:
                end = limit
            if end - start <= _CACHED_LINE:
                candidates[start] = (end, set())  # its shortlist holds its triggers' patterns
            else:
                triggers = {
                    i for i, t in enumerate(self._triggers) if block.find(t, start, end) >= 0
                }
                if triggers:
                    candidates[start] = (end, triggers)
            pos = end + 1

    def _candidates(self, block: bytes, begin: int, limit: int) -> dict[int, tuple[int, set[int]]]:
        """The candidate lines of ``block[begin:limit]`` (start: end, triggers), window by
        window of about ``_TEMPLATE_SPAN`` bytes.

        Python's re searches each window's distinct line templates, or its bytes where
        templates do not pay (``_template_candidates``). RE2's sweep is one automaton over the
        bytes, cheaper than templates while candidate lines are rare; but it is a call per
        candidate line, so a window with more than ``_DENSE`` of them (an error logged in a
        loop) sends the next windows to templates, until one has fewer than a quarter of that.
        """
        candidates: dict[int, tuple[int, set[int]]] = {}
        while begin < limit:
            stop = limit
            if limit - begin > _TEMPLATE_SPAN:
                stop = block.find(b"\n", begin + _TEMPLATE_SPAN, limit) + 1 or limit
            size = stop - begin
            before = len(candidates)
            if self._one_byte_run(block, begin, stop):
                pass  # NUL bytes, zeros: no trigger in it, no line to try
            elif size < _TEMPLATE_MIN or size > _TEMPLATE_WINDOW:
                self._direct(block, begin, stop, candidates)
            elif self._sweep is not None and not self._dense:
                self._sweep_candidates(block, begin, stop, candidates)
                self._dense = len(candidates) - before > _DENSE
            elif self._skip_templates:
                self._skip_templates -= 1
                self._direct(block, begin, stop, candidates)
                self._dense = len(candidates) - before > _DENSE // 4
            else:
                self._template_candidates(block, begin, stop, candidates)
                self._dense = len(candidates) - before > _DENSE // 4
            begin = stop
        return candidates

    def _one_byte_run(self, block: bytes, begin: int, limit: int) -> bool:
        """``block[begin:limit]`` is one byte repeated, with no newline (the NUL bytes a crash
        leaves in a log file, a log of zeros): no trigger can be in it, unless a trigger is
        that byte repeated. Checked only where there is no newline: a piece of a line longer
        than ``MAX_LINE`` (the search for one stops within the first line of other windows)."""
        if limit - begin < _TEMPLATE_MIN or block.find(b"\n", begin, limit) >= 0:
            return False
        byte = block[begin : begin + 1]
        return block.count(byte, begin, limit) == limit - begin and all(
            trigger.strip(byte) for trigger in self._triggers
        )

    def _direct(
        self, block: bytes, begin: int, limit: int, candidates: dict[int, tuple[int, set[int]]]
    ) -> None:
        """The engine's own way over the bytes themselves."""
        if self._sweep is not None:
            self._sweep_candidates(block, begin, limit, candidates)
        else:
            self._direct_candidates(block, begin, limit, candidates)

    def _template_candidates(
        self, block: bytes, begin: int, limit: int, candidates: dict[int, tuple[int, set[int]]]
    ) -> None:
        """Each distinct line shape once: a log repeats a few templates with other numbers
        (step lines, NCCL INFO, metrics), so the lines are stripped of their digits, the
        distinct templates searched for the triggers and the second-stage literals, and only
        the lines whose template passes become candidates. On a training log that is one pass
        over a small fraction of the bytes per trigger instead of one over all of them (and no
        Python step per trigger word). Where most lines are distinct (ids, hashes) the window
        costs more than the direct search, so the next windows go the direct way, twice as
        many after each window that did not pay."""
        if not self._template_second:
            self._template_stages()
        piece = block[begin:limit]
        templates = piece.translate(None, _DIGIT_BYTES).split(b"\n")
        joined = b"\n".join(set(templates))  # in any order: each is judged on its own
        if len(joined) > len(piece) // 2:
            self._template_backoff = min(2 * self._template_backoff or 1, _TEMPLATE_BACKOFF)
            self._skip_templates = self._template_backoff
        else:
            self._template_backoff = 0
        passing: dict[bytes, set[int]] = {}
        rfind = joined.rfind
        find = joined.find
        for index, search in enumerate(self._searchers):
            second = self._template_second[index]
            pos = 0
            while True:
                m = search(joined, pos)
                if m is None:
                    break
                hit, after = m.span()
                start = rfind(b"\n", 0, hit) + 1
                end = find(b"\n", after)
                if end < 0:
                    end = len(joined)
                pos = end + 1
                if second(joined, start, end) is None:
                    continue
                template = joined[start:end]
                passing.setdefault(template, set()).add(index)
        if not passing:
            return
        lines = piece.split(b"\n")
        ends = list(accumulate(map(len, lines)))
        for i in [i for i, template in enumerate(templates) if template in passing]:
            start = begin + (ends[i - 1] if i else 0) + i  # plus the i newlines before it
            candidates[start] = (start + len(lines[i]), set(passing[templates[i]]))

    def _direct_candidates(
        self, block: bytes, begin: int, limit: int, candidates: dict[int, tuple[int, set[int]]]
    ) -> None:
        """Python's re: one substring search per trigger over the bytes themselves, then the
        second stage and the cache of benign line templates."""
        rfind = block.rfind
        find = block.find
        for index, search in enumerate(self._searchers):
            second = self._second[index]
            with_digits = self._digit_literals[index]
            benign = self._benign[index]
            pos = begin
            while True:
                m = search(block, pos, limit)
                if m is None:
                    break
                hit, after = m.span()
                start = rfind(b"\n", begin, hit) + 1 or begin  # inlined _line_start: per hit
                end = find(b"\n", after, limit)
                if end < 0:
                    end = limit
                pos = end + 1
                if not (with_digits and any(find(lit, start, end) >= 0 for lit in with_digits)):
                    template = block[start:end].translate(None, _DIGIT_BYTES)
                    if template in benign:
                        continue
                    if second(block, start, end) is None:
                        # kept for every line of this shape only if the shape itself holds
                        # no literal: removing digits can make one ("N7o inf checks"), and a
                        # real line of the same shape holds it
                        if second(template) is None:
                            if len(benign) >= _BENIGN_CACHE:
                                benign.clear()
                            benign.add(template)
                        continue
                entry = candidates.get(start)
                if entry is None:
                    candidates[start] = (end, {index})
                else:
                    entry[1].add(index)

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
            known = self._memo.get(key)
            if known is not None:
                for signature, pattern, m, matched_text in known:
                    self._record(signature, pattern, m, line_no, matched_text, block, begin, start)
                return
        if not remember:
            # a long line is searched around its triggers' hits (_segments): found the same
            # way whichever path made it a candidate, or the windows and captures would depend
            # on the path (templates keep triggers whose literal only the digit-free line holds)
            triggers = self._line_triggers(line)
        found_here: list[tuple[Signature, Pattern, LineMatch, str]] = []
        matched: set[str] = set()
        following: tuple[bytes, ...] | None = None  # the lines after it, where they were read
        for segment in self._segments(line, triggers):
            text = segment.decode("utf-8", errors="replace").strip("\r")
            joined = _Continuation(block, end, limit, text)
            entries = self._shortlist(line, triggers) if remember else self._entries(triggers)
            for signature, pattern, search in entries:
                if pattern.literals[0] not in text or signature.id in matched:
                    continue  # the key literal first: _search needs it either way
                found = _search(pattern, search, text, joined)
                if found is None:
                    continue
                m, matched_text = found
                matched.add(signature.id)
                found_here.append((signature, pattern, m, matched_text))
                self._record(signature, pattern, m, line_no, matched_text, block, begin, start)
            following = joined.following if joined.read_on else None
        if remember:
            # A line repeated (an error logged in a loop) is matched once: what it matched
            # depends on the line alone, or on the line and the few after it that a cut line
            # may be joined with (whether it reads them depends on the line alone)
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
                self._reads_on.clear()
            if following is not None:
                self._reads_on.add(line)
                self._memo[line, following] = tuple(found_here)
            else:
                self._memo[line] = tuple(found_here)

    def _line_triggers(self, line: bytes) -> set[int]:
        """The triggers of a line as the engine's direct way finds them: with RE2 every
        trigger in it; with Python's re those whose second stage it passes."""
        present = {i for i, t in enumerate(self._triggers) if t in line}
        if self._sweep is not None:
            return present
        return {
            i
            for i in present
            if any(lit in line for lit in self._digit_literals[i]) or self._second[i](line)
        }

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
        template = line.translate(None, _DIGIT_BYTES)
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
            for entry, key in zip(self._by_trigger[index], self._bare_keys[index], strict=True)
            if key in template
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
        if acc is None:
            acc = self._acc[signature.id] = _Acc(signature, line_no)
        acc.count += 1
        acc.last_line = line_no
        if len(acc.occurrences) < self._max_occurrences:
            found = m.groupdict()  # RE2 orders it by name: keep the pattern's order
            captures = tuple((k, found[k]) for k in pattern.groups if found.get(k) is not None)
            acc.occurrences.append(Occurrence(line_no, text[:LINE_TEXT], captures))
        confidence = pattern.confidence
        if signature.context and acc.context_samples < CONTEXT_SAMPLES:
            acc.context_samples += 1
            context = self._context(block, begin, start)
            for i, rule in enumerate(signature.context):
                if self._context_search[signature.id, i](context):
                    confidence += rule.weight
                    if rule.note not in acc.notes:
                        acc.notes.append(rule.note)
        acc.confidence = max(acc.confidence, min(0.99, max(0.0, confidence)))

    def _context(self, block: bytes, begin: int, start: int) -> str:
        """The lines before ``start`` (bounded by bytes and by lines), decoded leniently; what
        came before ``begin`` is in ``_tail``."""
        before = block[max(begin, start - CONTEXT_BYTES) : start]
        if len(before) < CONTEXT_BYTES:
            before = self._tail[-(CONTEXT_BYTES - len(before)) :] + before
        lines = before.split(b"\n")[-CONTEXT_LINES:]
        return b"\n".join(lines).decode("utf-8", errors="replace")


class _Continuation:
    """The lines after a candidate line, joined to it only when a pattern needs them."""

    def __init__(self, block: bytes, end: int, limit: int, text: str) -> None:
        self._block, self._end, self._limit, self._text = block, end, limit, text
        self._variants: tuple[str, ...] | None = None
        self.read_on = False
        """Whether the lines after this one were read (a match may depend on them)."""
        self.following: tuple[bytes, ...] = ()
        """Those lines (``_following``), when they were read."""

    def variants(self) -> tuple[str, ...]:
        if self._variants is None:
            self._variants = ()
            if len(self._text) <= LONG_LINE and decor.looks_cut(self._text):
                self.read_on = True
                self.following = _following(self._block, self._end, self._limit)
                self._variants = decor.continued(
                    self._text, (line.decode("utf-8", errors="replace") for line in self.following)
                )
        return self._variants


def _following(block: bytes, end: int, limit: int) -> tuple[bytes, ...]:
    """The lines after the one that ends at ``end`` that a cut line may be joined with: at
    most ``decor.MAX_CONTINUATION`` (continued() reads no more), complete ones only, within
    ``WINDOW`` bytes (sliced before splitting: a copy of the rest of the block per cut line
    was quadratic in a block of near-miss lines)."""
    tail = block[end + 1 : min(limit, end + 1 + WINDOW)].split(b"\n")
    return tuple(tail[: min(len(tail) - 1, decor.MAX_CONTINUATION)])


def _search(
    pattern: Pattern, search: LineSearch, text: str, joined: _Continuation
) -> tuple[LineMatch, str] | None:
    """A match of ``pattern`` (with ``search``, the engine's) in the line, or in the line joined
    with the lines that continue it when the line holds the pattern's anchor and key literal
    but is cut short (a wrap)."""
    literals = pattern.literals
    if literals[0] not in text:
        return None  # both ways below need the key literal in the line: most patterns end here
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


def _alternation(literals: Iterable[bytes]) -> Callable[..., re.Match[bytes] | None]:
    """The search of any of ``literals`` (longest first), or of nothing when there are none."""
    ordered = sorted(set(literals), key=lambda lit: (-len(lit), lit))
    return re.compile(b"|".join(re.escape(lit) for lit in ordered) or b"(?!)").search


def scan_bytes(data: bytes, kb: KnowledgeBase, *, engine: str | None = None) -> ScanResult:
    """Scan an in-memory log (tests, ``envdoctor run``'s tail)."""
    scanner = Scanner(kb, engine=engine)
    scanner.feed(data)
    return scanner.finish()
