"""Live facts that confirm or rule out a cause found in a log (``explain --with-host``).

A signature lists the checks that bear on it (``facts: [gpu-memory]``). Each check is a pure
function of the captured values and the machine's ``Facts``; it returns a verdict, a one-line
note and the evidence it used. A check never raises: a value that could not be read keeps its
reason and the verdict stays neutral.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from envdoctor.kb.analyzers import human
from envdoctor.kb.model import HostCheck, Verdict
from envdoctor.kb.oomcheck import check_memory_holders, holder_label
from envdoctor.model.containers import SHM_ENOUGH, SHM_PATH
from envdoctor.model.facts import Facts, GpuFacts, NvmlErrorKind
from envdoctor.model.probed import Found, ProbeFailed, value_or, why_missing
from envdoctor.model.units import whole
from envdoctor.model.views import driver_view, gpu_presence, module_state, nvml_gpus
from envdoctor.model.visible import visible_gpus

Check = Callable[[Mapping[str, str], Facts], HostCheck]

LOW_FREE_FRACTION = 0.10


def _gpus(facts: Facts) -> tuple[GpuFacts, ...] | None:
    """NVML's GPUs, or None when NVML gave no list (the reason is in _nvml_reason)."""
    return nvml_gpus(facts) if isinstance(facts.nvml, Found) else None


def _nvml_reason(facts: Facts) -> str:
    return why_missing(facts.nvml) or "NVML answered"


def check_gpu_memory(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Free memory now, per GPU, and the processes that hold it."""
    name = "gpu-memory"
    gpus = _gpus(facts)
    if gpus is None:
        return HostCheck(name, Verdict.NEUTRAL, f"GPU memory unknown: {_nvml_reason(facts)}")
    wanted = whole(captures.get("gpu"), 9)
    evidence: list[tuple[str, str]] = []
    short: list[str] = []
    holders: list[str] = []
    for gpu in gpus:
        if wanted is not None and gpu.index != wanted:
            continue
        memory = value_or(gpu.memory, None)
        if memory is None:
            evidence.append((f"GPU {gpu.index} memory", why_missing(gpu.memory)))
            continue
        evidence.append(
            (f"GPU {gpu.index} memory", f"{human(memory.free)} free of {human(memory.total)}")
        )
        for proc in value_or(gpu.processes, ()):
            label = holder_label(
                (proc.pid, value_or(proc.name, "?"), value_or(proc.used_memory, None))
            )
            evidence.append((f"GPU {gpu.index} process", label))
            holders.append(label)
        if memory.total and memory.free / memory.total < LOW_FREE_FRACTION:
            short.append(f"GPU {gpu.index}")
    if short:
        held = f"; held by {', '.join(holders)}" if holders else ""
        note = f"{', '.join(short)} is nearly full right now{held}"
        return HostCheck(name, Verdict.CONFIRMS, note, tuple(evidence))
    if holders:
        note = "other processes hold GPU memory now, but there is room left: " + ", ".join(holders)
        return HostCheck(name, Verdict.NEUTRAL, note, tuple(evidence))
    note = (
        "GPU memory is free now and no other process holds it: if memory was the cause, "
        "the failing process used it itself"
    )
    return HostCheck(name, Verdict.NEUTRAL, note, tuple(evidence))


def check_driver_loaded(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Is the NVIDIA kernel driver loaded and answering now?"""
    del captures
    name = "driver-loaded"
    driver = driver_view(facts)
    evidence = [
        ("nvidia loaded", driver.module.describe()),
        ("kernel driver", driver.loaded.version if driver.loaded else driver.loaded_reason),
    ]
    if isinstance(facts.nvml, ProbeFailed):
        evidence.append(("NVML", facts.nvml.error))
    loaded = driver.loaded is not None or driver.module.yes
    if loaded and isinstance(facts.nvml, Found):
        return HostCheck(
            name,
            Verdict.RULES_OUT,
            "the driver is loaded and NVML answers on this machine now: if the error came from "
            "here it has since been fixed, or it came from a container started without GPU access",
            tuple(evidence),
        )
    if driver.module.no and driver.loaded is None:
        return HostCheck(
            name, Verdict.CONFIRMS, "no NVIDIA kernel driver is loaded now", tuple(evidence)
        )
    if not loaded:
        return HostCheck(
            name, Verdict.NEUTRAL, "whether the driver is loaded is unknown", tuple(evidence)
        )
    return HostCheck(
        name,
        Verdict.NEUTRAL,
        f"the driver is loaded but NVML: {_nvml_reason(facts)}",
        tuple(evidence),
    )


def check_driver_library_match(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Kernel module version against the installed user-space driver (model/views.py)."""
    del captures
    name = "driver-library-match"
    driver = driver_view(facts)
    evidence = [("kernel module", driver.loaded.version if driver.loaded else driver.loaded_reason)]
    evidence.extend((f"user-space {path}", version) for path, version in driver.userspace)
    if isinstance(facts.nvml, ProbeFailed):
        evidence.append(("NVML", facts.nvml.error))
    if driver.mismatch:
        return HostCheck(
            name,
            Verdict.CONFIRMS,
            f"the mismatch is still there now: {driver.describe()}",
            tuple(evidence),
        )
    if driver.loaded is not None and (driver.userspace or driver.nvml_version):
        return HostCheck(
            name,
            Verdict.RULES_OUT,
            f"kernel module and user space agree now ({driver.loaded.version}); a reboot or "
            "reload fixed it",
            tuple(evidence),
        )
    return HostCheck(name, Verdict.NEUTRAL, "versions could not both be read", tuple(evidence))


def check_driver_cuda(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """The driver version and the highest CUDA version it supports."""
    del captures
    name = "driver-cuda"
    driver = driver_view(facts)
    if driver.version is None:
        return HostCheck(name, Verdict.NEUTRAL, f"driver unknown: {_nvml_reason(facts)}")
    system = value_or(facts.nvml, None)
    cuda = value_or(system.cuda_driver_version, "?") if system else "? (NVML unavailable)"
    return HostCheck(
        name,
        Verdict.NEUTRAL,
        f"driver {driver.describe()} supports CUDA up to {cuda}: the torch wheel's CUDA must not "
        "be newer (envdoctor check compares them)",
        (("driver", driver.describe()), ("driver CUDA", cuda)),
    )


def check_gpu_count(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """How many GPUs exist (and are visible) against the device a checkpoint names."""
    name = "gpu-count"
    gpus = _gpus(facts)
    visible_value = facts.env.get("CUDA_VISIBLE_DEVICES")
    evidence: list[tuple[str, str]] = [
        ("CUDA_VISIBLE_DEVICES", "unset" if visible_value is None else repr(visible_value))
    ]
    if gpus is None:
        return HostCheck(
            name, Verdict.NEUTRAL, f"GPU count unknown: {_nvml_reason(facts)}", tuple(evidence)
        )
    visible = visible_gpus(facts, gpus)
    count = len(visible.gpus)
    evidence.append(
        ("GPUs visible", str(count) + (f" ({visible.problem})" if visible.problem else ""))
    )
    device = whole(captures.get("device"), 9)
    if device is not None:
        if device >= count:
            return HostCheck(
                name,
                Verdict.CONFIRMS,
                f"the checkpoint names cuda:{device} but only {count} GPU(s) are visible here",
                tuple(evidence),
            )
        return HostCheck(
            name, Verdict.NEUTRAL, f"cuda:{device} exists here ({count} visible)", tuple(evidence)
        )
    if count == 0:
        return HostCheck(
            name, Verdict.CONFIRMS, "no GPU is visible on this machine", tuple(evidence)
        )
    return HostCheck(name, Verdict.NEUTRAL, f"{count} GPU(s) visible", tuple(evidence))


def check_gpu_health(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Uncorrectable ECC errors, pending row remaps, GPUs lost from the bus."""
    del captures
    name = "gpu-health"
    gpus = _gpus(facts)
    if gpus is None:
        lost = isinstance(facts.nvml, ProbeFailed) and NvmlErrorKind.GPU_IS_LOST in facts.nvml.error
        verdict = Verdict.CONFIRMS if lost else Verdict.NEUTRAL
        return HostCheck(name, verdict, f"NVML: {_nvml_reason(facts)}")
    bad: list[str] = []
    evidence: list[tuple[str, str]] = []
    for gpu in gpus:
        if NvmlErrorKind.GPU_IS_LOST in gpu.failure_kinds():
            bad.append(f"GPU {gpu.index} has fallen off the bus")
        ecc = value_or(gpu.ecc, None)
        if ecc is not None:
            evidence.append(
                (
                    f"GPU {gpu.index} uncorrectable ECC",
                    f"volatile {ecc.volatile_uncorrectable}, aggregate {ecc.aggregate_uncorrectable}",
                )
            )
            if ecc.volatile_uncorrectable:
                bad.append(
                    f"GPU {gpu.index} has {ecc.volatile_uncorrectable} uncorrectable ECC errors"
                )
        remap = value_or(gpu.row_remap, None)
        if remap is not None and (remap.pending or remap.failure):
            bad.append(
                f"GPU {gpu.index} has a row remap {'failure' if remap.failure else 'pending (reset needed)'}"
            )
    if bad:
        return HostCheck(name, Verdict.CONFIRMS, "; ".join(bad), tuple(evidence))
    return HostCheck(
        name,
        Verdict.NEUTRAL,
        "the GPUs report no uncorrectable memory errors now: a software cause is more likely",
        tuple(evidence),
    )


def check_uvm(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Is nvidia_uvm loaded and /dev/nvidia-uvm present (CUDA needs both)?"""
    del captures
    name = "uvm"
    module = module_state(facts, "nvidia_uvm")
    nodes = value_or(facts.kernel.device_nodes, None)
    if nodes is None or not (module.yes or module.no):
        return HostCheck(
            name,
            Verdict.NEUTRAL,
            f"nvidia_uvm loaded: {module.describe()}; /dev: {why_missing(facts.kernel.device_nodes) or 'read'}",
        )
    node = any(n.path == "/dev/nvidia-uvm" for n in nodes)
    evidence = (
        ("nvidia_uvm loaded", module.describe()),
        ("/dev/nvidia-uvm", "present" if node else "missing"),
    )
    if not (module.yes and node):
        return HostCheck(
            name, Verdict.CONFIRMS, "nvidia_uvm or its device node is missing", evidence
        )
    return HostCheck(
        name,
        Verdict.NEUTRAL,
        "nvidia_uvm is loaded; after a suspend it can still be wedged (reload it)",
        evidence,
    )


def check_container(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Containers limit /dev/shm (Docker: 64 MiB by default)."""
    del captures
    name = "container"
    containers = facts.host.containers
    inside = facts.containers.inside
    shm = inside.value.shm if isinstance(inside, Found) else None
    size = shm.value.size if isinstance(shm, Found) else None
    if containers and size:  # /proc/self/mounts says how large it is (container.shm-small)
        shown = f"{size >> 20} MiB"
        evidence = (("container", ", ".join(containers)), (SHM_PATH, shown))
        if size < SHM_ENOUGH:
            return HostCheck(name, Verdict.CONFIRMS, f"{SHM_PATH} here is only {shown}", evidence)
        return HostCheck(
            name,
            Verdict.NEUTRAL,
            f"{SHM_PATH} here is {shown}: look at what fills it (`df -h {SHM_PATH}`)",
            evidence,
        )
    if containers:
        return HostCheck(
            name,
            Verdict.CONFIRMS,
            f"running in {', '.join(containers)}: its /dev/shm is small unless --shm-size or "
            "--ipc=host was given",
            (("container", ", ".join(containers)),),
        )
    return HostCheck(name, Verdict.NEUTRAL, "not in a container: check `df -h /dev/shm`")


def check_module_holders(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Which modules and processes keep the nvidia module busy."""
    del captures
    name = "module-holders"
    modules = value_or(facts.kernel.modules, ())
    evidence = [
        (m.name, f"used by {m.refcount}" + (f": {', '.join(m.used_by)}" if m.used_by else ""))
        for m in modules
        if m.name.startswith("nvidia")
    ]
    for gpu in _gpus(facts) or ():
        evidence.extend(
            (f"GPU {gpu.index} process", f"PID {proc.pid} {value_or(proc.name, '?')}")
            for proc in value_or(gpu.processes, ())
        )
    if evidence:
        return HostCheck(
            name,
            Verdict.CONFIRMS,
            "the nvidia modules have users now (see evidence)",
            tuple(evidence),
        )
    return HostCheck(name, Verdict.NEUTRAL, "no nvidia modules or GPU processes found now")


def check_libraries(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """Which copies of the CUDA libraries the loader can find; several copies shadow each other."""
    name = "libraries"
    families = value_or(facts.libraries, None)
    if families is None:
        return HostCheck(
            name, Verdict.NEUTRAL, f"libraries unknown: {why_missing(facts.libraries)}"
        )
    wanted = (captures.get("library") or "").split(".so")[0]
    evidence: list[tuple[str, str]] = []
    shadowed: list[str] = []
    found_wanted = False
    for family in families:
        paths = {copy.realpath for copy in family.copies}
        evidence.extend((family.name, f"{copy.path} ({copy.origin})") for copy in family.copies)
        if wanted and wanted.startswith(family.name):
            found_wanted = bool(family.copies)
        if len(paths) > 1:
            shadowed.append(family.name)
    if shadowed:
        return HostCheck(
            name,
            Verdict.CONFIRMS,
            f"several copies of {', '.join(shadowed)} can be loaded; the first one on the path wins",
            tuple(evidence),
        )
    if wanted and not found_wanted:
        return HostCheck(
            name, Verdict.CONFIRMS, f"no copy of {wanted} is found on this machine", tuple(evidence)
        )
    return HostCheck(name, Verdict.NEUTRAL, "one copy of each library found", tuple(evidence))


def check_gpu_models(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """The GPU models and compute capabilities (NVSwitch systems, architectures)."""
    del captures
    name = "gpu-models"
    gpus = _gpus(facts)
    if gpus is None:
        return HostCheck(name, Verdict.NEUTRAL, f"GPUs unknown: {_nvml_reason(facts)}")
    evidence = tuple(
        (
            f"GPU {g.index}",
            f"{value_or(g.name, '?')} (compute capability {value_or(g.compute_capability, '?')})",
        )
        for g in gpus
    )
    return HostCheck(name, Verdict.NEUTRAL, f"{len(gpus)} GPU(s) on this machine", evidence)


def check_nouveau(captures: Mapping[str, str], facts: Facts) -> HostCheck:
    """nouveau grabs the GPU before nvidia can."""
    del captures
    name = "nouveau"
    module = module_state(facts, "nouveau")
    bound = gpu_presence(facts).bound_to("nouveau")
    evidence = (
        ("nouveau loaded", module.describe()),
        ("GPUs bound to nouveau", ", ".join(bound) or "none"),
    )
    if module.yes or bound:
        return HostCheck(
            name, Verdict.CONFIRMS, "the nouveau driver is loaded and holds the GPU", evidence
        )
    if module.no:
        return HostCheck(name, Verdict.NEUTRAL, "nouveau is not loaded", evidence)
    return HostCheck(name, Verdict.NEUTRAL, f"nouveau loaded: {module.describe()}", evidence)


HOST_CHECKS: dict[str, Check] = {
    "gpu-memory": check_gpu_memory,
    "memory-holders": check_memory_holders,
    "driver-loaded": check_driver_loaded,
    "driver-library-match": check_driver_library_match,
    "driver-cuda": check_driver_cuda,
    "gpu-count": check_gpu_count,
    "gpu-health": check_gpu_health,
    "uvm": check_uvm,
    "container": check_container,
    "module-holders": check_module_holders,
    "libraries": check_libraries,
    "gpu-models": check_gpu_models,
    "nouveau": check_nouveau,
}
