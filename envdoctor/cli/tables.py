"""`envdoctor tables validate [DIR]` and `envdoctor tables show NAME`."""

from __future__ import annotations

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import Invocation, output_format, tables_of, write_report
from envdoctor.compat.locations import shipped_dir
from envdoctor.compat.tables import SECTIONS, TABLE_NAMES, count_rows
from envdoctor.errors import EnvdoctorError
from envdoctor.model.units import plural
from envdoctor.terminal import json_document, safe_line


def run(inv: Invocation) -> int:
    return show(inv) if inv.args.where == "tables show" else validate(inv)


def validate(inv: Invocation) -> int:
    """Validate the shipped tables, or DIR's tables merged over them; exit 2 on the first error."""
    from envdoctor.compat.loader import load_tables, validate_dir  # the YAML reader: here only

    directory = inv.args.path("directory")
    tables = validate_dir(str(directory)) if directory is not None else load_tables()
    where = str(directory) if directory is not None else str(shipped_dir())
    counts = count_rows(tables)
    rows = (f"  {name}: {plural(counts[name], 'row')}" for name in TABLE_NAMES)
    lines = [safe_line(f"ok: {where}"), *rows]
    emit("\n".join(lines) + "\n")
    return exitcodes.HEALTHY


def show(inv: Invocation) -> int:
    """Print one table as envdoctor loaded it (after ENVDOCTOR_TABLES and --tables)."""
    args = inv.args
    name = args.text("name") or ""
    key = name.replace("_", "-").removesuffix(".yaml")
    if key not in SECTIONS:
        raise EnvdoctorError(f"no table {name!r}", hint="tables: " + ", ".join(TABLE_NAMES))
    tables = tables_of(inv)  # what check, fix and recommend judge with
    if output_format(inv) == "json":
        from envdoctor.render.tables import table_json

        write_report(inv, json_document(table_json(key, tables)))
    else:
        from envdoctor.render.tables import colour_table, table_text

        write_report(inv, table_text(key, tables) + "\n", paint=colour_table)
    return exitcodes.HEALTHY
