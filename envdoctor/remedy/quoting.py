"""Quoting for the generated script: every value that came from the machine passes through here.

``sh_quote`` is ``shlex.quote`` for printable text, respelled where shellcheck would misread
the exact word (a leading ``~/``, an odd ``=``, a ``,``, a curly quote), since the generated
script must pass shellcheck clean. Text with control or invisible characters (a newline, ESC, a
bidi override) is written as bash ANSI-C quoting, ``$'…'``, with each such byte as ``\\xHH``:
the script stays one printable line per command, so a process named ``"a\\nrm -rf /"`` or one
carrying terminal escape sequences cannot forge lines or hide text from the person reading the
script. Both forms are single words that bash never expands.
"""

from __future__ import annotations

import re
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
    if value.isprintable() and not _CURLY_QUOTES.intersection(value):
        if value.startswith("~/"):
            # '~/…' is exact, but shellcheck reads it as a tilde the author hoped would expand
            # (SC2088, a warning); \~ is the same literal tilde without that reading
            return "\\~" + _plain(value[1:])
        return _plain(value)
    return "$'" + "".join(_ansi_c(ch) for ch in value) + "'"


def _plain(value: str) -> str:
    quoted = shlex.quote(value)
    if quoted == value and ("," in value or ("=" in value and not _BARE_ASSIGNMENT.match(value))):
        # shlex leaves `=x`, `a+=`, `1=`, `a,b` bare: plain data to bash, but to shellcheck a
        # spaced-out assignment or comparison (SC2283-SC2285) or, in an array, an assignment
        # or a comma meant as a separator (SC2191, SC2054). `--output=FILE` and `NAME=VALUE`
        # stay bare: shellcheck reads them as data, and so does the person reading the script.
        return f"'{value}'"
    return quoted


_BARE_ASSIGNMENT = re.compile(r"(?:--?[A-Za-z0-9][A-Za-z0-9_.-]*|[A-Za-z_][A-Za-z0-9_]*)=")


# U+2018 and U+2019 (curly single quotes) inside '…' make shellcheck warn of a unicode quote
# (SC1112) where `$'…'` does not: a name like "Bob<U+2019>s" in a path or an argv is ordinary
_CURLY_QUOTES = frozenset("\u2018\u2019")


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
    try:  # a surrogate from a non-UTF-8 byte (\udcff) is that byte again
        data = ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that was never a byte (a snapshot's \ud800)
        data = ch.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)
