"""The order to unload the NVIDIA kernel modules in, computed from the real module list.

``rmmod`` refuses a module while another module uses it, so every module goes after all of its
users (``used_by`` in /proc/modules). The set is every loaded ``nvidia``/``nvidia_*`` module plus
anything that uses one of them, transitively (e.g. ``gdrdrv`` or ``nvidia_fs``, which must go
first). Among modules that are free to go at the same time, the tie-break is the order NVIDIA's
own driver container and the seeds use: ``nvidia_peermem``, ``nvidia_drm``, ``nvidia_modeset``,
``nvidia_uvm``, then ``nvidia``; modules from outside the driver go before all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from envdoctor.model.facts import KernelModule

CANONICAL_ORDER = (
    "nvidia_peermem",
    "nvidia_drm",
    "nvidia_modeset",
    "nvidia_uvm",
    "nvidia_vgpu_vfio",
    "nvidia",
)


def is_nvidia_module(name: str) -> bool:
    return name == "nvidia" or name.startswith("nvidia_")


def unload_order(modules: Sequence[KernelModule]) -> tuple[str, ...]:
    """Names to rmmod, each after every module that uses it; () when none is loaded."""
    by_name = {m.name: m for m in modules}
    targets = {name for name in by_name if is_nvidia_module(name)}
    pending = sorted(targets)
    while pending:
        module = by_name.get(pending.pop())
        for user in module.used_by if module else ():
            if user not in targets:
                targets.add(user)
                pending.append(user)
    order: list[str] = []
    remaining = set(targets)
    while remaining:
        ready = [n for n in remaining if not (_users(by_name, n) & remaining)]
        # A cycle cannot happen in a real kernel; if the data has one, still give every module.
        pick = min(ready or remaining, key=_rank)
        order.append(pick)
        remaining.discard(pick)
    return tuple(order)


def _users(by_name: dict[str, KernelModule], name: str) -> set[str]:
    module = by_name.get(name)
    return set(module.used_by) if module else set()


def _rank(name: str) -> tuple[int, str]:
    if name in CANONICAL_ORDER:
        return (1 + CANONICAL_ORDER.index(name), name)
    if is_nvidia_module(name):
        return (CANONICAL_ORDER.index("nvidia"), name)  # another nvidia_* module: before nvidia
    return (0, name)
