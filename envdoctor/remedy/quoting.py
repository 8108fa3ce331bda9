"""Quoting for the generated script: every value that came from the machine passes through here.

``sh_quote`` is ``shlex.quote`` for printable text, respelled where shellcheck would misread
the exact word (a leading ``~/`` or ``=``: the generated script must pass shellcheck clean).
Text with control or invisible characters (a newline, ESC, a bidi override) is written as bash
ANSI-C quoting, ``$'…'``, with each such byte as ``\\xHH``: the script stays one printable line
per command, so a process named ``"a\\nrm -rf /"`` or one carrying terminal escape sequences
cannot forge lines or hide text from the person reading the script. Both forms are single words
that bash never expands.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from envdoctor.terminal import safe_line

# bash reserved words: a bare one is syntax in some positions (shellcheck SC1010 and friends).
_RESERVED = frozenset(
    [
        "!",
        "case",
        "coproc",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
        "{",
        "}",
        "[[",
        "]]",
    ]
)


def sh_quote(value: str) -> str:
    """One shell word that bash reads back as exactly ``value`` (NUL cannot be represented)."""
    if "\0" in value:
        raise ValueError("a shell word cannot contain NUL")
    if value in _RESERVED:
        return f"'{value}'"  # shlex leaves `then`, `fi` … bare; quoted they stay plain data
    if value.isprintable():
        if value.startswith("~/"):
            # '~/…' is exact, but shellcheck reads it as a tilde the author hoped would expand
            # (SC2088, a warning); \~ is the same literal tilde without that reading
            return "\\~" + shlex.quote(value[1:])
        quoted = shlex.quote(value)
        if quoted.startswith(("=", "+=")):
            # shlex leaves `=`, `==x` and `+=` bare: plain data to bash, but to shellcheck a
            # spaced-out assignment or comparison (SC2283-SC2285, errors)
            return f"'{value}'"
        return quoted
    return "$'" + "".join(_ansi_c(ch) for ch in value) + "'"


def sh_join(words: Iterable[str]) -> str:
    """A command line of quoted words."""
    return " ".join(sh_quote(word) for word in words)


def display(value: str) -> str:
    """``value`` for comments and messages: control and invisible characters as escapes."""
    return safe_line(value)


def _ansi_c(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch == "'":
        return "\\'"
    if ch.isprintable():
        return ch
    return "".join(f"\\x{byte:02x}" for byte in ch.encode("utf-8"))
