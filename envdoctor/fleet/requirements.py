"""``--require`` gates: one small expression per gate, such as ``gpus>=8`` or ``model~=H100``.

Grammar: ``KEY OP VALUE`` with no quoting needed.

- ``gpus`` (a count: the GPUs NVML reports; a machine without a driver has 0);
- ``driver``, ``cuda`` (versions: the driver version and the CUDA version it supports);
- ``memory_free``, ``memory_total`` (sizes: ``70GiB``, ``512MiB``, ``80GB``, bytes when bare);
- ``compute_capability`` (a version, e.g. ``8.0``);
- ``model`` (text: the GPU name, e.g. ``NVIDIA H100 80GB HBM3``).

Operators: ``>= <= > < == !=`` and ``~=`` (text only: contains, ignoring case). Versions compare
on as many parts as the requirement gives, so ``driver>=550`` and ``driver==580`` speak of the
branch and ``cuda>=12.4`` of major.minor. Per-GPU keys (sizes, ``compute_capability``, ``model``)
must hold for every GPU, and fail on a machine without GPUs. A value that could not be read makes
the gate *unknown* (exit 2), never healthy.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts, GpuFacts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import passed
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing
from envdoctor.model.views import driver_view
from envdoctor.rules.base import Evaluation, Rule, RuleContext

Version = tuple[int, ...]
Target = Union[int, Version, str]  # noqa: UP007 (a runtime alias needs Union on 3.10)

UNMET = "require.unmet"
UNKNOWN = "require.unknown"
CODES = (UNMET, UNKNOWN)

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}
_EXPR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(>=|<=|==|!=|~=|>|<|=)\s*(.*?)\s*$")
_VERSION = re.compile(r"^[0-9]{1,9}(?:\.[0-9]{1,9}){0,5}$")
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?i?B?)$", re.IGNORECASE)
# Ranges: a gate beyond them is a typo (or a fuzzer), answered with a usage error, not a crash.
MAX_TEXT = 200
MAX_COUNT = 1 << 16
MAX_SIZE = 1 << 60  # 1 EiB
_UNITS = {
    "": 1,
    "B": 1,
    **{f"{p}B": 1000 ** (i + 1) for i, p in enumerate("KMGTP")},
    **{f"{p}IB": 1024 ** (i + 1) for i, p in enumerate("KMGTP")},
    **{p: 1024 ** (i + 1) for i, p in enumerate("KMGTP")},
}


@dataclass(frozen=True, slots=True)
class _Key:
    kind: str  # "count", "version", "bytes" or "text"
    per_gpu: bool
    what: str


KEYS: dict[str, _Key] = {
    "gpus": _Key("count", per_gpu=False, what="the number of GPUs NVML reports"),
    "driver": _Key("version", per_gpu=False, what="the NVIDIA driver version"),
    "cuda": _Key("version", per_gpu=False, what="the CUDA version the driver supports"),
    "memory_free": _Key("bytes", per_gpu=True, what="free memory of every GPU"),
    "memory_total": _Key("bytes", per_gpu=True, what="total memory of every GPU"),
    "compute_capability": _Key("version", per_gpu=True, what="compute capability of every GPU"),
    "model": _Key("text", per_gpu=True, what="the name of every GPU"),
}
_ALIASES = {"gpu": "gpus", "cc": "compute_capability", "name": "model", "cuda_driver": "cuda"}


@dataclass(frozen=True, slots=True)
class Requirement:
    """One parsed gate. ``text`` is the normalised expression (``gpus>=8``)."""

    text: str
    key: str
    op: str
    target: Target


@dataclass(frozen=True, slots=True)
class Outcome:
    """A gate judged against facts: ``verdict`` is "met", "unmet" or "unknown"."""

    requirement: Requirement
    verdict: str
    actual: str


def parse_requirement(text: str) -> Requirement:
    """Parse ``KEY OP VALUE``; a malformed gate raises ``EnvdoctorError`` saying what is valid."""
    keys = ", ".join(KEYS)
    if len(text) > MAX_TEXT:
        raise EnvdoctorError(
            f"a requirement of {len(text)} characters is too long (at most {MAX_TEXT})",
            hint="write KEY OP VALUE, e.g. gpus>=8",
        )
    match = _EXPR.match(text)
    if not match:
        raise EnvdoctorError(
            f"cannot read the requirement {text!r}",
            hint=f"write KEY OP VALUE, e.g. gpus>=8 or model~=H100; keys: {keys}",
        )
    raw_key, op, raw_value = match.groups()
    key = _ALIASES.get(raw_key.lower(), raw_key.lower())
    if key not in KEYS:
        raise EnvdoctorError(
            f"unknown requirement key {raw_key!r} in {text!r}", hint=f"keys: {keys}"
        )
    op = "==" if op == "=" else op
    kind = KEYS[key].kind
    if not raw_value:
        raise EnvdoctorError(f"the requirement {text!r} has no value")
    if kind == "text":
        if op not in ("==", "!=", "~="):
            raise EnvdoctorError(f"{key} is text: use ==, != or ~= (contains) in {text!r}")
        return Requirement(f"{key}{op}{raw_value}", key, op, raw_value)
    if op == "~=":
        raise EnvdoctorError(
            f"~= (contains) is for text, and {key} is a {kind}: use one of {' '.join(_OPS)}"
        )
    target: Target
    if kind == "count":
        if not re.fullmatch("[0-9]+", raw_value):
            raise EnvdoctorError(f"{key} needs a whole number in {text!r}")
        target = int(raw_value)
        if target > MAX_COUNT:
            raise EnvdoctorError(f"{key}: {raw_value} is out of range (0 to {MAX_COUNT})")
    elif kind == "version":
        target = parse_version(raw_value, what=text)
    else:
        target = parse_size(raw_value, what=text)
    return Requirement(f"{key}{op}{raw_value}", key, op, target)


def parse_requirements(texts: Iterable[str]) -> tuple[Requirement, ...]:
    return tuple(parse_requirement(t) for t in texts)


def parse_version(text: str, *, what: str = "") -> Version:
    """``"580.159.04"`` → ``(580, 159, 4)``; anything else raises ``EnvdoctorError``."""
    text = text.strip()
    if not _VERSION.match(text):
        raise EnvdoctorError(
            f"{text!r} is not a version (numbers separated by dots)"
            + (f" in {what!r}" if what else "")
        )
    return tuple(int(part) for part in text.split("."))


def parse_size(text: str, *, what: str = "") -> int:
    """``"70GiB"`` → bytes. KiB…PiB are binary, KB…PB decimal, a bare K/M/G/T binary."""
    match = _SIZE.match(text.strip())
    unit = match.group(2).upper() if match else ""
    if not match or unit not in _UNITS:
        raise EnvdoctorError(
            f"{text!r} is not a size" + (f" in {what!r}" if what else ""),
            hint="e.g. 70GiB, 512MiB, 80GB",
        )
    size = float(match.group(1)) * _UNITS[unit]
    if not size <= MAX_SIZE:
        raise EnvdoctorError(
            f"{text!r} is out of range (at most {MAX_SIZE >> 60} EiB)"
            + (f" in {what!r}" if what else "")
        )
    return int(size)


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


# --- judging ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Value:
    """One observed value: where (``"GPU 3"``, or ``""`` for the machine), parsed, as read."""

    label: str
    value: object
    text: str

    def show(self) -> str:
        return f"{self.label}: {self.text}" if self.label else self.text


@dataclass(frozen=True, slots=True)
class _Observed:
    """What the machine has for a key: labelled values, or why there is none."""

    values: tuple[_Value, ...] = ()
    unknown: tuple[str, ...] = ()  # labels (or reasons) that could not be read
    missing: str = ""  # the thing is not there at all (no driver, no GPUs)


def evaluate_requirement(facts: Facts, req: Requirement) -> Outcome:
    """Judge one gate: every observed value must satisfy it; unreadable values make it unknown."""
    observed = _observe(facts, req.key)
    if observed.missing:
        return Outcome(req, "unmet", observed.missing)
    failing = [v for v in observed.values if not _holds(req, v.value)]
    actual = ", ".join(v.show() for v in failing or observed.values)
    if failing:
        return Outcome(req, "unmet", actual)
    if observed.unknown:
        unread = "; ".join(observed.unknown)
        return Outcome(req, "unknown", f"{actual}; could not read: {unread}" if actual else unread)
    return Outcome(req, "met", actual)


def requirement_findings(facts: Facts, requirements: Sequence[Requirement]) -> tuple[Finding, ...]:
    """A finding for every gate not met (error) or not decidable (inconclusive warning)."""
    outcomes = (evaluate_requirement(facts, r) for r in requirements)
    return tuple(_finding(o) for o in outcomes if o.verdict != "met")


def requirements_rule(requirements: Sequence[Requirement]) -> Rule:
    """The gates as a Rule, to run beside ``all_rules()`` in ``engine.evaluate``."""
    reqs = tuple(requirements)

    def evaluate(ctx: RuleContext) -> Evaluation:
        outcomes = [evaluate_requirement(ctx.facts, r) for r in reqs]
        failed = [_finding(o) for o in outcomes if o.verdict != "met"]
        yield from failed
        if not failed:
            yield passed("; ".join(f"{o.requirement.text} ({o.actual})" for o in outcomes))

    return Rule(
        name="requirements",
        summary="--require gates: " + (", ".join(r.text for r in reqs) or "(none)"),
        codes=CODES,
        evaluate=evaluate,
    )


def _finding(outcome: Outcome) -> Finding:
    req = outcome.requirement
    what = KEYS[req.key].what
    if outcome.verdict == "unknown":
        return Finding(
            code=UNKNOWN,
            severity=Severity.WARNING,
            title=f"Cannot tell whether {req.text} holds: {outcome.actual}"[:200],
            evidence=(("requirement", req.text), ("checks", what), ("machine", outcome.actual)),
            remediation=Remediation(
                summary="Find out why the value cannot be read",
                steps=("envdoctor check   # the full diagnosis, with why each value is missing",),
            ),
            inconclusive=True,
            subject=req.text,
        )
    return Finding(
        code=UNMET,
        severity=Severity.ERROR,
        title=f"Requirement {req.text} not met: {outcome.actual}"[:200],
        evidence=(("requirement", req.text), ("checks", what), ("machine", outcome.actual)),
        remediation=Remediation(
            summary="Run this workload on a node that meets the requirement, or fix this node",
            steps=(
                "envdoctor check   # the full diagnosis of this node",
                "nvidia-smi --query-gpu=index,name,memory.free,memory.total,driver_version "
                "--format=csv",
            ),
        ),
        subject=req.text,
    )


def _holds(req: Requirement, value: object) -> bool:
    target = req.target
    if isinstance(target, str):
        text, want = str(value).casefold(), target.casefold()
        return {"==": text == want, "!=": text != want, "~=": want in text}[req.op]
    if isinstance(target, tuple):
        assert isinstance(value, tuple)
        return _compare(value[: len(target)], req.op, target)
    assert isinstance(value, int)
    return _compare(value, req.op, target)


def _compare(a: object, op: str, b: object) -> bool:
    return bool(_OPS[op](a, b))


def _observe(facts: Facts, key: str) -> _Observed:
    nvml = facts.nvml
    if key == "gpus":
        if isinstance(nvml, Found):
            count = len(nvml.value.gpus)
            return _Observed(values=(_Value("", count, str(count)),))
        if isinstance(nvml, Absent):
            return _Observed(values=(_Value("", 0, f"0 ({nvml.reason})"),))
        return _Observed(unknown=(f"NVML failed: {_why(nvml)}",))
    if key == "driver":
        # the version every other judgement uses (model/views.py): NVML's, else the installed
        # user-space driver's (what runs after a reload), else the loaded module's
        version = driver_view(facts).version
        if version is not None:
            return _version_value(version)
        sources: list[Probed[str]] = []
        if isinstance(nvml, Found):
            sources.append(nvml.value.driver_version)
        driver = facts.kernel.driver
        sources.append(Found(driver.value.version) if isinstance(driver, Found) else driver)
        # none of them gave a version (driver_view would have): say why each is missing
        if isinstance(nvml, ProbeFailed) or any(isinstance(s, ProbeFailed) for s in sources):
            return _Observed(unknown=("; ".join(_why(s) for s in sources),))
        return _Observed(missing=f"no NVIDIA driver ({_why(driver)})")
    if key == "cuda":
        if isinstance(nvml, Found):
            cuda = nvml.value.cuda_driver_version
            if isinstance(cuda, Found):
                return _version_value(cuda.value)
            return _Observed(unknown=(_why(cuda),))
        if isinstance(nvml, Absent):
            return _Observed(missing=f"no NVIDIA driver ({nvml.reason})")
        return _Observed(unknown=(f"NVML failed: {_why(nvml)}",))
    return _observe_gpus(facts, key)


def _why(probed: Probed[Any]) -> str:
    return why_missing(probed)


def _version_value(text: str) -> _Observed:
    try:
        return _Observed(values=(_Value("", parse_version(text), text),))
    except EnvdoctorError:
        return _Observed(unknown=(f"unreadable version {text!r}",))


def _observe_gpus(facts: Facts, key: str) -> _Observed:
    nvml = facts.nvml
    if isinstance(nvml, Absent):
        return _Observed(missing=f"no GPUs ({nvml.reason})")
    if not isinstance(nvml, Found):
        return _Observed(unknown=(f"NVML failed: {_why(nvml)}",))
    if not nvml.value.gpus:
        return _Observed(missing="no GPUs")
    values: list[_Value] = []
    unknown: list[str] = []
    for gpu in nvml.value.gpus:
        label = f"GPU {gpu.index}"
        value = _gpu_value(gpu, key)
        if isinstance(value, Found):
            values.append(_Value(label, *value.value))
        else:
            unknown.append(f"{label} ({_why(value)})")
    return _Observed(values=tuple(values), unknown=tuple(unknown))


def _gpu_value(gpu: GpuFacts, key: str) -> Probed[tuple[object, str]]:
    """(parsed value, as shown) of one GPU for a per-GPU key."""
    if key in ("memory_free", "memory_total"):
        memory = gpu.memory
        if not isinstance(memory, Found):
            return memory
        size = memory.value.free if key == "memory_free" else memory.value.total
        return Found((size, format_bytes(size)))
    if key == "model":
        name = gpu.name
        return Found((name.value, name.value)) if isinstance(name, Found) else name
    cc = gpu.compute_capability
    if not isinstance(cc, Found):
        return cc
    try:
        return Found((parse_version(cc.value), cc.value))
    except EnvdoctorError:
        return ProbeFailed(f"unreadable compute capability {cc.value!r}")
