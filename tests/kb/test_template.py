"""Summary templates: what a user reads when a pattern's line lacks a number the full
message prints."""

from __future__ import annotations

from envdoctor.kb.template import fields, fill
from tests.kb.helpers import run

COMPANION = (
    "torch[[ (CUDA {torch})]] and {companion}[[ (CUDA {vision})]] come from different builds"
)


def test_a_segment_shows_when_its_captures_are_there() -> None:
    captures = {"torch": "11.8", "companion": "torchvision", "vision": "12.1"}
    assert (
        fill(COMPANION, captures)
        == "torch (CUDA 11.8) and torchvision (CUDA 12.1) come from different builds"
    )


def test_a_segment_whose_capture_is_missing_is_left_out() -> None:
    assert fill(COMPANION, {"companion": "torchvision", "vision": "12.1"}) == (
        "torch and torchvision (CUDA 12.1) come from different builds"
    )


def test_an_empty_capture_counts_as_missing_and_the_alternative_shows() -> None:
    template = "[[{library}||A CUDA library]] cannot be loaded"
    assert fill(template, {"library": ""}) == "A CUDA library cannot be loaded"
    assert fill(template, {"library": "libcudnn.so.8"}) == "libcudnn.so.8 cannot be loaded"


def test_a_required_placeholder_without_capture_still_prints_a_mark() -> None:
    assert fill("{what} failed", {}) == "? failed"


def test_a_hostile_capture_is_printed_as_text_not_read_as_a_template() -> None:
    """Captures come from the log: braces, segment marks and format specs in them are
    printed as they are, never filled or dropped."""
    hostile = "{__class__}[[{library}||x]]{0:>99999}"
    assert fill("[[{library}||A CUDA library]] cannot be loaded", {"library": hostile}) == (
        f"{hostile} cannot be loaded"
    )


def test_fields_tell_required_from_optional() -> None:
    assert fields(COMPANION) == (frozenset({"companion"}), frozenset({"torch", "vision"}))
    assert fields("[[{a}||{b}]] and [[{a}]]") == (frozenset({"b"}), frozenset({"a"}))


def test_a_cut_companion_line_reads_without_question_marks() -> None:
    """The first line of torchvision's message, cut where a terminal wrapped it (before the
    two versions): the summary said "torch (CUDA ?) and torchvision (CUDA ?)"."""
    line = "RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA"
    top = run(line + "\n").causes[0]
    assert top.id == "torch.companion-cuda-mismatch"
    assert top.summary == "torch and torchvision come from different builds"


def test_no_shipped_summary_prints_a_question_mark_on_its_own_examples() -> None:
    """Every example of every pattern, alone in a log: the summary of its signature has no
    placeholder left unfilled (the loader's rule, checked end to end)."""
    from envdoctor.kb import load_default_kb

    marked = [
        f"{signature.id}: {cause.summary!r} on {example[:60]!r}"
        for signature in load_default_kb().signatures
        for pattern in signature.patterns
        for example in pattern.examples
        for cause in run(example + "\n").causes
        if cause.id == signature.id and ("?" in cause.summary) != ("?" in signature.summary)
    ]
    assert not marked, "\n".join(marked)
