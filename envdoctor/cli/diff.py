"""``envdoctor diff A.json B.json``: two snapshots side by side, only what differs.

Exit 0 when the facts agree, 1 when they differ, 2 when a file cannot be read (like diff(1)).
Facts that change between any two runs (free memory, processes, timestamps) are hidden unless
``--all`` is given; ``--json`` prints every difference with a ``volatile`` flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.cli.common import Invocation, output_format, text_width, write_report
from envdoctor.model.units import plural
from envdoctor.terminal import json_document, safe_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envdoctor.fleet.diff import Difference

MAX_VALUE_WIDTH = 40


def run(inv: Invocation) -> int:
    from envdoctor.fleet.diff import diff_facts, diff_json
    from envdoctor.snapshot import load_snapshot

    args = inv.args
    a, b = Path(args.text("a") or ""), Path(args.text("b") or "")
    differences = diff_facts(load_snapshot(a), load_snapshot(b))
    shown = [d for d in differences if args.flag("all") or not d.volatile]
    code = exitcodes.UNHEALTHY if shown else exitcodes.HEALTHY
    if output_format(inv) == "json":
        write_report(inv, json_document(diff_json(str(a), str(b), differences, exit_code=code)))
    else:
        table = _table(
            a.name, b.name, shown, hidden=len(differences) - len(shown), width=text_width()
        )
        write_report(inv, safe_text(table) + "\n", paint=_colour)
    return code


def _table(a: str, b: str, diffs: Sequence[Difference], *, hidden: int, width: int = 100) -> str:
    """The differences as three columns that fit ``width``: a value longer than its column
    goes on over the next lines (it ran off the terminal before)."""
    import textwrap
    from itertools import zip_longest

    note = f"; {hidden} that change from run to run hidden (--all shows them)" if hidden else ""
    if not diffs:
        return f"{a} and {b}: no differences{note}"
    head = f"{a} and {b}: {plural(len(diffs), 'difference')}{note}"
    path_w = min(max(len("fact"), *(len(d.path) for d in diffs)), max(16, width // 3))
    a_w = min(
        MAX_VALUE_WIDTH,
        max(10, (width - path_w - 4) // 2),
        max(len(a), *(len(_show(d.a)) for d in diffs)),
    )
    b_w = max(10, width - path_w - a_w - 4)

    def cell(text: str, w: int) -> list[str]:
        return textwrap.wrap(text, w, break_long_words=True, break_on_hyphens=False) or [""]

    lines = [head, "", f"{'fact':<{path_w}}  {a:<{a_w}}  {b}"]
    for d in diffs:
        columns = zip_longest(
            cell(d.path, path_w), cell(_show(d.a), a_w), cell(_show(d.b), b_w), fillvalue=""
        )
        lines += [f"{p:<{path_w}}  {x:<{a_w}}  {y}".rstrip() for p, x, y in columns]
    return "\n".join(lines)


COLOURS = (
    (r".* and .*: (?:(no differences)|(\d+ differences?))", ("ok", "warning")),
    (r"(fact  .*)$", ("bold",)),  # the table's head
)


def _colour(text: str) -> str:
    from envdoctor.colour import paint

    return paint(text, COLOURS)


def _show(value: str) -> str:
    return '""' if value == "" else value
