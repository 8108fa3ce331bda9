"""The Rule record: a pure function from facts (and tables) to findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding

if TYPE_CHECKING:
    from envdoctor.compat.tables import CompatTables


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What a rule may look at: the facts and the compatibility tables. Nothing else."""

    facts: Facts
    tables: CompatTables


@dataclass(frozen=True, slots=True)
class Rule:
    """A named check. ``codes`` lists every finding code it can emit (documented and tested)."""

    name: str
    summary: str
    codes: tuple[str, ...]
    evaluate: Callable[[RuleContext], Iterable[Finding]]
    applies: Callable[[RuleContext], bool] = lambda _ctx: True
    """False when the rule has nothing to judge here (no GPU for GPU rules): not a pass."""
