"""`envdoctor collect`: write every fact of this machine to a redacted, versioned snapshot."""

from __future__ import annotations

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import Invocation, facts_for, write_output
from envdoctor.terminal import safe_line


def run(inv: Invocation) -> int:
    from envdoctor.snapshot import dump_snapshot

    args = inv.args
    no_redact = args.flag("no_redact")
    facts = facts_for(inv, timeout=args.number("timeout"))
    text = dump_snapshot(facts, redact=not no_redact)
    output = args.path("output")
    write_output(text, output, private=no_redact)  # unredacted: 0600
    if output is not None:
        emit(safe_line(f"wrote {output}") + "\n", err=True)
    return exitcodes.HEALTHY
