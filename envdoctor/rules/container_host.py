"""On a GPU host: can its container engines give containers the GPU?

The NVIDIA Container Toolkit, Docker/containerd/CRI-O configured for it (and as the default
runtime on a Kubernetes node, which the NVIDIA device plugin needs), Docker not a snap,
rootless Docker with ``no-cgroups``, Docker's ``--gpus`` where the toolkit runs in a mode its
hook refuses. CDI specs are judged in ``container_cdi``. These judge the host only: inside a
container the files describe the container's own image.
"""

from __future__ import annotations

from envdoctor.model.containers import (
    DEFAULT_CDI_SPEC,
    NVIDIA_KIND,
    CdiSpec,
    ContainerHostFacts,
    EngineConfig,
    EngineFacts,
    ToolkitConfig,
)
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Found, ProbeFailed, why_missing
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.container_cdi import CDI_HOOK, LEGACY_HOOK, cdi_generate_argv, resolvable
from envdoctor.rules.container_common import host_side, sudo

TOOLKIT_MISSING = "container.toolkit-missing"
DOCKER_SNAP = "container.docker-snap"
NO_GPU_RUNTIME = "container.no-gpu-runtime"
DEFAULT_RUNTIME = "container.default-runtime"
ROOTLESS = "container.rootless-cgroups"
CONFIG_INVALID = "container.config-invalid"
GPUS_REFUSED = "container.gpus-flag-refused"
# Which engine a kubelet talks to (CRI): nvidia-ctk's --runtime name for each.
CRI_ENGINES = ("containerd", "cri-o")
CTK_RUNTIME = {"docker": "docker", "containerd": "containerd", "cri-o": "crio"}
SERVICE = {"docker": "docker", "containerd": "containerd", "cri-o": "crio"}
INSTALL_TOOLKIT = (
    "install the NVIDIA Container Toolkit from NVIDIA's repository: "
    "sudo apt-get install -y nvidia-container-toolkit   (dnf/zypper: the same package name)"
)


# The toolkit's modes in which its hook serves Docker's --gpus; it refuses in any other ("auto"
# resolves to legacy for the hook on a discrete-GPU host): cmd/nvidia-container-runtime-hook
HOOK_SERVES = ("legacy", "auto")
HOOKS = (LEGACY_HOOK, CDI_HOOK)
"""With neither on PATH, Docker has no nvidia device driver at all."""
HOOK_REFUSAL = (
    "invoking the NVIDIA Container Runtime Hook directly (e.g. specifying the docker --gpus flag) "
    "is not supported"
)


def configure_argv(engine: str, *, default: bool = False) -> tuple[tuple[str, ...], ...]:
    """What registers the nvidia runtime with an engine, and restarts it (the findings show it,
    ``fix`` runs it)."""
    flags = ("--set-as-default",) if default else ()
    return (
        (
            "nvidia-ctk",
            "runtime",
            "configure",
            f"--runtime={CTK_RUNTIME.get(engine, engine)}",
            *flags,
        ),
        ("systemctl", "restart", SERVICE.get(engine, engine)),
    )


NO_CGROUPS_ARGV = ("nvidia-ctk", "config", "--set", "nvidia-container-cli.no-cgroups", "--in-place")
"""Turns on the toolkit's no-cgroups (rootless engines need it)."""


def configure_steps(engine: str, *, default: bool = False) -> tuple[str, ...]:
    """``configure_argv`` as steps for a person to run."""
    return tuple(sudo(argv) for argv in configure_argv(engine, default=default))


def _engines(facts: ContainerHostFacts) -> str:
    return ", ".join(f"{e.name} ({e.program})" for e in facts.engines)


# --- the toolkit and Docker ---------------------------------------------------------------------


def _toolkit(ctx: RuleContext) -> Evaluation:
    facts, why = host_side(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    toolkit = facts.toolkit
    hookless = _docker(facts) is not None and not set(HOOKS) & set(dict(toolkit.programs))
    if toolkit.installed and not hookless:
        version = toolkit.ctk_version.value if isinstance(toolkit.ctk_version, Found) else None
        shown = ", ".join(name for name, _ in toolkit.programs)
        yield passed(f"found {shown}" + (f" (version {version})" if version else ""))
        return
    engine = toolkit_engine(facts)
    if engine == "podman":
        # nvidia-ctk configures Docker, containerd and CRI-O only; Podman reads CDI specs
        symptom = (
            "`podman run --device nvidia.com/gpu=all` fails with 'unresolvable CDI devices "
            "nvidia.com/gpu=all' (no CDI spec without the toolkit)"
        )
        steps: tuple[str, ...] = (
            sudo(cdi_generate_argv(DEFAULT_CDI_SPEC)),
            "podman run --rm --device nvidia.com/gpu=all ubuntu nvidia-smi -L   # lists the GPUs",
        )
    elif engine == "docker":
        symptom = (
            '`docker run --gpus all` fails with \'could not select device driver "" with '
            "capabilities: [[gpu]]'"
        )
        steps = (
            *configure_steps(engine),
            "docker run --rm --gpus all ubuntu nvidia-smi   # must list the GPUs",
        )
    else:
        symptom = f"{engine} gives GPU containers and pods no GPU"
        steps = configure_steps(engine)
    found = ", ".join(name for name, _ in toolkit.programs)
    what = (
        f"{found}, but neither hook Docker uses ({' nor '.join(HOOKS)})"
        if toolkit.installed
        else "none of nvidia-container-runtime-hook, nvidia-ctk, nvidia-container-cli"
    )
    yield Finding(
        code=TOOLKIT_MISSING,
        severity=Severity.WARNING,
        title=(
            "Docker finds no NVIDIA hook, so it has no GPU device driver"
            if toolkit.installed
            else "Container engines are installed but the NVIDIA Container Toolkit is not"
        )
        + f": {symptom}",
        evidence=(
            ("container engines", _engines(facts)),
            ("NVIDIA Container Toolkit", f"{what} in the usual program directories"),
        ),
        remediation=Remediation(
            summary=f"Install the NVIDIA Container Toolkit and set {engine} up with it",
            steps=(INSTALL_TOOLKIT, *steps),
            needs_root=True,
        ),
        subject=engine,
    )


def toolkit_engine(facts: ContainerHostFacts) -> str:
    """The engine the toolkit is set up for first: Docker, else a CRI engine, else Podman."""
    names = [e.name for e in facts.engines]
    for name in ("docker", *CRI_ENGINES, "podman"):
        if name in names:
            return name
    return names[0]


def _docker(facts: ContainerHostFacts) -> EngineFacts | None:
    return next((e for e in facts.engines if e.name == "docker"), None)


def _docker_side(ctx: RuleContext) -> tuple[ContainerHostFacts, EngineFacts] | str:
    """The host's facts and its Docker, or why a Docker rule does not apply."""
    facts, why = host_side(ctx)
    docker = _docker(facts) if facts else None
    if facts is None or docker is None:
        return why or "Docker is not installed"
    return facts, docker


def _snap(ctx: RuleContext) -> Evaluation:
    side = _docker_side(ctx)
    if isinstance(side, str):
        yield not_applicable(side)
        return
    _, docker = side
    if not docker.snap:
        yield passed(f"Docker is not a snap ({docker.program})")
        return
    yield Finding(
        code=DOCKER_SNAP,
        severity=Severity.WARNING,
        title="Docker is installed as a snap: its confined daemon does not use the host's NVIDIA "
        "Container Toolkit, so --gpus fails ('could not select device driver')",
        evidence=(("docker", docker.program), ("snap", "/snap/bin/docker")),
        remediation=Remediation(
            summary="Replace the Docker snap with Docker from packages, then configure the toolkit",
            steps=(
                "sudo snap remove docker",
                "sudo apt-get install -y docker.io   (or docker-ce from Docker's repository)",
                *configure_steps("docker"),
            ),
            needs_root=True,
        ),
    )


def _rootless(ctx: RuleContext) -> Evaluation:
    side = _docker_side(ctx)
    if isinstance(side, str) or not side[1].rootless:
        yield not_applicable(side if isinstance(side, str) else "rootless Docker is not in use")
        return
    facts, docker = side
    config = facts.toolkit.config
    if not isinstance(config, Found):
        yield unknown(f"the toolkit's config.toml: {why_missing(config)}")
        return
    if config.value.no_cgroups:
        yield passed(f"rootless Docker with no-cgroups = true ({config.value.path})")
        return
    if config.value.mode in ("cdi", "jit-cdi"):
        yield passed(
            f'rootless Docker with the toolkit in mode = "{config.value.mode}" '
            f"({config.value.path}): devices come from CDI, no cgroup is written"
        )
        return
    yield Finding(
        code=ROOTLESS,
        severity=Severity.WARNING,
        title="Rootless Docker with nvidia-container-cli's no-cgroups off: the hook cannot write "
        "device cgroups as a user, so GPU containers fail to start",
        evidence=(
            ("docker", f"{docker.program} (rootless)"),
            (config.value.path, f"no-cgroups = false, mode = {config.value.mode}"),
        ),
        remediation=Remediation(
            summary="Turn on no-cgroups in the toolkit's config",
            steps=(
                sudo(NO_CGROUPS_ARGV),
                "systemctl --user restart docker",
            ),
            needs_root=True,
        ),
    )


# --- runtimes registered with the engines -------------------------------------------------------


def _cri(facts: ContainerHostFacts) -> list[EngineFacts]:
    return [e for e in facts.engines if e.name in CRI_ENGINES]


def _runtime(ctx: RuleContext) -> Evaluation:
    """On a Kubernetes node, the CRI engine must know an nvidia runtime (or resolve CDI)."""
    facts, why = host_side(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    if not facts.kubelet:
        yield not_applicable("not a Kubernetes node (a CRI engine's runtimes matter to pods)")
        return
    engines = [e for e in _cri(facts) if isinstance(e.config, Found) or _defaults(e)]
    if not engines:
        yield unknown("no containerd or CRI-O configuration could be read")
        return
    specs = resolvable(facts)  # one CDI resolution for every engine
    ways = {e.name: _gpu_ways(e, specs) for e in engines}
    lacking = [e for e in engines if not ways[e.name]]
    if not lacking:
        yield passed("; ".join(f"{e.name} {' and '.join(ways[e.name])}" for e in engines))
        return
    for engine in lacking:
        config = _config(engine)
        evidence = [
            (f"{engine.name} config", ", ".join(config.files) or why_missing(engine.config)),
            ("runtimes", ", ".join(config.runtimes) or "none registered (runc)"),
        ]
        if config.cdi:
            evidence.append(("CDI", "on, but no NVIDIA CDI spec here to resolve GPU devices from"))
        if config.merge == "section":
            evidence.append(("drop-ins", _SECTION_MERGE))
        yield Finding(
            code=NO_GPU_RUNTIME,
            severity=Severity.WARNING,
            title=f"This Kubernetes node's {engine.name} has no nvidia runtime: GPU pods get "
            "no GPU and the NVIDIA device plugin cannot load NVML",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary=f"Register the NVIDIA Container Runtime with {engine.name}",
                steps=configure_steps(engine.name, default=True),
                needs_root=True,
            ),
            subject=engine.name,
        )


_SECTION_MERGE = (
    "containerd 1.x takes a plugin's whole table from the last file that names it: a drop-in "
    "naming the CRI plugin replaces what config.toml set there"
)


def _gpu_ways(engine: EngineFacts, specs: list[CdiSpec]) -> list[str]:
    """How an engine can give a pod the GPU: its nvidia runtimes, and CDI where it resolves
    CDI devices and an NVIDIA spec (of ``specs``, those that resolve) is there for it."""
    config = _config(engine)
    ways = []
    if config.nvidia_runtimes:
        ways.append(f"knows {', '.join(config.nvidia_runtimes)}")
    if config.cdi and specs:
        ways.append(f"resolves CDI devices ({', '.join(s.path for s in specs)})")
    return ways


def _default(ctx: RuleContext) -> Evaluation:
    facts, why = host_side(ctx)
    if facts is None or not facts.kubelet:
        yield not_applicable(why or "not a Kubernetes node")
        return
    engines = [e for e in _cri(facts) if isinstance(e.config, Found) and _config(e).nvidia_runtimes]
    if not engines:
        yield not_applicable("no nvidia runtime to make the default (see container.runtime)")
        return
    wrong = []
    fine = []
    for engine in engines:
        config = _config(engine)
        if config.default_runtime in config.nvidia_runtimes:
            fine.append(f"{engine.name} runs {config.default_runtime} by default")
        elif config.cdi and _cdi_runtime(config):
            # the toolkit's installer (the GPU Operator) registers nvidia-cdi beside nvidia and
            # leaves runc the default: its operands use the RuntimeClass, GPU pods get CDI devices
            fine.append(
                f"{engine.name} resolves CDI devices and registers "
                f"{', '.join(config.nvidia_runtimes)} (the GPU Operator's layout: runc stays "
                "the default, GPU pods get their devices through CDI)"
            )
        else:
            wrong.append(engine)
    if not wrong:
        yield passed("; ".join(fine))
        return
    for engine in wrong:
        config = _config(engine)
        default = _default_name(engine, config)
        unless = "unless every GPU pod sets runtimeClassName: nvidia" + (
            " (or the device plugin hands devices over through CDI)" if config.cdi else ""
        )
        yield Finding(
            code=DEFAULT_RUNTIME,
            severity=Severity.WARNING,
            title=f"{engine.name}'s default runtime is {default}, not nvidia: the NVIDIA device "
            f"plugin fails with 'could not load NVML library' {unless}",
            evidence=(
                (f"{engine.name} config", ", ".join(config.files)),
                ("default runtime", default),
                ("nvidia runtimes", ", ".join(config.nvidia_runtimes)),
            ),
            remediation=Remediation(
                summary=f"Make nvidia {engine.name}'s default runtime (or use a RuntimeClass)",
                steps=(
                    *configure_steps(engine.name, default=True),
                    "or: a RuntimeClass named nvidia, and runtimeClassName: nvidia on the device "
                    "plugin and every GPU pod",
                ),
                needs_root=True,
            ),
            subject=engine.name,
        )


def _cdi_runtime(config: EngineConfig) -> bool:
    return any(name.endswith("-cdi") for name in config.nvidia_runtimes)


def _default_name(engine: EngineFacts, config: EngineConfig) -> str:
    if config.default_runtime:
        return config.default_runtime
    return "CRI-O's own (crun since CRI-O 1.31, runc before)" if engine.name == "cri-o" else "runc"


def _defaults(engine: EngineFacts) -> bool:
    """No config file: the engine runs its defaults, which is itself a fact."""
    return not isinstance(engine.config, Found | ProbeFailed)


def _config(engine: EngineFacts) -> EngineConfig:
    if isinstance(engine.config, Found):
        return engine.config.value
    # no config file: containerd runs runc and resolves no CDI (1.x), CRI-O its own runtime
    return EngineConfig(path="", runtimes=(), nvidia_runtimes=(), default_runtime="", cdi=False)


# --- Docker's --gpus and the toolkit's mode -----------------------------------------------------


def _gpus_flag(ctx: RuleContext) -> Evaluation:
    side = _docker_side(ctx)
    if isinstance(side, str):
        yield not_applicable(side)
        return
    facts, docker = side
    config = facts.toolkit.config
    if not isinstance(config, Found):
        yield not_applicable(f"the toolkit's config.toml: {why_missing(config)}")
        return
    mode = config.value.mode
    programs = dict(facts.toolkit.programs)
    if LEGACY_HOOK not in programs:
        if CDI_HOOK in programs:
            yield passed(
                f"no {LEGACY_HOOK}: Docker's --gpus asks CDI for the devices, not the hook "
                "(container.cdi-spec judges the spec)"
            )
        else:
            yield not_applicable("Docker finds no NVIDIA hook at all (see container.toolkit)")
        return
    if mode in HOOK_SERVES:
        yield passed(f'the toolkit runs in mode = "{mode}": its hook serves docker run --gpus')
        return
    engine = docker.config.value if isinstance(docker.config, Found) else None
    if engine is not None and engine.default_runtime in engine.nvidia_runtimes:
        yield passed(
            f'the toolkit runs in mode = "{mode}" and Docker\'s default runtime is '
            f"{engine.default_runtime}, which serves --gpus"
        )
        return
    yield _gpus_finding(docker, config.value, engine)


def _gpus_finding(
    docker: EngineFacts, toolkit: ToolkitConfig, engine: EngineConfig | None
) -> Finding:
    return Finding(
        code=GPUS_REFUSED,
        severity=Severity.WARNING,
        title=f'The toolkit runs in mode = "{toolkit.mode}", where its hook refuses Docker\'s '
        f"--gpus: `docker run --gpus all` fails with '{HOOK_REFUSAL}'",
        evidence=(
            (toolkit.path, f'mode = "{toolkit.mode}"'),
            ("docker", docker.program),
            (
                "Docker's default runtime",
                (engine.default_runtime or "runc") if engine else why_missing(docker.config),
            ),
        ),
        remediation=Remediation(
            summary="Run GPU containers through the NVIDIA Container Runtime",
            steps=(
                *configure_steps("docker", default=True),
                "or per container: docker run --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all …",
                f"or, Docker >= 25 with CDI: docker run --device {NVIDIA_KIND}=all …",
            ),
            needs_root=True,
        ),
        subject="docker",
    )


# --- files that do not parse --------------------------------------------------------------------


def _invalid(ctx: RuleContext) -> Evaluation:
    facts, why = host_side(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    failed = [
        (f"{e.name} config", e.config) for e in facts.engines if isinstance(e.config, ProbeFailed)
    ]
    toolkit = facts.toolkit.config
    if isinstance(toolkit, ProbeFailed):
        failed.append(("NVIDIA Container Toolkit config", toolkit))
    if not failed:
        yield passed("every engine and toolkit configuration that exists parses")
        return
    for what, probed in failed:
        yield Finding(
            code=CONFIG_INVALID,
            severity=Severity.ERROR,
            title=f"The {what} cannot be parsed: the engine refuses it (or starts without it)",
            evidence=((what, why_missing(probed)),),
            remediation=Remediation(
                summary="Fix the file's syntax (or move it away and let nvidia-ctk write it anew)",
                steps=(
                    "python3 -m json.tool /etc/docker/daemon.json   # shows where JSON breaks",
                    "containerd config dump   # shows how containerd reads its config",
                    "sudo nvidia-ctk runtime configure --runtime=<docker|containerd|crio>",
                ),
                needs_root=True,
            ),
            subject=what,
        )


RULES = (
    Rule(
        "container.toolkit",
        "The NVIDIA Container Toolkit is installed next to the container engines",
        (TOOLKIT_MISSING,),
        _toolkit,
    ),
    Rule(
        "container.docker-snap",
        "Docker is not the snap (which cannot use the host's toolkit)",
        (DOCKER_SNAP,),
        _snap,
    ),
    Rule(
        "container.rootless",
        "Rootless Docker has the toolkit's no-cgroups on",
        (ROOTLESS,),
        _rootless,
    ),
    Rule(
        "container.runtime",
        "A Kubernetes node's CRI engine knows the nvidia runtime",
        (NO_GPU_RUNTIME,),
        _runtime,
    ),
    Rule(
        "container.default-runtime",
        "nvidia is the default runtime on a Kubernetes node",
        (DEFAULT_RUNTIME,),
        _default,
    ),
    Rule(
        "container.config",
        "Engine and toolkit configuration files parse",
        (CONFIG_INVALID,),
        _invalid,
    ),
    Rule(
        "container.gpus-flag",
        "Docker's --gpus works with the toolkit's mode",
        (GPUS_REFUSED,),
        _gpus_flag,
    ),
)
