"""The literal every match of a regex must contain (its anchor), found without running it.

Only text that every match must contain counts: literal characters at the top level and inside
groups that are neither optional nor alternations. Classes, escapes such as ``\\d``, optional
atoms and anything after ``|`` break or end the search, so the anchor is conservative. A pattern
whose top level is an alternation has no single anchor; it must state one in the YAML
(``anchor:``). Whatever the anchor, the loader checks it against the pattern's examples, and the
scanner requires it literally, so a wrong anchor can only make a pattern miss its own examples
(a load error), never match what the regex would not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_MIN_ANCHOR = 3
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def select_triggers(base: Iterable[str], anchors: Iterable[str]) -> tuple[str, ...]:
    """The literals the scanner searches: for each anchor the first base trigger inside it,
    or the anchor itself when none is (correct either way; fewer literals scan faster)."""
    base = tuple(base)
    chosen: list[str] = []
    for anchor in anchors:
        trigger = next((t for t in base if t in anchor), anchor)
        if trigger not in chosen:
            chosen.append(trigger)
    return tuple(chosen)


def trigger_for(anchor: str, triggers: Iterable[str]) -> str:
    """The trigger that finds lines containing ``anchor`` (see ``select_triggers``)."""
    return next(t for t in triggers if t in anchor)


def derive_anchor(pattern: str, prefer: tuple[str, ...] = ()) -> str | None:
    """A required literal run of ``pattern``: the longest one that contains one of ``prefer``
    (the prefilter triggers, so the scanner needs no extra search for it), else the longest.
    None when the pattern requires no literal of at least 3 characters."""
    runs = required_literals(pattern)
    candidates = sorted((r for r in runs if len(r) >= _MIN_ANCHOR), key=len, reverse=True)
    for run in candidates:
        if any(t in run for t in prefer):
            return run
    return candidates[0] if candidates else None


def required_literals(pattern: str) -> list[str]:
    """Every literal run that all matches of ``pattern`` contain (stripped; maybe empty)."""
    runs = _runs(pattern)
    return [r.strip() for r in runs if r.strip()] if runs is not None else []


def _runs(pattern: str) -> list[str] | None:
    """Literal runs every match contains, or None when the pattern is an alternation."""
    runs: list[str] = []
    current: list[str] = []

    def close() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        inner: list[str] | None = None
        literal = False
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            i += 2
            if nxt.isalnum():
                close()  # \d, \w, \b, \n … are not literal text of the line
            else:
                current.append(nxt)
                literal = True
        elif c == "[":
            close()
            i = _skip_class(pattern, i)
        elif c == "(":
            close()
            end = _group_end(pattern, i)
            body_start = _body_start(pattern, i)
            body = pattern[body_start : end - 1] if body_start >= 0 else None
            i = end
            if body is not None:
                inner = _runs(body)
        elif c == "|":
            return None
        elif c in ".^$":
            close()
            i += 1
        else:
            current.append(c)
            literal = True
            i += 1
        optional = False
        if i < n and pattern[i] in "*+?{":
            optional, i = _read_quantifier(pattern, i)
            if literal and current:
                if optional:
                    current.pop()
                close()
        if inner is not None and not optional:
            runs.extend(inner)
    close()
    return runs


def _body_start(pattern: str, i: int) -> int:
    """Where the body of the group at ``i`` starts; -1 for lookarounds and inline flags."""
    if pattern.startswith(_LOOKAROUND, i):
        return -1
    if pattern.startswith("(?:", i):
        return i + 3
    if pattern.startswith("(?P<", i):
        return pattern.index(">", i) + 1
    if pattern.startswith("(?", i):
        return -1  # (?i), (?P=name), (?#comment) …
    return i + 1


def _group_end(pattern: str, i: int) -> int:
    """Index just past the ``)`` that closes the group opened at ``i``."""
    depth = 0
    j = i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _skip_class(pattern, j)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(pattern)


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the character class that starts at ``pattern[i] == '['``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _read_quantifier(pattern: str, i: int) -> tuple[bool, int]:
    """(may match zero times, index after the quantifier and its lazy/possessive suffix)."""
    c = pattern[i]
    if c == "{":
        m = re.match(r"\{(\d*)(?:,(\d*))?\}", pattern[i:])
        if m is None:
            return False, i  # a literal "{": read as a character next time round
        optional = (m.group(1) or "0") == "0"
        i += m.end()
    else:
        optional = c in "*?"
        i += 1
    if i < len(pattern) and pattern[i] in "?+":
        i += 1
    return optional, i


_GAPS = ("[^\\n]*?", "[^\\n]*", ".*?", ".*")


def leading_gap_literal(pattern: str) -> str | None:
    """The literal a pattern starts with when a gap that takes any rest of the line follows it
    (``rror[^\\n]*?message``), else None. For such a pattern a match that starts at a later
    occurrence of the literal implies one from its first occurrence, so a backtracking engine
    need only try that one (see ``engines.line_search``)."""
    if _runs(pattern) is None:  # a top-level alternation: not one literal, gap, rest
        return None
    chars: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            chars.append(pattern[i + 1])
            i += 2
        elif c not in "\\[](){}.^$|?*+":
            chars.append(c)
            i += 1
        else:
            break
    if chars and pattern.startswith(_GAPS, i):
        return "".join(chars)
    return None
