"""Environment rules: GPU visibility variables, debug switches left on, allocator config, nvcc."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import failed_elsewhere, not_applicable, passed
from envdoctor.model.probed import Found, missing_because
from envdoctor.model.views import MachineKind, cuda_torch, nvml_gpus
from envdoctor.model.visible import cuda_reading
from envdoctor.rules import alloc_conf
from envdoctor.rules.base import Evaluation, Rule, RuleContext


def _cuda_visible(ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.facts
    value = facts.env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return
    all_gpus = nvml_gpus(facts)
    count = len(all_gpus) if all_gpus else None
    kept, stop = cuda_reading(value, all_gpus, count)
    if not stop:
        return
    hides_all = not kept
    if kept:  # say what CUDA does now, explicitly; else every GPU the machine has
        example = f"export CUDA_VISIBLE_DEVICES={','.join(kept)}   # the GPUs CUDA uses now"
    elif count:
        example = f"export CUDA_VISIBLE_DEVICES={','.join(map(str, range(count)))}   # all GPUs"
    else:
        example = "export CUDA_VISIBLE_DEVICES=0   # an index that nvidia-smi -L lists"
    yield Finding(
        code="env.cuda-visible-devices",
        severity=Severity.ERROR if hides_all else Severity.WARNING,
        title=(
            f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA"
            if hides_all
            else f"CUDA_VISIBLE_DEVICES={value!r}: CUDA uses only {', '.join(kept)} and ignores "
            f"entry {len(kept) + 1} ({stop.split(' ')[0]}) and all after it"
        ),
        evidence=(
            ("CUDA_VISIBLE_DEVICES", repr(value)),
            ("CUDA stops at", stop),
            ("GPUs CUDA will use", ", ".join(kept) or "none"),
            (
                "GPUs on this machine",
                str(count) if count is not None else "unknown (NVML unavailable)",
            ),
        ),
        remediation=Remediation(
            summary="Unset CUDA_VISIBLE_DEVICES or list valid GPU indices/UUIDs",
            steps=(
                "unset CUDA_VISIBLE_DEVICES   # every GPU",
                example,
                "nvidia-smi -L   # valid indices and GPU-/MIG- UUIDs",
                "look for where it is set: env files, the job script, the container spec",
            ),
        ),
    )


def _nvidia_visible(ctx: RuleContext) -> Evaluation:
    """Only the NVIDIA container runtime reads NVIDIA_VISIBLE_DEVICES: what it did is judged by
    the container checks (container.no-gpu-access names the variable as the cause)."""
    value = ctx.facts.env.get("NVIDIA_VISIBLE_DEVICES")
    machine = ctx.machine
    if value is None:
        yield not_applicable("NVIDIA_VISIBLE_DEVICES is not set")
    elif not machine.containers:
        yield not_applicable(
            f"NVIDIA_VISIBLE_DEVICES={value!r}: not in a container (only the NVIDIA container "
            "runtime reads it)"
        )
    elif machine.kind is MachineKind.CONTAINER_WITHOUT_GPU:
        yield failed_elsewhere(
            f"NVIDIA_VISIBLE_DEVICES={value!r} and no GPU here: container.no-gpu-access says why"
        )
    else:
        yield passed(f"NVIDIA_VISIBLE_DEVICES={value!r}: this container was given GPU devices")


def _launch_blocking(ctx: RuleContext) -> Iterator[Finding]:
    value = ctx.facts.env.get("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() in {"", "0"}:
        return
    yield Finding(
        code="env.cuda-launch-blocking",
        severity=Severity.WARNING,
        title="CUDA_LAUNCH_BLOCKING is on: every kernel launch waits, training runs much slower",
        evidence=(("CUDA_LAUNCH_BLOCKING", value),),
        remediation=Remediation(
            summary="Unset it once you have the stack trace you were debugging",
            steps=("unset CUDA_LAUNCH_BLOCKING",),
        ),
    )


def _alloc_conf(ctx: RuleContext) -> Iterator[Finding]:
    build = cuda_torch(ctx.facts)
    asked = dict(build.alloc_conf) if build is not None else {}
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        value = ctx.facts.env.get(var)
        if value is None:
            continue
        verdict = asked.get(var)
        if verdict is not None and not verdict.startswith("not checked"):
            if not verdict:
                continue
            problems, judge = [verdict], f"torch {build.version if build else ''} itself"
        else:
            problems, judge = alloc_conf.judge(value), "envdoctor's reading of torch's parser"
            if not problems:
                continue
        cuda = build is not None
        yield Finding(
            code="env.alloc-conf-invalid",
            severity=Severity.ERROR if cuda else Severity.WARNING,
            title=f"{var} is not valid: torch rejects it at the first CUDA allocation",
            evidence=(
                (var, repr(value)),
                ("rejected because", problems[0]),
                ("judged by", judge),
            ),
            remediation=Remediation(
                summary=f"Fix {var}: comma-separated key:value pairs torch accepts",
                steps=(
                    f"e.g. export {var}=expandable_segments:True,max_split_size_mb:512",
                    "known keys: " + ", ".join(sorted(alloc_conf.KEYS)),
                    "https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf",
                ),
            ),
            subject=var,
        )


def _ld_preload(ctx: RuleContext) -> Iterator[Finding]:
    value = ctx.facts.env.get("LD_PRELOAD")
    if not value:
        return
    yield Finding(
        code="env.ld-preload",
        severity=Severity.INFO,
        title="LD_PRELOAD is set: these libraries load before CUDA's and torch's",
        evidence=(("LD_PRELOAD", value),),
        remediation=Remediation(
            summary="If CUDA or torch misbehave, retry with LD_PRELOAD unset",
            steps=("env -u LD_PRELOAD python …",),
        ),
    )


def _nvcc_without_driver(ctx: RuleContext) -> Iterator[Finding]:
    nvcc = ctx.facts.env.nvcc
    if not isinstance(nvcc, Found):
        return
    yield Finding(
        code="cuda.nvcc-without-driver",
        severity=Severity.WARNING,
        title=f"The CUDA {nvcc.value.version} toolkit (nvcc) is installed but there is no driver: "
        "code compiles here but cannot run",
        evidence=(
            ("nvcc", f"{nvcc.value.path} (CUDA {nvcc.value.version})"),
            ("NVIDIA driver", "not installed"),
        ),
        remediation=Remediation(
            summary="Install the NVIDIA driver (the toolkit does not include a usable one in containers)",
            steps=(
                "on a GPU machine: install the driver (see driver.not-installed)",
                "in a container: nvcc is fine for building; run the result with --gpus all",
            ),
        ),
    )


def _when_set(
    names: tuple[str, ...], judge: Callable[[RuleContext], Iterator[Finding]], ok: str
) -> Callable[[RuleContext], Evaluation]:
    """A check of variables: not applicable when none is set, else findings or passed."""

    def evaluate(ctx: RuleContext) -> Evaluation:
        values = [(n, ctx.facts.env.get(n)) for n in names]
        shown = ", ".join(f"{n}={v!r}" for n, v in values if v is not None)
        if not shown:
            yield not_applicable(
                f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} not set"
            )
            return
        findings = list(judge(ctx))
        if findings:
            yield from findings
        else:
            yield passed(f"{shown}: {ok}")

    return evaluate


def _nvcc_check(ctx: RuleContext) -> Evaluation:
    nvcc = ctx.facts.env.nvcc
    if not isinstance(nvcc, Found):
        yield not_applicable(missing_because("nvcc", nvcc))
        return
    machine = ctx.machine
    if ctx.facts.host.wsl or machine.driver.present:
        driver = "WSL's driver" if ctx.facts.host.wsl else f"driver {machine.driver.describe()}"
        yield passed(f"nvcc (CUDA {nvcc.value.version}) and {driver} are both installed")
        return
    if not machine.gpu_required:
        yield not_applicable(f"{machine.why_no_gpu()}: nvcc builds CUDA code to run elsewhere")
        return
    yield from _nvcc_without_driver(ctx)


RULES = (
    Rule(
        "env.cuda-visible-devices",
        "CUDA_VISIBLE_DEVICES selects existing GPUs",
        ("env.cuda-visible-devices",),
        _when_set(("CUDA_VISIBLE_DEVICES",), _cuda_visible, "every entry names a GPU"),
    ),
    Rule(
        "env.nvidia-visible-devices",
        "NVIDIA_VISIBLE_DEVICES gives the container GPUs",
        (),  # its finding is container.no-gpu-access's cause now (one finding per cause)
        _nvidia_visible,
    ),
    Rule(
        "env.launch-blocking",
        "CUDA_LAUNCH_BLOCKING is off",
        ("env.cuda-launch-blocking",),
        _when_set(("CUDA_LAUNCH_BLOCKING",), _launch_blocking, "kernel launches stay asynchronous"),
    ),
    Rule(
        "env.alloc-conf",
        "PYTORCH_CUDA_ALLOC_CONF parses",
        ("env.alloc-conf-invalid",),
        _when_set(
            ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"), _alloc_conf, "torch accepts it"
        ),
    ),
    Rule(
        "env.ld-preload",
        "LD_PRELOAD loads nothing before CUDA's and torch's libraries",
        ("env.ld-preload",),
        _when_set(("LD_PRELOAD",), _ld_preload, "reported above"),  # set: always a note
    ),
    Rule(
        "cuda.nvcc-driver",
        "nvcc has a driver to run what it builds",
        ("cuda.nvcc-without-driver",),
        _nvcc_check,
    ),
)
