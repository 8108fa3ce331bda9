"""Small read-only helpers over Facts shared by the rules (no judgement here)."""

from __future__ import annotations

from envdoctor.model.facts import Facts, GpuFacts, LibraryCopy, NvmlSystem
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing


def show(probed: Probed[object]) -> str:
    """A probed value for evidence: the value, or why it is missing."""
    return str(probed.value) if isinstance(probed, Found) else why_missing(probed)


def module_names(facts: Facts) -> frozenset[str] | None:
    """Loaded kernel module names, or None when /proc/modules could not be read."""
    mods = facts.kernel.modules
    return frozenset(m.name for m in mods.value) if isinstance(mods, Found) else None


def nvml_system(facts: Facts) -> NvmlSystem | None:
    return facts.nvml.value if isinstance(facts.nvml, Found) else None


def driver_version(facts: Facts) -> str | None:
    """The running driver's version: NVML's, else the loaded kernel module's."""
    system = nvml_system(facts)
    if system is not None and isinstance(system.driver_version, Found):
        return system.driver_version.value
    kernel = facts.kernel.driver
    return kernel.value.version if isinstance(kernel, Found) else None


def gpus(facts: Facts) -> tuple[GpuFacts, ...]:
    system = nvml_system(facts)
    return system.gpus if system else ()


def nvml_error_kind(facts: Facts) -> str | None:
    """The NVML initialisation failure kind ("LibRmVersionMismatch" …), if NVML failed."""
    return facts.nvml.error if isinstance(facts.nvml, ProbeFailed) else None


def nvidia_pci_count(facts: Facts) -> int | None:
    pci = facts.host.nvidia_pci
    return len(pci.value) if isinstance(pci, Found) else None


def library_copies(facts: Facts, family: str) -> tuple[LibraryCopy, ...]:
    libs = facts.libraries
    if not isinstance(libs, Found):
        return ()
    for fam in libs.value:
        if fam.name == family:
            return fam.copies
    return ()


def userspace_driver_versions(facts: Facts) -> tuple[tuple[str, str], ...]:
    """(file, version) of libcuda / libnvidia-ml copies whose file names carry a full version."""
    out = []
    for family in ("libnvidia-ml", "libcuda"):
        for copy in library_copies(facts, family):
            if copy.version.count(".") >= 1 and "/stubs/" not in copy.realpath:
                pair = (copy.realpath, copy.version)
                if pair not in out:
                    out.append(pair)
    return tuple(out)


def driver_present(facts: Facts) -> bool:
    """Any sign of the NVIDIA driver: kernel module, /proc entry, NVML or libcuda."""
    mods = module_names(facts) or frozenset()
    return (
        "nvidia" in mods
        or isinstance(facts.kernel.driver, Found)
        or not isinstance(facts.nvml, Absent)
        or bool(library_copies(facts, "libcuda"))
    )


def gpu_label(gpu: GpuFacts) -> str:
    name = gpu.name.value if isinstance(gpu.name, Found) else "GPU"
    return f"GPU {gpu.index} ({name})"
