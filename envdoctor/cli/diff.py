"""``envdoctor diff A.json B.json``: two snapshots side by side, only what differs.

Exit 0 when the facts agree, 1 when they differ, 2 when a file cannot be read (like diff(1)).
Facts that change between any two runs (free memory, processes, timestamps) are hidden unless
``--all`` is given; ``--json`` prints every difference with a ``volatile`` flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envdoctor import exitcodes
from envdoctor.cli.common import Invocation, output_format, write_report
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
        table = _table(a.name, b.name, shown, hidden=len(differences) - len(shown))
        write_report(inv, safe_text(table) + "\n", paint=_colour)
    return code


def _table(a: str, b: str, diffs: Sequence[Difference], *, hidden: int) -> str:
    note = f"; {hidden} that change from run to run hidden (--all shows them)" if hidden else ""
    if not diffs:
        return f"{a} and {b}: no differences{note}"
    head = f"{a} and {b}: {plural(len(diffs), 'difference')}{note}"
    path_w = max(len("fact"), *(len(d.path) for d in diffs))
    a_w = min(MAX_VALUE_WIDTH, max(len(a), *(len(_show(d.a)) for d in diffs)))
    lines = [head, "", f"{'fact':<{path_w}}  {a:<{a_w}}  {b}"]
    lines += [f"{d.path:<{path_w}}  {_show(d.a):<{a_w}}  {_show(d.b)}" for d in diffs]
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
