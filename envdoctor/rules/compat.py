"""Compatibility rules: the machine's driver, GPUs, torch, cuDNN and nvcc judged against the tables.

Each rule is silent when the facts it needs are missing (no driver, no torch, an unreadable
value): the driver, torch and library rules already report those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envdoctor.compat.judge import (
    ArchFit,
    DriverFit,
    DriverVerdict,
    driver_cuda_of,
    judge_arch,
    judge_driver,
)
from envdoctor.compat.recommend import (
    Recommendation,
    gpu_driver_problems,
    machine_from_facts,
    recommend,
)
from envdoctor.compat.tables import Architecture, CompatTables, TorchVariant
from envdoctor.compat.versions import (
    Cuda,
    cuda_text,
    cudnn_text,
    describe_arch_list,
    driver_at_least,
    driver_branch,
    parse_arch_list,
    parse_cc,
    parse_cuda,
    parse_cudnn,
    sm_name,
)
from envdoctor.model.facts import Facts, GpuFacts, TorchBuild
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.install import install_command, install_steps, installer_for, removal_steps
from envdoctor.model.outcome import Verdict, not_applicable, passed, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, missing_because
from envdoctor.model.views import (
    cuda_torch,
    gpu_label,
    show,
    torch_build,
    torch_python,
)
from envdoctor.model.views import nvml_gpus as gpus
from envdoctor.rules.base import Evaluation, Rule, RuleContext, judged
from envdoctor.rules.gpu import gpu_scope

DRIVER_DOCS = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/index.html"
COMPAT_DOCS = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
OPEN_DOCS = "https://download.nvidia.com/XFree86/Linux-x86_64/580.95.05/README/kernel_open.html"


# --- shared views ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Driver:
    version: str
    cuda: Cuda | None
    windows: bool
    source: str

    def judge(self, tables: CompatTables, cuda: Cuda) -> DriverVerdict:
        """Whether this driver runs code built for ``cuda`` (compat/judge.py)."""
        return judge_driver(
            tables, driver=self.version, driver_cuda=self.cuda, cuda=cuda, windows=self.windows
        )

    def evidence(self, verdict: DriverVerdict) -> tuple[tuple[str, str], ...]:
        """The driver's side of a verdict, for a finding's evidence."""
        return (
            ("driver", f"{self.version} ({self.source})"),
            ("driver supports CUDA up to", verdict.driver_cuda_text()),
            ("driver needed", verdict.needed_text()),
        )


def _driver(ctx: RuleContext) -> _Driver | None:
    """The driver compatibility is judged against (model/views.py: the installed user-space
    driver, which runs after a reload, else the loaded module) and the CUDA it supports."""
    view = ctx.machine.driver
    version = view.version
    if version is None:
        return None
    facts, tables = ctx.facts, ctx.tables
    nvml = facts.nvml
    reported = None
    if isinstance(nvml, Found) and isinstance(nvml.value.cuda_driver_version, Found):
        reported = nvml.value.cuda_driver_version.value
    return _Driver(
        version, driver_cuda_of(tables, version, reported), facts.host.wsl, view.version_source
    )


def _needs_cuda_torch(ctx: RuleContext) -> Verdict | None:
    """Why a judgement of torch's CUDA build cannot run here, or None."""
    if cuda_torch(ctx.facts) is not None:
        return None
    build = torch_build(ctx.facts)
    if build is not None:
        return not_applicable(f"torch {build.version} is not a CUDA build")
    return not_applicable(f"no CUDA build of torch was read ({_torch_state(ctx.facts)})")


def _torch_state(facts: Facts) -> str:
    probed = facts.torch.torch
    if isinstance(probed, Found):
        return "import fails"
    return probed.reason if isinstance(probed, Absent) else f"probe failed: {probed.error}"


def _needs_driver(ctx: RuleContext) -> Verdict | None:
    if _driver(ctx) is not None:
        return None
    machine = ctx.machine
    if not machine.gpu_required:
        return not_applicable(machine.why_no_gpu())
    if not machine.driver.present:
        return not_applicable("no NVIDIA driver is installed (the driver checks say so)")
    return unknown("the driver version could not be read (the driver checks say why)")


def _needs_driver_and_torch(ctx: RuleContext) -> Verdict | None:
    return _needs_cuda_torch(ctx) or _needs_driver(ctx)


def _needs_tables(ctx: RuleContext) -> Verdict | None:
    if ctx.given_tables is None:
        return not_applicable("the fast tier judges without the compatibility tables")
    return None


def _advice(ctx: RuleContext, pin: str | None = None) -> Recommendation | None:
    """What ``envdoctor recommend`` would install here (None when it cannot say)."""
    try:
        rec = recommend(ctx.tables, machine_from_facts(ctx.facts, ctx.tables, ctx.intent), pin=pin)
    except Exception:  # noqa: BLE001 (advice is a bonus; the finding stands without it)
        return None
    return rec if rec.choice is not None else None


def _install_steps(ctx: RuleContext, rec: Recommendation | None) -> tuple[str, ...]:
    """Replace the installed torch (and its torchvision, torchaudio) with the recommended set,
    in the environment's own installer."""
    if rec is None or rec.choice is None:
        return ("envdoctor recommend   # the torch wheel that fits this driver and GPU",)
    steps = install_steps(installer_for(ctx.facts.torch), rec.choice.install_set, replace=True)
    return (
        *steps[:-1],
        f"{steps[-1]}   # {rec.choice.variant.name}: see `envdoctor recommend`",
    )


def _reinstall_same(ctx: RuleContext, build: TorchBuild) -> str:
    """Reinstall the installed torch set as it is (same version, same variant's index): what
    restores the libraries its wheel depends on."""
    from envdoctor.compat.companions import build_variant, cpu_set, matched_set

    version = build.version.split("+", 1)[0]
    release = ctx.tables.torch_release(build.version)
    variant_name = build_variant(build)
    row = release.variant(variant_name) if release else None
    if release is not None and row is not None:
        wanted = matched_set(release, row, version)
    elif variant_name == "cpu":
        wanted = cpu_set(release, version)
    else:
        return (
            f"{torch_python(ctx.facts)} -m pip install --force-reinstall torch=={version}   "
            "# from the index it came from (envdoctor recommend names one)"
        )
    return install_command(installer_for(ctx.facts.torch), wanted, reinstall=True)


def _gpu_cc(gpu: GpuFacts) -> tuple[int, int] | None:
    return (
        parse_cc(gpu.compute_capability.value)
        if isinstance(gpu.compute_capability, Found)
        else None
    )


# --- torch.driver-too-old --------------------------------------------------------------------


def _driver_too_old(ctx: RuleContext) -> Evaluation:
    build = cuda_torch(ctx.facts)
    driver = _driver(ctx)
    cuda = parse_cuda(build.cuda) if build else None
    if build is None or driver is None or cuda is None:
        yield unknown(f"torch.version.cuda is not a CUDA version ({build.cuda if build else ''})")
        return
    verdict = driver.judge(ctx.tables, cuda)
    evidence = (
        ("torch", build.version),
        ("torch.version.cuda", build.cuda),
        *driver.evidence(verdict),
    )
    if verdict.fit is DriverFit.NATIVE:
        yield passed(
            f"driver {driver.version} runs CUDA up to {verdict.driver_cuda_text()}; torch "
            f"{build.version} needs CUDA {build.cuda}"
        )
    elif verdict.fit is DriverFit.TOO_OLD:
        rec = _advice(ctx)
        older = (
            f"a torch built for CUDA ≤ {verdict.driver_cuda_text()}"
            if verdict.driver_cuda
            else "an older torch"
        )
        steps = [*_install_steps(ctx, rec)]
        if verdict.needed:
            steps.append(
                f"or upgrade the NVIDIA driver to ≥ {verdict.needed} (then reboot): {DRIVER_DOCS}"
            )
        package = ctx.tables.forward_compat_package(cuda)
        if package and driver_branch(driver.version) in package.base_branches:
            steps.append(
                f"data-center GPUs only: install {package.package} and put /usr/local/cuda-"
                f"{package.cuda}/compat on LD_LIBRARY_PATH (forward compatibility)"
            )
        yield Finding(
            code="torch.driver-too-old",
            severity=Severity.ERROR,
            title=(
                f"The NVIDIA driver {driver.version} is too old for torch {build.version}: it "
                f"supports "
                f"CUDA up to {verdict.driver_cuda_text()}, the wheel needs CUDA {build.cuda} "
                f"(driver {verdict.needed_text()})"
            ),
            evidence=evidence,
            remediation=Remediation(
                summary=f"Install {older}, or upgrade the driver to ≥ "
                f"{verdict.needed or 'a newer branch'}",
                steps=tuple(steps),
                docs=COMPAT_DOCS,
            ),
        )
    elif verdict.fit is DriverFit.MINOR_VERSION:
        yield Finding(
            code="torch.driver-too-old",
            severity=Severity.INFO,
            title=(
                f"torch {build.version} (CUDA {build.cuda}) runs on driver {driver.version} (CUDA "
                f"{verdict.driver_cuda_text()}) through CUDA {cuda[0]}.x minor-version "
                f"compatibility"
            ),
            evidence=(*evidence, ("not covered", _limitations(ctx.tables))),
            remediation=Remediation(
                summary=f"Nothing to do unless PTX JIT is needed; driver ≥ {verdict.full} "
                f"supports every "
                f"CUDA {build.cuda} feature",
                steps=(
                    f"upgrade the NVIDIA driver to ≥ {verdict.full} when convenient: {DRIVER_DOCS}",
                ),
                needs_root=True,
                needs_reboot=True,
                docs=COMPAT_DOCS,
            ),
        )
    else:
        yield unknown(
            f"envdoctor's tables cannot tell whether driver {driver.version} runs CUDA {build.cuda}"
        )


def _limitations(tables: CompatTables) -> str:
    if not tables.minor_version_limitations:
        return "PTX JIT of newer PTX; APIs newer than the driver"
    return "; ".join(limit.feature.split(":")[0] for limit in tables.minor_version_limitations[:2])


# --- torch.arch-unsupported ------------------------------------------------------------------


def _arch_unsupported(ctx: RuleContext) -> Evaluation:
    build = cuda_torch(ctx.facts)
    cuda = parse_cuda(build.cuda) if build else None
    if build is None or cuda is None:
        yield unknown("torch.version.cuda is not a CUDA version")
        return
    scope = gpu_scope(ctx)
    if scope is not None:
        yield scope
        return
    variant = ctx.tables.torch_variant(build.version, build.cuda)
    arch_list, origin = _arch_list(build, variant)
    targets = parse_arch_list(arch_list)
    if not targets:
        yield unknown(
            f"torch {build.version}'s compiled architectures are unknown (no arch list from "
            "torch and no table row)"
        )
        return
    if not any(_gpu_cc(g) for g in gpus(ctx.facts)):
        yield unknown("no GPU's compute capability could be read")
        return
    driver = _driver(ctx)
    verdict: DriverVerdict | None = None
    if driver is not None:
        verdict = driver.judge(ctx.tables, cuda)
    ptx_ok = verdict is None or verdict.fit is DriverFit.NATIVE
    arch_text = describe_arch_list(targets)
    for gpu in gpus(ctx.facts):
        cc = _gpu_cc(gpu)
        if cc is None:
            continue
        arch = judge_arch(targets, cc, ptx_jit_ok=ptx_ok)
        if arch.fit is ArchFit.SASS:
            continue
        evidence = (
            ("GPU", f"{gpu_label(gpu)}, compute capability {cc[0]}.{cc[1]} ({sm_name(cc)})"),
            ("torch", build.version),
            (f"compiled architectures ({origin})", arch_text),
        )
        if arch.fit is ArchFit.PTX:
            yield Finding(
                code="torch.arch-unsupported",
                severity=Severity.WARNING,
                title=(
                    f"{gpu_label(gpu)} has no native kernels in torch {build.version}; it runs "
                    f"only "
                    f"through PTX JIT ({arch.target.name if arch.target else 'PTX'})"
                ),
                evidence=evidence,
                remediation=Remediation(
                    summary=f"Install a torch variant compiled for {sm_name(cc)}",
                    steps=_install_steps(ctx, _advice(ctx)),
                ),
                subject=f"gpu{gpu.index}",
            )
            continue
        rec = _advice(ctx)
        blocked = arch.fit is ArchFit.PTX_BLOCKED
        title = (
            f"torch {build.version} has no kernels for {gpu_label(gpu)} ({sm_name(cc)}): CUDA "
            f"ops fail with "
            "'no kernel image is available for execution on the device'"
        )
        if blocked:
            title = (
                f"torch {build.version} has only PTX for {gpu_label(gpu)} ({sm_name(cc)}), and "
                f"driver "
                f"{driver.version if driver else ''} is too old to JIT-compile it"
            )
        steps = list(_install_steps(ctx, rec))
        steps.append(f'or build torch from source with TORCH_CUDA_ARCH_LIST="{cc[0]}.{cc[1]}"')
        yield Finding(
            code="torch.arch-unsupported",
            severity=Severity.ERROR,
            title=title,
            evidence=evidence,
            remediation=Remediation(
                summary=f"Install a torch variant that includes {sm_name(cc)}",
                steps=tuple(steps),
            ),
            subject=f"gpu{gpu.index}",
        )


def _arch_list(build: TorchBuild, variant: TorchVariant | None) -> tuple[tuple[str, ...], str]:
    if build.arch_list:
        return build.arch_list, "torch.cuda.get_arch_list()"
    if variant is not None:
        return variant.arch_list, f"compat table, {variant.name}"
    return (), ""


# --- cuDNN -----------------------------------------------------------------------------------

_INCOMPATIBLE = (  # a pattern string: re compiles it on first use, not at import
    r"compiled\s+against\s+\((\d+),\s*(\d+),\s*(\d+)\)\s+but\s+(?:found\s+runtime\s+version|linked\s+against)"
    r"\s+\((\d+),\s*(\d+),\s*(\d+)\)"
)
_LIB_VERSION = r"libcudnn\.so\.([0-9]{1,9}(?:\.[0-9]{1,9})*)$"  # bounded: int() of the major


def _cudnn_wheel(build: TorchBuild) -> tuple[str, str] | None:
    """The installed ``nvidia-cudnn-cuNN`` wheel (name, version)."""
    return next(
        ((n, v) for n, v in build.nvidia_wheels if n.lower().startswith("nvidia-cudnn-cu")), None
    )


def _expected_cudnn(
    build: TorchBuild, variant: TorchVariant | None
) -> tuple[tuple[int, int, int], str] | None:
    wheel = _cudnn_wheel(build)
    if wheel:
        parsed = parse_cudnn(wheel[1])
        if parsed:
            return parsed, f"{wheel[0]} {wheel[1]} (pip wheel torch depends on)"
    if variant is not None and variant.cudnn:
        parsed = parse_cudnn(variant.cudnn)
        if parsed:
            return parsed, f"{variant.cudnn} (bundled with the official {variant.name} wheels)"
    return None


def _runtime_cudnn(build: TorchBuild) -> tuple[int, int, int] | None:
    return (
        parse_cudnn(build.cudnn_version.value) if isinstance(build.cudnn_version, Found) else None
    )


def _cudnn_cuda_incompatible(ctx: RuleContext) -> Evaluation:
    build = cuda_torch(ctx.facts)
    cuda = parse_cuda(build.cuda) if build else None
    if build is None or cuda is None:
        yield unknown("torch.version.cuda is not a CUDA version")
        return
    wheel = _cudnn_wheel(build)
    if wheel:
        match = re.match(r"nvidia-cudnn-cu([0-9]{1,9})$", wheel[0].lower())
        if match and int(match.group(1)) != cuda[0]:
            yield Finding(
                code="cudnn.cuda-incompatible",
                severity=Severity.ERROR,
                title=(
                    f"{wheel[0]} {wheel[1]} is the cuDNN for CUDA {match.group(1)}, but torch "
                    f"{build.version} is built for CUDA {build.cuda}"
                ),
                evidence=(
                    ("torch.version.cuda", build.cuda),
                    ("cuDNN wheel", f"{wheel[0]} {wheel[1]}"),
                ),
                remediation=Remediation(
                    summary=f"Install the cuDNN wheel for CUDA {cuda[0]} that torch depends on",
                    steps=(
                        *removal_steps(installer_for(ctx.facts.torch), (wheel[0],)),
                        _reinstall_same(ctx, build),
                    ),
                ),
            )
    version = _runtime_cudnn(build)
    raw = build.cudnn_version.value if isinstance(build.cudnn_version, Found) else ""
    if version is None:
        yield unknown(f"torch's cuDNN version: {show(build.cudnn_version)}")
        return
    release = ctx.tables.cudnn_release(version)
    if release is None:
        yield unknown(f"cuDNN {cudnn_text(version)} has no row in envdoctor's cudnn table")
        return
    shown = cudnn_text(version)
    package = release.package_for(cuda)
    evidence = [
        ("torch", f"{build.version} (CUDA {build.cuda})"),
        (
            "cuDNN torch loaded",
            f"{shown} (torch.backends.cudnn.version() = {raw})",
        ),
        (
            "cuDNN support matrix",
            f"{release.cudnn}: CUDA " + ", ".join(p.cuda for p in release.packages),
        ),
    ]
    if package is None:
        yield Finding(
            code="cudnn.cuda-incompatible",
            severity=Severity.ERROR,
            title=f"cuDNN {shown} does not support CUDA {build.cuda}, the CUDA torch "
            f"{build.version} uses",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary="Let torch load the cuDNN it was built with",
                steps=(
                    "remove other cuDNN directories from LD_LIBRARY_PATH",
                    _reinstall_same(ctx, build),
                ),
            ),
        )
        return
    driver = _driver(ctx)
    needed = (
        (package.windows_driver if driver and driver.windows else package.linux_driver)
        if driver
        else None
    )
    if driver and needed and driver_at_least(driver.version, needed) is False:
        yield Finding(
            code="cudnn.cuda-incompatible",
            severity=Severity.WARNING,
            title=f"cuDNN {shown} for CUDA {cuda[0]} documents driver ≥ {needed}; this driver is "
            f"{driver.version}",
            evidence=(*evidence, ("driver", driver.version)),
            remediation=Remediation(
                summary=f"Upgrade the NVIDIA driver to ≥ {needed}",
                steps=(f"install driver ≥ {needed}, then reboot: {DRIVER_DOCS}",),
                needs_root=True,
                needs_reboot=True,
            ),
        )
    min_cc = parse_cc(release.min_cc) if release.min_cc else None
    for gpu in gpus(ctx.facts):
        cc = _gpu_cc(gpu)
        if cc is None or min_cc is None or cc >= min_cc:
            continue
        yield Finding(
            code="cudnn.cuda-incompatible",
            severity=Severity.ERROR,
            title=(
                f"cuDNN {shown} does not support {gpu_label(gpu)} (compute capability "
                f"{cc[0]}.{cc[1]}; it needs ≥ {release.min_cc}): convolutions and RNNs fail on it"
            ),
            evidence=(*evidence, ("GPU", f"{gpu_label(gpu)}, {sm_name(cc)}")),
            remediation=Remediation(
                summary=f"Use a torch whose cuDNN still supports {sm_name(cc)}",
                steps=_install_steps(ctx, _advice(ctx)),
            ),
            subject=f"gpu{gpu.index}",
        )


def _cudnn_load_mismatch(ctx: RuleContext) -> Evaluation:
    build = cuda_torch(ctx.facts)
    if build is None:
        return
    variant = ctx.tables.torch_variant(build.version, build.cuda)
    expected = _expected_cudnn(build, variant)
    loaded = tuple(path for family, path in build.loaded_libraries if family == "libcudnn")
    ld_path = ctx.facts.env.get("LD_LIBRARY_PATH")
    evidence: list[tuple[str, str]] = [("torch", build.version)]
    if expected:
        evidence.append(("cuDNN torch expects", expected[1]))
    evidence.extend(("libcudnn loaded", path) for path in loaded)
    if ld_path:
        evidence.append(("LD_LIBRARY_PATH", ld_path))
    fix = Remediation(
        summary="Make torch load its own cuDNN: take the other cuDNN off the loader path",
        steps=(
            "echo $LD_LIBRARY_PATH   # remove the directory that holds the other libcudnn",
            "unset LD_LIBRARY_PATH   # or set it without that directory, then retry",
            f"{torch_python(ctx.facts)} -c 'import torch; print(torch.backends.cudnn.version())'",
        ),
    )
    # 1. torch itself refused the cuDNN it found (its own check, in the probe's reason text).
    probed = build.cudnn_version
    reason = (
        probed.reason
        if isinstance(probed, Absent)
        else f"{probed.error} {probed.detail}"
        if isinstance(probed, ProbeFailed)
        else ""
    )
    match = re.search(_INCOMPATIBLE, reason)
    if match:
        compiled = ".".join(match.group(i) for i in (1, 2, 3))
        found = ".".join(match.group(i) for i in (4, 5, 6))
        yield Finding(
            code="cudnn.load-mismatch",
            severity=Severity.ERROR,
            title=f"torch {build.version} was built with cuDNN {compiled} but loaded cuDNN "
            f"{found}; it refuses to use it",
            evidence=(*evidence, ("torch said", reason)),
            remediation=fix,
        )
        return
    if expected is None:
        yield unknown(f"the cuDNN torch {build.version} was built with is unknown")
        return
    want = expected[0]
    # 2. A libcudnn of another major version is mapped into the process.
    for path in loaded:
        file_version = re.search(_LIB_VERSION, path)
        if not file_version:
            continue
        major = int(file_version.group(1).split(".")[0])
        if major != want[0]:
            yield Finding(
                code="cudnn.load-mismatch",
                severity=Severity.ERROR,
                title=(
                    f"torch {build.version} loaded {path.rsplit('/', 1)[-1]} (cuDNN "
                    f"{file_version.group(1)}) "
                    f"instead of the cuDNN {want[0]} it was built with"
                ),
                evidence=tuple(evidence),
                remediation=fix,
            )
            return
    # 3. The runtime version torch reports is older than the one it was built with.
    runtime = _runtime_cudnn(build)
    if runtime is None:
        yield unknown(f"torch's cuDNN version: {show(build.cudnn_version)}")
        return
    if runtime[0] != want[0] or runtime[1] < want[1]:
        yield Finding(
            code="cudnn.load-mismatch",
            severity=Severity.ERROR,
            title=(
                f"torch {build.version} runs with cuDNN {cudnn_text(runtime)}, not the cuDNN "
                f"{cudnn_text(want)} it expects"
            ),
            evidence=(*evidence, ("torch.backends.cudnn.version()", cudnn_text(runtime))),
            remediation=fix,
        )


# --- driver.gpu-unsupported / driver.open-modules-required ---------------------------------


def _gpu_unsupported(ctx: RuleContext) -> Evaluation:
    driver = _driver(ctx)
    if driver is None:
        return
    scope = _archs_scope(ctx)
    if scope is not None:
        yield scope
        return
    flavor = ctx.machine.driver.flavor
    for gpu in gpus(ctx.facts):
        name, arch = _arch_of(ctx, gpu)
        name = name or "GPU"
        if arch is None or arch.platform != "discrete":
            continue
        problems = [
            p
            for p in gpu_driver_problems(arch, driver.version, flavor, gpu.index, name)
            if "only with the open" not in p  # driver.open-modules-required says that one
        ]
        for problem in problems:
            too_new = "no longer supports" in problem
            if too_new:
                steps: tuple[str, ...] = (
                    f"install the R{arch.last_driver_branch} driver branch (the last for "
                    f"{arch.arch}), "
                    f"e.g. Ubuntu: sudo apt install nvidia-driver-{arch.last_driver_branch}",
                    "reboot",
                )
                summary = f"Go back to the R{arch.last_driver_branch} driver branch"
            elif "open NVIDIA kernel modules do not support" in problem:
                branch = str(driver.version).split(".", 1)[0]
                steps = (
                    "install the proprietary kernel-module flavour of the same driver branch "
                    f"(e.g. Ubuntu: nvidia-driver-{branch} rather than "
                    f"nvidia-driver-{branch}-open)",
                    "reboot",
                )
                summary = f"Use the proprietary NVIDIA kernel modules for {arch.arch}"
            else:
                steps = (f"install driver ≥ {arch.first_driver}: {DRIVER_DOCS}", "reboot")
                summary = f"Upgrade the NVIDIA driver to ≥ {arch.first_driver}"
            yield Finding(
                code="driver.gpu-unsupported",
                severity=Severity.ERROR,
                title=problem,
                evidence=(
                    ("GPU", f"{gpu_label(gpu)}, {arch.arch} {arch.sm}"),
                    ("driver", driver.version),
                    ("kernel modules", flavor or "unknown"),
                    ("supported by", _support_window(arch)),
                ),
                remediation=Remediation(
                    summary=summary,
                    steps=steps,
                    needs_root=True,
                    needs_reboot=True,
                    docs=DRIVER_DOCS,
                ),
                subject=f"gpu{gpu.index}",
            )


def _support_window(arch: object) -> str:
    first = getattr(arch, "first_driver", None)
    last = getattr(arch, "last_driver_branch", None)
    parts = [f"driver ≥ {first}" if first else "", f"branches up to R{last}" if last else ""]
    return ", ".join(p for p in parts if p) or "every current driver branch"


def _open_modules_required(ctx: RuleContext) -> Evaluation:
    kernel = ctx.facts.kernel.driver
    if not isinstance(kernel, Found):
        yield unknown(f"the kernel module's flavour: {show(kernel)}")
        return
    if kernel.value.flavor != "proprietary":
        yield passed(f"the {kernel.value.flavor} kernel modules are loaded")
        return
    scope = _archs_scope(ctx)
    if scope is not None:
        yield scope
        return
    branch = kernel.value.version.split(".")[0]
    for gpu in gpus(ctx.facts):
        _, arch = _arch_of(ctx, gpu)
        if arch is None or arch.kernel_modules != "open":
            continue
        yield Finding(
            code="driver.open-modules-required",
            severity=Severity.ERROR,
            title=(
                f"{gpu_label(gpu)} is {arch.arch}, which runs only with the open NVIDIA kernel "
                f"modules; "
                f"the proprietary module {kernel.value.version} is loaded"
            ),
            evidence=(
                ("GPU", f"{gpu_label(gpu)}, {arch.sm}"),
                ("/proc/driver/nvidia/version", kernel.value.raw or kernel.value.version),
            ),
            remediation=Remediation(
                summary=f"Install the open kernel-module flavour of driver {branch}",
                steps=(
                    f"Ubuntu: sudo apt install nvidia-driver-{branch}-open",
                    "RHEL/Rocky: sudo dnf module install nvidia-driver:open-dkms",
                    "runfile: sh NVIDIA-Linux-*.run -m=kernel-open",
                    "reboot, then check /proc/driver/nvidia/version says 'Open Kernel Module'",
                ),
                needs_root=True,
                needs_reboot=True,
                docs=OPEN_DOCS,
            ),
            subject=f"gpu{gpu.index}",
        )


# --- cuda.toolkit-driver-mismatch ------------------------------------------------------------


def _toolkit_driver_mismatch(ctx: RuleContext) -> Evaluation:
    nvcc = ctx.facts.env.nvcc
    driver = _driver(ctx)
    if not isinstance(nvcc, Found):
        yield not_applicable(missing_because("nvcc", nvcc))
        return
    if driver is None:
        return
    cuda = parse_cuda(nvcc.value.version)
    if cuda is None:
        yield unknown(f"nvcc's version {nvcc.value.version!r} is not a CUDA version")
        return
    verdict = driver.judge(ctx.tables, cuda)
    evidence = (
        ("nvcc", f"{nvcc.value.path} (CUDA {nvcc.value.version})"),
        *driver.evidence(verdict),
    )
    if verdict.fit is DriverFit.NATIVE:
        yield passed(
            f"nvcc {cuda_text(cuda)} ≤ CUDA {verdict.driver_cuda_text()}, what driver "
            f"{driver.version} runs"
        )
    elif verdict.fit is DriverFit.TOO_OLD:
        yield Finding(
            code="cuda.toolkit-driver-mismatch",
            severity=Severity.WARNING,
            title=(
                f"The CUDA toolkit at {nvcc.value.path} ({cuda_text(cuda)}) is newer than driver "
                f"{driver.version} supports (CUDA {verdict.driver_cuda_text()}): what it builds "
                f"will not run here"
            ),
            evidence=evidence,
            remediation=Remediation(
                summary=(
                    f"Build with a CUDA toolkit ≤ {verdict.driver_cuda_text()}, or upgrade the "
                    f"driver "
                    f"to ≥ {verdict.needed or 'a newer branch'}"
                ),
                steps=(
                    f"install CUDA toolkit {verdict.driver_cuda_text()} and point CUDA_HOME and "
                    f"PATH at it",
                    f"or upgrade the NVIDIA driver to ≥ {verdict.needed}, then reboot: "
                    f"{DRIVER_DOCS}",
                ),
            ),
        )
    elif verdict.fit is DriverFit.MINOR_VERSION:
        yield Finding(
            code="cuda.toolkit-driver-mismatch",
            severity=Severity.INFO,
            title=(
                f"nvcc {cuda_text(cuda)} is newer than driver {driver.version} (CUDA "
                f"{verdict.driver_cuda_text()}); what it builds runs through minor-version "
                f"compatibility, "
                "but PTX it emits cannot be JIT-compiled by this driver"
            ),
            evidence=evidence,
            remediation=Remediation(
                summary='Compile SASS for your GPUs (e.g. TORCH_CUDA_ARCH_LIST="9.0"), not PTX '
                "only",
                steps=(
                    'export TORCH_CUDA_ARCH_LIST="<your GPU\'s compute capability>"   # e.g. 8.0 '
                    "or 9.0",
                    f"or upgrade the driver to ≥ {verdict.full} for every CUDA {cuda_text(cuda)} "
                    f"feature",
                ),
            ),
        )
    else:
        yield unknown(
            f"envdoctor's tables cannot tell whether driver {driver.version} runs CUDA "
            f"{cuda_text(cuda)}"
        )


def _archs_scope(ctx: RuleContext) -> Verdict | None:
    """Why no GPU's architecture can be judged against the driver (no GPU to judge, or none of
    their architectures known), else None."""
    scope = gpu_scope(ctx)
    if scope is not None:
        return scope
    if not _known_archs(ctx):
        return unknown(
            "no GPU's architecture is known (compute capability unread or not in the tables)"
        )
    return None


def _arch_of(ctx: RuleContext, gpu: GpuFacts) -> tuple[str, Architecture | None]:
    """A GPU's product name ("" unread) and its architecture's row in the tables (by compute
    capability, and by product where one differs: GH200 needs the open modules, H100 not)."""
    cc = _gpu_cc(gpu)
    name = gpu.name.value if isinstance(gpu.name, Found) else ""
    return name, ctx.tables.architecture_for(cc, name) if cc else None


def _known_archs(ctx: RuleContext) -> list[object]:
    archs = [ctx.tables.architecture(cc) for cc in (_gpu_cc(g) for g in gpus(ctx.facts)) if cc]
    return [a for a in archs if a is not None]


def _driver_ok(ctx: RuleContext) -> str:
    driver = _driver(ctx)
    return f"driver {driver.version if driver else '?'} supports every GPU's architecture"


def _needs_nvcc(ctx: RuleContext) -> Verdict | None:
    nvcc = ctx.facts.env.nvcc
    return None if isinstance(nvcc, Found) else not_applicable(missing_because("nvcc", nvcc))


RULES: tuple[Rule, ...] = (
    Rule(
        "torch.driver",
        "The driver supports the CUDA version torch was built for",
        ("torch.driver-too-old",),
        judged(_driver_too_old, _needs_tables, _needs_driver_and_torch, ok=None),
    ),
    Rule(
        "torch.arch",
        "torch has kernels (SASS or usable PTX) for every GPU",
        ("torch.arch-unsupported",),
        judged(
            _arch_unsupported,
            _needs_tables,
            _needs_cuda_torch,
            ok=lambda ctx: "torch has native kernels for every GPU's compute capability",
        ),
    ),
    Rule(
        "cudnn.cuda",
        "The cuDNN torch loads supports its CUDA version, the driver and the GPUs",
        ("cudnn.cuda-incompatible",),
        judged(
            _cudnn_cuda_incompatible,
            _needs_tables,
            _needs_cuda_torch,
            ok=lambda ctx: "cuDNN's support matrix lists torch's CUDA, this driver and these GPUs",
        ),
    ),
    Rule(
        "cudnn.loaded",
        "torch loads the cuDNN it was built with",
        ("cudnn.load-mismatch",),
        judged(
            _cudnn_load_mismatch,
            _needs_tables,
            _needs_cuda_torch,
            ok=lambda ctx: "torch runs with the cuDNN version it was built with",
        ),
    ),
    Rule(
        "driver.gpu-support",
        "The driver branch supports every GPU",
        ("driver.gpu-unsupported",),
        judged(_gpu_unsupported, _needs_tables, _needs_driver, ok=_driver_ok),
    ),
    Rule(
        "driver.kernel-flavour",
        "GPUs that need the open kernel modules have them",
        ("driver.open-modules-required",),
        judged(
            _open_modules_required,
            _needs_tables,
            _needs_driver,
            ok=lambda ctx: "no GPU here needs the open kernel modules",
        ),
    ),
    Rule(
        "cuda.toolkit",
        "The local CUDA toolkit (nvcc) is not newer than the driver supports",
        ("cuda.toolkit-driver-mismatch",),
        judged(_toolkit_driver_mismatch, _needs_tables, _needs_nvcc, _needs_driver, ok=None),
    ),
)
