"""``recommend``: the best official torch wheel for a machine's driver and GPUs, and why.

Pure: a ``Machine`` (built from facts) and the tables in, a ``Recommendation`` out. The choice is
the newest release that has a variant whose CUDA the driver runs and whose arch list covers every
GPU; within a release, a variant the driver supports natively beats one that needs minor-version
compatibility, a stable variant beats an experimental one, then the higher CUDA wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from envdoctor import exitcodes
from envdoctor.compat.companions import cpu_set, matched_set
from envdoctor.compat.judge import (
    ArchFit,
    DriverFit,
    DriverVerdict,
    driver_cuda_of,
    judge_arch,
    judge_driver,
)
from envdoctor.compat.tables import Architecture, CompatTables, TorchRelease, TorchVariant
from envdoctor.compat.versions import (
    Cc,
    Cuda,
    cuda_text,
    describe_arch_list,
    driver_at_least,
    driver_branch,
    parse_cc,
    parse_driver,
    sm_name,
    torch_release_of,
)
from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import OWN_INTERPRETER, Facts, NvmlErrorKind, NvmlSystem
from envdoctor.model.install import BARE, Installer, InstallSet, installer_for, one_line
from envdoctor.model.probed import Found, ProbeFailed, why_missing
from envdoctor.model.views import (
    NO_INTENT,
    Intent,
    MachineKind,
    machine_view,
    module_state,
    torch_broken,
    torch_build,
)

# What to fix first when NVML lists no GPU on a machine that has NVIDIA GPUs, by NVML's failure
# kind: one line of what the driver.*, device.* and gpu.* findings of `envdoctor check` advise.
FIX_FIRST: dict[str, str] = {
    NvmlErrorKind.LIB_RM_VERSION_MISMATCH: (
        "reload the NVIDIA kernel modules or reboot: the loaded module is not the installed "
        "driver (upgraded without a reload; `envdoctor fix` writes the steps)"
    ),
    NvmlErrorKind.DRIVER_NOT_LOADED: (
        "load the nvidia kernel module (sudo modprobe nvidia; if that fails, dmesg says why)"
    ),
    NvmlErrorKind.LIBRARY_NOT_FOUND: "install the NVIDIA driver, then reboot",
    NvmlErrorKind.NO_PERMISSION: "give this user access to /dev/nvidiactl and /dev/nvidia*",
    NvmlErrorKind.GPU_IS_LOST: "reset the GPU or reboot: it fell off the bus (dmesg | grep -i xid)",
    NvmlErrorKind.TIMEOUT: (
        "see dmesg | grep -i xid: the driver does not answer; a GPU reset or reboot may be needed"
    ),
    NvmlErrorKind.UNKNOWN: (
        "see dmesg | grep -i xid: the driver failed; a GPU reset or reboot may be needed"
    ),
    NvmlErrorKind.FUNCTION_NOT_FOUND: (
        "reinstall the driver's user-space libraries: libnvidia-ml is older than the driver"
    ),
}
FIX_FIRST_OTHERWISE = "run nvidia-smi to see the driver's own error"
FIX_NOUVEAU = "blacklist nouveau, rebuild the initramfs and reboot: nouveau holds the GPU"
FIX_CONTAINER = (
    "start the container with GPU access (docker run --gpus all: NVIDIA Container Toolkit)"
)
FIX_USERSPACE = (
    "install the NVIDIA user-space driver (libnvidia-ml, libcuda) of the loaded module's version"
)


@dataclass(frozen=True, slots=True)
class MachineGpu:
    index: int
    name: str
    cc: Cc | None
    cc_problem: str = ""  # why the compute capability is unknown, when it is


@dataclass(frozen=True, slots=True)
class Machine:
    """What the recommendation depends on, read from facts (live or a snapshot).

    ``driver`` is the version compatibility is judged against (model/views.py): the installed
    user-space driver, which is what runs once a stale kernel module is reloaded.
    """

    driver: str | None
    driver_cuda: Cuda | None
    gpus: tuple[MachineGpu, ...]
    kernel_flavor: str | None = None
    windows: bool = False
    nvidia_pci: int | None = None
    driver_problem: str = ""  # why NVML gave no driver or GPU list, in NVML's words
    nvml_error: str = ""  # NVML's failure kind (NvmlErrorKind); "" when it listed the GPUs
    module_loaded: bool = False  # the nvidia kernel module runs (/proc or /sys/module)
    nouveau: bool = False
    containers: tuple[str, ...] = ()
    loaded_driver: str | None = None  # the kernel module's version, when it differs
    kind: MachineKind = MachineKind.GPU
    intent: Intent = NO_INTENT
    installed_torch: str | None = None  # the public version of the torch in use ("2.13.0")
    installer: Installer = BARE  # how the target environment installs (model/install.py)


def machine_from_facts(facts: Facts, tables: CompatTables, intent: Intent = NO_INTENT) -> Machine:
    """The driver, its CUDA version and the GPUs' compute capabilities, from probed facts."""
    view = machine_view(facts, intent)
    driver = view.driver
    reported: str | None = None
    gpus: tuple[MachineGpu, ...] = ()
    nvml = facts.nvml
    if isinstance(nvml, Found):
        if isinstance(nvml.value.cuda_driver_version, Found):
            reported = nvml.value.cuda_driver_version.value
        gpus = tuple(_machine_gpus(nvml.value))
        count_error = nvml.value.device_count_error
        error = count_error.split(":", 1)[0].strip() if count_error else ""
        problem = count_error or why_missing(nvml.value.driver_version)
    elif isinstance(nvml, ProbeFailed):
        error = nvml.error
        detail = nvml.detail.strip().splitlines()[0] if nvml.detail.strip() else ""
        problem = f"{nvml.error}: {detail}" if detail else nvml.error
    else:
        error, problem = NvmlErrorKind.LIBRARY_NOT_FOUND, nvml.reason
    version = driver.version
    loaded = driver.loaded.version if driver.loaded else None
    pci = view.presence.pci
    nouveau = module_state(facts, "nouveau")
    return Machine(
        driver=version,
        driver_cuda=driver_cuda_of(tables, version, reported) if version else None,
        gpus=gpus,
        kernel_flavor=driver.flavor,
        windows=facts.host.wsl,
        nvidia_pci=len(pci) if pci is not None else None,
        driver_problem=problem,
        nvml_error=error,
        module_loaded=driver.module.yes or driver.loaded is not None,
        nouveau=nouveau.yes or bool(view.presence.bound_to("nouveau")),
        containers=facts.host.containers,
        loaded_driver=loaded if loaded != version else None,
        kind=view.kind,
        intent=intent,
        installed_torch=_installed_torch(facts),
        installer=_installer(facts),
    )


def _installer(facts: Facts) -> Installer:
    """The target environment's installer when the torch probe read it; the bare ``pip``
    otherwise (an older snapshot), and never envdoctor's own environment."""
    if not isinstance(facts.torch.installer, Found) or facts.torch.chosen_by == OWN_INTERPRETER:
        return BARE
    return installer_for(facts.torch)


def _installed_torch(facts: Facts) -> str | None:
    build = torch_build(facts)
    if build is not None:
        return build.version.split("+", 1)[0]
    broken = torch_broken(facts)
    if broken is not None and isinstance(broken.version, Found):
        return broken.version.value.split("+", 1)[0]
    return None


def _machine_gpus(system: NvmlSystem) -> list[MachineGpu]:
    """NVML's GPUs; a compute capability NVML refused keeps NVML's reason."""
    out = []
    for gpu in system.gpus:
        name = gpu.name.value if isinstance(gpu.name, Found) else f"GPU {gpu.index}"
        probed = gpu.compute_capability
        cc = parse_cc(probed.value) if isinstance(probed, Found) else None
        problem = why_missing(probed)
        if isinstance(probed, Found) and cc is None:
            problem = f"NVML reported {probed.value!r}, not a compute capability"
        out.append(MachineGpu(gpu.index, name, cc, problem))
    return out


@dataclass(frozen=True, slots=True)
class Candidate:
    """One (release, variant) judged against the machine."""

    release: TorchRelease
    variant: TorchVariant
    version: str  # the exact torch version to install
    driver: DriverVerdict | None
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    reasons: tuple[str, ...]
    installer: Installer = BARE

    @property
    def works(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return f"torch {self.version} {self.variant.name}"

    @property
    def install_set(self) -> InstallSet:
        """torch with the torchvision and torchaudio released with it, from the variant's index."""
        return matched_set(self.release, self.variant, self.version)

    @property
    def command(self) -> str:
        """The set's install command in the target environment's installer."""
        return one_line(self.installer, self.install_set)

    def rank(self) -> tuple[Any, ...]:
        native = self.driver is not None and self.driver.fit is DriverFit.NATIVE
        return (native, not self.variant.experimental, self.variant.cuda_version)


@dataclass(frozen=True, slots=True)
class Recommendation:
    machine: Machine
    choice: Candidate | None
    rejected: tuple[Candidate, ...]
    blockers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    pinned: str | None = None
    cpu_command: str | None = None
    cpu_install: InstallSet | None = None  # the CPU build's set, when ``cpu_command`` is given
    considered: tuple[str, ...] = field(default=())
    kept_installed: bool = False

    @property
    def status(self) -> str:
        """ "ok", "blocked" (a pick exists but the driver itself must be fixed first), "cpu-only"
        or "none"."""
        if self.choice is None:
            return "cpu-only" if self.cpu_command and not self.blockers else "none"
        return "blocked" if self.blockers else "ok"

    @property
    def exit_code(self) -> int:
        return exitcodes.HEALTHY if self.status in ("ok", "cpu-only") else exitcodes.UNHEALTHY


def judge_candidate(
    tables: CompatTables,
    machine: Machine,
    release: TorchRelease,
    variant: TorchVariant,
    version: str,
) -> Candidate:
    """Every reason this variant would or would not work on the machine."""
    problems: list[str] = []
    notes: list[str] = []
    reasons: list[str] = []
    verdict: DriverVerdict | None = None
    if machine.driver is not None:
        verdict = judge_driver(
            tables,
            driver=machine.driver,
            driver_cuda=machine.driver_cuda,
            cuda=variant.cuda_version,
            windows=machine.windows,
        )
        supports = f"driver {machine.driver} supports CUDA up to {verdict.driver_cuda_text()}"
        if verdict.fit is DriverFit.NATIVE:
            reasons.append(f"{supports}; {variant.name} needs CUDA {variant.cuda}")
        elif verdict.fit is DriverFit.MINOR_VERSION:
            reasons.append(
                f"{supports}; {variant.name} (CUDA {variant.cuda}) runs on it through CUDA "
                f"{variant.cuda_version[0]}.x minor-version compatibility (driver ≥ "
                f"{verdict.floor})"
            )
            if verdict.full:
                notes.append(
                    f"driver ≥ {verdict.full} would support every CUDA {variant.cuda} feature; "
                    f"until "
                    f"then the driver cannot JIT-compile PTX built with CUDA {variant.cuda} "
                    f"(code that "
                    "ships only such PTX fails with 'the provided PTX was compiled with an "
                    "unsupported "
                    "toolchain')"
                )
        elif verdict.fit is DriverFit.TOO_OLD:
            problems.append(f"needs a driver {verdict.needed_text()}; {supports}")
        else:
            problems.append(
                f"envdoctor cannot tell whether driver {machine.driver} runs CUDA {variant.cuda}"
            )
    ptx_ok = verdict is None or verdict.fit is DriverFit.NATIVE
    targets = variant.targets
    arch_text = describe_arch_list(targets)
    for gpu in machine.gpus:
        if gpu.cc is None:
            notes.append(f"GPU {gpu.index} ({gpu.name}): {_cc_unknown(gpu)}, not checked")
            continue
        arch = judge_arch(targets, gpu.cc, ptx_jit_ok=ptx_ok)
        line = (
            f"GPU {gpu.index} ({gpu.name}) is {sm_name(gpu.cc)}; "
            f"{variant.name} {arch.explain(arch_text)}"
        )
        if arch.fit is ArchFit.SASS:
            reasons.append(line)
        elif arch.fit is ArchFit.PTX:
            reasons.append(line)
            notes.append(
                f"GPU {gpu.index} runs through PTX JIT: slow first start, and some libraries may "
                f"lack kernels"
            )
        else:
            problems.append(line)
    if not variant.confirmed:
        problems.append(f"the arch list of {variant.name} in torch {release.torch} is unconfirmed")
    if variant.experimental:
        notes.append(f"{variant.name} is an experimental variant of torch {release.torch}")
    return Candidate(
        release=release,
        variant=variant,
        version=version,
        driver=verdict,
        problems=tuple(problems),
        notes=tuple(notes),
        reasons=tuple(reasons),
        installer=machine.installer,
    )


def nvidia_evidence(machine: Machine) -> tuple[str, ...]:
    """What shows NVIDIA GPUs are here although NVML lists none; () on a machine without any.

    NVML that is missing or finds no loaded driver proves nothing by itself (a CPU machine says
    the same); any other NVML failure, or NVML that initialised, means a driver is running.
    """
    out = []
    if machine.module_loaded:
        out.append("the nvidia kernel module is loaded")
    if machine.nvidia_pci:
        gpus = (
            "1 NVIDIA GPU is"
            if machine.nvidia_pci == 1
            else f"{machine.nvidia_pci} NVIDIA GPUs are"
        )
        out.append(f"{gpus} on the PCI bus")
    if not out and machine.nvml_error not in (
        NvmlErrorKind.LIBRARY_NOT_FOUND,
        NvmlErrorKind.DRIVER_NOT_LOADED,
    ):
        out.append("NVML reached an NVIDIA driver")
    return tuple(out)


def fix_first(machine: Machine) -> str:
    """The one thing to fix so that NVML lists the GPUs (the check findings say more)."""
    missing = machine.nvml_error in (
        NvmlErrorKind.LIBRARY_NOT_FOUND,
        NvmlErrorKind.DRIVER_NOT_LOADED,
    )
    if missing and machine.nouveau:
        return FIX_NOUVEAU
    if machine.nvml_error == NvmlErrorKind.LIBRARY_NOT_FOUND:
        if machine.containers:
            return FIX_CONTAINER
        if machine.module_loaded:
            return FIX_USERSPACE
    return FIX_FIRST.get(machine.nvml_error, FIX_FIRST_OTHERWISE)


def _cc_unknown(gpu: MachineGpu) -> str:
    """ "compute capability unknown: probe failed: GPUIsLost" (the reason travels along)."""
    reason = f": {gpu.cc_problem}" if gpu.cc_problem else ""
    return f"compute capability unknown{reason}"


def machine_blockers(tables: CompatTables, machine: Machine) -> tuple[str, ...]:
    """Problems no torch wheel can fix: the driver cannot drive (or even list) the GPUs, or a
    GPU is expected where there is none."""
    out: list[str] = []
    if not machine.gpus:
        if machine.kind is not MachineKind.GPU:
            if machine.intent.expect_gpu:
                where = (
                    f"this container was given no NVIDIA GPU: {FIX_CONTAINER}"
                    if machine.kind is MachineKind.CONTAINER_WITHOUT_GPU
                    else "this machine has no NVIDIA GPU and no driver: run on one that has"
                )
                out.append(f"a GPU is expected ({machine.intent.source}) but {where}")
            return tuple(out)
        evidence = nvidia_evidence(machine)
        if evidence:
            why = f" ({machine.driver_problem})" if machine.driver_problem else ""
            out.append(
                f"NVML lists no GPU{why} although {' and '.join(evidence)}; fix the driver "
                f"first: {fix_first(machine)}"
            )
        return tuple(out)
    if machine.driver is None:
        out.append(
            f"the driver version cannot be read ({machine.driver_problem or 'unknown'}), so "
            f"envdoctor cannot tell which CUDA it runs: {FIX_FIRST_OTHERWISE}"
        )
        return tuple(out)
    for gpu in machine.gpus:
        arch = tables.architecture_for(gpu.cc, gpu.name) if gpu.cc else None
        if arch is None:
            continue
        out.extend(
            gpu_driver_problems(arch, machine.driver, machine.kernel_flavor, gpu.index, gpu.name)
        )
    return tuple(out)


def gpu_driver_problems(
    arch: Architecture, driver: str, flavor: str | None, index: int, name: str
) -> tuple[str, ...]:
    """Why this driver (and kernel-module flavour) cannot run a GPU of this architecture."""
    out = []
    label = f"GPU {index} ({name}, {arch.arch} {arch.sm})"
    branch = driver_branch(driver)
    if (
        arch.last_driver_branch is not None
        and branch is not None
        and branch > arch.last_driver_branch
    ):
        out.append(
            f"{label}: driver branch R{branch} no longer supports {arch.arch}; "
            f"R{arch.last_driver_branch} is the last branch that does"
        )
    if arch.first_driver and driver_at_least(driver, arch.first_driver) is False:
        out.append(f"{label}: driver {driver} predates {arch.arch}; it needs ≥ {arch.first_driver}")
    if arch.kernel_modules == "open" and flavor == "proprietary":
        out.append(f"{label}: {arch.arch} runs only with the open NVIDIA kernel modules")
    if arch.kernel_modules == "proprietary" and flavor == "open":
        out.append(f"{label}: the open NVIDIA kernel modules do not support {arch.arch}")
    return tuple(out)


def parse_pin(tables: CompatTables, pin: str) -> tuple[TorchRelease, str, str | None]:
    """``--torch 2.11`` / ``2.11.0`` / ``2.11.0+cu128`` → (release, exact version, variant)."""
    parsed = torch_release_of(pin)
    release = tables.torch_release(pin) if parsed else None
    if parsed is None or release is None:
        known = ", ".join(r.torch for r in tables.releases_newest_first())
        raise EnvdoctorError(
            f"torch {pin} is not in the compatibility tables",
            hint=f"known releases: {known}",
        )
    public = pin.split("+", 1)[0]
    version = public if public.count(".") >= 2 else release.latest
    variant = parsed[1]
    if variant and release.variant(variant) is None:
        raise EnvdoctorError(
            f"torch {release.torch} has no {variant} variant",
            hint="variants: " + ", ".join(v.name for v in release.variants),
        )
    return release, version, variant


def recommend(tables: CompatTables, machine: Machine, *, pin: str | None = None) -> Recommendation:
    """The best wheel for the machine (within ``pin``'s release when given) and the rest."""
    blockers = machine_blockers(tables, machine)
    if machine.driver is None or not machine.gpus:
        return _no_gpu_list(tables, machine, blockers, pin)
    if pin is None and machine.installed_torch:
        kept = _keep_installed(tables, machine)
        if kept is not None:
            return kept
    if pin is not None:
        release, version, only = parse_pin(tables, pin)
        releases: tuple[tuple[TorchRelease, str], ...] = ((release, version),)
    else:
        only = None
        releases = tuple((r, r.latest) for r in tables.releases_newest_first())
    choice: Candidate | None = None
    rejected: list[Candidate] = []
    considered: list[str] = []
    for index, (release, version) in enumerate(releases):
        candidates = [
            judge_candidate(tables, machine, release, v, version)
            for v in release.variants
            if only is None or v.name == only
        ]
        considered.append(release.torch)
        working = [c for c in candidates if c.works]
        if working:
            choice = max(working, key=lambda c: c.rank())
            if index > 0 or len(candidates) > 1:
                rejected.extend(c for c in candidates if not c.works)
            break
        if index == 0:
            rejected.extend(candidates)  # say what the newest (or pinned) release needs
    notes: list[str] = []
    upgrade = _driver_upgrade_path(rejected, releases[0][0], choice)
    if upgrade:
        notes.append(upgrade)
    notes.extend(_last_branch_notes(tables, machine))
    if choice is not None and choice.release.torch != releases[0][0].torch:
        notes.append(
            f"the newest release in envdoctor's tables, torch {releases[0][0].torch}, has no "
            f"variant "
            "that works here (see below)"
        )
    if (
        choice is not None
        and choice.release.default == choice.variant.name
        and choice.release.release_version.major >= 2
    ):
        notes.append(
            f"{choice.variant.name} is also what a plain `pip install torch=={choice.version}` "
            f"gets on Linux"
        )
    return Recommendation(
        machine=machine,
        choice=choice,
        rejected=tuple(rejected),
        blockers=blockers,
        notes=tuple(notes),
        pinned=pin,
        considered=tuple(considered),
    )


def _known_pin(tables: CompatTables, version: str) -> tuple[TorchRelease, str, str | None] | None:
    """``parse_pin``'s answer, or None for a version the tables do not know."""
    try:
        return parse_pin(tables, version)
    except EnvdoctorError:
        return None


def _keep_installed(tables: CompatTables, machine: Machine) -> Recommendation | None:
    """The installed torch version in the variant that fits, when one does: switching the
    variant (2.13.0+cpu → 2.13.0 from the cu130 index) changes less than a new release."""
    installed = machine.installed_torch
    if installed is None or _known_pin(tables, installed) is None:
        return None
    rec = recommend(tables, machine, pin=installed)
    if rec.choice is None:
        return None
    newest = tables.releases_newest_first()[0]
    notes = list(rec.notes)
    notes.insert(0, f"keeps the installed torch {installed}, in the variant that fits this machine")
    if newest.torch != rec.choice.release.torch:
        notes.insert(
            1,
            f"the newest release is torch {newest.latest}: `envdoctor recommend --torch "
            f"{newest.torch}` says whether it fits",
        )
    return replace(rec, pinned=None, notes=tuple(notes), kept_installed=True)


def _driver_upgrade_path(
    rejected: list[Candidate], newest: TorchRelease, choice: Candidate | None
) -> str:
    """ "a driver ≥ X would also allow torch 2.14.1 cu130" when only the driver stands between."""
    driver_only = [
        c
        for c in rejected
        if c.release.torch == newest.torch
        and c.driver is not None
        and c.driver.fit is DriverFit.TOO_OLD
        and len(c.problems) == 1
    ]
    if not driver_only:
        return ""
    best = min(
        driver_only,
        key=lambda c: (
            c.variant.experimental,
            parse_driver((c.driver.needed if c.driver else None) or "") or (),
            c.variant.cuda_version,
        ),
    )
    if (
        choice is not None
        and choice.rank()[2] >= best.variant.cuda_version
        and choice.release == newest
    ):
        return ""
    assert best.driver is not None
    return f"with a driver ≥ {best.driver.needed}, {best.label} would work too"


def _last_branch_notes(tables: CompatTables, machine: Machine) -> tuple[str, ...]:
    out = []
    branch = driver_branch(machine.driver) if machine.driver else None
    for gpu in machine.gpus:
        arch = tables.architecture_for(gpu.cc, gpu.name) if gpu.cc else None
        if arch and branch is not None and arch.last_driver_branch == branch:
            out.append(
                f"R{branch} is the last driver branch that supports {arch.arch} (GPU {gpu.index}): "
                "do not upgrade to a newer branch"
            )
    return tuple(dict.fromkeys(out))


def _no_gpu_list(
    tables: CompatTables, machine: Machine, blockers: tuple[str, ...], pin: str | None
) -> Recommendation:
    """No GPU to judge wheels against: the CPU build on a machine without NVIDIA hardware;
    with NVIDIA GPUs present, nothing (a CPU wheel there is the `torch.cpu-build` error)."""
    newest = tables.releases_newest_first()
    release, version = (newest[0], newest[0].latest) if newest else (None, "")
    if pin is not None:
        release, version, _ = parse_pin(tables, pin)
    elif machine.installed_torch and (known := _known_pin(tables, machine.installed_torch)):
        release, version, _ = known
    if blockers:
        return Recommendation(
            machine=machine,
            choice=None,
            rejected=(),
            blockers=blockers,
            notes=(
                "envdoctor picks a CUDA wheel once NVML lists the GPUs: fix the above "
                "(`envdoctor check` says more), then run `envdoctor recommend` again",
            ),
            pinned=pin,
        )
    return Recommendation(
        machine=machine,
        choice=None,
        rejected=(),
        notes=(_cpu_note(machine),),
        pinned=pin,
        cpu_command=one_line(machine.installer, cpu_set(release, version)) if release else None,
        cpu_install=cpu_set(release, version) if release else None,
    )


def _cpu_note(machine: Machine) -> str:
    if machine.kind is MachineKind.CONTAINER_WITHOUT_GPU:
        return (
            "this container was given no NVIDIA GPU: the CPU build of torch is the one that "
            "works here (start it with GPU access for a CUDA build)"
        )
    return "no NVIDIA driver or GPU here: the CPU build of torch is the one that works"


# --- rendering -----------------------------------------------------------------------------


def describe_machine(tables: CompatTables, machine: Machine) -> tuple[str, ...]:
    lines = []
    if machine.driver:
        cuda = cuda_text(machine.driver_cuda) if machine.driver_cuda else "unknown"
        flavor = f", {machine.kernel_flavor} kernel modules" if machine.kernel_flavor else ""
        lines.append(f"driver {machine.driver} (supports CUDA up to {cuda}{flavor})")
        if machine.loaded_driver:
            lines.append(
                f"kernel module {machine.loaded_driver} is loaded, not the installed "
                f"{machine.driver}: judged as {machine.driver}, what runs after a reload"
            )
    elif machine.gpus:
        lines.append(f"driver version unknown ({machine.driver_problem or 'unknown'})")
    else:
        lines.append(f"no NVIDIA driver ({machine.driver_problem or 'NVML unavailable'})")
    if not machine.gpus and machine.driver and machine.driver_problem:
        lines.append(f"no GPU listed ({machine.driver_problem})")
    for gpu in machine.gpus:
        if gpu.cc is None:
            lines.append(f"GPU {gpu.index}: {gpu.name} ({_cc_unknown(gpu)})")
            continue
        arch = tables.architecture_for(gpu.cc, gpu.name)  # a GH200 is Grace Hopper, as in blockers
        arch_name = f", {arch.arch}" if arch else ""
        lines.append(f"GPU {gpu.index}: {gpu.name} ({sm_name(gpu.cc)}{arch_name})")
    return tuple(lines)
