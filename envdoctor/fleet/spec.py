"""Node specs: the expected state of a machine, written once and checked on every run.

``envdoctor spec init`` writes a spec from the machine as it is (like NHC's ``nhc-genconf``, but
for the software stack too); ``envdoctor check --spec node.yaml`` turns every difference into a
``spec.*`` finding. The file is YAML so that people can read, edit and review it::

    schema_version: 1
    kind: envdoctor-spec
    gpus:
      count: 8
      model: NVIDIA H100 80GB HBM3
      persistence_mode: true
      ecc: true
      mig: off            # or per GPU, in index order: the number of MIG devices, or off
    driver:
      branch: "580"       # the major version; `version: 580.159.04` pins it exactly
      cuda: "13.0"        # the CUDA version the driver supports (nvidia-smi's "CUDA Version")
    torch:
      version: 2.11.0+cu130
      cudnn: 9.15.0

Every key is optional: a key that is not there is not checked. A malformed file is an
``EnvdoctorError`` naming the file and line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts, GpuFacts, TorchBroken, TorchBuild
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import passed
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed, why_missing
from envdoctor.model.units import plural, whole
from envdoctor.model.views import driver_view, torch_not_probed
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.terminal import quoted, safe_line
from envdoctor.yamlsource import Map, Node, Reader, Scalar, load, parse, plain_kind

SPEC_SCHEMA_VERSION = 1
SPEC_KIND = "envdoctor-spec"

GPU_COUNT = "spec.gpu-count"
GPU_MODEL = "spec.gpu-model"
DRIVER_BRANCH = "spec.driver-branch"
DRIVER_VERSION = "spec.driver-version"
CUDA_VERSION = "spec.cuda-version"
TORCH_VERSION = "spec.torch-version"
CUDNN_VERSION = "spec.cudnn-version"
PERSISTENCE = "spec.persistence-mode"
ECC = "spec.ecc-mode"
MIG = "spec.mig-layout"
UNVERIFIABLE = "spec.unverifiable"
CODES = (
    GPU_COUNT,
    GPU_MODEL,
    DRIVER_BRANCH,
    DRIVER_VERSION,
    CUDA_VERSION,
    TORCH_VERSION,
    CUDNN_VERSION,
    PERSISTENCE,
    ECC,
    MIG,
    UNVERIFIABLE,
)

MigLayout = Union[Literal["off"], tuple[Union[int, None], ...]]  # noqa: UP007 (runtime alias, 3.10)
"""``"off"`` (MIG off on every GPU) or, per GPU in index order, a MIG device count or None (off)."""


@dataclass(frozen=True, slots=True)
class Spec:
    """The expected state; ``None`` means "not checked". ``source`` names the file for evidence."""

    source: str = ""
    gpu_count: int | None = None
    gpu_model: str | None = None
    persistence_mode: bool | None = None
    ecc: bool | None = None
    mig: MigLayout | None = None
    driver_branch: str | None = None
    driver_version: str | None = None
    cuda: str | None = None
    torch_version: str | None = None
    cudnn: str | None = None

    @property
    def needs_torch(self) -> bool:
        """Whether checking this spec needs the (slow) torch child probe."""
        return self.torch_version is not None or self.cudnn is not None


# --- reading ----------------------------------------------------------------------------------


def load_spec(path: Path | str) -> Spec:
    """Read and validate a spec file; any problem raises ``EnvdoctorError`` with file:line."""
    return _spec(load(Path(path), empty="the spec is empty", empty_hint=_INIT_HINT), str(path))


def parse_spec(text: str, *, source: str = "<spec>") -> Spec:
    """Validate spec YAML text (see the module docstring for the format)."""
    return _spec(parse(text, source, empty="the spec is empty", empty_hint=_INIT_HINT), source)


# The format, one section per line: a key added here (and read in ``_spec``) is all a new check
# needs on the reading side.
_INIT_HINT = "write one with: envdoctor spec init -o node.yaml"
_TOP_KEYS = ("schema_version", "kind", "gpus", "driver", "torch")
_GPU_KEYS = ("count", "model", "persistence_mode", "ecc", "mig")
_DRIVER_KEYS = ("branch", "version", "cuda")
_TORCH_KEYS = ("version", "cudnn")
_OFF_WORDS = ("off", "disabled", "false", "no")
MAX_GPUS = 4096  # more than any node has: a larger count is a typo (or an attack), not a spec
MAX_MIG_DEVICES = 64  # per GPU (today's GPUs have at most 7)
# torch.__version__: a release (2.11.0), perhaps a pre-release (2.12.0a0, rc1, .dev2026…), a local
# build tag (+cu130, +git1a2b3c); or the first parts of one (2.11).
_TORCH_VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc|\.post|\.dev)\d+)*(\+[A-Za-z0-9.]+)?")
_VERSION = re.compile(r"\d{1,9}(\.\d{1,9})*")


def _spec(root: Node, source: str) -> Spec:
    read = _SpecReader(source)
    top = read.keys(read.mapping(root, "the spec"), "the spec", optional=_TOP_KEYS)
    if "schema_version" not in top.items:
        raise EnvdoctorError(
            "the spec: missing key 'schema_version'", where=f"{source}:1", hint=_INIT_HINT
        )
    if read.integer(top.items["schema_version"], "schema_version") != SPEC_SCHEMA_VERSION:
        raise read.error(
            top.items["schema_version"], f"schema_version: must be {SPEC_SCHEMA_VERSION}"
        )
    if "kind" in top.items and read.text(top.items["kind"], "kind") != SPEC_KIND:
        raise read.error(top.items["kind"], f"kind: must be {SPEC_KIND!r}")
    gpus = read.section(top, "gpus", _GPU_KEYS)
    driver = read.section(top, "driver", _DRIVER_KEYS)
    torch = read.section(top, "torch", _TORCH_KEYS)
    return Spec(
        source=source,
        gpu_count=read.optional(gpus, "count", "gpus", read.count),
        gpu_model=read.optional(gpus, "model", "gpus", read.text),
        persistence_mode=read.optional(gpus, "persistence_mode", "gpus", read.boolean),
        ecc=read.optional(gpus, "ecc", "gpus", read.boolean),
        mig=read.optional(gpus, "mig", "gpus", read.mig),
        driver_branch=read.optional(driver, "branch", "driver", read.branch),
        driver_version=read.optional(driver, "version", "driver", read.version),
        cuda=read.optional(driver, "cuda", "driver", read.version),
        torch_version=read.optional(torch, "version", "torch", read.torch_version),
        cudnn=read.optional(torch, "cudnn", "torch", read.version),
    )


T = TypeVar("T")


class _SpecReader(Reader):
    """The shared reader plus the spec's vocabulary: versions, counts, the MIG layout."""

    def section(self, top: Map, key: str, keys: Sequence[str]) -> Map | None:
        """``gpus:``, ``driver:`` or ``torch:``; None when the spec has no such section."""
        if key not in top.items:
            return None
        return self.keys(self.mapping(top.items[key], key), key, optional=keys)

    def optional(
        self, section: Map | None, key: str, prefix: str, read: Callable[[Node, str], T]
    ) -> T | None:
        """``section[key]`` read by ``read`` (None: not checked)."""
        if section is None or key not in section.items:
            return None
        return read(section.items[key], f"{prefix}.{key}")

    def count(self, node: Node, what: str) -> int:
        return self.integer(node, what, high=MAX_GPUS)

    def version(self, node: Node, what: str) -> str:
        text = self.text(node, what)  # the text as written: 2.10 stays "2.10", not 2.1
        if not _VERSION.fullmatch(text):
            raise self.error(node, f"{what}: expected a version such as 12.4, got {quoted(text)}")
        return text

    def branch(self, node: Node, what: str) -> str:
        text = self.text(node, what)
        if not _VERSION.fullmatch(text) or "." in text:
            raise self.error(
                node, f"{what}: expected a major version such as 580, got {quoted(text)}"
            )
        return text

    def torch_version(self, node: Node, what: str) -> str:
        text = self.text(node, what)
        if len(text) > 64 or not _TORCH_VERSION.fullmatch(text):
            raise self.error(
                node, f"{what}: expected a version such as 2.11.0+cu130 or 2.11, got {quoted(text)}"
            )
        return text

    def mig(self, node: Node, what: str) -> MigLayout:
        if isinstance(node, Scalar):
            if _is_off(node):
                return "off"
            raise self.error(node, f"{what}: expected off or a list (one entry per GPU)")
        layout: list[int | None] = []
        for index, item in enumerate(self.sequence(node, what)):
            entry = f"{what}[{index}]"
            if isinstance(item, Scalar) and _is_off(item):
                layout.append(None)
            elif isinstance(item, Scalar) and item.kind == "int":
                layout.append(self.integer(item, entry, high=MAX_MIG_DEVICES))
            else:
                raise self.error(
                    item, f"{entry}: expected off or the number of MIG devices of that GPU"
                )
        return tuple(layout)


def _is_off(node: Scalar) -> bool:
    return node.text.lower() in _OFF_WORDS


# --- writing ----------------------------------------------------------------------------------


def spec_from_facts(facts: Facts) -> tuple[Spec, tuple[str, ...]]:
    """The spec this machine meets now, and a note for each value that could not be read."""
    notes: list[str] = []
    gpus = _gpus(facts)
    nvml = facts.nvml
    if isinstance(nvml, ProbeFailed):
        notes.append(f"gpus: NVML failed ({_why(nvml)})")
    count = len(gpus) if gpus is not None else None
    names = {g.name.value for g in gpus or () if isinstance(g.name, Found)}
    model = names.pop() if len(names) == 1 and gpus and _all_found(g.name for g in gpus) else None
    if gpus and model is None:
        notes.append("gpus.model: the GPUs differ or a name could not be read")
    persistence = _uniform(gpus, lambda g: g.persistence_mode, "gpus.persistence_mode", notes)
    ecc = _uniform(gpus, _ecc_probed, "gpus.ecc", notes)
    mig = _mig_layout(gpus, notes)
    driver = driver_view(facts).version
    cuda = nvml.value.cuda_driver_version if isinstance(nvml, Found) else None
    if driver is None:
        notes.append("driver: no driver version could be read")
    torch_version, cudnn = _torch_versions(facts, notes)
    spec = Spec(
        gpu_count=count,
        gpu_model=model,
        persistence_mode=persistence,
        ecc=ecc,
        mig=mig,
        driver_branch=driver.split(".", 1)[0] if driver else None,
        cuda=cuda.value if isinstance(cuda, Found) else None,
        torch_version=torch_version,
        cudnn=cudnn,
    )
    return spec, tuple(notes)


def dump_spec(
    spec: Spec, *, hostname: str = "", created: str = "", notes: Sequence[str] = ()
) -> str:
    """The spec as commented YAML that ``parse_spec`` reads back to the same ``Spec``."""
    # A comment is one line: a hostname or note from a snapshot must not start a YAML line.
    about = safe_line(", ".join(p for p in (f"from {hostname}" if hostname else "", created) if p))
    lines = [
        f"# envdoctor node spec{(' (' + about + ')') if about else ''}: the expected state of this",
        "# machine. `envdoctor check --spec THIS_FILE` reports each difference as a spec.* finding",
        "# and fails. Delete a line to stop checking it; docs/fleet.md describes every key.",
        *(f"# not recorded: {safe_line(note)}" for note in notes),
        f"schema_version: {SPEC_SCHEMA_VERSION}",
        f"kind: {SPEC_KIND}",
    ]
    gpu_lines = [
        _line("count", spec.gpu_count, "GPUs NVML reports"),
        _line("model", spec.gpu_model, "every GPU's name"),
        _line("persistence_mode", spec.persistence_mode, "nvidia-smi -pm"),
        _line("ecc", spec.ecc, "ECC memory enabled"),
        _line("mig", spec.mig, "off, or per GPU: number of MIG devices, or off"),
    ]
    driver_lines = [
        _line("branch", spec.driver_branch, "the major version: any 580.x matches"),
        _line("version", spec.driver_version, "pinned exactly"),
        _line("cuda", spec.cuda, "the CUDA version the driver supports"),
    ]
    torch_lines = [
        _line("version", spec.torch_version, "torch.__version__"),
        _line("cudnn", spec.cudnn, "torch.backends.cudnn.version()"),
    ]
    for name, section in (("gpus", gpu_lines), ("driver", driver_lines), ("torch", torch_lines)):
        body = [line for line in section if line]
        if body:
            lines += [f"{name}:", *body]
    return "\n".join(lines) + "\n"


def _line(key: str, value: object, comment: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value == "off":
        text = "off"
    elif isinstance(value, tuple):
        text = "[" + ", ".join("off" if v is None else str(v) for v in value) + "]"
    elif isinstance(value, int):
        text = str(value)
    else:
        text = _quote(str(value))
    return f"  {key}: {text}".ljust(40) + f"# {comment}"


_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+()/-]*[A-Za-z0-9.+)]|[A-Za-z0-9]")


def _quote(text: str) -> str:
    """Plain when YAML reads it back as the same string, else double-quoted.

    In double quotes every character that is not printable is an escape (``\\x1b``,
    ``\\u202e``, ``\\n``): YAML reads those back as the character, and the file stays one
    printable line per key on a terminal.
    """
    # Plain only when the text has no YAML indicator at all and resolves to a string, decided
    # without parsing: a value from a snapshot is not fed to a YAML parser to find out.
    if _PLAIN.fullmatch(text) and plain_kind(text) == "str":
        return text
    return '"' + safe_line(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


# --- judging ----------------------------------------------------------------------------------


def spec_findings(facts: Facts, spec: Spec) -> tuple[Finding, ...]:
    """One finding per difference between the machine and the spec (``spec.*`` codes)."""
    return tuple(_drift(facts, spec))


def spec_rule(spec: Spec) -> Rule:
    """The spec as a Rule, to run beside ``all_rules()`` in ``engine.evaluate``."""
    where = spec.source or "(inline)"

    def evaluate(ctx: RuleContext) -> Evaluation:
        findings = spec_findings(ctx.facts, spec)
        yield from findings
        if not findings:
            yield passed(f"every key of {where} matches")

    return Rule(
        name="spec",
        summary=f"the machine matches the node spec {where}",
        codes=CODES,
        evaluate=evaluate,
    )


def spec_lists_gpus(spec: Spec) -> bool:
    """A spec that names GPUs makes a GPU expected (machine intent)."""
    return bool(spec.gpu_count) or spec.gpu_model is not None


_REBASE = "if the change is intended, record the new baseline: envdoctor spec init -o node.yaml"


def _drift(facts: Facts, spec: Spec) -> Iterator[Finding]:
    yield from _gpu_drift(facts, spec)
    yield from _driver_drift(facts, spec)
    yield from _torch_drift(facts, spec)


def _finding(
    spec: Spec, code: str, title: str, evidence: Sequence[tuple[str, str]], fix: Remediation
) -> Finding:
    return Finding(
        code=code,
        severity=Severity.ERROR,
        title=title,
        evidence=(("spec", spec.source or "(inline)"), *evidence),
        remediation=fix,
        subject=code,
    )


def _unverifiable(spec: Spec, key: str, why: str) -> Finding:
    return Finding(
        code=UNVERIFIABLE,
        severity=Severity.WARNING,
        title=f"Cannot check {key} against the spec: {why}",
        evidence=(("spec", spec.source or "(inline)"), ("key", key), ("why", why)),
        remediation=Remediation(
            summary="Find out why the value cannot be read, then check again",
            steps=("envdoctor check   # says why each value is missing",),
        ),
        inconclusive=True,
        subject=key,
    )


def _gpus(facts: Facts) -> tuple[GpuFacts, ...] | None:
    """The GPUs NVML reports: () without a driver, None when NVML failed (cannot tell)."""
    nvml = facts.nvml
    if isinstance(nvml, Found):
        return nvml.value.gpus
    return () if isinstance(nvml, Absent) else None


def _gpu_drift(facts: Facts, spec: Spec) -> Iterator[Finding]:
    gpus = _gpus(facts)
    wanted = [
        k
        for k, v in (
            ("gpus.count", spec.gpu_count),
            ("gpus.model", spec.gpu_model),
            ("gpus.persistence_mode", spec.persistence_mode),
            ("gpus.ecc", spec.ecc),
            ("gpus.mig", spec.mig),
        )
        if v is not None
    ]
    if gpus is None:
        why = f"NVML failed ({_why(facts.nvml)})"
        for key in wanted:
            yield _unverifiable(spec, key, why)
        return
    if spec.gpu_count is not None and len(gpus) != spec.gpu_count:
        absent = f" ({facts.nvml.reason})" if isinstance(facts.nvml, Absent) else ""
        yield _finding(
            spec,
            GPU_COUNT,
            f"{plural(len(gpus), 'GPU')} found, the spec expects {spec.gpu_count}",
            (("expected", str(spec.gpu_count)), ("found", f"{len(gpus)}{absent}")),
            Remediation(
                summary="Find the missing GPU: fallen off the bus, unseated, or disabled",
                steps=(
                    "nvidia-smi -L; lspci -d 10de: | grep -ci nvidia   # NVML vs the PCI bus",
                    "sudo dmesg | grep -i -E 'xid|nvrm'   # Xid 79: fallen off the bus",
                    "envdoctor check   # the full diagnosis",
                    _REBASE,
                ),
                needs_root=True,
            ),
        )
    if spec.gpu_model is not None:
        yield from _per_gpu(
            spec,
            gpus,
            "gpus.model",
            lambda g: g.name,
            lambda name: name == spec.gpu_model,
            lambda bad: _finding(
                spec,
                GPU_MODEL,
                f"GPU model differs from the spec ({spec.gpu_model}): {bad}",
                (("expected", str(spec.gpu_model)), ("found", bad)),
                Remediation(
                    summary="This node has other GPUs than its spec says",
                    steps=("nvidia-smi -L", _REBASE),
                ),
            ),
        )
    if spec.persistence_mode is not None:
        want = spec.persistence_mode
        yield from _per_gpu(
            spec,
            gpus,
            "gpus.persistence_mode",
            lambda g: g.persistence_mode,
            lambda on: on == want,
            lambda bad: _finding(
                spec,
                PERSISTENCE,
                f"Persistence mode is not {_on(want)} as the spec expects: {bad}",
                (("expected", _on(want)), ("found", bad)),
                Remediation(
                    summary=f"Turn persistence mode {_on(want)}",
                    steps=(
                        f"sudo nvidia-smi -pm {1 if want else 0}",
                        "or run the daemon: sudo systemctl enable --now nvidia-persistenced",
                        _REBASE,
                    ),
                    needs_root=True,
                ),
            ),
        )
    if spec.ecc is not None:
        want_ecc = spec.ecc
        yield from _per_gpu(
            spec,
            gpus,
            "gpus.ecc",
            _ecc_probed,
            lambda on: on == want_ecc,
            lambda bad: _finding(
                spec,
                ECC,
                f"ECC is not {_on(want_ecc)} as the spec expects: {bad}",
                (("expected", _on(want_ecc)), ("found", bad)),
                Remediation(
                    summary=f"Turn ECC {_on(want_ecc)} (it takes effect after a GPU reset)",
                    steps=(
                        f"sudo nvidia-smi -e {1 if want_ecc else 0}",
                        "sudo nvidia-smi -r   # or reboot",
                        _REBASE,
                    ),
                    needs_root=True,
                    needs_reboot=True,
                ),
            ),
        )
    if spec.mig is not None:
        yield from _mig_drift(spec, gpus)


def _per_gpu(
    spec: Spec,
    gpus: Sequence[GpuFacts],
    key: str,
    read: Callable[[GpuFacts], Probed[Any]],
    ok: Callable[[Any], bool],
    drift: Callable[[str], Finding],
) -> Iterator[Finding]:
    """Check one per-GPU value; differing GPUs make one drift finding, unreadable ones another."""
    bad: list[str] = []
    unreadable: list[str] = []
    for gpu in gpus:
        probed: Probed[Any] = read(gpu)
        if isinstance(probed, Found):
            if not ok(probed.value):
                bad.append(f"GPU {gpu.index}: {_shown(probed.value)}")
        else:
            unreadable.append(f"GPU {gpu.index}: {_why(probed)}")
    if bad:
        yield drift(", ".join(bad))
    if unreadable:
        yield _unverifiable(spec, key, "; ".join(unreadable))


def _mig_drift(spec: Spec, gpus: Sequence[GpuFacts]) -> Iterator[Finding]:
    layout = spec.mig
    expected: list[int | None] = (
        [None] * len(gpus) if layout == "off" or layout is None else list(layout)
    )
    bad: list[str] = []
    unreadable: list[str] = []
    for index in range(max(len(gpus), len(expected))):
        want = expected[index] if index < len(expected) else None
        if index >= len(gpus):
            bad.append(f"GPU {index}: missing (expected MIG {_mig_text(want)})")
            continue
        actual = _gpu_mig(gpus[index])
        if isinstance(actual, str):
            unreadable.append(f"GPU {index}: {actual}")
        elif actual != want:
            bad.append(f"GPU {index}: MIG {_mig_text(actual)}, expected {_mig_text(want)}")
    if bad:
        yield _finding(
            spec,
            MIG,
            "MIG layout differs from the spec: " + ", ".join(bad),
            (("expected", _mig_text_all(layout)), *(("found", b) for b in bad)),
            Remediation(
                summary="Recreate the MIG layout the spec describes (stop GPU workloads first)",
                steps=(
                    "nvidia-smi mig -lgi; nvidia-smi mig -lci   # what is there now",
                    "sudo nvidia-smi -i <gpu> -mig 1   # or -mig 0 to turn MIG off",
                    "sudo nvidia-smi mig -i <gpu> -cgi <profiles> -C",
                    _REBASE,
                ),
                needs_root=True,
            ),
        )
    if unreadable:
        yield _unverifiable(spec, "gpus.mig", "; ".join(unreadable))


def _gpu_mig(gpu: GpuFacts) -> int | str | None:
    """MIG devices on a GPU with MIG on, None when MIG is off, or why it cannot be read."""
    mode = gpu.mig_mode
    if isinstance(mode, Absent):
        return None  # a GPU without MIG support has MIG off
    if isinstance(mode, ProbeFailed):
        return _why(mode)
    if not mode.value.current:
        return None
    devices = gpu.mig_devices
    return devices.value if isinstance(devices, Found) else _why(devices)


def _mig_text(value: int | None) -> str:
    return "off" if value is None else f"on with {value} devices"


def _mig_text_all(layout: MigLayout | None) -> str:
    if layout == "off" or layout is None:
        return "off on every GPU"
    return ", ".join(f"GPU {i}: {_mig_text(v)}" for i, v in enumerate(layout))


def _driver_drift(facts: Facts, spec: Spec) -> Iterator[Finding]:
    if spec.driver_branch is None and spec.driver_version is None and spec.cuda is None:
        return
    driver = driver_view(facts).version
    fix = Remediation(
        summary="Install the driver the spec names (your provisioning, or the distribution's)",
        steps=(
            "e.g. Ubuntu: sudo apt install nvidia-driver-<branch>-server-open; then reboot",
            "envdoctor recommend   # the torch wheel that matches the driver you keep",
            _REBASE,
        ),
        needs_root=True,
        needs_reboot=True,
    )
    if driver is None:
        why = _driver_missing(facts)
        for key, value in (
            ("driver.branch", spec.driver_branch),
            ("driver.version", spec.driver_version),
        ):
            if value is None:
                continue
            if why is None:
                yield _finding(
                    spec,
                    DRIVER_BRANCH if key == "driver.branch" else DRIVER_VERSION,
                    f"No NVIDIA driver is installed; the spec expects {value}",
                    (("expected", value), ("found", "no driver")),
                    fix,
                )
            else:
                yield _unverifiable(spec, key, why)
    else:
        if spec.driver_branch is not None and driver.split(".", 1)[0] != spec.driver_branch:
            yield _finding(
                spec,
                DRIVER_BRANCH,
                f"Driver {driver} is not on the branch the spec expects ({spec.driver_branch})",
                (("expected branch", spec.driver_branch), ("found", driver)),
                fix,
            )
        if spec.driver_version is not None and driver != spec.driver_version:
            yield _finding(
                spec,
                DRIVER_VERSION,
                f"Driver {driver} is not the version the spec pins ({spec.driver_version})",
                (("expected", spec.driver_version), ("found", driver)),
                fix,
            )
    if spec.cuda is not None:
        yield from _cuda_drift(facts, spec, fix)


def _cuda_drift(facts: Facts, spec: Spec, fix: Remediation) -> Iterator[Finding]:
    assert spec.cuda is not None
    nvml = facts.nvml
    cuda: Probed[str] = nvml.value.cuda_driver_version if isinstance(nvml, Found) else nvml
    if isinstance(cuda, Found):
        if not _version_matches(cuda.value, spec.cuda):
            yield _finding(
                spec,
                CUDA_VERSION,
                f"The driver supports CUDA {cuda.value}; the spec expects {spec.cuda}",
                (("expected", spec.cuda), ("found", cuda.value)),
                fix,
            )
    elif isinstance(cuda, Absent):
        yield _finding(
            spec,
            CUDA_VERSION,
            f"No NVIDIA driver (no CUDA support); the spec expects CUDA {spec.cuda}",
            (("expected", spec.cuda), ("found", cuda.reason)),
            fix,
        )
    else:
        yield _unverifiable(spec, "driver.cuda", _why(cuda))


def _torch_drift(facts: Facts, spec: Spec) -> Iterator[Finding]:
    if not spec.needs_torch:
        return
    probed = facts.torch.torch
    python = facts.torch.python
    pin = f" --torch {shlex.quote(spec.torch_version)}" if spec.torch_version else ""
    fix = Remediation(
        summary=f"Install the torch the spec names into {python}",
        steps=(
            f"envdoctor recommend --python {shlex.quote(python)}{pin}   # the exact pip command "
            "for this machine, with its index URL",
            _REBASE,
        ),
    )
    keys = [k for k, v in (("torch.version", spec.torch_version), ("torch.cudnn", spec.cudnn)) if v]
    not_probed = torch_not_probed(facts)
    if not_probed:
        for key in keys:
            yield _unverifiable(spec, key, f"torch was not probed ({not_probed})")
        return
    if isinstance(probed, ProbeFailed):
        for key in keys:
            yield _unverifiable(spec, key, f"the torch probe failed: {probed.error}")
        return
    if isinstance(probed, Absent):
        yield _finding(
            spec,
            TORCH_VERSION,
            f"torch is not installed for {python}; the spec expects {spec.torch_version or 'it'}",
            (("expected", spec.torch_version or "torch"), ("found", probed.reason)),
            fix,
        )
        return
    build = probed.value
    version: Probed[str] = Found(build.version) if isinstance(build, TorchBuild) else build.version
    if spec.torch_version is not None:
        if isinstance(version, Found):
            if not _torch_matches(version.value, spec.torch_version):
                yield _finding(
                    spec,
                    TORCH_VERSION,
                    f"torch {version.value} is not the version the spec expects "
                    f"({spec.torch_version})",
                    (
                        ("expected", spec.torch_version),
                        ("found", version.value),
                        ("python", python),
                    ),
                    fix,
                )
        else:
            yield _unverifiable(spec, "torch.version", _why(version))
    if spec.cudnn is not None:
        yield from _cudnn_drift(spec, build, fix)


def _cudnn_drift(
    spec: Spec, build: TorchBuild | TorchBroken, fix: Remediation
) -> Iterator[Finding]:
    assert spec.cudnn is not None
    if isinstance(build, TorchBroken):
        yield _unverifiable(spec, "torch.cudnn", f"`import torch` fails: {build.error}")
        return
    cudnn = build.cudnn_version
    if isinstance(cudnn, Found):
        found = cudnn_dotted(cudnn.value)
        if not _version_matches(found, cudnn_dotted(spec.cudnn)):
            yield _finding(
                spec,
                CUDNN_VERSION,
                f"torch uses cuDNN {found}; the spec expects {spec.cudnn}",
                (("expected", spec.cudnn), ("found", f"{found} ({cudnn.value})")),
                fix,
            )
    elif isinstance(cudnn, Absent):
        yield _finding(
            spec,
            CUDNN_VERSION,
            f"torch has no cuDNN ({cudnn.reason}); the spec expects {spec.cudnn}",
            (("expected", spec.cudnn), ("found", cudnn.reason)),
            fix,
        )
    else:
        yield _unverifiable(spec, "torch.cudnn", _why(cudnn))


# --- shared helpers ---------------------------------------------------------------------------


def cudnn_dotted(raw: str) -> str:
    """cuDNN's integer version as dotted text: 91500 → 9.15.0, 8902 → 8.9.2; dotted stays."""
    raw = raw.strip()
    n = whole(raw)
    if n is None:
        return raw
    if n >= 10000:  # cuDNN 9+: major * 10000 + minor * 100 + patch
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"  # cuDNN 7 and 8: major * 1000 + …


def _version_matches(actual: str, expected: str) -> bool:
    """Equal on as many parts as ``expected`` gives (``12`` matches 12.4; 13.0 matches 13)."""
    a = [n for p in actual.split(".") if (n := whole(p)) is not None]
    e = [n for p in expected.split(".") if (n := whole(p)) is not None]
    a += [0] * (len(e) - len(a))
    return a[: len(e)] == e


def _torch_matches(actual: str, expected: str) -> bool:
    """A spec without a local part matches any build of it, on the parts given.

    ``2.11.0`` matches ``2.11.0+cu130``; ``2.11`` matches every 2.11.x; ``2.11.0+cu130`` only
    itself.
    """
    if "+" in expected:
        return actual == expected
    public = actual.split("+", 1)[0]
    want, have = expected.split("."), public.split(".")
    return public == expected or (len(want) < len(have) and have[: len(want)] == want)


def _driver_missing(facts: Facts) -> str | None:
    """Why the driver version is unknown (None: it is simply not installed)."""
    failed = [p for p in (facts.nvml, facts.kernel.driver) if isinstance(p, ProbeFailed)]
    return "; ".join(_why(p) for p in failed) or None


def _ecc_probed(gpu: GpuFacts) -> Probed[bool]:
    """ECC on when NVML can read the ECC counters; NotSupported means off (or no ECC at all)."""
    ecc = gpu.ecc
    if isinstance(ecc, Found):
        return Found(True)
    return Found(False) if isinstance(ecc, Absent) else ecc


def _uniform(
    gpus: Sequence[GpuFacts] | None,
    read: Callable[[GpuFacts], Probed[Any]],
    key: str,
    notes: list[str],
) -> bool | None:
    if not gpus:
        return None
    values: list[Probed[Any]] = [read(g) for g in gpus]
    found = {v.value for v in values if isinstance(v, Found)}
    if len(found) == 1 and all(isinstance(v, Found) for v in values):
        value = found.pop()
        return value if isinstance(value, bool) else None
    notes.append(f"{key}: the GPUs differ or a value could not be read")
    return None


def _mig_layout(gpus: Sequence[GpuFacts] | None, notes: list[str]) -> MigLayout | None:
    if not gpus:
        return None
    layout = [_gpu_mig(g) for g in gpus]
    if any(isinstance(v, str) for v in layout):
        notes.append("gpus.mig: the MIG state of a GPU could not be read")
        return None
    if all(v is None for v in layout):
        return "off"
    return tuple(v for v in layout if not isinstance(v, str))


def _torch_versions(facts: Facts, notes: list[str]) -> tuple[str | None, str | None]:
    probed = facts.torch.torch
    if not isinstance(probed, Found):
        notes.append(f"torch: {_why(probed)}")
        return None, None
    build = probed.value
    if isinstance(build, TorchBroken):
        notes.append(f"torch: `import torch` fails ({build.error})")
        version = build.version.value if isinstance(build.version, Found) else None
        return version, None
    cudnn = build.cudnn_version
    if not isinstance(cudnn, Found):
        notes.append(f"torch.cudnn: {_why(cudnn)}")
    return build.version, cudnn_dotted(cudnn.value) if isinstance(cudnn, Found) else None


def _all_found(values: Iterable[Probed[Any]]) -> bool:
    return all(isinstance(v, Found) for v in values)


def _on(value: bool) -> str:
    return "on" if value else "off"


def _shown(value: object) -> str:
    return _on(value) if isinstance(value, bool) else str(value)


def _why(probed: Probed[Any]) -> str:
    return why_missing(probed)
