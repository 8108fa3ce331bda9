"""Which of NVML's GPUs the caller's ``CUDA_VISIBLE_DEVICES`` lets CUDA use.

Smoke pins each child to one GPU by UUID. That must never widen what the caller allowed: a
Slurm job or a shared node's user who set ``CUDA_VISIBLE_DEVICES=2`` means GPU 2 only. CUDA
reads the variable up to its first invalid entry (``rules.env.visible_devices``); a UUID entry
names a GPU exactly, a number names one in CUDA's order. NVML lists GPUs in PCI bus order, which
is CUDA's order with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and in practice for identical GPUs; with
different models under CUDA's default order (fastest first, the rest unspecified) a number
cannot be mapped, and smoke says so rather than guess.
"""

from __future__ import annotations

from envdoctor.model.facts import Facts, GpuFacts
from envdoctor.model.probed import Found, value_or
from envdoctor.model.record import record
from envdoctor.rules.env import HIDE_ALL, visible_devices


@record
class Visible:
    """The GPUs CUDA may use (``gpus``), or why none can be chosen (``problem``)."""

    gpus: tuple[GpuFacts, ...]
    problem: str = ""
    value: str | None = None

    @property
    def restricted(self) -> bool:
        return self.value is not None


def visible_gpus(facts: Facts, gpus: tuple[GpuFacts, ...]) -> Visible:
    """The GPUs of ``gpus`` (NVML's, in its order) that CUDA_VISIBLE_DEVICES leaves to CUDA."""
    value = facts.env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return Visible(gpus)
    shown = f"CUDA_VISIBLE_DEVICES={value!r}"
    if not value.strip() or value.strip().lower() in HIDE_ALL:
        return Visible((), f"{shown} hides every GPU", value)
    uuids = tuple(g.uuid.value for g in gpus if isinstance(g.uuid, Found))
    mig = any(isinstance(g.mig_mode, Found) and g.mig_mode.value.current for g in gpus)
    kept, stop = visible_devices(value, len(gpus), uuids, mig)
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
