"""Analyzers (allocator numbers, the Xid catalog) and the live checks of --with-host."""

from __future__ import annotations

import dataclasses

from envdoctor.kb import assess, load_default_kb
from envdoctor.kb.analyzers import analyze_oom, parse_size
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


def test_oom_notes_tell_the_kinds_apart() -> None:
    kb = load_default_kb()
    huge = analyze_oom({"requested": "55.57 GiB", "total": "12.00 GiB", "free": "9.02 GiB"}, kb)
    assert any("larger than the whole GPU" in n for n in huge)
    fragmented = analyze_oom(
        {
            "requested": "3.00 GiB",
            "total": "23.65 GiB",
            "free": "1.66 GiB",
            "in_use_self": "20.81 GiB",
            "allocated": "12.09 GiB",
            "unallocated": "4.84 GiB",
        },
        kb,
    )
    assert any("expandable_segments" in n for n in fragmented)
    others = analyze_oom(
        {
            "requested": "20.00 MiB",
            "total": "80.00 GiB",
            "free": "10.00 MiB",
            "reserved": "2.00 GiB",
            "allocated": "1.90 GiB",
        },
        kb,
    )
    assert any("another process" in n for n in others)
    ours = analyze_oom(
        {
            "requested": "20.00 MiB",
            "gpu": "0",
            "total": "5.80 GiB",
            "allocated": "4.36 GiB",
            "free": "6.69 MiB",
            "reserved": "5.70 GiB",
        },
        kb,
    )
    assert any("This process itself filled the GPU" in n for n in ours)


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
    broken = dataclasses.replace(factories.facts(), nvml=Found(None))  # type: ignore[arg-type]
    assessed = assess(explanation, broken)
    notes = [c.note for cause in assessed.causes for c in cause.host_checks]
    assert any("check crashed" in n for n in notes)
