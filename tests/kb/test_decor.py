"""Log decorations and wrapped lines: what launchers, loggers, terminals and trackers add.

The decorated lines come from the in-sample corpus (tests/data/tracebacks) or are the common
formats of the tools named; none comes from the held-out logs.
"""

from __future__ import annotations

import pytest

from envdoctor.kb import Scanner, decor, explain, load_default_kb, scan_bytes
from envdoctor.kb.engines import available_engines
from tests.kb.helpers import ids, run

WATCHDOG = (
    "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, "
    "NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds "
    "before timing out."
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog",
            "Watchdog",
        ),
        ("3: RuntimeError: CUDA error: invalid device ordinal", "RuntimeError:"),
        ("[1,2]<stdout>:node1:29880:30398 [0] init.cc:497 NCCL WARN", "node1:"),
        ("[default0]:RuntimeError: x", "RuntimeError: x"),
        (
            "(EngineCore_DP0 pid=3208) ERROR 04-27 12:56:07 [core.py:968] RuntimeError: W",
            "RuntimeError",
        ),
        ("Oct 04 13:19:39 llm sd-webui-forge-start[394]: NVIDIA GeForce", "NVIDIA GeForce"),
        ("Jul 01 22:55:07 gpu kernel: NVRM: GPU 0000:01:00.0: rm_init_adapter", "NVRM: GPU"),
        ("[   81.967314] NVRM: GPU0", "NVRM: GPU0"),
        ("17:22:50-122539 ERROR    Could not load torch", "Could not load torch"),
        ("2025-06-13 22:59:55,656 RuntimeError: CUDA error", "RuntimeError"),
        ("F0504 12:30:02.978602 2662 common.cpp:163] Check failed: error", "Check failed"),
        ("app-1  | Unable to load any of {libcudnn_ops.so.9.1.0", "Unable to load"),
        (">>RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE", "RuntimeError"),
        ("> > RuntimeError: x", "RuntimeError: x"),
        (" 14 jpype._jexception.CudaExceptionPyRaisable", "jpype."),
        ("[INFO|trainer.py:2128] 2025-04-24 20:44:49,943 >> Running training", "Running"),
        ("│ ❱ 88 │   main()", "❱ 88"),
        ("plain text stays", "plain text stays"),
    ],
)
def test_strip_removes_decorations_only(line: str, message: str) -> None:
    assert decor.strip(line).startswith(message)


def test_strip_is_bounded_on_hostile_input() -> None:
    assert decor.strip("[rank1]:" * 10_000 + "x").startswith("[rank1]:")
    assert decor.strip(" " * 100_000 + "x") == "x"
    assert decor.strip("") == ""


def test_continued_undoes_both_kinds_of_wrap() -> None:
    # a terminal cuts mid-word; a logger breaks at a space and indents the rest
    cut = decor.continued("… OpType=_REDU", ["CE_SCATTER_BASE, NumelIn=544997376"])
    assert cut[0] == "… OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376"
    indented = decor.continued(
        "The detected CUDA version (11.8) mismatches the version that was used to compile",
        ["      PyTorch (12.4). Please make sure to use the same CUDA versions."],
    )
    assert indented == (
        "The detected CUDA version (11.8) mismatches the version that was used to compile "
        "PyTorch (12.4). Please make sure to use the same CUDA versions.",
    )
    # a new record is not a continuation
    assert (
        decor.continued(
            "RuntimeError: CUDA error: something long enough to be cut",
            ["Traceback (most recent call last):"],
        )
        == ()
    )
    assert decor.continued("x" * 50, ["", "more"]) == ()


def test_a_terminal_wrapped_watchdog_line_is_still_explained() -> None:
    wrapped = "\n".join(WATCHDOG[i : i + 137] for i in range(0, len(WATCHDOG), 137))
    explanation = run(wrapped + "\n")
    cause = next(c for c in explanation.causes if c.id == "nccl.timeout")
    assert cause.hit.first_line == 1
    assert dict(cause.hit.occurrences[0].captures)["ms"] == "600061"
    # the same line unwrapped gives the same cause and captures
    whole = next(c for c in run(WATCHDOG).causes if c.id == "nccl.timeout")
    assert whole.hit.occurrences[0].captures == cause.hit.occurrences[0].captures


def test_a_message_a_logger_split_over_lines_keeps_both_versions() -> None:
    log = (
        "RuntimeError:\n"
        "      The detected CUDA version (11.8) mismatches the version that was used to compile\n"
        "      PyTorch (12.4). Please make sure to use the same CUDA versions.\n"
    )
    cause = run(log).top
    assert cause is not None and cause.id == "build.cuda-version-mismatch"
    assert cause.summary == (
        "nvcc (CUDA 11.8) cannot build an extension for this torch (built with CUDA 12.4)"
    )


def test_a_wrap_that_moves_the_key_literal_to_the_next_line_is_still_explained() -> None:
    """The kernel's assertion cut at 120 columns: the anchor ("] Assertion") is on the first
    line, the distinctive condition on the next. The scanner used to look for the condition
    on the first line only, so the line was never a candidate."""
    line = (
        "../aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [18,0,0],"
        " thread: [5,0,0] Assertion `srcIndex < srcSelectDimSize` failed."
    )
    wrapped = line[:120] + "\n" + line[120:] + "\n"
    assert "srcSelectDimSize" not in wrapped.splitlines()[0]
    for engine in available_engines():
        kb = load_default_kb()
        scanner = Scanner(kb, engine=engine)
        scanner.feed(wrapped.encode())
        explanation = explain(scanner.finish(), kb)
        assert explanation.top is not None, engine
        assert explanation.top.id == "cuda.assert-index-out-of-range", engine


def test_decorated_error_lines_match_like_plain_ones() -> None:
    plain = "RuntimeError: CUDA error: invalid device ordinal"
    for prefix in (
        "3: ",
        "[rank3]: ",
        "2025-06-13 22:59:55,656 ERROR ",
        "> ",
        ">> ",
        "app-1  | ",
    ):
        assert ids(run(prefix + plain)) == ["cuda.invalid-device-ordinal"]


def test_joining_never_invents_a_cause_across_records() -> None:
    """Two records that happen to end and start a message do not become one."""
    log = (
        "2024-05-03 12:00:01 INFO step 200 loss 1.8732 grad_norm 0.913 tokens/s 51234 lr 3e-4\n"
        "Traceback (most recent call last):\n"
        "The detected CUDA version is printed by nvcc --version\n"
    )
    assert run(log).causes == ()
    # a wrapped line at the very end of the log has nothing to join and stays as it is: named
    # by the watchdog's cut form alone, without the numbers a join would have read
    result = scan_bytes(WATCHDOG[:137].encode(), load_default_kb())
    assert [(h.signature_id, h.occurrences[0].captures) for h in result.hits] == [
        ("nccl.timeout", ())
    ]
