"""Analyzers (allocator numbers, the Xid catalog) and the live checks of --with-host."""

from __future__ import annotations

from dataclasses import replace

from envdoctor.kb import assess, load_default_kb
from envdoctor.kb.analyzers import analyze_oom, analyze_runtime_against_gpu, parse_size
from envdoctor.kb.hostcheck import (
    check_container,
    check_driver_library_match,
    check_gpu_count,
    check_gpu_memory,
    check_uvm,
)
from envdoctor.kb.model import Verdict
from envdoctor.model.facts import GpuProcess, MemoryInfo, NvmlErrorKind
from envdoctor.model.probed import Found, ProbeFailed
from tests import factories
from tests.kb.helpers import run

GiB = 1 << 30


def test_parse_size() -> None:
    assert parse_size("2.00 GiB") == 2 * GiB
    assert parse_size("0 bytes") == 0
    assert parse_size("576.00 KiB") == 576 * 1024
    assert parse_size("a lot") is None


# real allocator messages (tests/data/tracebacks/cuda.out-of-memory/*, docs/explain.md)
OOM_TOO_BIG = (
    "RuntimeError: CUDA out of memory. Tried to allocate 5.74 GiB (GPU 0; 5.50 GiB total "
    "capacity; 588.00 MiB already allocated; 4.13 GiB free; 588.00 MiB reserved in total by PyTorch)"
)
OOM_FRAGMENTED = (
    "CUDA out of memory. Tried to allocate 10.84 GiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB "
    "already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)"
)
OOM_OTHER_PROCESS = (
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total capacity; 2.81 GiB "
    "already allocated; 25.38 MiB free; 3.06 GiB reserved in total by PyTorch)"
)
OOM_OURS = (
    "RuntimeError:CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total "
    "capacity; 4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)"
)
OOM_CACHED = (
    "RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total "
    "capacity; 1.62 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)"
)
OOM_LISTED = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.50 GiB is free. Process 1234 has 77.58 GiB memory in use. "
    "Of the allocated memory 75.12 GiB is allocated by PyTorch, and 1.20 GiB is reserved by "
    "PyTorch but unallocated."
)
OOM_NEW_OURS = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 226.00 MiB. GPU 0 has a total "
    "capacity of 15.70 GiB of which 210.38 MiB is free. Including non-PyTorch memory, this process "
    "has 15.48 GiB memory in use. Of the allocated memory 14.81 GiB is allocated by PyTorch, and "
    "336.73 MiB is reserved by PyTorch but unallocated."
)


def _oom(text: str) -> tuple[str, tuple[str, ...]]:
    cause = next(c for c in run(text).causes if c.id == "cuda.out-of-memory")
    return cause.summary, cause.notes


def test_oom_notes_tell_the_kinds_apart() -> None:
    assert any("larger than the whole GPU" in n for n in _oom(OOM_TOO_BIG)[1])
    assert any("expandable_segments" in n for n in _oom(OOM_FRAGMENTED)[1])
    assert any("This process itself filled the GPU" in n for n in _oom(OOM_OURS)[1])
    assert any("This process itself filled the GPU" in n for n in _oom(OOM_NEW_OURS)[1])


def test_oom_held_by_another_process_becomes_the_summary() -> None:
    summary, notes = _oom(OOM_OTHER_PROCESS)
    assert "about 4.85 GiB of 7.93 GiB is held by another process" in summary
    assert any("not a model too big" in n and "gpu.memory-held" in n for n in notes)
    # the message lists the other processes (PyTorch >= 2.1): their sum, with their PIDs
    summary, notes = _oom(OOM_LISTED)
    assert "77.58 GiB of 79.10 GiB is held by another process" in summary
    assert any("PID 1234: 77.58 GiB" in n for n in notes)
    # PyTorch < 1.4 printed the cache beyond the allocated memory ("cached")
    summary, _ = _oom(OOM_CACHED)
    assert "2.30 GiB of 3.95 GiB is held by another process" in summary
    # a process that filled the GPU itself keeps the plain summary
    assert _oom(OOM_OURS)[0] == "The GPU ran out of memory"


def test_oom_numbers_without_the_first_line_are_still_analysed() -> None:
    """A log cut in the middle of the message, or the message split over lines."""
    fragment = OOM_OTHER_PROCESS[OOM_OTHER_PROCESS.index("(GPU") :]
    summary, _ = _oom('  File "train.py", line 12, in <module>\n' + fragment + "\n")
    assert "held by another process" in summary
    new_fragment = OOM_LISTED[OOM_LISTED.index("GPU 0 has") :]
    assert "held by another process" in _oom(new_fragment)[0]
    wrapped = "\n".join(OOM_OTHER_PROCESS[i : i + 80] for i in range(0, len(OOM_OTHER_PROCESS), 80))
    explanation = run(wrapped + "\n")
    cause = next(c for c in explanation.causes if c.id == "cuda.out-of-memory")
    assert cause.hit.first_line == 1
    assert cause.hit.count == 1
    assert "held by another process" in cause.summary


def test_analyze_oom_says_less_on_odd_values() -> None:
    kb = load_default_kb()
    assert analyze_oom({"detail": "GPU x; lots total capacity"}, kb).notes == ()
    assert analyze_oom({"requested": "a lot", "detail": "Process 1 has -3 GiB"}, kb).summary == ""


def test_xid_catalog_in_notes() -> None:
    explanation = run(
        "[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    )
    xid = next(c for c in explanation.causes if c.id == "kernel.xid")
    assert any("fallen off the bus" in n for n in xid.notes)
    unknown = run("NVRM: Xid (PCI:0000:3b:00): 999, something new")
    assert any("not in envdoctor's catalog" in n for n in unknown.causes[0].notes)


def test_driver_too_old_note_converts_the_version() -> None:
    explanation = run(
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040)."
    )
    assert any("CUDA up to 11.4" in n for n in explanation.causes[0].notes)


def test_a_runtime_older_than_the_gpu_is_kept_and_any_other_dropped() -> None:
    kb = load_default_kb()
    older = analyze_runtime_against_gpu({"cc": "8.6", "runtime": "10.2"}, kb)
    assert older.confidence is None and older.summary and "needs CUDA 11.1" in older.summary
    # Paddle 1.x's "70" is 7.0, which CUDA 9.0 knows; a capability the tables lack says nothing
    assert analyze_runtime_against_gpu({"cc": "70", "runtime": "9.0"}, kb).confidence == 0.0
    assert analyze_runtime_against_gpu({"cc": "8.6", "runtime": "11.2"}, kb).confidence == 0.0
    assert analyze_runtime_against_gpu({"cc": "4.2", "runtime": "9.0"}, kb).confidence == 0.0


def _facts_with_memory(free: int, processes: tuple[GpuProcess, ...] = ()) -> object:
    gpu = factories.gpu(
        0,
        memory=Found(MemoryInfo(total=80 * GiB, used=80 * GiB - free, free=free)),
        processes=Found(processes),
    )
    return factories.facts(nvml=factories.nvml(gpus=(gpu,)))


def test_gpu_memory_confirms_when_full_and_names_holders() -> None:
    holder = GpuProcess(pid=4242, name=Found("python train.py"), used_memory=Found(79 * GiB))
    facts = _facts_with_memory(200 << 20, (holder,))
    check = check_gpu_memory({}, facts)  # type: ignore[arg-type]
    assert check.verdict is Verdict.CONFIRMS
    assert "PID 4242" in check.note


def test_gpu_memory_is_neutral_when_free() -> None:
    check = check_gpu_memory({}, _facts_with_memory(79 * GiB))  # type: ignore[arg-type]
    assert check.verdict is Verdict.NEUTRAL


def test_driver_library_match_both_ways() -> None:
    assert check_driver_library_match({}, factories.facts()).verdict is Verdict.RULES_OUT
    broken = factories.facts(nvml=ProbeFailed(NvmlErrorKind.LIB_RM_VERSION_MISMATCH, "mismatch"))
    assert check_driver_library_match({}, broken).verdict is Verdict.CONFIRMS


def test_gpu_count_against_the_checkpoint_device() -> None:
    facts = factories.facts()
    assert check_gpu_count({"device": "2"}, facts).verdict is Verdict.CONFIRMS
    assert check_gpu_count({"device": "0"}, facts).verdict is Verdict.NEUTRAL
    hidden = factories.facts(env=factories.env({"CUDA_VISIBLE_DEVICES": ""}))
    assert check_gpu_count({}, hidden).verdict is Verdict.CONFIRMS


def test_uvm_and_container_checks() -> None:
    no_uvm = factories.facts(kernel=factories.kernel(modules=factories.modules("nvidia")))
    assert check_uvm({}, no_uvm).verdict is Verdict.CONFIRMS
    docker = factories.facts(host=factories.host(containers=("docker",)))
    assert check_container({}, docker).verdict is Verdict.CONFIRMS


def test_assess_moves_confidence_and_attaches_evidence() -> None:
    explanation = run(
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    holder = GpuProcess(pid=4242, name=Found("python other.py"), used_memory=Found(79 * GiB))
    assessed = assess(explanation, _facts_with_memory(100 << 20, (holder,)))  # type: ignore[arg-type]
    top = assessed.top
    assert top is not None and top.id == "cublas.alloc-failed"
    assert top.confidence > explanation.causes[0].confidence
    assert top.host_checks[0].verdict is Verdict.CONFIRMS


def test_a_crashing_check_is_contained() -> None:
    explanation = run(
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
    )
    broken = replace(factories.facts(), nvml=Found("garbage"))  # type: ignore[arg-type]  # a wrong type on purpose: the check must survive it
    assessed = assess(explanation, broken)
    notes = [c.note for cause in assessed.causes for c in cause.host_checks]
    assert any("check crashed" in n for n in notes)


def _oom_assessed(text: str, facts: object) -> tuple[float, float, str]:
    explanation = run(text)
    before = next(c for c in explanation.causes if c.id == "cuda.out-of-memory")
    after = next(
        c
        for c in assess(explanation, facts).causes  # type: ignore[arg-type]
        if c.id == "cuda.out-of-memory"
    )
    (check,) = after.host_checks
    assert check.name == "memory-holders"
    return before.confidence, after.confidence, check.note


def test_with_host_names_who_holds_the_memory_now() -> None:
    holder = GpuProcess(pid=4242, name=Found("python other.py"), used_memory=Found(70 * GiB))
    facts = _facts_with_memory(9 * GiB, (holder,))
    before, after, note = _oom_assessed(OOM_OTHER_PROCESS, facts)
    assert after > before
    assert "PID 4242 python other.py (70.00 GiB)" in note and "gpu.memory-held" in note
    # the PID the message names is still there
    named = GpuProcess(pid=1234, name=Found("python serve.py"), used_memory=Found(77 * GiB))
    _, _, note = _oom_assessed(OOM_LISTED, _facts_with_memory(2 * GiB, (named,)))
    assert note.startswith("a process the error message names still holds")


def test_with_host_when_the_other_process_is_gone_or_never_was() -> None:
    before, after, note = _oom_assessed(OOM_OTHER_PROCESS, _facts_with_memory(79 * GiB))
    assert after == before and "has exited" in note
    _, _, note = _oom_assessed(OOM_OURS, _facts_with_memory(79 * GiB))
    assert note == "no process holds GPU memory now"
    broken = factories.facts(nvml=ProbeFailed(NvmlErrorKind.DRIVER_NOT_LOADED, "no driver"))
    _, _, note = _oom_assessed(OOM_OURS, broken)
    assert note.startswith("GPU memory unknown now")
