"""What a smoke run produced: per target (a GPU, or several for NCCL), one result per step."""

from __future__ import annotations

from dataclasses import dataclass, field

from envdoctor.model.units import whole
from envdoctor.smoke import child

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"

# Kinds of failure decided by the runner (or the child) rather than by an error text.
KIND_TIMEOUT = "timeout"
KIND_CRASH = "crash"
KIND_MISMATCH = "mismatch"
KIND_NOT_STARTED = "not-started"

# The steps of a per-GPU run, in order; NCCL runs in its own child once the GPUs passed.
# The child defines the steps (it runs without envdoctor installed); this module only splits them.
GPU_STEPS = tuple(step for step in child.STEPS if step not in child.MULTI_GPU_STEPS)
NCCL_STEPS = ("import", "context", *child.MULTI_GPU_STEPS)


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step as the child (or the runner, for a hang or a crash) reported it.

    ``error`` is the verbatim text ("RuntimeError: CUDA error: …"), ``kind`` says when the
    failure is not an exception (timeout, crash, mismatch), ``reason`` why a step was skipped.
    """

    step: str
    status: str
    seconds: float = 0.0
    detail: str = ""
    error: str = ""
    error_type: str = ""
    kind: str = ""
    reason: str = ""
    info: tuple[tuple[str, str], ...] = ()

    @property
    def first_line(self) -> str:
        lines = self.error.strip().splitlines()
        return lines[0] if lines else ""

    def get(self, key: str) -> str | None:
        for name, value in self.info:
            if name == key:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Target:
    """What one child tests: a GPU by its NVML index (or several, for NCCL).

    ``visible`` is the CUDA_VISIBLE_DEVICES the child gets (a GPU UUID pins it whatever the
    enumeration order); None inherits envdoctor's own. ``index`` is the CUDA device the child
    uses within what it sees.
    """

    label: str
    nvml_indices: tuple[int, ...] = ()
    visible: str | None = None
    index: int = 0
    devices: int = 1
    device: str = "cuda"


@dataclass(frozen=True, slots=True)
class ChildRun:
    """One child's run: its steps, how it ended and the tail of its stderr."""

    target: Target
    python: str
    steps: tuple[StepResult, ...]
    ending: str  # "completed", "timeout", "crashed", "not-started"
    seconds: float
    returncode: int | None = None
    stderr_tail: str = ""
    pid: int | None = None
    # (PID, /proc state letter) of the child or its descendants still there after SIGKILL
    survivors: tuple[tuple[int, str], ...] = ()

    @property
    def failed(self) -> tuple[StepResult, ...]:
        return tuple(s for s in self.steps if s.status == FAILED)

    @property
    def ok(self) -> bool:
        return not self.failed and self.ending == "completed"

    def step(self, name: str) -> StepResult | None:
        for result in self.steps:
            if result.step == name:
                return result
        return None

    def info(self, key: str) -> str | None:
        """The first value any step reported under ``key`` (e.g. "free", "capability")."""
        for result in self.steps:
            value = result.get(key)
            if value is not None:
                return value
        return None

    def byte_count(self, key: str) -> int | None:
        """``info(key)`` as a count of bytes: whole, at most 24 digits (the child runs in the
        target interpreter: "²" or 10**400 is no count), else None."""
        return whole(self.info(key), 24)


@dataclass(frozen=True, slots=True)
class NotRun:
    """A target smoke could not run at all, and why (no GPU, MIG instances …)."""

    label: str
    reason: str
    evidence: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SmokeRun:
    """Everything one ``envdoctor smoke`` did."""

    python: str
    runs: tuple[ChildRun, ...] = ()
    not_run: tuple[NotRun, ...] = ()
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
