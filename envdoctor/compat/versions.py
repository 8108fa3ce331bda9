"""Version arithmetic for drivers, CUDA, compute capabilities, arch lists and cuDNN.

Pure functions over strings, shared by the table loader, the rules and ``recommend``. Every
parser returns ``None`` for text it does not understand rather than guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A number in a version is ASCII digits, at most 9 of them: text from a snapshot or a table can
# be anything, and int() of thousands of digits raises (Python 3.11+) or takes long (3.10).
_N = "[0-9]{1,9}"
_NUMBER = re.compile(_N)
_DRIVER = re.compile(rf"^{_N}(?:\.{_N}){{0,3}}$")
_CUDA = re.compile(rf"^V?({_N})\.({_N})(?:\.{_N}){{0,6}}$")
_CC = re.compile(rf"^({_N})\.({_N})$")
_ARCH = re.compile(rf"^(sm|compute)_({_N})([af]?)$")
_ARCH_LIST_ENTRY = re.compile(rf"^({_N})\.({_N})([af]?)(\+PTX)?$")
_RELEASE = re.compile(rf"^{_N}(?:\.{_N}){{0,6}}$")

Cuda = tuple[int, int]
Cc = tuple[int, int]


def parse_driver(text: str) -> tuple[int, ...] | None:
    """``"580.159.04"`` → ``(580, 159, 4)``; compared component by component."""
    text = text.strip()
    if not _DRIVER.match(text):
        return None
    return tuple(int(part) for part in text.split("."))


def driver_branch(text: str) -> int | None:
    """The branch of a driver version: ``"535.104.05"`` → 535."""
    parsed = parse_driver(text)
    return parsed[0] if parsed else None


def driver_at_least(driver: str, minimum: str) -> bool | None:
    """Whether ``driver`` ≥ ``minimum`` (None when either is not a driver version)."""
    have, need = parse_driver(driver), parse_driver(minimum)
    if have is None or need is None:
        return None
    return have >= need


def parse_cuda(text: str) -> Cuda | None:
    """``"12.8"``, ``"12.8.1"``, ``"V12.8.93"`` → ``(12, 8)``; the integer form ``"12080"`` too."""
    text = text.strip()
    match = _CUDA.match(text)
    if match:
        return int(match.group(1)), int(match.group(2))
    if _NUMBER.fullmatch(text) and len(text) >= 4:
        # cuDriverGetVersion / cudaRuntimeGetVersion encoding: 1000 * major + 10 * minor.
        number = int(text)
        return number // 1000, (number % 1000) // 10
    return None


def cuda_text(cuda: Cuda) -> str:
    return f"{cuda[0]}.{cuda[1]}"


def parse_cc(text: str) -> Cc | None:
    """A compute capability ``"9.0"`` → ``(9, 0)``."""
    match = _CC.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def sm_name(cc: Cc) -> str:
    """``(12, 0)`` → ``"sm_120"``."""
    return f"sm_{cc[0]}{cc[1]}"


@dataclass(frozen=True, slots=True)
class ArchTarget:
    """One entry of a compiled arch list: SASS (``sm_90``) or PTX (``compute_90``).

    ``suffix`` is ``"a"`` for arch-specific targets (run only on exactly that CC) or ``"f"``
    for family targets (run on the same major at the same or a higher minor).
    """

    ptx: bool
    cc: Cc
    suffix: str = ""

    @property
    def name(self) -> str:
        prefix = "compute" if self.ptx else "sm"
        return f"{prefix}_{self.cc[0]}{self.cc[1]}{self.suffix}"

    def runs_natively_on(self, cc: Cc) -> bool:
        """SASS compatibility: same major, minor at least ours (exact CC for ``a`` targets)."""
        if self.ptx:
            return False
        if self.suffix == "a":
            return cc == self.cc
        return cc[0] == self.cc[0] and cc[1] >= self.cc[1]

    def jits_to(self, cc: Cc) -> bool:
        """PTX compatibility: the driver can JIT it for any CC at least ours."""
        if not self.ptx:
            return False
        if self.suffix == "a":
            return cc == self.cc
        if self.suffix == "f":
            return cc[0] == self.cc[0] and cc[1] >= self.cc[1]
        return cc >= self.cc


def parse_arch(text: str) -> ArchTarget | None:
    """``"sm_120"`` → SASS for 12.0; ``"compute_90a"`` → arch-specific PTX for 9.0."""
    match = _ARCH.match(text.strip())
    if not match:
        return None
    digits = match.group(2)
    if len(digits) < 2:
        return None
    cc = (int(digits[:-1]), int(digits[-1]))
    return ArchTarget(ptx=match.group(1) == "compute", cc=cc, suffix=match.group(3))


def parse_arch_list(entries: tuple[str, ...] | list[str]) -> tuple[ArchTarget, ...]:
    """The targets of ``torch.cuda.get_arch_list()`` output; unknown entries are skipped."""
    return tuple(t for t in (parse_arch(e) for e in entries) if t is not None)


def expand_torch_arch_list(spec: str) -> tuple[str, ...] | None:
    """``TORCH_CUDA_ARCH_LIST`` (``"7.5;8.0;12.0+PTX"``) → ``("sm_75", "sm_80", "sm_120",
    "compute_120")``, the form ``torch.cuda.get_arch_list()`` reports. None when malformed."""
    out: list[str] = []
    parts = [p.strip() for p in re.split(r"[;\s]+", spec.strip()) if p.strip()]
    if not parts:
        return None
    for part in parts:
        match = _ARCH_LIST_ENTRY.match(part)
        if not match:
            return None
        major, minor, suffix, ptx = match.groups()
        out.append(f"sm_{major}{minor}{suffix}")
        if ptx:
            out.append(f"compute_{major}{minor}{suffix}")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Coverage:
    """How an arch list serves one compute capability."""

    sass: ArchTarget | None
    ptx: ArchTarget | None

    @property
    def native(self) -> bool:
        return self.sass is not None


def coverage(targets: tuple[ArchTarget, ...], cc: Cc) -> Coverage:
    """The best SASS target that runs on ``cc`` and the best PTX target that can JIT to it."""
    sass = [t for t in targets if t.runs_natively_on(cc)]
    ptx = [t for t in targets if t.jits_to(cc)]
    return Coverage(
        sass=max(sass, key=lambda t: t.cc) if sass else None,
        ptx=max(ptx, key=lambda t: t.cc) if ptx else None,
    )


def describe_arch_list(targets: tuple[ArchTarget, ...]) -> str:
    """``"sm_50 … sm_90"`` style summary, PTX noted: ``"sm_75 … sm_120 + PTX compute_120"``."""
    sass = sorted((t for t in targets if not t.ptx), key=lambda t: (t.cc, t.suffix))
    ptx = sorted((t for t in targets if t.ptx), key=lambda t: (t.cc, t.suffix))
    parts = []
    if sass:
        parts.append(", ".join(t.name for t in sass))
    if ptx:
        parts.append("PTX " + ", ".join(t.name for t in ptx))
    else:
        parts.append("no PTX")
    return "; ".join(parts)


def parse_cudnn(text: str) -> tuple[int, int, int] | None:
    """cuDNN as torch reports it (``"91500"``, ``"8907"``) or dotted (``"9.10.2.21"``)."""
    text = text.strip()
    if _NUMBER.fullmatch(text):
        number = int(text)
        if number >= 90000:  # cuDNN 9+: major * 10000 + minor * 100 + patch
            return number // 10000, (number % 10000) // 100, number % 100
        if number >= 1000:  # cuDNN 7/8: major * 1000 + minor * 100 + patch
            return number // 1000, (number % 1000) // 100, number % 100
        return None
    parts = text.split(".")
    if not _RELEASE.fullmatch(text):
        return None
    nums = [int(p) for p in parts[:3]] + [0] * (3 - len(parts[:3]))
    return nums[0], nums[1], nums[2]


def cudnn_text(version: tuple[int, int, int]) -> str:
    return ".".join(str(n) for n in version)


def is_version(text: str) -> bool:
    """A PEP 440 release number made of digits and dots only (no letters, no local part).

    Every such text is a valid ``packaging`` ``Version`` (a release segment ``N(.N)*``), so this
    does not import ``packaging`` (~2 ms of every check: the rules import this module)."""
    return _RELEASE.fullmatch(text) is not None


def torch_release_of(version: str) -> tuple[str, str | None] | None:
    """``"2.11.0+cu130"`` → ``("2.11", "cu130")``; ``"2.11"`` → ``("2.11", None)``."""
    public, _, local = version.strip().partition("+")
    parts = public.split(".")
    if len(parts) < 2 or not _NUMBER.fullmatch(parts[0]) or not _NUMBER.fullmatch(parts[1]):
        return None
    return f"{int(parts[0])}.{int(parts[1])}", (local or None)
