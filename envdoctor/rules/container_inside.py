"""Inside a container: did the NVIDIA hook give it a working GPU, and can it keep using it?

One finding per cause. NVML's own failure (gpu.nvml-failed) and the driver mismatch
(driver.version-mismatch) defer to these where the container explains them: see
``container_cause``.
"""

from __future__ import annotations

import re

from envdoctor.model.containers import (
    DEFAULT_CDI_SPEC,
    SHM_ENOUGH,
    DeviceOpen,
    InsideFacts,
    ShmMount,
)
from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Absent, Found, ProbeFailed, why_missing
from envdoctor.model.units import whole
from envdoctor.model.views import MachineKind, MachineView, nvml_system
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.container_cdi import cdi_generate_argv

CGROUP_DENIED = "container.cgroup-denied"
CAPABILITIES = "container.driver-capabilities"
LIBS_MISSING = "container.driver-libs-missing"
LIBRARY_MISMATCH = "container.library-mismatch"
REQUIRE_UNMET = "container.require-cuda-unmet"
SHM_SMALL = "container.shm-small"

DOCKER_DEFAULT_SHM = 64 << 20
# NVIDIA_DRIVER_CAPABILITIES when unset or empty: "utility,compute" (nvidia-container-toolkit
# internal/config/image/capabilities.go, DefaultDriverCapabilities).
DEFAULT_CAPABILITIES = frozenset({"utility", "compute"})
NEEDED = {"compute": "libcuda (CUDA)", "utility": "libnvidia-ml and nvidia-smi (NVML)"}
_CONDITION = r"(arch|brand|cuda|driver)(>=|<=|!=|=|<|>)(\S+)"  # compiled on first use


def _inside(ctx: RuleContext) -> InsideFacts | None:
    inside = ctx.facts.containers.inside
    return inside.value if isinstance(inside, Found) else None


def _scope(ctx: RuleContext, *, gpu: bool = True) -> str:
    """Why an inside check does not apply here ("" when it does)."""
    machine = ctx.machine
    if not machine.containers or ctx.facts.host.wsl:
        return "not in a container"
    if gpu and machine.kind is MachineKind.CONTAINER_WITHOUT_GPU:
        return "this container was given no GPU (container.no-gpu-access)"
    if gpu and machine.kind is MachineKind.CPU:
        return f"{machine.why_no_gpu()}: no GPU for the NVIDIA hook to give this container"
    return ""


# --- which finding explains NVML's failure in a container --------------------------------------


def container_cause(facts: Facts, machine: MachineView) -> str:
    """The container finding that explains NVML's failure or a driver mismatch here, or ""."""
    if not machine.containers or facts.host.wsl:
        return ""
    inside = facts.containers.inside
    if isinstance(inside, Found) and _denied(facts, inside.value):
        return CGROUP_DENIED
    if machine.kind is MachineKind.CONTAINER_WITHOUT_GPU:
        return ""
    if isinstance(facts.nvml, Absent) and machine.presence.gpu_nodes:
        return CAPABILITIES if _lacking(facts) else LIBS_MISSING
    if machine.driver.mismatch and machine.driver.loaded is not None:
        return LIBRARY_MISMATCH
    return ""


def _denied(facts: Facts, inside: InsideFacts) -> list[DeviceOpen]:
    """Opens refused with EPERM although the mode bits grant read and write."""
    opens = inside.opens.value if isinstance(inside.opens, Found) else ()
    nodes = facts.kernel.device_nodes
    allowed = {
        n.path
        for n in (nodes.value if isinstance(nodes, Found) else ())
        if n.readable and n.writable
    }
    return [o for o in opens if o.result == "EPERM" and o.path in allowed]


def _capabilities(facts: Facts) -> frozenset[str]:
    raw = (facts.env.get("NVIDIA_DRIVER_CAPABILITIES") or "").strip()
    caps = frozenset(c.strip() for c in raw.split(",") if c.strip())
    return caps or DEFAULT_CAPABILITIES


def _lacking(facts: Facts) -> list[str]:
    caps = _capabilities(facts)
    return [] if "all" in caps else [c for c in NEEDED if c not in caps]


# --- device cgroup ------------------------------------------------------------------------------


def _cgroup(ctx: RuleContext) -> Evaluation:
    where = _scope(ctx, gpu=False)
    if where:
        yield not_applicable(where)
        return
    inside = _inside(ctx)
    if inside is None or not isinstance(inside.opens, Found):
        reason = why_missing(inside.opens) if inside else "the container facts were not read"
        yield not_applicable(f"the device nodes were not opened: {reason}")
        return
    denied = _denied(ctx.facts, inside)
    if not denied:
        shown = ", ".join(f"{o.path}: {o.result}" for o in inside.opens.value)
        yield passed(f"every GPU node opened ({shown})")
        return
    nvml = ctx.facts.nvml
    evidence = [(f"open({o.path}, O_RDWR)", f"{o.result}") for o in inside.opens.value]
    evidence.append(("mode bits", "grant read and write (not a permission problem)"))
    if isinstance(nvml, ProbeFailed):
        evidence.append(("NVML", f"{nvml.error}: {nvml.detail}"))
    evidence.append(("container", ", ".join(ctx.machine.containers)))
    yield Finding(
        code=CGROUP_DENIED,
        severity=Severity.ERROR,
        title="The device cgroup refuses this container its GPU (EPERM on open): the host's "
        "systemd reset the container's device rules (e.g. `systemctl daemon-reload`)",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Restart (recreate) this container; on the host, stop it from happening again",
            steps=(
                "now: delete and recreate the container (docker rm -f / kubectl delete pod): "
                "a new one gets its device rules back",
                "host, NVIDIA Container Toolkit >= 1.12.0: sudo nvidia-ctk system "
                "create-dev-char-symlinks --create-all, and the udev rule that runs it at boot "
                "(NVIDIA/nvidia-container-toolkit#48)",
                "host, Docker: pass the nodes explicitly (--device /dev/nvidiactl --device "
                '/dev/nvidia0 …) or set "exec-opts": ["native.cgroupdriver=cgroupfs"] in '
                "/etc/docker/daemon.json",
                "host, long term: run GPU containers in CDI mode (nvidia-ctk cdi generate; "
                "--device nvidia.com/gpu=all), which declares the devices to runc",
            ),
        ),
    )


# --- the driver inside --------------------------------------------------------------------------


def _libraries(ctx: RuleContext) -> Evaluation:
    where = _scope(ctx)
    if where:
        yield not_applicable(where)
        return
    facts = ctx.facts
    cause = container_cause(facts, ctx.machine)
    caps = ", ".join(sorted(_capabilities(facts)))
    if cause == CGROUP_DENIED:
        yield not_applicable("the device cgroup denies the GPU (container.cgroup-denied)")
        return
    if cause not in (CAPABILITIES, LIBS_MISSING):
        if isinstance(facts.nvml, Found):
            yield passed(f"NVML initialised in this container (capabilities: {caps})")
        else:
            yield unknown(f"NVML: {why_missing(facts.nvml)}")
        return
    evidence = (
        ("GPU device nodes", ", ".join(ctx.machine.presence.gpu_nodes)),
        ("NVML", why_missing(facts.nvml)),
        ("NVIDIA_DRIVER_CAPABILITIES", facts.env.get("NVIDIA_DRIVER_CAPABILITIES") or "(unset)"),
        ("NVIDIA_VISIBLE_DEVICES", facts.env.get("NVIDIA_VISIBLE_DEVICES") or "(unset)"),
    )
    if cause == CAPABILITIES:
        lacking = _lacking(facts)
        yield Finding(
            code=CAPABILITIES,
            severity=Severity.ERROR if "compute" in lacking else Severity.WARNING,
            title=f"NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks {' and '.join(lacking)}: the hook "
            f"did not mount {' nor '.join(NEEDED[c] for c in lacking)}",
            evidence=evidence,
            remediation=Remediation(
                summary="Start the container with the compute and utility capabilities",
                steps=(
                    "docker run --gpus 'all,\"capabilities=compute,utility\"' … "
                    "or -e NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                    "in the image: ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility "
                    "(the CUDA images set it)",
                ),
            ),
        )
        return
    yield Finding(
        code=LIBS_MISSING,
        severity=Severity.ERROR,
        title="The GPU device nodes are here but the driver's libraries are not: the container "
        "got /dev/nvidia* without the NVIDIA hook mounting libnvidia-ml and libcuda",
        evidence=evidence,
        remediation=Remediation(
            summary="Let the NVIDIA Container Toolkit give the GPU, not bare --device flags",
            steps=(
                "docker run --gpus all … (not only --device /dev/nvidia0)",
                "Kubernetes: run the pod with the nvidia runtime (runtimeClassName: nvidia, or "
                "nvidia as containerd's default runtime)",
                "CDI: regenerate the spec so that it mounts the driver's libraries "
                f"({' '.join(('sudo', *cdi_generate_argv(DEFAULT_CDI_SPEC)))} on the host)",
            ),
        ),
    )


def _mismatch(ctx: RuleContext) -> Evaluation:
    where = _scope(ctx)
    if where:
        yield not_applicable(where)
        return
    driver = ctx.machine.driver
    if container_cause(ctx.facts, ctx.machine) != LIBRARY_MISMATCH or driver.loaded is None:
        if driver.loaded is None:
            yield not_applicable(f"no kernel module version to compare ({driver.loaded_reason})")
        elif driver.userspace:
            yield passed(
                f"the mounted driver libraries are the host module's {driver.loaded.version}"
            )
        else:
            yield unknown("no driver library with a version in its file name is mounted")
        return
    loaded = driver.loaded.version
    evidence = [("host kernel module", loaded)]
    evidence.extend(
        (f"in the container: {path}", version)
        for path, version in driver.userspace
        if version != loaded
    )
    yield Finding(
        code=LIBRARY_MISMATCH,
        severity=Severity.ERROR,
        title="The driver libraries in this container are not the host kernel module's version: "
        "the image carries its own driver, or the host's driver changed under a running container",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Use the host's driver libraries: none in the image, and a fresh container",
            steps=(
                "remove driver packages from the image (libnvidia-compute-*, libcuda1, "
                "nvidia-utils-*); the toolkit mounts the host's own at start",
                "after a driver upgrade on the host: restart the container",
                "do not set LD_LIBRARY_PATH to a directory with another libcuda.so",
            ),
        ),
    )


# --- NVIDIA_REQUIRE_CUDA ----------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...] | None:
    parts = [whole(p) for p in text.split(".")]
    return tuple(p for p in parts if p is not None) if None not in parts else None


def _holds(op: str, left: tuple[int, ...], right: tuple[int, ...]) -> bool:
    width = max(len(left), len(right))
    a, b = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return {
        ">=": a >= b,
        "<=": a <= b,
        "=": a == b,
        "!=": a != b,
        "<": a < b,
        ">": a > b,
    }[op]


def judge_requirement(text: str, props: dict[str, str]) -> bool | None:
    """libnvidia-container's reading: space-separated terms are ORed, comma-separated
    conditions ANDed; unknown properties are skipped. True, False, or None (unknown)."""
    terms: list[bool | None] = []
    for term in text.split():
        values: list[bool | None] = []
        for condition in term.split(","):
            match = re.fullmatch(_CONDITION, condition.strip())
            if not match:
                continue
            name, op, want = match.groups()
            have = props.get(name)
            if name == "brand":
                values.append(None if have is None else _holds_str(op, have, want))
                continue
            left, right = _version(have or ""), _version(want)
            values.append(None if left is None or right is None else _holds(op, left, right))
        if not values:
            continue
        if False in values:
            terms.append(False)
        elif None in values:
            terms.append(None)
        else:
            terms.append(True)
    if not terms or True in terms:
        return True
    return None if None in terms else False


def _holds_str(op: str, have: str, want: str) -> bool:
    return (have == want) if op == "=" else (have != want) if op == "!=" else False


LEGACY = "CUDA_VERSION (a legacy image: no NVIDIA_REQUIRE_CUDA)"
# Go's semver (golang.org/x/mod/semver), as the toolkit reads CUDA_VERSION: "12" is 12.0; a
# prerelease or build only after major.minor.patch; no leading zeros in a number or a numeric
# prerelease identifier. Anything else is no version: the toolkit then refuses the container.
_NUMBER = r"(?:0|[1-9]\d{0,19})"
_PRE = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = (
    rf"v?({_NUMBER})(?:\.({_NUMBER})(?:\.{_NUMBER}"
    rf"(?:-{_PRE}(?:\.{_PRE})*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?)?)?"
)


def requirements(variables: dict[str, str]) -> dict[str, str]:
    """What the toolkit hands nvidia-container-cli as requirements: every NVIDIA_REQUIRE_*
    but NVIDIA_REQUIRE_JETPACK*, and for a legacy image (CUDA_VERSION set, NVIDIA_REQUIRE_CUDA
    not) ``cuda>=MAJOR.MINOR`` of CUDA_VERSION (internal/config/image/cuda_image.go)."""
    wanted = {
        k: v
        for k, v in variables.items()
        if k.startswith("NVIDIA_REQUIRE_") and not k.startswith("NVIDIA_REQUIRE_JETPACK")
    }
    legacy = variables.get("CUDA_VERSION", "")
    if legacy and not variables.get("NVIDIA_REQUIRE_CUDA"):
        found = re.fullmatch(_SEMVER, legacy) if len(legacy) <= 128 else None
        # major and minor as the toolkit parses them (ParseUint, 32 bits)
        if found and max(int(found[1]), int(found[2] or 0)) < 1 << 32:
            wanted[LEGACY] = f"cuda>={int(found[1])}.{int(found[2] or 0)}"
    return wanted


def _require(ctx: RuleContext) -> Evaluation:
    where = _scope(ctx)
    inside = _inside(ctx)
    if where or inside is None:
        yield not_applicable(where or "the container facts were not read")
        return
    variables = dict(inside.require)
    wanted = requirements(variables)
    if not wanted:
        yield not_applicable("the image sets no NVIDIA_REQUIRE_* variable (nor CUDA_VERSION)")
        return
    if variables.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() in ("1", "true", "t"):
        yield not_applicable("NVIDIA_DISABLE_REQUIRE is set: the requirement is not checked")
        return
    system = nvml_system(ctx.facts)
    props = {}
    if system is not None and isinstance(system.cuda_driver_version, Found):
        props["cuda"] = system.cuda_driver_version.value
    driver = ctx.machine.driver.version
    if driver:
        props["driver"] = driver
    if "cuda" not in props:
        yield unknown("the driver's CUDA version is unknown (NVML did not answer)")
        return
    unmet = {k: v for k, v in wanted.items() if judge_requirement(v, props) is False}
    if not unmet:
        yield passed(
            f"the driver (CUDA {props['cuda']}) meets {', '.join(f'{k}={v}' for k, v in wanted.items())}"
        )
        return
    yield Finding(
        code=REQUIRE_UNMET,
        severity=Severity.ERROR,
        title=f"This image requires a newer driver than the host has: {next(iter(unmet.values())).split()[0]} "
        f"but the driver runs CUDA {props['cuda']}",
        evidence=(
            *unmet.items(),
            ("driver", f"{driver or 'unknown'} (CUDA {props['cuda']})"),
        ),
        remediation=Remediation(
            summary="Upgrade the host's driver, or use an image built for an older CUDA",
            steps=(
                "host: install a driver whose CUDA version (nvidia-smi) meets the requirement",
                "or pick an image tag for CUDA <= " + props["cuda"],
                "NVIDIA_DISABLE_REQUIRE=1 only with CUDA forward compatibility (datacenter GPUs, "
                "cuda-compat in the image): otherwise CUDA fails at the first call",
            ),
        ),
    )


# --- /dev/shm ---------------------------------------------------------------------------------


def _mib(size: int) -> str:
    return f"{size >> 20} MiB" if size < SHM_ENOUGH else f"{size / (1 << 30):.1f} GiB"


def _shm(ctx: RuleContext) -> Evaluation:
    where = _scope(ctx, gpu=False)
    inside = _inside(ctx)
    if where or inside is None:
        yield not_applicable(where or "the container facts were not read")
        return
    shm = inside.shm
    if not isinstance(shm, Found):
        yield unknown(f"/dev/shm: {why_missing(shm)}")
        return
    yield from _judge_shm(ctx, shm.value)


def _judge_shm(ctx: RuleContext, shm: ShmMount) -> Evaluation:
    if shm.size == 0 or shm.size >= SHM_ENOUGH:
        limit = (
            "no size limit shown (the host's or half of the memory)"
            if shm.size == 0
            else _mib(shm.size)
        )
        yield passed(f"/dev/shm ({shm.fstype}) holds {limit}")
        return
    docker = " (Docker's default)" if shm.size == DOCKER_DEFAULT_SHM else ""
    yield Finding(
        code=SHM_SMALL,
        severity=Severity.WARNING,
        title=f"/dev/shm is only {_mib(shm.size)}{docker}: DataLoader workers die with "
        '"Bus error" and NCCL cannot create its shared-memory segments',
        evidence=(
            ("/dev/shm", f"{shm.fstype}, size {_mib(shm.size)}"),
            ("container", ", ".join(ctx.machine.containers)),
            ("enough for training", f">= {_mib(SHM_ENOUGH)}"),
        ),
        remediation=Remediation(
            summary="Give the container a larger /dev/shm",
            steps=(
                "docker run --shm-size=16g …  (or --ipc=host)",
                "Kubernetes: mount an emptyDir with medium: Memory (and a sizeLimit) at /dev/shm",
                "meanwhile: fewer DataLoader workers, or NCCL_SHM_DISABLE=1 (slower)",
            ),
        ),
    )


RULES = (
    Rule(
        "container.cgroup",
        "The device cgroup lets this container open its GPU",
        (CGROUP_DENIED,),
        _cgroup,
    ),
    Rule(
        "container.driver-libraries",
        "The NVIDIA hook mounted the driver's libraries into this container",
        (CAPABILITIES, LIBS_MISSING),
        _libraries,
    ),
    Rule(
        "container.library-version",
        "The container's driver libraries are the host kernel module's version",
        (LIBRARY_MISMATCH,),
        _mismatch,
    ),
    Rule(
        "container.require-cuda",
        "The host's driver meets the image's NVIDIA_REQUIRE_CUDA",
        (REQUIRE_UNMET,),
        _require,
    ),
    Rule(
        "container.shm",
        "/dev/shm is large enough for DataLoader workers and NCCL",
        (SHM_SMALL,),
        _shm,
    ),
)
