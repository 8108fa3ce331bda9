"""`envdoctor collect`: write every fact of this machine to a redacted, versioned snapshot."""

from __future__ import annotations

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import Invocation, facts_for
from envdoctor.terminal import safe_line


def run(inv: Invocation) -> int:
    from envdoctor.snapshot import dump_snapshot

    args = inv.args
    no_redact = args.flag("no_redact")
    facts = facts_for(inv, timeout=args.number("timeout"))
    text = dump_snapshot(facts, redact=not no_redact)
    output = args.path("output")
    if output is None:
        emit(text)
        return exitcodes.HEALTHY
    from envdoctor.render.files import write_atomic

    write_atomic(output, text, private=no_redact)  # unredacted: 0600
    emit(safe_line(f"wrote {output}") + "\n", err=True)
    return exitcodes.HEALTHY
