"""`envdoctor recommend`: the torch install command that fits this machine's driver and GPUs."""

from __future__ import annotations

import re

from envdoctor.cli.common import (
    Invocation,
    facts_for,
    intent_for,
    output_format,
    tables_of,
    write_report,
)
from envdoctor.compat.recommend import machine_from_facts, recommend
from envdoctor.errors import EnvdoctorError
from envdoctor.render.recommend import colour_text, render_markdown, render_text, to_json
from envdoctor.terminal import json_document


def run(inv: Invocation) -> int:
    args = inv.args
    torch = args.text("torch")
    if torch is not None:
        _check_pin(torch)
    if args.path("snapshot") is not None and args.text("python") is not None:
        raise EnvdoctorError(
            "--python cannot be used with --snapshot: the snapshot already holds the torch "
            "of the interpreter it was collected for",
            hint="choose it when collecting: `envdoctor collect --python PATH`",
        )
    tables = tables_of(inv)
    intent = intent_for(inv)
    facts = facts_for(inv, snapshot=args.path("snapshot"), torch_version_only=True)
    rec = recommend(tables, machine_from_facts(facts, tables, intent), pin=torch)
    fmt = output_format(inv)
    if fmt == "json":
        write_report(inv, json_document(to_json(tables, rec)))
    elif fmt == "markdown":
        write_report(inv, render_markdown(tables, rec))
    else:
        write_report(inv, render_text(tables, rec), paint=colour_text)
    return rec.exit_code


# 2.11, 2.11.0, 2.11.0+cu128, 2.12.0rc1: a torch release as pip spells it, with numbers of a
# sane size (a 5000-digit "release" is a usage error, not an internal one).
_PIN = re.compile(
    r"[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?((a|b|rc)[0-9]{1,6})?(\+[A-Za-z0-9.]{1,32})?"
)


def _check_pin(pin: str) -> None:
    if not _PIN.fullmatch(pin):
        shown = pin if len(pin) <= 40 else pin[:40] + "…"
        raise EnvdoctorError(
            f"--torch {shown!r} is not a torch release",
            hint="write 2.11, 2.11.0 or 2.11.0+cu128",
        )
