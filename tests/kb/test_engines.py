"""The two regex engines: RE2 when it can be imported, Python's re otherwise, same answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envdoctor.kb import Scanner, engines, load_default_kb, model, scan_bytes
from envdoctor.kb.anchor import leading_gap_literal
from envdoctor.kb.engines import PYTHON_RE, RE2, available_engines, line_search


@pytest.fixture
def fresh_engine_choice() -> Iterator[None]:
    engines._re2.cache_clear()
    yield
    engines._re2.cache_clear()


@pytest.mark.parametrize(
    ("pattern", "lead"),
    [
        (r"rror[^\n]*?device-side assert triggered", "rror"),
        (r"NVRM:[^\n]*fallen off the bus", "NVRM:"),
        (r"CUDA error.*?out of memory", "CUDA error"),
        (r"a\.b[^\n]*?c", "a.b"),
        (r"rror[^\n]*?x|y", None),  # a top-level alternation
        (r"rrors?[^\n]*?x", None),  # the last letter is optional
        (r"(?:a|b)[^\n]*?x", None),
        (r"CUDA out of memory", None),  # no gap: every occurrence must be tried
        (r"\d+[^\n]*?x", None),
    ],
)
def test_leading_gap_literal(pattern: str, lead: str | None) -> None:
    assert leading_gap_literal(pattern) == lead


_GAP_PATTERNS = [
    r"ab[^\n]*?b(?P<x>a+)c",
    r"ab.*?(?P<x>b+)a",
    r"ba[^\n]*(?P<x>ab)",
    r"rror[^\n]*?(?P<x>[ab]+)\.so",
]


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.sampled_from(_GAP_PATTERNS),
    text=st.text(alphabet="abcr o.s", max_size=40),
)
def test_trying_only_the_first_occurrence_finds_what_search_finds(pattern: str, text: str) -> None:
    """The fallback's shortcut for `literal, gap, rest` patterns returns exactly re.search's
    match (span and captures), not merely whether there is one."""
    regex = re.compile(pattern)
    expected = regex.search(text)
    got = line_search(pattern, PYTHON_RE)(text)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert isinstance(got, re.Match)
        assert got.span() == expected.span()
        assert got.groupdict() == expected.groupdict()


def test_without_re2_the_fallback_is_used(
    monkeypatch: pytest.MonkeyPatch, fresh_engine_choice: None
) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # `import re2` raises ImportError
    assert engines.default_engine() == PYTHON_RE
    assert engines.available_engines() == (PYTHON_RE,)
    log = b"RuntimeError: CUDA error: device-side assert triggered\n"
    assert [h.signature_id for h in scan_bytes(log, load_default_kb()).hits] == [
        "cuda.device-assert"
    ]


def test_the_environment_can_force_the_fallback(
    monkeypatch: pytest.MonkeyPatch, fresh_engine_choice: None
) -> None:
    monkeypatch.setenv("ENVDOCTOR_RE2", "0")
    assert engines.default_engine() == PYTHON_RE


def test_explain_without_re2_gives_the_same_report() -> None:
    """End to end: the CLI with and without RE2 explains a real log the same way."""
    log = (
        b"step 1 loss 0.3 val_error_rate 0.1\n"
        b"../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
        b"block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
        b"RuntimeError: CUDA error: device-side assert triggered\n"
    )
    outputs = []
    for value in ("1", "0"):
        result = subprocess.run(
            [sys.executable, "-m", "envdoctor", "explain", "--json", "-"],
            input=log,
            capture_output=True,
            check=False,
            env={**os.environ, "ENVDOCTOR_RE2": value},
        )
        assert result.returncode == 1, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]


@pytest.mark.skipif(RE2 not in available_engines(), reason="google-re2 is not installed")
def test_re2_and_re_capture_the_same_from_every_example() -> None:
    for signature in load_default_kb().signatures:
        for pattern in signature.patterns:
            fast = line_search(pattern.regex, RE2)
            slow = line_search(pattern.regex, PYTHON_RE)
            for example in pattern.examples:
                a, b = fast(example), slow(example)
                assert a is not None
                assert b is not None
                assert a.groupdict() == b.groupdict(), (signature.id, example)


@pytest.mark.parametrize("engine", available_engines())
def test_a_second_scanner_compiles_no_regex_again(engine: str) -> None:
    # a process that explains log after log (a library user, the catalog tests) must not pay
    # the compilation of every signature again per log: the caches hold them all, with room
    kb = load_default_kb()
    regexes = {p.regex for s in kb.signatures for p in s.patterns}
    regexes |= {c.regex for s in kb.signatures for c in s.context}
    assert 2 * len(regexes) <= model.REGEX_CACHE, "raise model.REGEX_CACHE with the signatures"
    Scanner(kb, engine=engine)
    before = engines._re2_search.cache_info().misses, model.compiled.cache_info().misses
    Scanner(kb, engine=engine)
    assert (engines._re2_search.cache_info().misses, model.compiled.cache_info().misses) == before
