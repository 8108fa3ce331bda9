"""Translate the knowledge base's regexes to POSIX extended regexes (``grep -E``).

The signatures use the subset of Python's syntax that has an ERE equivalent, which is also the
subset RE2 matches in linear time; anything else (a lookaround, an inline flag, a
backreference) raises ``ValueError`` naming the construct. The loader uses that to refuse such a
pattern (``file:line``, exit 2); the benchmark gives ``grep -E`` the very same patterns, and a
test checks that every translated pattern still matches its examples under grep.
"""

from __future__ import annotations

from envdoctor.kb.model import KnowledgeBase

_CLASS_ESCAPES = {
    "d": "0-9",
    "w": "[:alnum:]_",
    "s": "[:space:]",
}
_ESCAPES = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[[:alnum:]_]",
    "W": "[^[:alnum:]_]",
    "s": "[[:space:]]",
    "S": "[^[:space:]]",
    "b": "\\b",
}


def to_ere(pattern: str) -> str:
    """The ERE equivalent of a Python regex from a signature."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("trailing backslash")
            nxt = pattern[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            elif nxt.isalnum():
                raise ValueError(f"escape \\{nxt} has no ERE equivalent")
            else:
                out.append("\\" + nxt)
            i += 2
        elif c == "[":
            cls, i = _translate_class(pattern, i)
            out.append(cls)
        elif c == "(":
            if pattern.startswith("(?:", i):
                out.append("(")
                i += 3
            elif pattern.startswith("(?P<", i):
                out.append("(")
                i = pattern.index(">", i) + 1
            elif pattern.startswith("(?", i):
                raise ValueError(
                    f"{pattern[i : i + 4]}… (lookaround or flag) has no ERE equivalent"
                )
            else:
                out.append("(")
                i += 1
        elif c in "*+?}" and i + 1 < n and pattern[i + 1] == "?":
            out.append(c)  # lazy quantifier: the same set of lines matches
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _translate_class(pattern: str, i: int) -> tuple[str, int]:
    """Translate ``[...]`` starting at ``i``; returns (ERE class, index after it)."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] == "^"
    if negate:
        j += 1
    start = j
    tokens: list[str] = []  # single characters, ranges "a-z" and POSIX classes "[:alnum:]"
    bracket = dash = newline = False
    while j < len(pattern) and (pattern[j] != "]" or j == start):
        c = pattern[j]
        if c == "\\" and j + 1 < len(pattern):
            nxt = pattern[j + 1]
            j += 2
            if nxt in _CLASS_ESCAPES:
                tokens.append(_CLASS_ESCAPES[nxt])
            elif nxt == "n":
                newline = True
            elif nxt.isalnum():
                raise ValueError(f"class escape \\{nxt} has no ERE equivalent")
            elif nxt == "]":
                bracket = True
            elif nxt == "-":
                dash = True
            else:
                tokens.append(nxt)
            continue
        if c == "-" and (j == start or pattern[j + 1] == "]"):
            dash = True  # a literal "-" at either end
            j += 1
            continue
        if c == "]":
            bracket = True
            j += 1
            continue
        if j + 2 < len(pattern) and pattern[j + 1] == "-" and pattern[j + 2] != "]":
            tokens.append(pattern[j : j + 3])  # a range such as 0-9
            j += 3
            continue
        tokens.append(c)
        j += 1
    if newline and not tokens and not bracket and not dash:
        return (".", j + 1) if negate else ("\n", j + 1)  # [^\n] is "any character" per line
    # in a bracket expression a literal "]" must come first and a literal "-" last
    body = ("]" if bracket else "") + "".join(tokens) + ("-" if dash else "")
    return ("[^" if negate else "[") + body + "]", j + 1


def kb_to_ere(kb: KnowledgeBase) -> list[str]:
    """One ERE per pattern of the knowledge base, in signature order."""
    return [to_ere(p.regex) for s in kb.signatures for p in s.patterns]
