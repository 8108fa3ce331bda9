"""``envdoctor spec init``: write this machine's expected state as a node spec (YAML).

Like NHC's ``nhc-genconf``, but for the whole stack: GPU count and model, persistence mode, ECC,
MIG layout, driver branch, the CUDA version it supports, and the torch and cuDNN versions.
``envdoctor check --spec node.yaml`` then reports every drift as a ``spec.*`` finding.
``envdoctor spec validate node.yaml`` checks a hand-edited spec without probing anything.
"""

from __future__ import annotations

from dataclasses import fields, replace

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import Invocation, facts_for, write_output
from envdoctor.terminal import safe_line


def run(inv: Invocation) -> int:
    return validate(inv) if inv.args.where == "spec validate" else init(inv)


def init(inv: Invocation) -> int:
    """Write the spec this machine meets now (review it, then use it with check --spec)."""
    from envdoctor.fleet.spec import dump_spec, spec_from_facts
    from envdoctor.model.probed import value_or

    args = inv.args
    no_torch = args.flag("no_torch")
    facts = facts_for(
        inv,
        snapshot=args.path("snapshot"),
        timeout=args.number("timeout"),
        include_torch=not no_torch,
    )
    spec, notes = spec_from_facts(facts)
    if no_torch:
        spec = replace(spec, torch_version=None, cudnn=None)
        notes = tuple(n for n in notes if not n.startswith("torch"))
    text = dump_spec(
        spec, hostname=value_or(facts.host.hostname, ""), created=facts.collected_at, notes=notes
    )
    for note in notes:
        emit(safe_line(f"envdoctor: not recorded: {note}") + "\n", err=True)
    output = args.path("output")
    write_output(text, output)
    if output is not None:
        emit(safe_line(f"wrote {output}") + "\n", err=True)
    return exitcodes.HEALTHY


def validate(inv: Invocation) -> int:
    """Check that a spec file is well formed (exit 0), or say what is wrong and where (exit 2)."""
    from envdoctor.fleet.spec import load_spec

    path = inv.args.path("path")
    assert path is not None  # a required argument
    spec = load_spec(path)
    checked = [
        f.name for f in fields(spec) if f.name != "source" and getattr(spec, f.name) is not None
    ]
    emit(safe_line(f"{path}: valid; checks {', '.join(checked) or 'nothing'}") + "\n")
    return exitcodes.HEALTHY
