"""Untrusted text made safe for a terminal, and JSON that stays lossless but terminal-safe too.

Log lines, file names, NVML process names, snapshot fields and command names are written by
anyone. Printed raw, ``ESC [2J`` clears the screen, OSC 0 sets the window title, OSC 52 writes
the clipboard, a C1 CSI (U+009B) does what ``ESC [`` does, and a bidi override (U+202E) makes
the reader see text in another order than it is. So every text and Markdown renderer passes its
output through ``safe_text`` once, where it leaves for the terminal (one choke point per
renderer), and every message that names such a value through ``safe_line``.

What counts as unsafe is what Python calls not printable (``str.isprintable``): C0 and C1
controls, DEL, format characters (bidi overrides and isolates, zero-width joiners), line and
paragraph separators, unassigned and private-use code points, lone surrogates. Each is shown
visibly as an escape (``\\x1b``, ``\\u202e``), never dropped: the reader sees that it was there.

This module is a leaf (no envdoctor imports, ``json`` only when asked): ``envdoctor probe``
imports it on its start-up path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envdoctor.errors import values_hidden

if TYPE_CHECKING:
    from typing import Any


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` is a terminal; a closed stream, or one without ``isatty``, is not."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):  # closed
        return False


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe_text(text: str) -> str:
    """``text`` with every character that is not printable shown as an escape; newlines and
    tabs stay (a report has lines; a tab cannot move the cursor anywhere but right)."""
    if text.isprintable():
        return text
    return "\n".join(_line(line, keep_tab=True) for line in text.split("\n"))


def safe_line(text: str) -> str:
    """``text`` as one line: also a newline, carriage return or tab is shown as an escape."""
    return text if text.isprintable() else _line(text, keep_tab=False)


def cut(text: str, limit: int = 40) -> str:
    """``text`` for a message, cut short: a 5000-digit value is named, not repeated in full."""
    return text if len(text) <= limit else text[:limit] + "…"


def quoted(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message (``repr``), cut short as ``cut`` cuts it; once a file not
    everyone may read was read, a placeholder instead (``keep_private``)."""
    hidden = values_hidden()
    if hidden:
        return f"(a value {hidden})"
    return repr(cut(text, limit))


def safe_json(document: str) -> str:
    """A JSON document (from ``json.dumps(..., ensure_ascii=False)``) with every character that
    is not printable written as a ``\\uXXXX`` escape.

    Lossless: such characters can only stand inside JSON strings (json already escapes C0
    there), and a ``\\u`` escape decodes to the same character. A lone surrogate (a non-UTF-8
    byte that Python carried as ``\\udcff``) becomes its escape too, so the output always
    encodes as UTF-8.
    """
    if document.isprintable():
        return document
    return "\n".join(
        line if line.isprintable() else "".join(_json_char(ch) for ch in line)
        for line in document.split("\n")
    )


def json_document(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as a JSON document ending in a newline: readable UTF-8, safe on a terminal."""
    import json  # not at the top: the probe's plain text output never needs it

    return safe_json(json.dumps(data, indent=indent, ensure_ascii=False)) + "\n"


def _line(line: str, *, keep_tab: bool) -> str:
    if line.isprintable():
        return line
    return "".join(
        ch if ch.isprintable() or (keep_tab and ch == "\t") else _escape(ch) for ch in line
    )


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_char(ch: str) -> str:
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: JSON spells it as a UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
