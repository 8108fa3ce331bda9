"""Colour for the text reports on a terminal: plain ANSI SGR codes, added after ``safe_text``.

Whether to colour: ``--color never`` never; ``--color always`` always, ``NO_COLOR`` included
(no-color.org: a command-line flag overrides it); ``--color auto`` (the default) when
``NO_COLOR`` is unset or empty and the stream is a terminal, or ``FORCE_COLOR`` /
``CLICOLOR_FORCE`` ask for it. Never when ``TERM=dumb`` (such a terminal shows the codes as
text). A file (``-o``), JSON, Markdown and Prometheus output are never coloured: the commands
ask only for a text report on their own stdout or stderr.

How: a renderer's output is made terminal-safe first (every ESC of untrusted text becomes the
visible ``\\x1b``), and ``paint`` styles parts of that safe text that a renderer's layout rules
point at (a mark at the start of a line, a verdict word). So a colour code can come only from
here, and a log line or a GPU name can at most be painted, never paint.

A leaf beside ``terminal``: ``envdoctor probe`` imports it on its start-up path (``os`` only;
``re`` is imported when there is something to paint).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from envdoctor.terminal import is_terminal, safe_text

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO

# Select Graphic Rendition parameters (ECMA-48): what each style is on a terminal.
STYLES = {
    "error": "1;31",  # bold red
    "warning": "1;33",  # bold yellow
    "ok": "32",  # green
    "info": "36",  # cyan
    "unknown": "35",  # magenta
    "dim": "2",
    "bold": "1",
}
RESET = "\x1b[0m"

Rule = tuple[str, tuple[str, ...]]
"""A layout rule: a regular expression matched at the start of a line, and the style of each
of its groups ("" leaves a group as it is)."""


def wants_colour(
    choice: str | None, stream: TextIO | None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether text written to ``stream`` gets colour (``choice``: ``--color``'s value)."""
    env = os.environ if environ is None else environ
    if choice == "never" or env.get("TERM") == "dumb":
        return False
    if choice == "always":
        return True
    if env.get("NO_COLOR"):
        return False
    if _forced(env.get("FORCE_COLOR")) or _forced(env.get("CLICOLOR_FORCE")):
        return True
    return is_terminal(stream)


def _forced(value: str | None) -> bool:
    return bool(value) and value not in ("0", "false")


def style(text: str, name: str) -> str:
    """``text`` in the style ``name`` (a key of ``STYLES``); ``text`` must already be safe."""
    return f"\x1b[{STYLES[name]}m{text}{RESET}" if text else text


def paint(text: str, rules: Sequence[Rule]) -> str:
    """``text`` made terminal-safe, then each line the first matching rule applies to styled.

    ``safe_text`` is idempotent, so a renderer's already safe output passes unchanged, and text
    that was not made safe cannot smuggle its own escapes past this point.
    """
    import re  # only when colouring: the plain path never compiles a pattern

    compiled = [(re.compile(pattern), styles) for pattern, styles in rules]
    lines = safe_text(text).split("\n")
    for number, line in enumerate(lines):
        for pattern, styles in compiled:
            match = pattern.match(line)
            if match is None:
                continue
            # from the last group to the first, so that earlier offsets stay valid
            for group in range(len(styles), 0, -1):
                name = styles[group - 1]
                start, end = match.span(group)
                if name and start >= 0 and end > start:
                    line = line[:start] + style(line[start:end], name) + line[end:]
            lines[number] = line
            break
    return "\n".join(lines)
