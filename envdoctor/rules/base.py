"""The Rule record: a pure function from facts (and tables) to findings and a verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding
from envdoctor.model.outcome import Verdict, passed
from envdoctor.model.views import NO_INTENT, Intent, MachineView, machine_view

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What a rule may look at: the facts, the intent, the tables, and the shared views."""

    facts: Facts
    given_tables: CompatTables | None = None
    """None for the fast tier, which judges without tables (and never imports them)."""
    intent: Intent = NO_INTENT
    given_view: MachineView | None = None
    """The machine view, computed once by ``evaluate``; computed on demand otherwise."""

    @property
    def tables(self) -> CompatTables:
        """The tables to judge against; the empty set (rules then say nothing) when none."""
        if self.given_tables is not None:
            return self.given_tables
        from envdoctor.compat.tables import CompatTables  # lazy: see given_tables

        return CompatTables()

    @property
    def machine(self) -> MachineView:
        """The one interpretation of the facts (model/views.py) that every command shares."""
        if self.given_view is not None:
            return self.given_view
        return machine_view(self.facts, self.intent)


Evaluation = Iterable[Finding | Verdict]
"""What a rule yields: its findings, or one ``Verdict`` saying why there is none."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A named check. ``codes`` lists every finding code it can emit (documented and tested).

    ``evaluate`` yields findings, or a ``Verdict`` (passed on what evidence, not applicable and
    why, unknown and why). A rule that yields neither is reported as unknown: a contract test
    keeps every rule honest on every scenario.
    """

    name: str
    summary: str
    codes: tuple[str, ...]
    evaluate: Callable[[RuleContext], Evaluation]


def judged(
    judge: Callable[[RuleContext], Evaluation],
    *needs: Callable[[RuleContext], Verdict | None],
    ok: Callable[[RuleContext], str] | None,
) -> Callable[[RuleContext], Evaluation]:
    """A check with honest verdicts: each of ``needs`` may say why it cannot judge here (not
    applicable, unknown); then the judge's findings or verdicts; if it says nothing, passed with
    ``ok``'s account of what was read (None: the judge always says)."""

    def evaluate(ctx: RuleContext) -> Evaluation:
        for need in needs:
            missing = need(ctx)
            if missing is not None:
                yield missing
                return
        said = False
        for item in judge(ctx):
            said = True
            yield item
        if not said and ok is not None:
            yield passed(ok(ctx))

    return evaluate
