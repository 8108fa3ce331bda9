"""Analyzers: turn a signature's captured values into specific notes (and a sharper summary).

A signature names one with ``analyzer:``. Each is a pure function
``(captures, knowledge base) -> Analysis``; it never raises on odd values, it just says less.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envdoctor.compat.versions import parse_cuda, parse_driver
from envdoctor.kb.model import KnowledgeBase
from envdoctor.model.units import scaled, whole


@dataclass(frozen=True, slots=True)
class Analysis:
    """What an analyzer read from the captures: notes, a summary that replaces the signature's
    when the numbers name the cause more precisely ("" keeps it), and the confidence the
    numbers give when they, not a pattern, decide (None keeps the patterns'; 0 drops the
    cause: the numbers show nothing wrong)."""

    notes: tuple[str, ...] = ()
    summary: str = ""
    confidence: float | None = None


Analyzer = Callable[[Mapping[str, str], KnowledgeBase], Analysis]

_UNITS = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": 1 << 10,
    "kb": 1000,
    "mib": 1 << 20,
    "mb": 1000**2,
    "gib": 1 << 30,
    "gb": 1000**3,
    "tib": 1 << 40,
}
# at most 15 digits before the point: a double holds them exactly, and no GPU has 1e15 of a unit
_SIZE = re.compile(r"^\s*([0-9]{1,15}(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")
GiB = 1 << 30


def parse_size(text: str | None) -> int | None:
    """``"2.00 GiB"`` → bytes; None when the text is not a size (nor a 400-digit "size")."""
    if not text:
        return None
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = _UNITS.get(m.group(2).lower())
    if unit is None:
        return None
    return int(float(m.group(1)) * unit)


def human(n: int) -> str:
    """Bytes for a person: 1.50 GiB, 210.00 MiB."""
    return scaled(n, 2) or f"{n} bytes"


# not after a digit or a dot: a size is read from its first digit only (from every digit of a
# long run of them, each search took a second on 8 KB of digits)
_SIZE_TEXT = r"(?<![\d.])([\d.]+ (?:[KMGT]iB|bytes))"
# the caching allocator's message, before and after PyTorch 2.1 (c10/cuda/CUDACachingAllocator.cpp)
_OOM_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(regex))
    for name, regex in (
        ("gpu", r"GPU (\d+)"),
        ("total", _SIZE_TEXT + r" total capacity"),
        ("total", r"total capaci?ty of " + _SIZE_TEXT),
        ("allocated", _SIZE_TEXT + r" already allocated"),
        ("allocated", r"allocated memory " + _SIZE_TEXT + r" is allocated by PyTorch"),
        ("free", _SIZE_TEXT + r" free;"),
        ("free", r"of which " + _SIZE_TEXT + r" is free"),
        ("reserved", _SIZE_TEXT + r" reserved in total by PyTorch"),
        # PyTorch < 1.4 printed the cache beyond what is allocated: reserved = allocated + cached
        ("cached", _SIZE_TEXT + r" cached\)"),
        ("unallocated", _SIZE_TEXT + r" is reserved by PyTorch but unallocated"),
        ("in_use_self", r"this process has " + _SIZE_TEXT + r" memory in use"),
    )
)
_OTHER_PROCESS = re.compile(r"Process (\d+) has " + _SIZE_TEXT + r" memory in use")
MAX_PROCESSES = 64


def oom_numbers(captures: Mapping[str, str]) -> dict[str, str]:
    """The allocator's numbers: named captures, else read from the message text (``detail``)."""
    numbers = {k: v for k, v in captures.items() if k != "detail" and v}
    detail = captures.get("detail", "")
    for name, regex in _OOM_FIELDS:
        if name not in numbers:
            m = regex.search(detail)
            if m is not None:
                numbers[name] = m.group(1)
    allocated = parse_size(numbers.get("allocated"))
    cached = parse_size(numbers.get("cached"))
    if "reserved" not in numbers and allocated is not None and cached is not None:
        numbers["reserved"] = human(allocated + cached)
    return numbers


def other_processes(captures: Mapping[str, str]) -> list[tuple[str, int]]:
    """(PID, bytes) of each *other* process the message lists ("Process 1234 has 20 GiB memory
    in use"; the failing process itself is "this process")."""
    out: list[tuple[str, int]] = []
    for m in _OTHER_PROCESS.finditer(captures.get("detail", "")):
        size = parse_size(m.group(2))
        if size is not None:
            out.append((m.group(1), size))
        if len(out) >= MAX_PROCESSES:
            break
    return out


def analyze_oom(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """Read the caching allocator's numbers and say which kind of out-of-memory this is.

    Most of the GPU used outside this process (total - free - what this process holds, or the
    other processes the message lists) means another process holds the memory: the model is
    not too big, the GPU is shared. That conclusion replaces the summary.
    """
    del kb
    fields = oom_numbers(captures)
    requested = parse_size(fields.get("requested"))
    total = parse_size(fields.get("total"))
    free = parse_size(fields.get("free"))
    allocated = parse_size(fields.get("allocated"))
    reserved = parse_size(fields.get("reserved"))
    unallocated = parse_size(fields.get("unallocated"))
    in_use = parse_size(fields.get("in_use_self") or fields.get("in_use"))
    gpu = fields.get("gpu")
    notes: list[str] = []
    where = f"GPU {gpu}" if gpu is not None else "the GPU"
    numbers = [
        f"asked for {human(requested)}" if requested is not None else "",
        f"{human(free)} free of {human(total)}" if free is not None and total is not None else "",
        f"PyTorch holds {human(allocated)} allocated" if allocated is not None else "",
        f"{human(reserved)} reserved" if reserved is not None else "",
        f"this process uses {human(in_use)}" if in_use is not None else "",
    ]
    summary = "; ".join(n for n in numbers if n)
    if summary:
        notes.append(f"Allocator numbers on {where}: {summary}.")
    if requested is not None and total is not None and requested > total:
        notes.append(
            f"One allocation of {human(requested)} is larger than the whole GPU "
            f"({human(total)}): a tensor shape is far too big (batch × sequence × features), "
            "not a fragmentation or sharing problem."
        )
        return Analysis(tuple(notes))
    if unallocated is None and reserved is not None and allocated is not None:
        unallocated = max(0, reserved - allocated)
    if (
        unallocated is not None
        and requested is not None
        and unallocated >= max(requested, GiB // 2)
    ):
        notes.append(
            f"{human(unallocated)} is reserved by PyTorch but unallocated (fragmentation): set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before starting the process."
        )
    listed = other_processes(captures)
    others = held_elsewhere(fields, listed)
    if others is not None and total is not None and taken_elsewhere(others, total):
        who = (
            " (" + ", ".join(f"PID {pid}: {human(size)}" for pid, size in listed) + ")"
            if listed
            else ""
        )
        notes.append(
            f"About {human(others)} of {where}'s {human(total)} is used outside this "
            f"process{who}: another process holds GPU memory, so this is not a model too big "
            "for the GPU. `nvidia-smi` names it; `envdoctor explain --with-host` (or "
            "`envdoctor check`, finding gpu.memory-held) lists who holds it now."
        )
        return Analysis(
            tuple(notes),
            f"Out of memory on {where}: about {human(others)} of {human(total)} is held by "
            "another process",
        )
    if total is not None and free is not None and free < max(total // 20, 256 << 20):
        ours = in_use if in_use is not None else reserved
        if ours is not None:
            notes.append(
                "This process itself filled the GPU: lower the batch size or sequence "
                "length, use mixed precision or activation checkpointing."
            )
    return Analysis(tuple(notes))


def held_elsewhere(fields: Mapping[str, str], listed: list[tuple[str, int]]) -> int | None:
    """Bytes of the GPU that processes other than the failing one held when it failed: the
    ones the message lists (``other_processes``), else total - free - what this process held
    (its own use, or what PyTorch reserved), from ``oom_numbers``. None when the message lacks
    the numbers."""
    if listed:
        return sum(size for _, size in listed)
    total = parse_size(fields.get("total"))
    free = parse_size(fields.get("free"))
    ours = parse_size(fields.get("in_use_self") or fields.get("in_use"))
    if ours is None:
        ours = parse_size(fields.get("reserved"))
    if total is None or free is None or ours is None:
        return None
    return max(0, total - free - ours)


def significant(total: int) -> int:
    """Memory held elsewhere that is more than CUDA contexts and library workspaces (which
    the allocator does not count): a quarter of the GPU, and at least 1 GiB."""
    return max(total // 4, GiB)


def taken_elsewhere(elsewhere: int | None, total: int | None) -> bool:
    """Whether the memory held outside the failing process is what made it fail."""
    return elsewhere is not None and total is not None and elsewhere > significant(total)


def analyze_xid(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """Look the Xid code up in NVIDIA's catalog (``envdoctor/catalogs/xid.yaml``, the one
    ``envdoctor check`` reads): what it means, what to do."""
    from envdoctor.catalogs.xid import xid_catalog  # read only when a log has an Xid

    raw = captures.get("xid")
    code = whole(raw, 9)
    if code is None:
        return Analysis()
    entry = xid_catalog().get(code)
    if entry is None:
        return Analysis(
            (
                f"Xid {raw} is not in envdoctor's catalog; look it up in NVIDIA's Xid catalog "
                "(docs.nvidia.com/deploy/xid-errors).",
            )
        )
    return Analysis(
        (f"Xid {entry.code} ({entry.name}): {entry.meaning}", f"Action: {entry.action}")
    )


def analyze_driver_too_old(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """An error message about the driver (torch prints the driver's CUDA version times 1000:
    11040 = CUDA 11.4) stands; torch's environment report alone is judged by its numbers."""
    del kb
    raw = captures.get("found")
    version = whole(raw, 9)
    if version is not None:
        cuda = f"{version // 1000}.{version % 1000 // 10}"
        return Analysis(
            (
                f"The driver supports CUDA up to {cuda} (found version {raw}); install a torch "
                f"built for CUDA {cuda} or older, or upgrade the driver.",
            )
        )
    if raw is not None or captures.get("error") is not None:  # the error message stands
        return Analysis()
    return _environment_report(captures)


COLLECT_ENV_CONFIDENCE = 0.8  # the report shows the cause, but no error message confirms it


def _environment_report(captures: Mapping[str, str]) -> Analysis:
    """``python -m torch.utils.collect_env``: CUDA unavailable, torch built with CUDA X.Y, and
    a driver (``Nvidia driver version``) older than the one CUDA X.Y needs → the driver is too
    old. Anything less (CUDA available, a value missing, a driver that fits) drops the cause.

    The tables (and the YAML reader and packaging behind them) load only here: explaining a log
    that holds no such report never pays for them."""
    from envdoctor.compat.judge import DriverFit, driver_cuda_of, judge_driver
    from envdoctor.compat.loader import load_tables
    from envdoctor.compat.versions import cuda_text, parse_cuda

    built = parse_cuda(captures.get("built", ""))
    driver = captures.get("driver", "")
    if captures.get("available") not in ("No", "False") or built is None or not driver:
        return Analysis(confidence=0.0)
    tables = load_tables()
    verdict = judge_driver(
        tables, driver=driver, driver_cuda=driver_cuda_of(tables, driver, None), cuda=built
    )
    if verdict.fit is not DriverFit.TOO_OLD:
        return Analysis(confidence=0.0)
    return Analysis(
        (
            f"torch's environment report: built with CUDA {cuda_text(built)}, driver {driver} "
            f"(CUDA {verdict.driver_cuda_text()}), CUDA not available. CUDA {cuda_text(built)} "
            f"needs a driver {verdict.needed_text()}.",
        ),
        f"The driver {driver} is too old for torch's CUDA {cuda_text(built)}: CUDA is not "
        "available",
        COLLECT_ENV_CONFIDENCE,
    )


def _driver_release(text: str | None) -> tuple[int, ...] | None:
    """``"384.111.0"`` → (384, 111): trailing zero fields dropped, as TensorFlow pads them."""
    fields = list(parse_driver(text or "") or ())
    while len(fields) > 1 and fields[-1] == 0:
        fields.pop()
    return tuple(fields) or None


def analyze_module_against_library(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """TensorFlow's CUDA diagnostics print libcuda's version, then the kernel module's: two
    lines that say nothing wrong when they agree, and the mismatch when they do not."""
    del kb
    library, module = captures.get("libcuda"), captures.get("kernel_module")
    lib_release, module_release = _driver_release(library), _driver_release(module)
    if lib_release is None or module_release is None or lib_release == module_release:
        return Analysis(confidence=0.0)
    return Analysis(
        (f"libcuda (the user-space driver) is {library}, the loaded kernel module {module}.",)
    )


def analyze_build_against_driver(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """A program built with CUDA X.Y on a driver for CUDA X.Z (Z < Y) runs, by CUDA's minor
    version compatibility, and the warning says nothing wrong; a driver of an older major
    release cannot run it at all."""
    del kb
    built, driver = parse_cuda(captures.get("built", "")), parse_cuda(captures.get("driver", ""))
    if built is None or driver is None or built[0] <= driver[0]:
        return Analysis(confidence=0.0)
    return Analysis(
        (
            f"Built with CUDA {captures['built']}; the driver supports CUDA {captures['driver']}, "
            "an older major release: upgrade the driver, or install the build for that CUDA.",
        )
    )


def analyze_gres_count(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """slurmctld's drain reason compares the GPUs slurmd found with slurm.conf's count; its
    "Count changed" notice compares them with what the node reported before, in either
    direction: only a count that fell is a GPU lost."""
    del kb
    before, found = captures.get("before"), captures.get("found", "")
    if before is None:
        return Analysis()
    # isdecimal, not isdigit: the re engine's \d takes "²", which int() refuses
    if not (before.isdecimal() and found.isdecimal()) or int(found) >= int(before):
        return Analysis(confidence=0.0)
    node = captures.get("node")
    where = f" on {node}" if node else ""
    return Analysis(summary=f"slurmd now counts {found} GPUs{where}, where it counted {before}")


def analyze_runtime_against_gpu(captures: Mapping[str, str], kb: KnowledgeBase) -> Analysis:
    """A device notice names the GPU's compute capability and the CUDA runtime the program
    runs with; a runtime older than the first CUDA release that knows the GPU cannot have
    code built for it. Anything else (the runtime knows it, a capability the tables lack) drops
    the hit: the notice is then the start-up line of a working GPU.

    The tables load only here, as for torch's environment report."""
    del kb
    from envdoctor.compat.loader import load_tables
    from envdoctor.compat.versions import cuda_text, parse_arch, parse_cc

    text = captures.get("cc", "")
    # Paddle 1.x prints "CUDA Capability: 70", the digits of an sm_ name
    target = parse_arch(f"sm_{text}")
    cc = parse_cc(text) or (target.cc if target is not None else None)
    runtime = parse_cuda(captures.get("runtime", ""))
    arch = load_tables().architecture(cc) if cc is not None else None
    if cc is None or runtime is None or arch is None or not arch.first_cuda:
        return Analysis(confidence=0.0)
    first = parse_cuda(arch.first_cuda)
    if first is None or runtime >= first:
        return Analysis(confidence=0.0)
    shown = f"{cc[0]}.{cc[1]}"
    return Analysis(
        (
            f"Compute capability {shown} ({arch.arch}) first appears in CUDA {cuda_text(first)}; "
            f"the runtime here is CUDA {cuda_text(runtime)}.",
        ),
        f"The CUDA {cuda_text(runtime)} runtime this program runs with predates this GPU "
        f"(compute capability {shown} needs CUDA {cuda_text(first)} or newer): install its build "
        "for a newer CUDA",
    )


ANALYZERS: dict[str, Analyzer] = {
    "runtime-against-gpu": analyze_runtime_against_gpu,
    "gres-count": analyze_gres_count,
    "build-against-driver": analyze_build_against_driver,
    "module-against-library": analyze_module_against_library,
    "oom": analyze_oom,
    "xid": analyze_xid,
    "driver-too-old": analyze_driver_too_old,
}
