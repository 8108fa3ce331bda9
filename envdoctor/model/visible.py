"""CUDA's reading of ``CUDA_VISIBLE_DEVICES``, and which of NVML's GPUs it lets CUDA use.

One reading for every command: the env.cuda-visible-devices check, smoke (which pins each
child to one GPU by UUID, and must never widen what the caller allowed: a Slurm job or a shared
node's user who set ``CUDA_VISIBLE_DEVICES=2`` means GPU 2 only), and explain --with-host.

CUDA reads the variable up to its first invalid entry (``visible_devices``); a UUID entry names
a GPU exactly, a number names one in CUDA's order. NVML lists GPUs in PCI bus order, which
is CUDA's order with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and in practice for identical GPUs; with
different models under CUDA's default order (fastest first, the rest unspecified) a number
cannot be mapped, and smoke says so rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.model.facts import Facts, GpuFacts
from envdoctor.model.probed import Found, value_or

HIDE_ALL = frozenset({"-1", "none", "nodevfiles"})


def visible_devices(
    value: str, count: int | None, uuids: tuple[str, ...], mig: bool
) -> tuple[list[str], str]:
    """CUDA's reading of CUDA_VISIBLE_DEVICES: the entries kept, and why parsing stopped.

    CUDA keeps entries up to the first invalid one and silently drops the rest.
    """
    kept: list[str] = []
    for raw in value.split(","):
        token = raw.strip()
        if not token:
            return kept, "an empty entry"
        digits = token.removeprefix("-")
        if digits.isascii() and digits.isdigit():  # CUDA reads ASCII digits only
            if token.startswith("-"):
                return kept, f"{_cut(token)} (negative: hides the GPUs)"
            if count is not None and (len(digits) > 9 or int(digits) >= count):
                return kept, f"{_cut(token)} (there {_gpus_here(count)})"
        elif token.startswith("GPU-"):
            if uuids and not any(u.startswith(token) for u in uuids):
                return kept, f"{_cut(token)} (no GPU has this UUID)"
        elif token.startswith("MIG-"):
            if uuids and not mig:
                return kept, f"{_cut(token)} (no GPU is in MIG mode)"
        else:
            return kept, f"{_cut(token)!r} (neither an index nor a GPU-/MIG- UUID)"
        if token in kept:
            return kept, f"{_cut(token)} (listed twice)"
        kept.append(token)
    return kept, ""


def _cut(text: str) -> str:
    """As ``terminal.cut`` (a value named, not repeated 5000 times): model imports only model."""
    return text if len(text) <= 40 else text[:40] + "…"


def _gpus_here(count: int) -> str:
    if count == 1:
        return "is only 1 GPU: index 0"
    if count == 0:
        return "are no GPUs"
    return f"are only {count} GPUs: indices 0–{count - 1}"


@dataclass(frozen=True, slots=True)
class Visible:
    """The GPUs CUDA may use (``gpus``), or why none can be chosen (``problem``)."""

    gpus: tuple[GpuFacts, ...]
    problem: str = ""
    value: str | None = None


def hides_all(value: str) -> bool:
    """Whether the value is one that hides every GPU on purpose ("", -1, none, NoDevFiles)."""
    return not value.strip() or value.strip().lower() in HIDE_ALL


def cuda_reading(
    value: str, gpus: tuple[GpuFacts, ...], count: int | None
) -> tuple[list[str], str]:
    """What CUDA makes of ``CUDA_VISIBLE_DEVICES=value`` on NVML's ``gpus`` (``count`` of them,
    None when unknown): the tokens it keeps, and why it stops reading ("" when it reads all)."""
    if hides_all(value):
        return [], f"{value!r} hides every GPU"
    uuids = tuple(g.uuid.value for g in gpus if isinstance(g.uuid, Found))
    mig = any(isinstance(g.mig_mode, Found) and g.mig_mode.value.current for g in gpus)
    return visible_devices(value, count, uuids, mig)


def visible_gpus(facts: Facts, gpus: tuple[GpuFacts, ...]) -> Visible:
    """The GPUs of ``gpus`` (NVML's, in its order) that CUDA_VISIBLE_DEVICES leaves to CUDA."""
    value = facts.env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return Visible(gpus)
    shown = f"CUDA_VISIBLE_DEVICES={_cut(value)!r}"
    if hides_all(value):
        return Visible((), f"{shown} hides every GPU", value)
    kept, stop = cuda_reading(value, gpus, len(gpus))
    chosen: list[GpuFacts] = []
    for token in kept:
        if token.startswith("MIG-"):
            return Visible((), f"{shown} names MIG instances: smoke does not test them", value)
        if token.startswith("GPU-"):
            matches = [g for g in gpus if value_or(g.uuid, "").startswith(token)]
            if len(matches) != 1:
                return Visible((), f"{shown}: {token} does not name exactly one GPU", value)
            chosen.append(matches[0])
            continue
        if not _numbers_are_pci_order(facts, gpus):
            return Visible(
                (),
                f"{shown} names GPUs by number, and with different GPU models CUDA's default "
                "order (fastest first) need not be NVML's: set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                "or name the GPUs by UUID (nvidia-smi -L)",
                value,
            )
        chosen.append(gpus[int(token)])
    if not chosen:
        return Visible((), f"{shown} leaves CUDA no GPU (CUDA stops at {stop})", value)
    return Visible(tuple(chosen), "", value)


def _numbers_are_pci_order(facts: Facts, gpus: tuple[GpuFacts, ...]) -> bool:
    if (facts.env.get("CUDA_DEVICE_ORDER") or "").strip() == "PCI_BUS_ID":
        return True
    return len({value_or(g.name, "?") for g in gpus}) <= 1
