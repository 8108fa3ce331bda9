"""What one check concluded: a finding, passed, not applicable, or unknown, each with why.

A report never prints "passed" for a check that did not run: a rule says *why* it passed
(the evidence it read), why it does not apply here, or why it could not decide.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Outcome(str, enum.Enum):
    FAILED = "failed"
    """The check produced a finding (an error, a warning or a note)."""
    PASSED = "passed"
    """The check ran on evidence that was read, and found nothing wrong."""
    NOT_APPLICABLE = "not-applicable"
    """There is nothing here for the check to judge (no GPU for a GPU check …)."""
    UNKNOWN = "unknown"
    """The check could not decide: what it needs could not be read."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A rule's conclusion when it yields no finding; ``reason`` is shown to the user."""

    outcome: Outcome
    reason: str


def passed(reason: str) -> Verdict:
    """Passed, on the evidence ``reason`` names ("NVML initialised: driver 580.159.04")."""
    return Verdict(Outcome.PASSED, reason)


def not_applicable(reason: str) -> Verdict:
    return Verdict(Outcome.NOT_APPLICABLE, reason)


def unknown(reason: str) -> Verdict:
    return Verdict(Outcome.UNKNOWN, reason)


def failed_elsewhere(reason: str) -> Verdict:
    """Failed, and another check's finding already says so (``reason`` names it): the report
    shows the failure once, as that finding, and this check does not claim to have passed."""
    return Verdict(Outcome.FAILED, reason)
