"""The loaded compatibility tables: frozen rows and the look-ups rules and ``recommend`` need.

Each row keeps ``source`` (the documents it comes from), ``confirmed`` (False for values no
readable source confirmed, with ``missing`` saying what is missing) and ``where`` (file:line it
was read from, for messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.version import Version

from envdoctor.compat.versions import (
    ArchTarget,
    Cc,
    Cuda,
    driver_branch,
    parse_arch_list,
    parse_cc,
    parse_cuda,
    parse_cudnn,
    parse_driver,
    torch_release_of,
)

DEFAULT_INDEX_URL = "https://download.pytorch.org/whl/{variant}"


@dataclass(frozen=True, slots=True)
class CudaRelease:
    """A CUDA toolkit release and the driver it needs for all of its features."""

    cuda: str
    label: str
    linux_driver: str | None
    windows_driver: str | None
    source: tuple[str, ...]
    confirmed: bool = True
    missing: str = ""  # what no readable source confirmed (only when confirmed is False)
    note: str = ""
    where: str = field(default="", compare=False)

    @property
    def cuda_version(self) -> Cuda:
        parsed = parse_cuda(self.cuda)
        assert parsed is not None  # validated on load
        return parsed


@dataclass(frozen=True, slots=True)
class MinorVersionFloor:
    """CUDA ``major``.x applications run on any driver ≥ this floor (with limitations)."""

    major: int
    linux_driver: str
    windows_driver: str | None
    source: tuple[str, ...]
    where: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class MinorVersionLimitation:
    feature: str
    symptom: str
    source: tuple[str, ...]
    where: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class ForwardCompatGpuClass:
    gpus: str
    supported: bool
    source: tuple[str, ...]
    note: str = ""
    where: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class ForwardCompatPackage:
    """A cuda-compat package: CUDA ``cuda`` on the listed (older) driver branches."""

    package: str
    cuda: str
    base_branches: tuple[int, ...]
    source: tuple[str, ...]
    where: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class DriverBranch:
    """A driver branch and the highest CUDA version it supports (nvidia-smi's "CUDA Version")."""

    branch: int
    cuda: str
    example: str
    source: tuple[str, ...]
    kind: str = ""
    confirmed: bool = True
    missing: str = ""  # what no readable source confirmed (only when confirmed is False)
    note: str = ""
    where: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Architecture:
    """A compute capability: its architecture, example GPUs and support windows."""

    cc: str
    arch: str
    gpus: tuple[str, ...]
    source: tuple[str, ...]
    platform: str = "discrete"  # or "jetson"
    first_cuda: str | None = None
    last_cuda: str | None = None
    first_driver: str | None = None
    last_driver_branch: int | None = None
    kernel_modules: str = ""  # "open", "proprietary", "any" or "" (not applicable)
    confirmed: bool = True
    missing: str = ""  # what no readable source confirmed (only when confirmed is False)
    note: str = ""
    where: str = field(default="", compare=False)

    @property
    def cc_version(self) -> Cc:
        parsed = parse_cc(self.cc)
        assert parsed is not None  # validated on load
        return parsed

    @property
    def sm(self) -> str:
        return f"sm_{self.cc.replace('.', '')}"


@dataclass(frozen=True, slots=True)
class GpuProduct:
    """A product whose needs differ from its compute capability's row (GH200 is CC 9.0 like
    H100, but runs only with the open kernel modules), matched on NVML's GPU name."""

    product: str  # "Grace Hopper": replaces the architecture name in messages
    cc: str
    names: tuple[str, ...]  # case-insensitive substrings of the GPU name ("GH200")
    source: tuple[str, ...]
    kernel_modules: str = ""  # overrides the architecture's when set
    first_driver: str | None = None  # overrides the architecture's when set
    note: str = ""
    where: str = field(default="", compare=False)

    def matches(self, name: str) -> bool:
        lowered = name.lower()
        return any(pattern.lower() in lowered for pattern in self.names)

    def apply(self, arch: Architecture) -> Architecture:
        """``arch`` as this product needs it: its name, kernel modules and first driver."""
        return replace(
            arch,
            arch=self.product,
            kernel_modules=self.kernel_modules or arch.kernel_modules,
            first_driver=self.first_driver or arch.first_driver,
            source=(*arch.source, *(s for s in self.source if s not in arch.source)),
        )


@dataclass(frozen=True, slots=True)
class CudnnPackage:
    """One cuDNN package (per CUDA major) and the driver it documents."""

    cuda: str  # a specifier, e.g. ">=12.0,<13"
    linux_driver: str | None = None
    windows_driver: str | None = None

    def supports(self, cuda: Cuda) -> bool:
        from packaging.specifiers import SpecifierSet  # lazy: the probe tier never matches
        from packaging.version import Version

        return Version(f"{cuda[0]}.{cuda[1]}") in SpecifierSet(self.cuda)


@dataclass(frozen=True, slots=True)
class CudnnRelease:
    """A range of cuDNN releases sharing one support matrix."""

    cudnn: str  # a specifier, e.g. ">=9.0,<9.6"
    packages: tuple[CudnnPackage, ...]
    source: tuple[str, ...]
    min_cc: str | None = None
    max_cc: str | None = None
    confirmed: bool = True
    missing: str = ""  # what no readable source confirmed (only when confirmed is False)
    note: str = ""
    where: str = field(default="", compare=False)

    def contains(self, version: tuple[int, int, int]) -> bool:
        from packaging.specifiers import SpecifierSet  # lazy: the probe tier never matches
        from packaging.version import Version

        return Version(".".join(str(n) for n in version)) in SpecifierSet(self.cudnn)

    def package_for(self, cuda: Cuda) -> CudnnPackage | None:
        return next((p for p in self.packages if p.supports(cuda)), None)


@dataclass(frozen=True, slots=True)
class TorchVariant:
    """One CUDA variant of a PyTorch release's official wheels."""

    name: str  # "cu130"
    cuda: str  # "13.0"
    index_url: str
    arch_spec: str  # TORCH_CUDA_ARCH_LIST, e.g. "7.5;8.0;12.0+PTX"
    arch_list: tuple[str, ...]  # expanded: ("sm_75", "sm_80", "sm_120", "compute_120")
    source: tuple[str, ...]
    cudnn: str | None = None
    nccl: str | None = None
    experimental: bool = False
    confirmed: bool = True
    missing: str = ""  # what no readable source confirmed (only when confirmed is False)
    note: str = ""
    where: str = field(default="", compare=False)

    @property
    def cuda_version(self) -> Cuda:
        parsed = parse_cuda(self.cuda)
        assert parsed is not None  # validated on load
        return parsed

    @property
    def targets(self) -> tuple[ArchTarget, ...]:
        return parse_arch_list(self.arch_list)


@dataclass(frozen=True, slots=True)
class TorchCompanions:
    """The torchvision and torchaudio released with one torch patch release (``"2.13.0"``):
    the set to install together, from one index (PyTorch's published version pairs)."""

    torch: str
    torchvision: str
    torchaudio: str
    source: tuple[str, ...]
    note: str = ""
    where: str = field(default="", compare=False)

    def version_of(self, name: str) -> str | None:
        return {"torchvision": self.torchvision, "torchaudio": self.torchaudio}.get(name)


@dataclass(frozen=True, slots=True)
class TorchRelease:
    """A PyTorch feature release (``"2.11"``) and its official CUDA wheels."""

    torch: str
    latest: str
    python: str
    variants: tuple[TorchVariant, ...]
    source: tuple[str, ...]
    default: str | None = None
    note: str = ""
    where: str = field(default="", compare=False)
    companions: tuple[TorchCompanions, ...] = ()
    """torchvision/torchaudio for each patch release; () when the table gives none."""

    def companions_of(self, version: str) -> TorchCompanions | None:
        """The set released with torch ``version`` (``"2.13.0"``, ``"2.13.0+cpu"``)."""
        public = version.split("+", 1)[0]
        return next((c for c in self.companions if c.torch == public), None)

    @property
    def release_version(self) -> Version:
        from packaging.version import Version

        return Version(self.torch)

    def variant(self, name: str) -> TorchVariant | None:
        return next((v for v in self.variants if v.name == name), None)


@dataclass(frozen=True, slots=True)
class CompatTables:
    """Every table, loaded and validated. ``CompatTables()`` is the empty set of tables."""

    cuda_releases: tuple[CudaRelease, ...] = ()
    minor_version_floors: tuple[MinorVersionFloor, ...] = ()
    minor_version_limitations: tuple[MinorVersionLimitation, ...] = ()
    forward_compat_gpus: tuple[ForwardCompatGpuClass, ...] = ()
    forward_compat_packages: tuple[ForwardCompatPackage, ...] = ()
    driver_branches: tuple[DriverBranch, ...] = ()
    architectures: tuple[Architecture, ...] = ()
    gpu_products: tuple[GpuProduct, ...] = ()
    cudnn: tuple[CudnnRelease, ...] = ()
    torch_releases: tuple[TorchRelease, ...] = ()
    origins: tuple[str, ...] = ()  # the directories the tables were read from, in order

    # --- CUDA toolkit → driver ------------------------------------------------------------

    def full_feature_driver(self, cuda: Cuda, *, windows: bool = False) -> CudaRelease | None:
        """The release row of CUDA ``major.minor`` with the lowest driver that runs all of it."""
        rows = [
            r
            for r in self.cuda_releases
            if r.cuda_version == cuda and (r.windows_driver if windows else r.linux_driver)
        ]
        if not rows:
            return None
        return min(rows, key=lambda r: parse_driver(_driver_of(r, windows)) or ())

    def minor_version_floor(self, major: int) -> MinorVersionFloor | None:
        return next((f for f in self.minor_version_floors if f.major == major), None)

    def forward_compat_package(self, cuda: Cuda) -> ForwardCompatPackage | None:
        return next((p for p in self.forward_compat_packages if parse_cuda(p.cuda) == cuda), None)

    # --- driver branches ------------------------------------------------------------------

    def branch_row(self, driver: str) -> DriverBranch | None:
        """The row of the driver's branch, or of the nearest lower listed branch."""
        branch = driver_branch(driver)
        if branch is None:
            return None
        rows = [b for b in self.driver_branches if b.branch <= branch]
        return max(rows, key=lambda b: b.branch) if rows else None

    # --- architectures --------------------------------------------------------------------

    def architecture(self, cc: str | Cc) -> Architecture | None:
        wanted = parse_cc(cc) if isinstance(cc, str) else cc
        return next((a for a in self.architectures if a.cc_version == wanted), None)

    def architecture_for(self, cc: str | Cc, name: str) -> Architecture | None:
        """The architecture row of a GPU named ``name``, with its product's overrides applied."""
        arch = self.architecture(cc)
        if arch is None:
            return None
        product = next(
            (p for p in self.gpu_products if parse_cc(p.cc) == arch.cc_version and p.matches(name)),
            None,
        )
        return product.apply(arch) if product else arch

    # --- cuDNN ----------------------------------------------------------------------------

    def cudnn_release(self, version: str | tuple[int, int, int]) -> CudnnRelease | None:
        parsed = parse_cudnn(version) if isinstance(version, str) else version
        if parsed is None:
            return None
        return next((r for r in self.cudnn if r.contains(parsed)), None)

    # --- PyTorch --------------------------------------------------------------------------

    def torch_release(self, version: str) -> TorchRelease | None:
        """The release of ``"2.11.0+cu130"``, ``"2.11.0"`` or ``"2.11"``."""
        parsed = torch_release_of(version)
        if parsed is None:
            return None
        return next((r for r in self.torch_releases if r.torch == parsed[0]), None)

    def torch_variant(self, version: str, cuda: str = "") -> TorchVariant | None:
        """The wheel variant of an installed torch: by its ``+cuXYZ`` tag, else by its CUDA."""
        release = self.torch_release(version)
        parsed = torch_release_of(version)
        if release is None or parsed is None:
            return None
        if parsed[1]:
            return release.variant(parsed[1])
        wanted = parse_cuda(cuda) if cuda else None
        matches = [v for v in release.variants if wanted and v.cuda_version == wanted]
        return matches[0] if len(matches) == 1 else None

    def releases_newest_first(self) -> tuple[TorchRelease, ...]:
        return tuple(sorted(self.torch_releases, key=lambda r: r.release_version, reverse=True))


def _driver_of(row: CudaRelease, windows: bool) -> str:
    return (row.windows_driver if windows else row.linux_driver) or ""


SECTIONS: dict[str, tuple[str, ...]] = {
    "cuda-toolkits": (
        "cuda_releases",
        "minor_version_floors",
        "minor_version_limitations",
        "forward_compat_gpus",
        "forward_compat_packages",
    ),
    "driver-branches": ("driver_branches",),
    "architectures": ("architectures", "gpu_products"),
    "cudnn": ("cudnn",),
    "pytorch": ("torch_releases",),
}
"""Table name -> the ``CompatTables`` fields it fills (here, not in the loader: ``tables show``
and help read it without importing the YAML reader)."""
TABLE_NAMES = tuple(SECTIONS)


def count_rows(tables: CompatTables) -> dict[str, int]:
    """Rows per table, as ``tables validate`` reports them."""
    return {name: sum(len(getattr(tables, f)) for f in fields) for name, fields in SECTIONS.items()}
