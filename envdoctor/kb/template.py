"""Summary templates: ``{name}`` placeholders filled from a hit's captures, ``[[…]]``
segments left out when a capture they use is missing, and ``[[…||words]]`` segments that say
``words`` instead.

One signature's patterns read different forms of a message, and a cut or older form often
lacks a number the full one prints ("… compiled with different CUDA versions" without the two
versions). A summary that printed "?" for it reads as broken; an optional segment says what the
line said and nothing more.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping

_SEGMENT = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)
# a ``{name}`` in free text (not a shell ``${name}``); free text may hold braces that are no
# format field at all (awk's ``{print $1}``, a lone brace), which string.Formatter refuses
_WRITTEN = re.compile(r"(?<![$\{])\{(\w+)\}")


def _fields(text: str) -> Iterator[str]:
    for _, name, _, _ in string.Formatter().parse(text):
        if name is not None:
            yield name


def fields(template: str) -> tuple[frozenset[str], frozenset[str]]:
    """(the placeholders every summary prints, those only inside optional segments). A
    segment's ``||`` alternative counts as printed always: it is what shows when one is
    missing."""
    optional: set[str] = set()
    required = set(_fields(_SEGMENT.sub("", template)))
    for segment in _SEGMENT.findall(template):
        present, _, otherwise = segment.partition("||")
        optional.update(_fields(present))
        required.update(_fields(otherwise))
    return frozenset(required), frozenset(optional - required)


def written(text: str) -> frozenset[str]:
    """The ``{name}`` placeholders a text that is printed as written holds (a title, an
    explanation, a fix step): where one names a capture, the user would read it literally."""
    return frozenset(_WRITTEN.findall(text))


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def fill(template: str, captures: Mapping[str, str]) -> str:
    """The summary with ``{name}`` filled from the captures: a ``[[…]]`` segment appears only
    when all its captures are there (else its ``||`` alternative, if it has one); a required
    placeholder with no capture (a template the loader would refuse) prints "?"."""

    def segment(match: re.Match[str]) -> str:
        present, _, otherwise = match.group(1).partition("||")
        return present if all(captures.get(name) for name in _fields(present)) else otherwise

    text = _SEGMENT.sub(segment, template)
    return string.Formatter().vformat(text, (), _Missing(captures))
