"""Which lines of a block may hold an error: the scanner's first stage (``matcher``).

A line is a *candidate* when it holds a *trigger* (a handful of literals such as ``rror`` or
``CUDA`` that every pattern's anchor contains) and the key literal of one of that trigger's
patterns; only candidates are decoded and tried against the regexes. Finding them is most of
the time a large log takes, so there are three ways, chosen window by window (``find``):

- RE2 (``engines.literal_sweep``): one automaton for every pattern's key literal over the bytes;
- Python's re, directly: one substring search per trigger over the bytes, then the key literals
  in each line found (a line shape that holds none is remembered as benign);
- either engine, by *line templates*: a window's lines with their digits removed, each distinct
  one searched once (a training log repeats a few shapes with other numbers).

Whichever way, the candidates are a superset of the lines a pattern can match, and the lines
over ``LONG_LINE`` get the triggers the engine's direct way finds (``line_triggers``), so the
scanner's result does not depend on the way (``tests/kb/test_matcher.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import accumulate

from envdoctor.kb.engines import BlockSearch

Candidates = dict[int, tuple[int, set[int]]]
"""A candidate line's start: its end and the triggers it holds."""

DIGIT_BYTES = b"0123456789"
_DIGITS = frozenset(DIGIT_BYTES)
_TEMPLATE_SPAN = 256 << 10  # a window: its lines' objects are a few MiB at most
_TEMPLATE_MIN = 64 << 10  # a few lines (the one left from the last block) go the direct way
_TEMPLATE_WINDOW = 4 << 20  # and so does a longer stretch without a newline
_TEMPLATE_BACKOFF = 64  # windows, at most, before templates are tried again
_DENSE = 256  # candidate lines in a window beyond which RE2 leaves its sweep for templates
_BENIGN_CACHE = 4096


class CandidateFinder:
    """The candidate lines of a log's blocks, for one scanner (it keeps what it learnt of
    the log: benign line shapes, whether templates pay, whether candidates are dense)."""

    _dense = False
    """RE2: the last window had many candidate lines (``find``); set per finder."""

    def __init__(
        self, triggers: list[bytes], key_literals: list[set[bytes]], sweep: BlockSearch | None
    ) -> None:
        """``key_literals``: per trigger, the key literal of each of its patterns; ``sweep``:
        RE2's automaton for them all, or None for Python's re."""
        self._triggers = triggers
        self._key_literals = key_literals
        self._sweep = sweep
        # Python's re: the triggers find the candidate lines (built only for this engine)
        self._searchers: list[Callable[..., re.Match[bytes] | None]] = []
        self._second: list[Callable[..., re.Match[bytes] | None]] = []
        self._digit_literals: list[tuple[bytes, ...]] = []
        self._benign: list[set[bytes]] = []
        # either engine: the line templates' stages, built with the first window of templates
        self._template_second: list[Callable[..., re.Match[bytes] | None]] = []
        self._skip_templates = 0  # windows to scan the direct way before trying templates
        self._template_backoff = 0
        if sweep is None:
            self._trigger_stages()

    def _trigger_stages(self) -> None:
        """The Python-engine path's stages: a search per trigger, then a second literal test."""
        self._searchers = [re.compile(re.escape(t)).search for t in self._triggers]
        # second stage: a line found by a trigger is kept only if it also contains the most
        # distinctive literal of one of that trigger's patterns (one C-level search per line)
        distinct = self._key_literals
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
            _alternation(lit.translate(None, DIGIT_BYTES) for lit in lits)
            for lits in self._key_literals
        ]

    @staticmethod
    def _line_start(block: bytes, begin: int, at: int) -> int:
        return block.rfind(b"\n", begin, at) + 1 or begin

    def _sweep_candidates(
        self, block: bytes, begin: int, limit: int, candidates: Candidates
    ) -> None:
        """RE2: the lines that contain a pattern's distinctive literal, with the triggers in
        them (each line is looked at once, however many literals it holds)."""
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
            triggers = {i for i, t in enumerate(self._triggers) if block.find(t, start, end) >= 0}
            if triggers:
                candidates[start] = (end, triggers)
            pos = end + 1

    def find(self, block: bytes, begin: int, limit: int) -> Candidates:
        """The candidate lines of ``block[begin:limit]`` (start: end, triggers), window by
        window of about ``_TEMPLATE_SPAN`` bytes.

        Python's re searches each window's distinct line templates, or its bytes where
        templates do not pay (``_template_candidates``). RE2's sweep is one automaton over the
        bytes, cheaper than templates while candidate lines are rare; but it is a call per
        candidate line, so a window with more than ``_DENSE`` of them (an error logged in a
        loop) sends the next windows to templates, until one has fewer than a quarter of that.
        """
        candidates: Candidates = {}
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
        than ``matcher.MAX_LINE`` (the search for one stops within the first line of other windows)."""
        if limit - begin < _TEMPLATE_MIN or block.find(b"\n", begin, limit) >= 0:
            return False
        byte = block[begin : begin + 1]
        return block.count(byte, begin, limit) == limit - begin and all(
            trigger.strip(byte) for trigger in self._triggers
        )

    def _direct(self, block: bytes, begin: int, limit: int, candidates: Candidates) -> None:
        """The engine's own way over the bytes themselves."""
        if self._sweep is not None:
            self._sweep_candidates(block, begin, limit, candidates)
        else:
            self._direct_candidates(block, begin, limit, candidates)

    def _template_candidates(
        self, block: bytes, begin: int, limit: int, candidates: Candidates
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
        templates = piece.translate(None, DIGIT_BYTES).split(b"\n")
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
        self, block: bytes, begin: int, limit: int, candidates: Candidates
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
                    template = block[start:end].translate(None, DIGIT_BYTES)
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

    def line_triggers(self, line: bytes) -> set[int]:
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


def _alternation(literals: Iterable[bytes]) -> Callable[..., re.Match[bytes] | None]:
    """The search of any of ``literals`` (longest first), or of nothing when there are none."""
    ordered = sorted(set(literals), key=lambda lit: (-len(lit), lit))
    return re.compile(b"|".join(re.escape(lit) for lit in ordered) or b"(?!)").search
