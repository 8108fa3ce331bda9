"""Top-1 accuracy on the corpus of real error output (tests/data/tracebacks/<signature-id>/).

Each fixture is verbatim output copied from a public issue or forum thread, with its source
and the cause the thread established in its header. The expected answer is the directory name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kb.helpers import corpus, run

DOCS = Path(__file__).parents[2] / "docs" / "explain.md"

MIN_ACCURACY = 0.90
MIN_CASES = 40


def test_corpus_is_large_and_sourced() -> None:
    cases = corpus()
    assert len(cases) >= MIN_CASES
    for case in cases:
        assert case.source, f"{case.path}: no `# source:` header"
        assert case.cause, f"{case.path}: no `# cause:` header"
        assert case.log.strip(), f"{case.path}: empty log"
    assert len({c.expected for c in cases}) >= 25


def test_corpus_directories_are_known_signatures() -> None:
    from envdoctor.kb import load_default_kb

    known = set(load_default_kb().ids)
    assert {c.expected for c in corpus()} <= known


def test_top1_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    cases = corpus()
    misses = []
    for case in cases:
        explanation = run(case.log)
        top = explanation.top
        if top is None or top.id != case.expected or explanation.status != "explained":
            misses.append(f"{case.path.parent.name}/{case.path.name} -> {top.id if top else None}")
    accuracy = 1 - len(misses) / len(cases)
    with capsys.disabled():
        print(f"\nexplain top-1 accuracy: {accuracy:.1%} on {len(cases)} real error logs")  # noqa: T201
    assert accuracy >= MIN_ACCURACY, misses
    # docs/explain.md states the figure; it went stale once (99.0% stated, 97.9% measured)
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    stated = re.search(
        r"prints the top-1 accuracy and fails below 90%; today it is ([\d.]+)% \((\d+) of (\d+);",
        text,
    )
    assert stated is not None, "docs/explain.md must state the in-sample accuracy"
    right = len(cases) - len(misses)
    assert stated.groups() == (f"{100 * accuracy:.1f}", str(right), str(len(cases))), misses
