"""The streaming scanner: a log of any size in, the signatures it contains out, in bounded memory.

How it stays fast: the log is read in blocks of complete lines. For each block the scanner runs
one substring search per *trigger* (a handful of literals such as ``rror`` or ``CUDA`` that every
pattern's anchor contains), jumps from hit to hit, and only the few candidate lines are decoded
and tested against the full regexes. Line numbers come from counting newlines between hits.

How it stays small: it keeps one partial line (at most ``MAX_LINE`` bytes, longer "lines" — binary
data, progress bars without a newline — are cut), the last ``CONTEXT_BYTES`` of the log for the
context rules, and per signature a count plus the first ``max_occurrences`` occurrences.

Bytes are never decoded wholesale: undecodable input is replaced character by character, so
binary files, Latin-1 logs and truncated UTF-8 are scanned, never a traceback. A UTF-16 log
(PowerShell ``>``) is recognised by its byte-order mark and transcoded on the fly.
``undecodable`` is about the whole log, not only the lines that were matched: every block is
validated as it arrives (pure-ASCII blocks at C speed, the rest with a strict incremental
decoder, so a character split between two blocks is not mistaken for a bad one) until the
first invalid byte.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from envdoctor.kb import decor
from envdoctor.kb.loader import trigger_for
from envdoctor.kb.model import Hit, KnowledgeBase, Occurrence, Pattern, ScanResult, Signature

CHUNK = 4 << 20
MAX_LINE = 1 << 20
CONTEXT_BYTES = 16 << 10
CONTEXT_LINES = 80
LONG_LINE = 8 << 10
WINDOW = 2 << 10
LINE_TEXT = 500
MAX_OCCURRENCES = 8
CONTEXT_SAMPLES = 3
_BINARY_PROBE = 8 << 10
_DIGITS = frozenset(b"0123456789")
_BENIGN_CACHE = 4096


@dataclass
class _Acc:
    signature: Signature
    count: int = 0
    first_line: int = 0
    last_line: int = 0
    occurrences: list[Occurrence] = field(default_factory=list)
    confidence: float = 0.0
    context_samples: int = 0
    notes: list[str] = field(default_factory=list)


class Scanner:
    """Feed it bytes in any pieces; ``finish()`` returns what it found."""

    def __init__(self, kb: KnowledgeBase, *, max_occurrences: int = MAX_OCCURRENCES) -> None:
        self._kb = kb
        self._max_occurrences = max_occurrences
        self._triggers = [t.encode() for t in kb.triggers]
        self._searchers = [re.compile(re.escape(t)).search for t in self._triggers]
        self._by_trigger: list[list[tuple[Signature, Pattern]]] = [[] for _ in kb.triggers]
        for signature in kb.signatures:
            for pattern in signature.patterns:
                index = kb.triggers.index(trigger_for(pattern.anchor, kb.triggers))
                self._by_trigger[index].append((signature, pattern))
        # second stage: a line found by a trigger is kept only if it also contains the most
        # distinctive literal of one of that trigger's patterns (one C-level search per line)
        distinct = [{p.literals[0].encode() for _, p in group} for group in self._by_trigger]
        self._second = [
            re.compile(
                b"|".join(
                    re.escape(lit)
                    for lit in sorted(lits, key=len, reverse=True)
                    if not _DIGITS.intersection(lit)
                )
                or b"(?!)"
            )
            for lits in distinct
        ]
        # Lines that trip a trigger without being errors are mostly one template repeated
        # with other numbers ("val_error_rate 0.0123"). The verdict of the digit-free literals
        # is cached under the line with its digits removed (removing digits cannot hide a
        # digit-free literal); the few literals with digits are searched for every time.
        self._digit_literals = [
            tuple(lit for lit in lits if _DIGITS.intersection(lit)) for lits in distinct
        ]
        self._benign: list[set[bytes]] = [set() for _ in kb.triggers]  # per trigger
        self._pending = b""
        self._tail = b""
        self._newlines = 0
        self._bytes = 0
        self._ended_with_newline = True
        self._binary = False
        self._probed = False
        self._undecodable = False
        self._utf8 = codecs.getincrementaldecoder("utf-8")()  # strict: it only validates
        self._truncated = 0
        self._acc: dict[str, _Acc] = {}

    # --- input ------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Scan more of the log. Complete lines are scanned now, a trailing partial line later."""
        if not data:
            return
        self._bytes += len(data)
        if not self._undecodable:
            self._validate(data)
        if not self._probed:
            self._probed = True
            self._binary = b"\x00" in data[:_BINARY_PROBE]
        self._ended_with_newline = data.endswith(b"\n")
        buf = self._pending + data if self._pending else data
        cut = buf.rfind(b"\n") + 1
        if cut:
            self._pending = buf[cut:]
            self._process(buf, cut)
        else:
            self._pending = buf
        if len(self._pending) > MAX_LINE:
            # a "line" this long is binary data or an endless progress bar: scan it in pieces
            self._truncated += 1
            piece, self._pending = self._pending[:MAX_LINE], self._pending[MAX_LINE:]
            self._process(piece, len(piece))

    def finish(self) -> ScanResult:
        """Scan what is left and return the result (the scanner can not be fed afterwards)."""
        if self._pending:
            self._process(self._pending, len(self._pending))
            self._pending = b""
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
        """Is this piece of the log still UTF-8? (Decoded only to be checked, then dropped.)"""
        if data.isascii() and not final and not self._utf8.getstate()[0]:
            return
        try:
            self._utf8.decode(data, final)
        except UnicodeDecodeError:
            self._undecodable = True

    def _process(self, block: bytes, limit: int) -> None:
        """Scan ``block[:limit]`` (complete lines, or a forced cut of an endless line)."""
        candidates: dict[int, tuple[int, set[int]]] = {}
        rfind = block.rfind
        find = block.find
        for index, search in enumerate(self._searchers):
            second = self._second[index].search
            with_digits = self._digit_literals[index]
            benign = self._benign[index]
            pos = 0
            while True:
                m = search(block, pos, limit)
                if m is None:
                    break
                hit, after = m.span()
                start = rfind(b"\n", 0, hit) + 1
                end = find(b"\n", after, limit)
                if end < 0:
                    end = limit
                pos = end + 1
                if not any(find(lit, start, end) >= 0 for lit in with_digits):
                    template = block[start:end].translate(None, b"0123456789")
                    if template in benign:
                        continue
                    if second(block, start, end) is None:
                        if len(benign) >= _BENIGN_CACHE:
                            benign.clear()
                        benign.add(template)
                        continue
                entry = candidates.get(start)
                if entry is None:
                    candidates[start] = (end, {index})
                else:
                    entry[1].add(index)
        counted = 0
        newlines = 0
        for start in sorted(candidates):
            newlines += block.count(b"\n", counted, start)
            counted = start
            end, triggers = candidates[start]
            self._match_line(block, start, end, self._newlines + newlines + 1, triggers, limit)
        self._newlines += newlines + block.count(b"\n", counted, limit)
        self._tail = (
            block[max(0, limit - CONTEXT_BYTES) : limit]
            if limit >= CONTEXT_BYTES
            else (self._tail + block[:limit])[-CONTEXT_BYTES:]
        )

    def _match_line(
        self, block: bytes, start: int, end: int, line_no: int, triggers: set[int], limit: int
    ) -> None:
        matched: set[str] = set()
        for segment in self._segments(block[start:end], triggers):
            text = segment.decode("utf-8", errors="replace").strip("\r")
            joined = _Continuation(block, end, limit, text)
            for index in sorted(triggers):
                for signature, pattern in self._by_trigger[index]:
                    if signature.id in matched:
                        continue
                    found = _search(pattern, text, joined)
                    if found is None:
                        continue
                    m, matched_text = found
                    matched.add(signature.id)
                    self._record(signature, pattern, m, line_no, matched_text, block, start)

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
        m: re.Match[str],
        line_no: int,
        text: str,
        block: bytes,
        start: int,
    ) -> None:
        acc = self._acc.get(signature.id)
        if acc is None:
            acc = self._acc[signature.id] = _Acc(signature=signature, first_line=line_no)
        acc.count += 1
        acc.last_line = line_no
        if len(acc.occurrences) < self._max_occurrences:
            captures = tuple((k, v) for k, v in m.groupdict().items() if v is not None)
            acc.occurrences.append(Occurrence(line_no, text[:LINE_TEXT], captures))
        confidence = pattern.confidence
        if signature.context and acc.context_samples < CONTEXT_SAMPLES:
            acc.context_samples += 1
            context = self._context(block, start)
            for rule in signature.context:
                if rule.regex.search(context):
                    confidence += rule.weight
                    if rule.note not in acc.notes:
                        acc.notes.append(rule.note)
        acc.confidence = max(acc.confidence, min(0.99, max(0.0, confidence)))

    def _context(self, block: bytes, start: int) -> str:
        """The lines before ``start`` (bounded by bytes and by lines), decoded leniently."""
        before = block[max(0, start - CONTEXT_BYTES) : start]
        if len(before) < CONTEXT_BYTES:
            before = self._tail[-(CONTEXT_BYTES - len(before)) :] + before
        lines = before.split(b"\n")[-CONTEXT_LINES:]
        return b"\n".join(lines).decode("utf-8", errors="replace")


class _Continuation:
    """The lines after a candidate line, joined to it only when a pattern needs them."""

    def __init__(self, block: bytes, end: int, limit: int, text: str) -> None:
        self._block, self._end, self._limit, self._text = block, end, limit, text
        self._variants: tuple[str, ...] | None = None

    def variants(self) -> tuple[str, ...]:
        if self._variants is None:
            self._variants = ()
            if len(self._text) <= LONG_LINE and decor.looks_cut(self._text):
                tail = self._block[self._end + 1 : self._limit][:WINDOW].split(b"\n")
                following = [line.decode("utf-8", errors="replace") for line in tail[:-1]]
                self._variants = decor.continued(self._text, following)
        return self._variants


def _search(pattern: Pattern, text: str, joined: _Continuation) -> tuple[re.Match[str], str] | None:
    """A match of ``pattern`` in the line, or in the line joined with the lines that continue
    it when the line holds the pattern's anchor and key literal but is cut short (a wrap)."""
    if all(literal in text for literal in pattern.literals):
        m = pattern.regex.search(text)
        if m is not None:
            return m, text
    elif pattern.anchor not in text or pattern.literals[0] not in text:
        return None
    for variant in joined.variants():
        if all(literal in variant for literal in pattern.literals):
            m = pattern.regex.search(variant)
            if m is not None and m.start() < len(text):
                return m, variant
    return None


_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class ByteSource(Protocol):
    """Anything with ``read(n) -> bytes``: a file, stdin's buffer, a gzip stream."""

    def read(self, size: int = ..., /) -> bytes: ...

    def close(self) -> None: ...


def scan_stream(stream: ByteSource, kb: KnowledgeBase, *, chunk_size: int = CHUNK) -> ScanResult:
    """Scan a binary stream to its end, ``chunk_size`` bytes at a time."""
    scanner = Scanner(kb)
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


def scan_bytes(data: bytes, kb: KnowledgeBase) -> ScanResult:
    """Scan an in-memory log (tests, ``envdoctor run``'s tail)."""
    scanner = Scanner(kb)
    scanner.feed(data)
    return scanner.finish()
