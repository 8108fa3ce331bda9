"""The smoke children's environment: the caller's, minus what would falsify a smoke result.

A smoke child inherits envdoctor's environment, so that it loads the very libraries the user's
jobs load. A few variables change what a step *measures* rather than what it loads; those are
taken out of the children's environment, as data below, and every removal is reported with
its reason (``notes``), never done silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from envdoctor.model.facts import Facts


@dataclass(frozen=True, slots=True)
class Removed:
    """A variable the children do not get, and why."""

    name: str
    why: str


REMOVED: tuple[Removed, ...] = (
    Removed(
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
        "it forces TF32 for float32 GEMMs whatever torch.backends.cuda.matmul.allow_tf32 says "
        "(PyTorch's CUDA environment variables), and a healthy GPU's TF32 GEMM misses the "
        "float32 tolerance",
    ),
)


@dataclass(frozen=True, slots=True)
class ChildEnvironment:
    """Adjustments to the inherited environment (None unsets) and what was changed, for the
    report."""

    env: tuple[tuple[str, str | None], ...]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.env)


def child_environment(facts: Facts, extra: Mapping[str, str | None]) -> ChildEnvironment:
    """``extra`` (the caller's adjustments) with every ``REMOVED`` variable unset; a note for
    each one that was set, in the inherited environment (``facts.env``) or in ``extra``."""
    env: dict[str, str | None] = dict(extra)
    notes: list[str] = []
    for variable in REMOVED:
        value = extra.get(variable.name) or facts.env.get(variable.name)
        env[variable.name] = None
        if value is not None:
            notes.append(
                f"{variable.name}={value} was removed from the smoke children's environment: "
                f"{variable.why}"
            )
    return ChildEnvironment(tuple(env.items()), tuple(notes))
