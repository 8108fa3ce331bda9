"""Failed steps + Facts → Findings that say which cause the evidence supports.

The same status code can mean several things: ``CUBLAS_STATUS_ALLOC_FAILED`` is memory held by
another process on one machine and a foreign libcublas on another. Each failure is cross-checked
with what the probes read (NVML free memory and the processes holding it, the cuDNN torch loaded
against the one it was built with, the arch list against the GPU's compute capability, the
driver's CUDA against torch's) and, when the evidence points somewhere, the finding says so and
its fix is the precise one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from envdoctor.model.facts import Facts, GpuFacts
from envdoctor.model.finding import Finding, Remediation
from envdoctor.model.probed import Found, value_or, why_missing
from envdoctor.model.units import GiB, format_bytes, whole
from envdoctor.model.views import driver_view, nvml_gpus, nvml_system, torch_build
from envdoctor.smoke.bandwidth import bandwidth_findings, skipped_reason
from envdoctor.smoke.classify import Classification, classify
from envdoctor.smoke.codes import CODES, DOCS
from envdoctor.smoke.model import FAILED, ChildRun, NotRun, SmokeRun, StepResult, Target

fmt_bytes = format_bytes  # the name smoke has always used; one formatter for all findings

# Below this much free memory a failed cuBLAS/cuDNN initialisation is put down to memory
# pressure: both load kernels and allocate workspaces (tens to hundreds of MiB) at first use.
PRESSURE_BYTES = 1 * GiB

MEMORY_CODES = frozenset(
    {
        "smoke.cublas-alloc-failed",
        "smoke.cublas-not-initialized",
        "smoke.cudnn-not-initialized",
        "smoke.out-of-memory",
        "smoke.cublas-failed",
        "smoke.cudnn-failed",
    }
)
HARDWARE_CODES = frozenset(
    {
        "smoke.illegal-memory-access",
        "smoke.device-assert",
        "smoke.ecc-error",
        "smoke.launch-failed",
        "smoke.unknown-cuda-error",
        "smoke.wrong-result",
    }
)
REPRODUCE_KIND = {
    "smoke.cublas-alloc-failed": "cublas-alloc",
    "smoke.cublas-not-initialized": "cublas-alloc",
    "smoke.cublas-failed": "cublas-alloc",
    "smoke.cudnn-not-initialized": "cudnn-init",
    "smoke.cudnn-failed": "cudnn-init",
}


@dataclass(frozen=True, slots=True)
class Cause:
    """What the evidence supports: a phrase for the title, its evidence, and maybe a better fix."""

    summary: str
    evidence: tuple[tuple[str, str], ...] = ()
    fix: Remediation | None = None


def smoke_findings(facts: Facts, run: SmokeRun) -> tuple[Finding, ...]:
    """One finding per (target, code) that failed, one ``smoke.passed`` per healthy target,
    one ``smoke.not-run`` per target that could not be tested."""
    findings: list[Finding] = []
    notes = tuple(("children's environment", note) for note in run.notes)
    alone = skipped_reason(list(run.runs))
    if alone is not None:  # one GPU or the CPU: the multi-GPU steps say why they did not run
        notes = (*notes, ("multi-GPU steps", alone))
    for child in run.runs:
        findings.extend(
            replace(f, evidence=(*f.evidence, *notes)) for f in child_findings(facts, child)
        )
        if child.ok:
            findings.extend(bandwidth_findings(facts, child))
    findings.extend(not_run_finding(skipped) for skipped in run.not_run)
    findings.sort(key=lambda f: (-f.severity, f.subject, f.code))
    return tuple(findings)


def child_findings(facts: Facts, child: ChildRun) -> list[Finding]:
    label = child.target.label
    if child.ok:
        info = CODES["smoke.passed"]
        ran = [s for s in child.steps if s.status != "skipped"]
        evidence = tuple((s.step, s.detail) for s in ran)
        skipped = tuple(
            (s.step, f"skipped: {s.reason}") for s in child.steps if s.status == "skipped"
        )
        return [
            Finding(
                code="smoke.passed",
                severity=info.severity,
                title=f"{label}: {len(ran)} smoke steps passed in {child.seconds:.1f} s",
                evidence=evidence + skipped,
                subject=label,
            )
        ]
    groups: dict[str, list[tuple[StepResult, Classification]]] = {}
    for step in child.steps:
        if step.status == FAILED:
            found = classify(step)
            groups.setdefault(found.code, []).append((step, found))
    return [failure_finding(facts, child, code, items) for code, items in groups.items()]


def failure_finding(
    facts: Facts,
    child: ChildRun,
    code: str,
    items: list[tuple[StepResult, Classification]],
) -> Finding:
    info = CODES.get(code, CODES["smoke.failed"])
    first, found = items[0]
    steps = ", ".join(f"`{s.step}`" for s, _ in items)
    evidence: list[tuple[str, str]] = [
        ("failed step" if len(items) == 1 else "failed steps", steps)
    ]
    if first.error:
        evidence.append(("error", _clip(first.error, 12)))
    if found.status and found.status not in first.first_line:
        evidence.append(("status", found.status))
    skipped = [s for s in child.steps if s.status == "skipped" and s.reason.startswith("the CUDA")]
    if skipped:
        evidence.append(
            ("then skipped", f"{', '.join(s.step for s in skipped)}: {skipped[0].reason}")
        )
    evidence.append(("interpreter", child.python))
    if child.target.visible is not None:
        evidence.append(("child's CUDA_VISIBLE_DEVICES", child.target.visible))
    if child.survivors:
        evidence.append(("still there after SIGKILL", describe_survivors(child.survivors)))
    cause = attribute(facts, child, code, first)
    title = f"{child.target.label}: {info.title}"
    fix = info.fix
    if cause is not None:
        title += f" — {cause.summary}"
        evidence.extend(cause.evidence)
        fix = cause.fix or fix
    return Finding(
        code=code,
        severity=info.severity,
        title=title,
        evidence=tuple(evidence),
        remediation=fix,
        inconclusive=info.inconclusive,
        subject=child.target.label,
    )


def not_applicable_finding(why: str) -> Finding:
    """``check --deep`` on a machine that needs no GPU: the smoke tests have nothing to run on."""
    info = CODES["smoke.not-applicable"]
    return Finding(
        code="smoke.not-applicable",
        severity=info.severity,
        title=f"Smoke tests not applicable: {why}",
        evidence=(("machine", why),),
        remediation=info.fix,
    )


def not_run_finding(skipped: NotRun) -> Finding:
    info = CODES["smoke.not-run"]
    return Finding(
        code="smoke.not-run",
        severity=info.severity,
        title=f"{skipped.label}: smoke tests could not run — {skipped.reason}",
        evidence=skipped.evidence,
        remediation=info.fix,
        inconclusive=True,
        subject=skipped.label,
    )


# --- attribution ----------------------------------------------------------------------------


def attribute(facts: Facts, child: ChildRun, code: str, step: StepResult) -> Cause | None:
    """The cause the facts support for this failure, or None when they say nothing more."""
    if code in MEMORY_CODES:
        return _memory_cause(facts, child, code)
    if code == "smoke.cudnn-version-mismatch":
        return _library_cause(facts, child, "libcudnn", code) or None
    if code == "smoke.no-kernel-image":
        return _arch_cause(facts, child)
    if code in ("smoke.driver-insufficient", "smoke.driver-mismatch"):
        return _driver_cause(facts, code)
    if code in ("smoke.device-busy", "smoke.no-device"):
        return _visibility_cause(facts, child, code)
    if code in HARDWARE_CODES:
        return _hardware_cause(facts, child)
    if code == "smoke.timeout":
        return _timeout_cause(facts, child, step)
    if code == "smoke.crashed":
        return _crash_cause(facts, child, step)
    if code == "smoke.fabric-manager":
        return _fabric_cause(facts, child)
    return None


def target_gpu(facts: Facts, target: Target) -> GpuFacts | None:
    """The NVML GPU a target runs on, when it is exactly one."""
    if len(target.nvml_indices) != 1:
        return None
    return next((g for g in nvml_gpus(facts) if g.index == target.nvml_indices[0]), None)


@dataclass(frozen=True, slots=True)
class MemoryPicture:
    free: int | None
    total: int | None
    source: str
    holders: tuple[tuple[int, str, int | None], ...]  # (pid, name, bytes)

    def line(self, label: str) -> str:
        if self.free is None:
            return f"{label}: free memory unknown ({self.source})"
        total = f" of {fmt_bytes(self.total)}" if self.total else ""
        text = f"{label} has {fmt_bytes(self.free)} free{total}"
        holders = [
            f"PID {pid} `{name}` holds {fmt_bytes(used) if used is not None else 'unknown memory'}"
            for pid, name, used in self.holders[:3]
        ]
        if len(self.holders) > 3:
            holders.append(f"{len(self.holders) - 3} more process(es)")
        return "; ".join([text, *holders])


def memory_picture(facts: Facts, child: ChildRun | None, gpu: GpuFacts | None) -> MemoryPicture:
    """Free memory (the child's own reading at context creation when it has one, else NVML's)
    and the processes NVML saw holding memory, largest first."""
    holders: tuple[tuple[int, str, int | None], ...] = ()
    free = total = None
    source = "no NVML reading for this GPU"
    if gpu is not None:
        if isinstance(gpu.processes, Found):
            procs = sorted(
                gpu.processes.value,
                key=lambda p: -value_or(p.used_memory, 0),
            )
            holders = tuple(
                (p.pid, value_or(p.name, "?"), value_or(p.used_memory, None)) for p in procs
            )
        if isinstance(gpu.memory, Found):
            free, total, source = gpu.memory.value.free, gpu.memory.value.total, "NVML"
        else:
            source = f"NVML: {why_missing(gpu.memory)}"
    child_free = child.byte_count("free") if child else None
    if child_free is not None and child is not None:
        free, source = child_free, "torch.cuda.mem_get_info in the smoke child"
        total = child.byte_count("total") or total
    return MemoryPicture(free, total, source, holders)


def _memory_cause(facts: Facts, child: ChildRun, code: str) -> Cause | None:
    gpu = target_gpu(facts, child.target)
    picture = memory_picture(facts, child, gpu)
    label = child.target.label
    kind = REPRODUCE_KIND.get(code, "cublas-alloc")
    # No --gpu: a GPU others fill would be refused; any idle GPU runs the same software.
    confirm = (
        f"envdoctor smoke --reproduce {kind}   # on an idle GPU: does running out of memory "
        "produce this failure here?"
    )
    evidence: tuple[tuple[str, str], ...] = (
        ("memory", picture.line(label)),
        ("memory read by", picture.source),
    )
    if picture.free is not None and picture.free < PRESSURE_BYTES:
        others = [h for h in picture.holders if h[2]]
        summary = f"memory pressure: {label} has only {fmt_bytes(picture.free)} free" + (
            f" and PID {others[0][0]} `{others[0][1]}` holds {fmt_bytes(others[0][2] or 0)}"
            if others
            else ""
        )
        steps = [
            f"kill {pid}   # `{name}` holds {fmt_bytes(used or 0)}"
            for pid, name, used in others[:3]
        ]
        run_elsewhere = "run on a GPU with free memory: CUDA_VISIBLE_DEVICES=<idle GPU>"
        steps.append(f"or {run_elsewhere}" if steps else run_elsewhere)
        steps.append(confirm)
        if not others and gpu is not None and isinstance(gpu.processes, Found):
            evidence += (
                (
                    "holders",
                    "NVML lists no process using this memory: processes in other containers or "
                    "PID namespaces are invisible from here (check `nvidia-smi` on the host)",
                ),
            )
        fix = Remediation(
            summary="Free GPU memory: stop or move the processes that hold it, then run again",
            steps=tuple(steps),
            docs=DOCS,
        )
        return Cause(summary, evidence, fix)
    family = "libcudnn" if "cudnn" in code else "libcublas"
    libs = _library_cause(facts, child, family, code)
    if libs is not None:
        return Cause(libs.summary, evidence + libs.evidence, libs.fix)
    if picture.free is None:
        return Cause(
            "free memory unknown, so memory pressure is neither confirmed nor ruled out", evidence
        )
    return Cause(
        f"not memory pressure ({fmt_bytes(picture.free)} free); no foreign library found",
        evidence,
        Remediation(
            summary="Rule memory pressure out for certain, then reinstall torch's CUDA libraries",
            steps=(
                confirm,
                _reinstall_step(facts),
                "envdoctor check   # driver and library consistency",
            ),
            docs=DOCS,
        ),
    )


_SONAME = re.compile(r"lib(?:cudnn|cublas)[A-Za-z_]*\.so\.([0-9]{1,9})\b")


def _cudnn_major(version: str) -> int | None:
    """torch.backends.cudnn.version(): 90100 → 9 (cuDNN 9), 8902 → 8 (cuDNN 8)."""
    try:
        number = int(version)
    except ValueError:
        return None
    return number // 10000 if number >= 10000 else number // 1000


NGC_CUDA = (
    "/usr/local/cuda/",
    "/usr/local/cuda-",
    "/usr/lib/x86_64-linux-gnu/",
    "/usr/lib/aarch64-linux-gnu/",
)
"""Where an NGC image's torch (a ``+….nvYY.MM`` version) takes CUDA, cuBLAS and cuDNN from: it
is built against the image's toolkit, not against nvidia-* wheels."""


def _reinstall_step(facts: Facts) -> str:
    """How to restore torch's CUDA libraries, by how this torch was installed: pip's nvidia-*
    wheels, a conda environment, or an NGC image (whose libraries are the image's own)."""
    build = torch_build(facts)
    version = build.version if build else ""
    location = build.location if build and build.location else ""
    if re.search(r"\+.*\.nv\d", version):
        return (
            "this NGC image's torch uses the image's own CUDA libraries: start a fresh "
            "container from the image (nothing to reinstall with pip)"
        )
    prefix, found, _ = location.partition("/lib/python")
    conda = facts.env.get("CONDA_PREFIX") == prefix or any(
        word in part for part in prefix.split("/") for word in ("conda", "miniforge", "mamba")
    )
    if found and conda:
        return f"conda install -p {prefix} --force-reinstall pytorch   # conda's own CUDA libraries"
    return "pip install --force-reinstall torch   # restores its nvidia-* library wheels"


def _own_directories(version: str, site: str) -> tuple[str, ...]:
    """The directories whose libraries are torch's own: its site-packages (pip's nvidia-*
    wheels), its environment's ``lib`` (conda installs CUDA libraries there), and the image's
    CUDA for an NGC build. Copies elsewhere are foreign."""
    own = [site] if site else []
    prefix, found, _ = site.partition("/lib/python")
    if found and prefix:
        own.append(prefix + "/lib/")
    if re.search(r"\+.*\.nv\d", version):
        own.extend(NGC_CUDA)
    return tuple(own)


def _library_cause(facts: Facts, child: ChildRun, family: str, code: str) -> Cause | None:
    """A copy of ``family`` loaded from outside torch's own wheels, or of the wrong major."""
    build = torch_build(facts)
    loaded: list[str] = []
    for lines in (child.info("libraries") or "").splitlines():
        if family in lines.rsplit("/", 1)[-1] and lines not in loaded:
            loaded.append(lines)
    if build is not None:
        for name, path in build.loaded_libraries:
            if name.startswith(family) and path not in loaded:
                loaded.append(path)
    if not loaded:
        return None
    site = build.location.rsplit("/", 1)[0] if build and build.location else ""
    own = _own_directories(build.version if build else "", site)
    foreign = [p for p in loaded if site and not p.startswith(own)]
    evidence: list[tuple[str, str]] = [(f"{family} loaded", "\n".join(loaded))]
    built = value_or(build.cudnn_version, "") if build and family == "libcudnn" else ""
    wrong_major = []
    if built:
        major = _cudnn_major(built)
        evidence.append(("cuDNN torch was built with", built))
        for path in loaded:
            match = _SONAME.search(path.rsplit("/", 1)[-1])
            if match and major is not None and int(match.group(1)) != major:
                wrong_major.append(path)
    if not foreign and not wrong_major:
        return None
    ld_path = facts.env.get("LD_LIBRARY_PATH") or ""
    culprit = (foreign or wrong_major)[0]
    directory = culprit.rsplit("/", 1)[0]
    steps = []
    if directory and directory in ld_path.split(":"):
        evidence.append(("LD_LIBRARY_PATH", ld_path))
        steps.append(f"remove {directory} from LD_LIBRARY_PATH (it shadows torch's own {family})")
    else:
        steps.append(
            f"find what makes the loader pick {culprit} (LD_LIBRARY_PATH, LD_PRELOAD, ldconfig)"
        )
    steps.append("pip install --force-reinstall torch   # restores the matching nvidia-* wheels")
    name = culprit.rsplit("/", 1)[-1]
    summary = f"torch loaded {name} from {directory}, not its own copy"
    if wrong_major and not foreign:
        summary = f"torch loaded {name}, another major version than the one it was built with"
    return Cause(
        summary,
        tuple(evidence),
        Remediation(summary=f"Let torch load its own {family}", steps=tuple(steps), docs=DOCS),
    )


def _sm(capability: str) -> str:
    return "sm_" + capability.replace(".", "")


def _arch_cause(facts: Facts, child: ChildRun) -> Cause | None:
    build = torch_build(facts)
    gpu = target_gpu(facts, child.target)
    capability = child.info("capability") or (value_or(gpu.compute_capability, "") if gpu else "")
    if build is None or not capability:
        return None
    sm = _sm(capability)
    arches = build.arch_list
    evidence = (
        ("GPU architecture", f"{sm} (compute capability {capability})"),
        ("torch arch list", ", ".join(arches) or "empty"),
    )
    number = whole(capability.replace(".", "")) or 0
    ptx = [
        a
        for a in arches
        if a.startswith("compute_") and (n := whole(a[8:])) is not None and n <= number
    ]
    if sm in arches or ptx:
        return Cause(
            f"torch {build.version} lists {sm} yet its kernels did not load: inconsistent install",
            evidence,
            Remediation(
                summary="Reinstall torch so that its libraries match each other",
                steps=("pip install --force-reinstall torch",),
                docs=DOCS,
            ),
        )
    return Cause(
        f"torch {build.version} has no {sm} kernels (built for {', '.join(arches) or 'nothing'})",
        evidence,
        Remediation(
            summary=f"Install a torch build that includes {sm}",
            steps=(
                f"envdoctor recommend --python {shlex.quote(facts.torch.python)}   # the wheel "
                f"whose builds include {sm}, with its install command for this environment",
            ),
            docs=DOCS,
        ),
    )


def _driver_cause(facts: Facts, code: str) -> Cause | None:
    build = torch_build(facts)
    evidence: list[tuple[str, str]] = []
    driver_cuda = ""
    system = nvml_system(facts)
    if system is not None:
        driver = driver_view(facts).describe()
        driver_cuda = value_or(system.cuda_driver_version, "")
        evidence.append(("driver", f"{driver}, supports CUDA up to {driver_cuda or '?'}"))
    if build is not None:
        evidence.append(("torch", f"{build.version}, built with CUDA {build.cuda or 'none'}"))
    ld_path = facts.env.get("LD_LIBRARY_PATH") or ""
    compat = [d for d in ld_path.split(":") if "compat" in d]
    if code == "smoke.driver-mismatch" and compat:
        evidence.append(("LD_LIBRARY_PATH", ld_path))
        return Cause(
            f"a CUDA forward-compatibility libcuda ({compat[0]}) is on LD_LIBRARY_PATH",
            tuple(evidence),
            Remediation(
                summary="Drop the forward-compatibility libcuda (or use a GPU that supports it)",
                steps=(f"remove {compat[0]} from LD_LIBRARY_PATH",),
                docs=DOCS,
            ),
        )
    if build is None or not driver_cuda or not build.cuda:
        return Cause("driver and torch versions unknown", tuple(evidence)) if evidence else None
    if _version(build.cuda) > _version(driver_cuda):
        return Cause(
            f"torch needs CUDA {build.cuda}; the driver supports only up to {driver_cuda}",
            tuple(evidence),
            Remediation(
                summary=(
                    f"Upgrade the NVIDIA driver to one supporting CUDA {build.cuda}, "
                    f"or install torch built for CUDA {driver_cuda}"
                ),
                steps=(
                    f"envdoctor recommend   # the driver branches that support CUDA {build.cuda}",
                    "pip install --force-reinstall torch --index-url "
                    f"https://download.pytorch.org/whl/cu{driver_cuda.replace('.', '')}",
                ),
                needs_root=True,
                docs=DOCS,
            ),
        )
    return Cause(f"the driver supports CUDA {driver_cuda} ≥ torch's {build.cuda}", tuple(evidence))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"[0-9]{1,9}", text)[:3])


def _visibility_cause(facts: Facts, child: ChildRun, code: str) -> Cause | None:
    gpu = target_gpu(facts, child.target)
    evidence: list[tuple[str, str]] = []
    if gpu is not None and isinstance(gpu.compute_mode, Found):
        mode = gpu.compute_mode.value
        evidence.append(("compute mode", mode))
        picture = memory_picture(facts, None, gpu)
        if picture.holders:
            evidence.append(("processes", picture.line(child.target.label)))
        if mode == "prohibited":
            return Cause("the GPU's compute mode is Prohibited", tuple(evidence))
        if mode in ("exclusive-process", "exclusive-thread") and picture.holders:
            pid, name, _ = picture.holders[0]
            return Cause(
                f"the GPU is in {mode} mode and PID {pid} `{name}` owns it",
                tuple(evidence),
                Remediation(
                    summary=f"Wait for PID {pid} or switch the GPU to the Default compute mode",
                    steps=(f"sudo nvidia-smi -i {gpu.index} -c DEFAULT",),
                    needs_root=True,
                    docs=DOCS,
                ),
            )
    nodes = facts.kernel.device_nodes
    if isinstance(nodes, Found):
        denied = [n.path for n in nodes.value if not (n.readable and n.writable)]
        if denied:
            evidence.append(("no read/write access", ", ".join(denied)))
            return Cause(f"this user cannot open {denied[0]}", tuple(evidence))
    return Cause("no cause found in the facts", tuple(evidence)) if evidence else None


def _hardware_cause(facts: Facts, child: ChildRun) -> Cause | None:
    gpu = target_gpu(facts, child.target)
    if gpu is None:
        return None
    evidence: list[tuple[str, str]] = []
    signs: list[str] = []
    if isinstance(gpu.ecc, Found):
        ecc = gpu.ecc.value
        evidence.append(
            (
                "ECC uncorrectable",
                f"volatile {ecc.volatile_uncorrectable}, aggregate {ecc.aggregate_uncorrectable}",
            )
        )
        if ecc.volatile_uncorrectable:
            signs.append(
                f"{ecc.volatile_uncorrectable} uncorrectable ECC error(s) since the driver loaded"
            )
    if isinstance(gpu.row_remap, Found):
        remap = gpu.row_remap.value
        if remap.pending or remap.failure:
            evidence.append(("row remapping", f"pending={remap.pending}, failure={remap.failure}"))
            signs.append(
                "a row remap is " + ("failing" if remap.failure else "pending (reset needed)")
            )
    if value_or(gpu.retired_pages_pending, False):
        evidence.append(("retired pages", "pending"))
        signs.append("page retirement is pending")
    if not signs:
        return (
            Cause("the GPU reports no ECC or remapping problem", tuple(evidence))
            if evidence
            else None
        )
    return Cause(
        f"{child.target.label} reports {'; '.join(signs)}: suspect its memory",
        tuple(evidence),
        Remediation(
            summary="Drain the GPU and reset it; have it replaced if errors persist",
            steps=(
                f"sudo nvidia-smi -r -i {gpu.index}   # with no process on it",
                "nvidia-smi -q -d ECC,ROW_REMAPPER",
            ),
            needs_root=True,
            docs=DOCS,
        ),
    )


def describe_survivors(survivors: tuple[tuple[int, str], ...]) -> str:
    """ "PID 4242 in state D (uninterruptible sleep: …)" for each process SIGKILL did not end."""
    return "; ".join(
        f"PID {pid} in state {state} ({PROCESS_STATES.get(state, 'neither gone nor a zombie')})"
        for pid, state in survivors
    )


PROCESS_STATES = {
    "D": "uninterruptible sleep: stuck inside a kernel call, usually the GPU driver's; "
    "SIGKILL takes effect only when that call returns",
    "T": "stopped",
    "t": "stopped by a debugger",
    "R": "running: envdoctor may not signal it (another user's process)",
    "S": "sleeping: envdoctor may not signal it (another user's process)",
}


def _timeout_cause(facts: Facts, child: ChildRun, step: StepResult) -> Cause | None:
    gpu = target_gpu(facts, child.target)
    evidence: list[tuple[str, str]] = [("hung in", f"`{step.step}` after {step.seconds:.1f} s")]
    if child.stderr_tail:
        evidence.append(("child's last words", _tail(child.stderr_tail, 6)))
    stuck = [pid for pid, state in child.survivors if state == "D"]
    if stuck:
        return Cause(
            f"PID {stuck[0]} is stuck in the kernel (state D) even after SIGKILL: the GPU driver "
            "did not return from a call",
            tuple(evidence),
            Remediation(
                summary="Look for a wedged GPU; a process in state D goes away only when the "
                "driver call returns",
                steps=(
                    "sudo dmesg | grep -i xid   # the driver's GPU fault reports",
                    f"cat /proc/{stuck[0]}/stack   # where it is stuck (root)",
                    "drain the node and reboot it if the process never goes away",
                ),
                docs=DOCS,
            ),
        )
    if step.step == "import":  # never touches the GPU: persistence mode cannot make it slow
        return Cause(
            "`import torch` did not finish; importing never touches the GPU: look at the "
            "filesystem torch is read from (network storage, a cold cache) and at site hooks",
            tuple(evidence),
            Remediation(
                summary="Time the import on its own, away from the GPU",
                steps=(
                    f"time {child.python} -X importtime -c 'import torch' 2>&1 | tail -5",
                    "python -c 'import torch; print(torch.__file__)'   # where it is read from",
                ),
                docs=DOCS,
            ),
        )
    if gpu is not None and step.step == "context" and value_or(gpu.persistence_mode, True) is False:
        evidence.append(("persistence mode", "off"))
        return Cause(
            "persistence mode is off, so the driver initialises the GPU on each first use",
            tuple(evidence),
            Remediation(
                summary="Enable persistence mode (or run nvidia-persistenced)",
                steps=("sudo nvidia-smi -pm 1",),
                needs_root=True,
                docs=DOCS,
            ),
        )
    if gpu is not None:
        picture = memory_picture(facts, child, gpu)
        if picture.holders:
            evidence.append(("other processes", picture.line(child.target.label)))
    return Cause(f"`{step.step}` did not finish", tuple(evidence))


def _crash_cause(facts: Facts, child: ChildRun, step: StepResult) -> Cause | None:
    evidence: list[tuple[str, str]] = [("crashed in", f"`{step.step}`: {step.error}")]
    if child.stderr_tail:
        evidence.append(("child's stderr", _crash_excerpt(child.stderr_tail)))
    family = {"gemm": "libcublas", "conv": "libcudnn"}.get(step.step.split("-")[0])
    if family:
        libs = _library_cause(facts, child, family, "smoke.crashed")
        if libs is not None:
            return Cause(libs.summary, tuple(evidence) + libs.evidence, libs.fix)
    return Cause(step.error or "native crash", tuple(evidence))


def _fabric_cause(facts: Facts, child: ChildRun) -> Cause | None:
    gpu = target_gpu(facts, child.target)
    name = value_or(gpu.name, "") if gpu else ""
    if "SXM" in name or "HGX" in name or "H100" in name or "A100" in name or "H200" in name:
        return Cause(
            f"{name} systems with NVSwitch need nvidia-fabricmanager running", (("GPU", name),)
        )
    return None


def _clip(text: str, lines: int) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][:lines]
    return "\n".join(line[:300] for line in kept)


def _crash_excerpt(stderr: str, lines: int = 8) -> str:
    """faulthandler's report (innermost frame first), else the last lines of stderr."""
    kept = [line for line in stderr.splitlines() if line.strip()]
    for number, line in enumerate(kept):
        if line.startswith("Fatal Python error"):
            return "\n".join(x[:300] for x in kept[number : number + lines])
    return _tail(stderr, lines)


def _tail(text: str, lines: int) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join(line[:300] for line in kept)
