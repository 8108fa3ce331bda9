"""Guards for training code: catch the seeds' classic mistakes where they happen, with a message
that names the bad values — before CUDA turns them into "device-side assert triggered".

    from envdoctor.guard import check_targets, nonfinite_guard, load_checkpoint

    loss = F.cross_entropy(logits, check_targets(y, num_classes, logits=logits))
    with nonfinite_guard(model):          # names the first module whose output is NaN/Inf
        out = model(batch)
    state = load_checkpoint("ckpt.pt")    # storages mapped to devices that exist here

This module runs inside the user's training process, where torch is already imported; it
imports torch lazily inside each function so that ``import envdoctor`` never does.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envdoctor.model.units import whole

if TYPE_CHECKING:
    import torch  # noqa: TID251 (type names only; guard runs where torch is already imported)

MAX_REPORTED = 8


class TargetError(ValueError):
    """Targets that a classification loss would reject on the GPU with a device-side assert."""


class NonFiniteError(FloatingPointError):
    """A module's forward output contains NaN or Inf."""


class CheckpointRemapWarning(UserWarning):
    """``load_checkpoint`` moved storages saved on a device that does not exist here."""


# --- targets --------------------------------------------------------------------------------


def check_targets(
    target: torch.Tensor,
    num_classes: int,
    ignore_index: int | None = -100,
    *,
    logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Check class-index targets before ``cross_entropy``/``nll_loss``; return them unchanged.

    Every value must lie in ``[0, num_classes)`` or equal ``ignore_index``. With ``logits``,
    also check that the model outputs ``num_classes`` scores (dim 1, or dim 0 for one sample)
    and that the target's shape fits. Raises ``TargetError`` naming the bad values, where they
    are and the likely mistake (1-based labels, -1/255 "ignore" labels, too few outputs).
    """
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)

    if not isinstance(target, torch.Tensor):
        raise TypeError(f"target must be a tensor, not {type(target).__name__}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes <= 0:
        raise ValueError(f"num_classes must be a positive int, not {num_classes!r}")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise TypeError(
            f"target has dtype {target.dtype}; class-index targets must be an integer tensor "
            "(torch.long) — use target.long() if they are indices. (Class probabilities of the "
            "logits' shape are not class indices and need no range check.)"
        )
    if logits is not None:
        _check_logits(target, num_classes, logits)
    bad = (target < 0) | (target >= num_classes)
    if ignore_index is not None:
        bad &= target != ignore_index
    if not bool(bad.any()):
        return target
    raise TargetError(_describe_bad_targets(target, bad, num_classes, ignore_index))


def _check_logits(target: torch.Tensor, num_classes: int, logits: torch.Tensor) -> None:
    if logits.dim() == 0:
        raise TargetError("logits must have a class dimension")
    class_dim = 1 if logits.dim() >= 2 else 0
    outputs = int(logits.shape[class_dim])
    if outputs != num_classes:
        raise TargetError(
            f"the model outputs {outputs} classes (logits shape {tuple(logits.shape)}, dim "
            f"{class_dim}) but num_classes is {num_classes}: make the last layer output "
            f"{num_classes} scores, or fix num_classes"
        )
    expected = tuple(logits.shape[:1]) + tuple(logits.shape[2:]) if logits.dim() >= 2 else ()
    if tuple(target.shape) != expected:
        raise TargetError(
            f"target shape {tuple(target.shape)} does not fit logits shape "
            f"{tuple(logits.shape)}: class-index targets need shape {expected}"
        )


def _describe_bad_targets(
    target: torch.Tensor, bad: torch.Tensor, num_classes: int, ignore_index: int | None
) -> str:
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)

    cpu = target.detach().to("cpu")
    bad_cpu = bad.detach().to("cpu")
    values, counts = torch.unique(cpu[bad_cpu], return_counts=True)
    pairs = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda vc: -vc[1])
    shown = ", ".join(f"{v} (×{c})" for v, c in pairs[:MAX_REPORTED])
    more = f" and {len(pairs) - MAX_REPORTED} more values" if len(pairs) > MAX_REPORTED else ""
    where = [tuple(int(i) for i in idx) for idx in torch.nonzero(bad_cpu)[:5].tolist()]
    positions = ", ".join(str(w[0]) if len(w) == 1 else str(w) for w in where)
    allowed = f"[0, {num_classes})" + (f" or {ignore_index}" if ignore_index is not None else "")
    total = int(bad_cpu.sum())
    lines = [
        f"targets must be class indices in {allowed}; found {total} bad value"
        f"{'s' if total != 1 else ''}: {shown}{more}; first at index {positions}"
    ]
    valid = cpu if ignore_index is None else cpu[cpu != ignore_index]
    low, high = (int(valid.min()), int(valid.max())) if valid.numel() else (0, 0)
    bad_values = {int(v) for v in values.tolist()}
    if low == 1 and high == num_classes:
        lines.append("labels run 1..num_classes: they look 1-based — subtract 1")
    if -1 in bad_values:
        lines.append(
            "-1 labels: if they mean 'ignore', pass ignore_index=-1 to the loss (or remap them)"
        )
    if 255 in bad_values:
        lines.append(
            "255 labels (segmentation 'void'): pass ignore_index=255 to the loss, or remap them"
        )
    if high >= num_classes and not (low == 1 and high == num_classes) and high != 255:
        lines.append(
            f"labels go up to {high}: the model needs at least {high + 1} outputs, or the labels "
            "are not class indices (e.g. drawn from a vocabulary)"
        )
    return "; ".join(lines)


# --- NaN / Inf in the forward pass ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NonFinite:
    """Where the first non-finite value appeared."""

    module: str
    module_type: str
    output: str  # "output", "output[0]", "output['logits']"
    shape: tuple[int, ...]
    nan: int
    inf: int
    inputs_finite: bool | None  # None when inputs were not checked

    def message(self) -> str:
        found = ", ".join(
            p
            for p in (
                f"NaN ×{self.nan}" if self.nan else "",
                f"Inf ×{self.inf}" if self.inf else "",
            )
            if p
        )
        if self.inputs_finite is True:
            origin = "its inputs were finite, so this module produced them"
        elif self.inputs_finite is False:
            origin = (
                "its inputs already contained NaN/Inf: they come from the data or from an "
                "operation outside any module before it"
            )
        else:
            origin = "inputs not checked"
        return (
            f"module {self.module!r} ({self.module_type}) produced {found} in {self.output} of "
            f"shape {self.shape}; {origin}"
        )


@dataclass
class NonFiniteWatch:
    """What ``nonfinite_guard`` saw; ``first`` stays None while everything is finite."""

    check_inputs: bool = True
    raise_error: bool = True
    first: NonFinite | None = None
    calls: int = field(default=0)

    def hook(self, name: str, module: Any, inputs: Any, output: Any) -> None:
        self.calls += 1
        if self.first is not None:
            return
        for label, tensor in _tensors(output, "output"):
            nan, inf = _count_nonfinite(tensor)
            if nan or inf:
                inputs_finite = (
                    all(_count_nonfinite(t) == (0, 0) for _, t in _tensors(inputs, "input"))
                    if self.check_inputs
                    else None
                )
                self.first = NonFinite(
                    module=name,
                    module_type=type(module).__name__,
                    output=label,
                    shape=tuple(int(s) for s in tensor.shape),
                    nan=nan,
                    inf=inf,
                    inputs_finite=inputs_finite,
                )
                if self.raise_error:
                    raise NonFiniteError(self.first.message())
                return


@contextmanager
def nonfinite_guard(
    model: torch.nn.Module, *, check_inputs: bool = True, raise_error: bool = True
) -> Iterator[NonFiniteWatch]:
    """Watch every module's forward output; stop at the first one containing NaN or Inf.

    Forward hooks fire when a module *finishes*, children before parents, so the first module
    reported is the innermost one that produced the bad value. Each check costs one reduction
    per module output (far cheaper than ``torch.autograd.set_detect_anomaly``). With
    ``raise_error=False`` nothing is raised; look at ``watch.first`` afterwards.
    """
    watch = NonFiniteWatch(check_inputs=check_inputs, raise_error=raise_error)
    root = type(model).__name__
    handles = []
    for name, module in model.named_modules():
        label = name or root

        def hook(mod: Any, inputs: Any, output: Any, _label: str = label) -> None:
            watch.hook(_label, mod, inputs, output)

        handles.append(module.register_forward_hook(hook))
    try:
        yield watch
    finally:
        for handle in handles:
            handle.remove()


def _tensors(value: Any, label: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Floating tensors inside (nested) tuples, lists, dicts and dataclass-like outputs."""
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)

    if depth > 4:
        return
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield label, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{label}[{key!r}]", depth + 1)
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{label}[{index}]", depth + 1)


def _count_nonfinite(tensor: Any) -> tuple[int, int]:
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)

    data = tensor.detach()
    if bool(torch.isfinite(data).all()):
        return 0, 0
    return int(torch.isnan(data).sum()), int(torch.isinf(data).sum())


# --- checkpoints ----------------------------------------------------------------------------


def load_checkpoint(path: Any, *, device: str | None = None, **kwargs: Any) -> Any:
    """``torch.load`` that maps every storage to a device that exists on this machine.

    Storages saved on ``cuda:N`` load on ``cuda:N`` when it exists, on the current GPU when
    only fewer GPUs are visible, and on the CPU when CUDA is unavailable (the cases behind
    "Attempting to deserialize object on CUDA device 2 but torch.cuda.device_count() is 1").
    ``device`` forces one device for everything. A ``CheckpointRemapWarning`` lists what moved.
    Other keyword arguments go to ``torch.load`` (e.g. ``weights_only``).
    """
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)
    from torch import serialization  # noqa: TID251 (see above)

    default_restore: Any = serialization.default_restore_location  # untyped in torch

    if "map_location" in kwargs:
        raise TypeError("load_checkpoint chooses map_location itself; pass device= instead")
    moved: dict[str, str] = {}

    def restore(storage: Any, location: str) -> Any:
        target = device or existing_location(location)
        if target != location:
            moved[location] = target
        return default_restore(storage, target)

    result = torch.load(path, map_location=restore, **kwargs)
    if moved and device is None:
        summary = ", ".join(f"{src} → {dst}" for src, dst in sorted(moved.items()))
        warnings.warn(
            f"checkpoint storages were saved on devices that do not exist here: {summary}",
            CheckpointRemapWarning,
            stacklevel=2,
        )
    return result


def existing_location(location: str) -> str:
    """The device to restore a storage saved at ``location`` on (e.g. "cuda:3" → "cuda:0")."""
    import torch  # noqa: TID251 (guard runs inside the user's training process, where torch is already imported)

    if location.startswith("cuda"):
        if not torch.cuda.is_available():
            return "cpu"
        _, _, index = location.partition(":")
        number = whole(index, 9)  # the checkpoint's text: "cuda:²" must not raise here
        if number is not None and number < torch.cuda.device_count():
            return location
        return f"cuda:{torch.cuda.current_device()}"
    if location.startswith("mps"):
        mps = getattr(torch.backends, "mps", None)
        return location if mps is not None and mps.is_available() else "cpu"
    return location
