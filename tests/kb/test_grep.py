"""The knowledge base's regexes have faithful grep -E translations (used by the benchmark)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from envdoctor.kb import load_default_kb
from envdoctor.kb.ere import kb_to_ere, to_ere

GREP = shutil.which("grep")


@pytest.mark.parametrize(
    ("python", "ere"),
    [
        (r"(?P<x>\d+) GiB", "([0-9]+) GiB"),
        (r"a(?:b|c)*?d", "a(b|c)*d"),
        (r"[\w.+-]+", "[[:alnum:]_.+-]+"),
        (r"rror[^\n]*?x", "rror.*x"),
        (r"[^\s:]+", "[^[:space:]:]+"),
        (r"\(GPU \d+;", r"\(GPU [0-9]+;"),
    ],
)
def test_translation(python: str, ere: str) -> None:
    assert to_ere(python) == ere


def test_untranslatable_constructs_are_refused() -> None:
    for bad in (r"(?=x)y", r"(?i)abc", r"\1"):
        with pytest.raises(ValueError):
            to_ere(bad)


@pytest.mark.skipif(GREP is None, reason="grep is not installed")
def test_every_example_matches_its_translation_under_grep() -> None:
    assert GREP is not None
    kb = load_default_kb()
    assert len(kb_to_ere(kb)) == sum(len(s.patterns) for s in kb.signatures)
    for signature in kb.signatures:
        for pattern in signature.patterns:
            ere = to_ere(pattern.regex)
            examples = "\n".join(pattern.examples) + "\n"
            result = subprocess.run(
                [GREP, "-E", "-c", "-e", ere],
                input=examples.encode(),
                capture_output=True,
                check=False,
            )
            assert result.returncode == 0, (signature.id, ere, result.stderr)
            assert int(result.stdout) == len(pattern.examples), (signature.id, ere)
