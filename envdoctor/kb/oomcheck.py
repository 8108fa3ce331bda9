"""``--with-host`` for an out-of-memory error: who holds the GPU's memory now.

The allocator's message says how much of the GPU was used outside the failing process
(``analyzers.held_elsewhere``). This check sets that against the processes NVML sees on the same
GPU now, the ones `envdoctor check` reports as ``gpu.memory-held``: a process the message named
that still holds memory, or any process holding much of the GPU, confirms that the memory was
taken by another process rather than by a model too big for the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

from envdoctor.kb.analyzers import (
    held_elsewhere,
    human,
    oom_numbers,
    other_processes,
    parse_size,
    taken_elsewhere,
)
from envdoctor.kb.model import HostCheck, Verdict
from envdoctor.model.facts import Facts, GpuFacts
from envdoctor.model.probed import Found, value_or, why_missing

NAME = "memory-holders"


def check_memory_holders(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """The live holders of the failing GPU's memory against the numbers in the log."""
    if not isinstance(facts.nvml, Found):
        return HostCheck(
            NAME, Verdict.NEUTRAL, f"GPU memory unknown now: {why_missing(facts.nvml)}"
        )
    fields = oom_numbers(captures)
    listed = other_processes(captures)
    wanted = fields.get("gpu")
    gpus = [g for g in facts.nvml.value.gpus if wanted is None or str(g.index) == wanted]
    elsewhere = held_elsewhere(fields, listed)
    total = parse_size(fields.get("total"))
    evidence: list[tuple[str, str]] = []
    if elsewhere is not None:
        evidence.append(("held outside the failing process (from the log)", human(elsewhere)))
    named = {pid for pid, _ in listed}
    holders: list[tuple[int, str, int | None]] = []
    for gpu in gpus:
        holders.extend(_holders(gpu, evidence))
    still = [h for h in holders if str(h[0]) in named]
    if still:
        return HostCheck(
            NAME,
            Verdict.CONFIRMS,
            "a process the error message names still holds GPU memory now: "
            + ", ".join(holder_label(h) for h in still),
            tuple(evidence),
        )
    taken = taken_elsewhere(elsewhere, total)
    if taken and holders:
        return HostCheck(
            NAME,
            Verdict.CONFIRMS,
            "the log shows the memory held outside the failing process, and these processes "
            "hold it now (envdoctor check: gpu.memory-held): "
            + ", ".join(map(holder_label, holders)),
            tuple(evidence),
        )
    if taken:
        return HostCheck(
            NAME,
            Verdict.NEUTRAL,
            "the log shows memory held outside the failing process, but no process holds the GPU "
            "now: the other process has exited (or runs in another container NVML cannot see)",
            tuple(evidence),
        )
    if holders:
        return HostCheck(
            NAME,
            Verdict.NEUTRAL,
            "processes hold GPU memory now: " + ", ".join(map(holder_label, holders)),
            tuple(evidence),
        )
    return HostCheck(NAME, Verdict.NEUTRAL, "no process holds GPU memory now", tuple(evidence))


def _holders(gpu: GpuFacts, evidence: list[tuple[str, str]]) -> list[tuple[int, str, int | None]]:
    memory = value_or(gpu.memory, None)
    if memory is None:
        evidence.append((f"GPU {gpu.index} memory", why_missing(gpu.memory)))
    else:
        evidence.append(
            (f"GPU {gpu.index} memory now", f"{human(memory.free)} free of {human(memory.total)}")
        )
    out: list[tuple[int, str, int | None]] = []
    for proc in value_or(gpu.processes, ()):
        holder = (proc.pid, value_or(proc.name, "?"), value_or(proc.used_memory, None))
        evidence.append((f"GPU {gpu.index} process", holder_label(holder)))
        out.append(holder)
    return out


def holder_label(holder: tuple[int, str, int | None]) -> str:
    """``PID 4242 python (70.00 GiB)``: a process holding GPU memory, as the notes name it."""
    pid, name, used = holder
    return f"PID {pid} {name}" + (f" ({human(used)})" if used is not None else "")
