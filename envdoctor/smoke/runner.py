"""Run the smoke child once per GPU, in parallel, each bounded per step and per GPU.

Every child runs in its own process group; a step that reports nothing within its limit gets
the whole group killed and becomes ``smoke.timeout`` naming that step; a child that dies from a
signal becomes ``smoke.crashed`` with the signal's name. Steps a child did not reach are
reported as skipped, with the reason. Children are spawned from the calling thread and watched
from worker threads; leaving ``run_smoke`` by any path (Ctrl-C included) kills them all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts, TorchBroken
from envdoctor.model.probed import Found, value_or, why_missing
from envdoctor.model.views import cuda_torch
from envdoctor.model.visible import visible_gpus
from envdoctor.platform.processes import (
    ChildProcess,
    ChildSet,
    Eof,
    SpawnError,
    Timeout,
    describe_exit,
    signal_name,
    sigterm_raises,
)
from envdoctor.smoke.child import MARK as MARK  # the child prints it: one definition
from envdoctor.smoke.classify import POISON_REGEXES, poisons
from envdoctor.smoke.environment import child_environment
from envdoctor.smoke.model import (
    FAILED,
    GPU_STEPS,
    KIND_CRASH,
    KIND_NOT_STARTED,
    KIND_TIMEOUT,
    NCCL_STEPS,
    PASSED,
    SKIPPED,
    ChildRun,
    NotRun,
    SmokeRun,
    StepResult,
    Target,
)

# The child's own native watchdog fires this long after the runner should have killed it.
BACKSTOP_S = 5.0


@dataclass(frozen=True, slots=True)
class SmokeOptions:
    """How to run: the target interpreter, the budgets, which GPUs.

    ``timeout`` bounds one GPU's whole child, ``step_timeout`` each step (the first step also
    covers the interpreter's start and ``import torch``). ``device="cpu"`` runs the very same
    steps on the CPU (tests, benchmarks). ``env`` adjusts the children's environment (a None
    value unsets a variable). ``on_step(label, step)`` hears each step a child starts, and
    ``done`` when it ends (a progress line; called from the runner's threads).
    """

    python: str
    timeout: float = 60.0
    step_timeout: float = 30.0
    gpus: tuple[int, ...] = ()
    device: str = "cuda"
    env: Mapping[str, str | None] = field(default_factory=dict)
    nccl: bool = True
    memory_mib: int = 8
    steps: tuple[str, ...] = GPU_STEPS
    on_step: Callable[[str, str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.step_timeout <= 0:
            raise EnvdoctorError("--timeout and --step-timeout must be positive numbers of seconds")


def child_source() -> str:
    """The child's source, run with ``python -c`` so the target needs no envdoctor."""
    return resources.files("envdoctor.smoke").joinpath("child.py").read_text("utf-8")


def child_argv(python: str, config: Mapping[str, Any]) -> list[str]:
    return [python, "-c", child_source(), json.dumps(dict(config))]


def child_env(target: Target, extra: Mapping[str, str | None]) -> dict[str, str | None]:
    env: dict[str, str | None] = dict(extra)
    if target.visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = target.visible
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # NVML's order, when ``visible`` is an index
    return env


def smoke_config(target: Target, options: SmokeOptions, steps: tuple[str, ...]) -> dict[str, Any]:
    return {
        "mode": "smoke",
        "device": target.device,
        "index": target.index,
        "devices": target.devices,
        "steps": list(steps),
        "poison": list(POISON_REGEXES),
        "budget": options.timeout + BACKSTOP_S,
        "memory_mib": options.memory_mib,
        "watch_stdin": True,
    }


# --- planning -------------------------------------------------------------------------------


def plan(facts: Facts, options: SmokeOptions) -> tuple[list[Target], list[NotRun]]:
    """The GPUs to test: NVML's that CUDA_VISIBLE_DEVICES leaves to CUDA (each pinned by UUID),
    else the devices torch sees."""
    if options.device == "cpu":
        return [Target("CPU", device="cpu")], []
    if isinstance(facts.nvml, Found) and facts.nvml.value.gpus:
        return _nvml_targets(facts, options)
    build = cuda_torch(facts)
    if build is not None:
        count = value_or(build.device_count, 0)
        indices = options.gpus or tuple(range(max(count, 1)))
        return [Target(f"cuda:{i}", index=i) for i in indices], []
    nvml = facts.nvml
    evidence = [("NVML", "sees no GPU" if isinstance(nvml, Found) else why_missing(nvml))]
    evidence.append(("torch", _torch_summary(facts)))
    return [], [NotRun("GPU", "no GPU to test", tuple(evidence))]


def _nvml_targets(facts: Facts, options: SmokeOptions) -> tuple[list[Target], list[NotRun]]:
    assert isinstance(facts.nvml, Found)
    gpus = facts.nvml.value.gpus
    known = {g.index for g in gpus}
    missing = sorted(set(options.gpus) - known)
    if missing:
        have = ", ".join(map(str, sorted(known)))
        raise EnvdoctorError(f"no GPU {', '.join(map(str, missing))}: NVML sees GPU(s) {have}")
    visible = visible_gpus(facts, gpus)
    if visible.problem:
        evidence = (("CUDA_VISIBLE_DEVICES", repr(visible.value)),)
        return [], [NotRun("GPU", visible.problem, evidence)]
    allowed = {g.index for g in visible.gpus}
    hidden = sorted(set(options.gpus) - allowed)
    if hidden:
        raise EnvdoctorError(
            f"GPU {', '.join(map(str, hidden))} is hidden by CUDA_VISIBLE_DEVICES="
            f"{visible.value!r}, which leaves CUDA GPU(s) "
            f"{', '.join(str(g.index) for g in visible.gpus)}"
        )
    targets: list[Target] = []
    not_run: list[NotRun] = []
    for gpu in visible.gpus:
        if options.gpus and gpu.index not in options.gpus:
            continue
        label = f"GPU {gpu.index}"
        mig = value_or(gpu.mig_mode, None)
        if mig is not None and mig.current:
            not_run.append(
                NotRun(
                    label,
                    "MIG mode is on; smoke does not test MIG instances",
                    (("MIG devices", str(value_or(gpu.mig_devices, "?"))),),
                )
            )
            continue
        uuid = value_or(gpu.uuid, "")
        targets.append(Target(label, (gpu.index,), visible=uuid or str(gpu.index)))
    return targets, not_run


def _torch_summary(facts: Facts) -> str:
    probed = facts.torch.torch
    if isinstance(probed, Found):
        if isinstance(probed.value, TorchBroken):
            return f"import fails: {probed.value.error}"
        build = probed.value
        return f"{build.version}: CPU-only build" if build.is_cpu_build else build.version
    return why_missing(probed)


# --- running --------------------------------------------------------------------------------


def start_child(
    children: ChildSet,
    target: Target,
    python: str,
    config: Mapping[str, Any],
    env: Mapping[str, str | None],
) -> ChildProcess | str:
    """The started child, or why it could not start."""
    try:
        return children.spawn(child_argv(python, config), env=child_env(target, env))
    except SpawnError as exc:
        return str(exc)


def not_started(target: Target, python: str, why: str, steps: tuple[str, ...]) -> ChildRun:
    first = StepResult(
        steps[0], FAILED, error=f"cannot start {python}: {why}", kind=KIND_NOT_STARTED
    )
    rest = tuple(
        StepResult(s, SKIPPED, reason="the interpreter could not be started") for s in steps[1:]
    )
    return ChildRun(target, python, (first, *rest), "not-started", 0.0)


def monitor(
    child: ChildProcess,
    target: Target,
    python: str,
    steps: tuple[str, ...],
    *,
    step_timeout: float,
    budget: float,
    on_step: Callable[[str, str], None] | None = None,
) -> ChildRun:
    """Read the child's protocol lines until it is done, hangs, or dies; a killed child's
    survivors are re-checked and kept in the result (``on_step``: see ``SmokeOptions``)."""
    results: dict[str, StepResult] = {}
    current: str | None = None
    mark = child.started
    end = child.started + budget
    done = False
    hung: str | None = None
    while True:
        now = time.monotonic()
        step_end = mark + step_timeout
        event = child.read(min(end, step_end) - now)
        if isinstance(event, Timeout):
            hung = current or _next_step(steps, results) or "exit"
            per_step = step_end <= end
            limit = step_timeout if per_step else budget
            child.kill()
            results[hung] = StepResult(
                hung,
                FAILED,
                seconds=round(time.monotonic() - mark, 3),
                error=(
                    f"no result within the {'per-step' if per_step else 'per-GPU'} limit of "
                    f"{limit:g} s; the child's process group was killed"
                ),
                error_type="timeout",
                kind=KIND_TIMEOUT,
            )
            break
        if isinstance(event, Eof):
            break
        message = parse_line(event.text)
        if message is None:
            continue
        kind = message.get("event")
        if kind == "start":
            current, mark = str(message.get("step")), time.monotonic()
            if on_step is not None:
                on_step(target.label, current)
        elif kind == "result":
            result = step_result(message)
            results[result.step] = result
            current, mark = None, time.monotonic()
        elif kind == "done":
            done = True
        if done:
            break
    ending = "timeout" if hung else "completed"
    returncode = child.wait(2.0 if done else 5.0)
    if returncode is None:
        child.kill()
        returncode = child.returncode
    survivors = child.survivors()
    if not hung and not done and (_next_step(steps, results) is not None or returncode):
        died_in = current or _next_step(steps, results) or "exit"
        how = describe_exit(returncode if returncode is not None else -9)
        results[died_in] = StepResult(
            died_in,
            FAILED,
            seconds=round(time.monotonic() - mark, 3),
            error=f"the child {how} during `{died_in}`",
            error_type=signal_name(-returncode)
            if returncode and returncode < 0
            else f"exit {returncode}",
            kind=KIND_CRASH,
        )
        ending = "crashed"
    child.close_stdin()
    if on_step is not None:
        on_step(target.label, "done")
    return _child_run(target, python, steps, results, child, ending, returncode, survivors)


def _child_run(
    target: Target,
    python: str,
    steps: tuple[str, ...],
    results: dict[str, StepResult],
    child: ChildProcess,
    ending: str,
    returncode: int | None,
    survivors: tuple[tuple[int, str], ...] = (),
) -> ChildRun:
    ordered = [results[s] for s in steps if s in results]
    extra = [r for name, r in results.items() if name not in steps]
    reason = _missing_reason(ordered, ending)
    ordered.extend(StepResult(n, SKIPPED, reason=reason) for n in steps if n not in results)
    ordered.sort(key=lambda r: steps.index(r.step) if r.step in steps else len(steps))
    return ChildRun(
        target=target,
        python=python,
        steps=(*ordered, *extra),
        ending=ending,
        seconds=round(child.elapsed(), 3),
        returncode=returncode,
        stderr_tail=child.stderr_tail()
        if ending != "completed" or any(r.status == FAILED for r in ordered)
        else "",
        pid=child.pid,
        survivors=survivors,
    )


def _missing_reason(reported: list[StepResult], ending: str) -> str:
    for result in reported:
        if result.status != FAILED:
            continue
        if result.kind == KIND_TIMEOUT:
            return f"not run: the child was killed after `{result.step}` hung"
        if result.kind == KIND_CRASH:
            return f"not run: the child died in `{result.step}`"
        if result.step == "import":
            return "torch could not be imported"
        if result.step == "context":
            return "no CUDA context: `context` failed"
        if poisons(result.error):
            return (
                f"the CUDA context is unusable after `{result.step}` failed with: "
                f"{result.first_line}"
            )
    return "not reported by the child" if ending == "completed" else "not run"


def _next_step(steps: tuple[str, ...], results: Mapping[str, StepResult]) -> str | None:
    for name in steps:
        if name not in results:
            return name
    return None


_DECODER = json.JSONDecoder()


def parse_line(text: str) -> dict[str, Any] | None:
    """The JSON object after the protocol marker, wherever the marker is in the line (output a
    library wrote without a newline may precede it), or None for any other output."""
    at = text.find(MARK)
    if at < 0:
        return None
    try:
        data, _ = _DECODER.raw_decode(text, at + len(MARK))
    except (ValueError, RecursionError):  # not JSON, a 5000-digit number, deep nesting
        return None
    return data if isinstance(data, dict) else None


def step_result(message: Mapping[str, Any]) -> StepResult:
    info = message.get("info") or {}
    pairs = tuple(
        (str(k), "\n".join(map(str, v)) if isinstance(v, list) else str(v))
        for k, v in (info.items() if isinstance(info, dict) else ())
    )
    return StepResult(
        step=str(message.get("step", "?")),
        status=str(message.get("status", FAILED)),
        seconds=_seconds(message.get("seconds")),
        detail=str(message.get("detail", "")),
        error=str(message.get("error", "")),
        error_type=str(message.get("error_type", "")),
        kind=str(message.get("kind", "")),
        reason=str(message.get("reason", "")),
        info=pairs,
    )


def _seconds(value: object) -> float:
    """A step's duration as the child sent it; 0 for anything else ("fast", Infinity, a list)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e9:
        return float(value)
    return 0.0


def run_smoke(facts: Facts, options: SmokeOptions) -> SmokeRun:
    """Every planned GPU in parallel, then NCCL across the GPUs whose context came up."""
    started = time.monotonic()
    targets, not_run = plan(facts, options)
    environment = child_environment(facts, options.env)
    env = environment.as_dict()
    runs: list[ChildRun] = []
    with (
        ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool,
        sigterm_raises(),
        ChildSet() as children,
    ):
        pending = []
        for target in targets:
            config = smoke_config(target, options, options.steps)
            child = start_child(children, target, options.python, config, env)
            if isinstance(child, str):
                runs.append(not_started(target, options.python, child, options.steps))
                continue
            pending.append(
                pool.submit(
                    monitor,
                    child,
                    target,
                    options.python,
                    options.steps,
                    step_timeout=min(options.step_timeout, options.timeout),
                    budget=options.timeout,
                    on_step=options.on_step,
                )
            )
        runs.extend(future.result() for future in pending)
        runs.sort(key=lambda r: r.target.nvml_indices or (r.target.index,))
        nccl = _nccl_target(runs, options)
        if nccl is not None:
            config = smoke_config(nccl, options, NCCL_STEPS)
            child = start_child(children, nccl, options.python, config, env)
            if isinstance(child, str):
                runs.append(not_started(nccl, options.python, child, NCCL_STEPS))
            else:
                runs.append(
                    monitor(
                        child,
                        nccl,
                        options.python,
                        NCCL_STEPS,
                        step_timeout=min(options.step_timeout, options.timeout),
                        budget=options.timeout,
                        on_step=options.on_step,
                    )
                )
    return SmokeRun(
        python=options.python,
        runs=tuple(runs),
        not_run=tuple(not_run),
        seconds=round(time.monotonic() - started, 3),
        notes=environment.notes,
    )


def _nccl_target(runs: list[ChildRun], options: SmokeOptions) -> Target | None:
    if not options.nccl or options.device != "cuda":
        return None
    ready = [
        r
        for r in runs
        if r.target.visible is not None
        and len(r.target.nvml_indices) == 1
        and (ctx := r.step("context")) is not None
        and ctx.status == PASSED
    ]
    if len(ready) < 2:
        return None
    indices = tuple(r.target.nvml_indices[0] for r in ready)
    return Target(
        label="GPUs " + ",".join(map(str, indices)),
        nvml_indices=indices,
        visible=",".join(r.target.visible or "" for r in ready),
        devices=len(ready),
    )
