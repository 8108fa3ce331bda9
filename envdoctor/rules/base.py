"""The Rule record: a pure function from facts (and tables) to findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding
from envdoctor.model.record import record

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables


@record
class RuleContext:
    """What a rule may look at: the facts and the compatibility tables. Nothing else."""

    facts: Facts
    given_tables: CompatTables | None = None
    """None for the fast tier, which judges without tables (and never imports them)."""

    @property
    def tables(self) -> CompatTables:
        """The tables to judge against; the empty set (rules then say nothing) when none."""
        if self.given_tables is not None:
            return self.given_tables
        from envdoctor.compat.tables import CompatTables  # lazy: see given_tables

        return CompatTables()


@record
class Rule:
    """A named check. ``codes`` lists every finding code it can emit (documented and tested)."""

    name: str
    summary: str
    codes: tuple[str, ...]
    evaluate: Callable[[RuleContext], Iterable[Finding]]
    applies: Callable[[RuleContext], bool] = lambda _ctx: True
    """False when the rule has nothing to judge here (no GPU for GPU rules): not a pass."""
