"""On a GPU host: can its container engines give containers the GPU?

The NVIDIA Container Toolkit, Docker/containerd/CRI-O configured for it (and as the default
runtime on a Kubernetes node, which the NVIDIA device plugin needs), Docker not a snap,
rootless Docker with ``no-cgroups``, and CDI specs that match the driver that is loaded.
These judge the host only: inside a container the files describe the container's own image.
"""

from __future__ import annotations

from envdoctor.model.containers import (
    DEFAULT_CDI_SPEC,
    CdiSpec,
    ContainerHostFacts,
    EngineConfig,
    EngineFacts,
)
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Found, ProbeFailed, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import MachineKind
from envdoctor.rules.base import Evaluation, Rule, RuleContext

TOOLKIT_MISSING = "container.toolkit-missing"
DOCKER_SNAP = "container.docker-snap"
NO_GPU_RUNTIME = "container.no-gpu-runtime"
DEFAULT_RUNTIME = "container.default-runtime"
ROOTLESS = "container.rootless-cgroups"
CONFIG_INVALID = "container.config-invalid"
CDI_MISSING = "container.cdi-missing"
CDI_STALE = "container.cdi-stale"
NVIDIA_KIND = "nvidia.com/gpu"
# Which engine a kubelet talks to (CRI): nvidia-ctk's --runtime name for each.
CRI_ENGINES = ("containerd", "cri-o")
CTK_RUNTIME = {"docker": "docker", "containerd": "containerd", "cri-o": "crio"}
SERVICE = {"docker": "docker", "containerd": "containerd", "cri-o": "crio"}
INSTALL_TOOLKIT = (
    "install the NVIDIA Container Toolkit from NVIDIA's repository: "
    "sudo apt-get install -y nvidia-container-toolkit   (dnf/zypper: the same package name)"
)


def _host(ctx: RuleContext) -> tuple[ContainerHostFacts | None, str]:
    """The host-side facts where they apply, else why not."""
    if ctx.machine.containers:
        return None, "in a container: the host's engines are judged on the host"
    if ctx.facts.host.wsl:
        return None, "WSL: Docker Desktop gives containers the GPU"
    if ctx.machine.kind is not MachineKind.GPU:
        return None, f"{ctx.machine.why_no_gpu()}: no GPU to give containers"
    facts = ctx.facts.containers.host
    if not isinstance(facts, Found):
        return None, f"the container layer was not read ({why_missing(facts)})"
    if not facts.value.engines:
        return None, "no container engine (Docker, containerd, CRI-O, Podman) is installed"
    return facts.value, ""


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


def cdi_generate_argv(path: str) -> tuple[str, ...]:
    """Writes the NVIDIA CDI spec for the installed driver to ``path``."""
    return ("nvidia-ctk", "cdi", "generate", f"--output={path}")


def configure_steps(engine: str, *, default: bool = False) -> tuple[str, ...]:
    """``configure_argv`` as steps for a person to run."""
    return tuple(_sudo(argv) for argv in configure_argv(engine, default=default))


def _sudo(argv: tuple[str, ...]) -> str:
    return "sudo " + " ".join(argv)


def _engines(facts: ContainerHostFacts) -> str:
    return ", ".join(f"{e.name} ({e.program})" for e in facts.engines)


# --- the toolkit and Docker ---------------------------------------------------------------------


def _toolkit(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    toolkit = facts.toolkit
    if toolkit.installed:
        version = toolkit.ctk_version.value if isinstance(toolkit.ctk_version, Found) else None
        shown = ", ".join(name for name, _ in toolkit.programs)
        yield passed(f"found {shown}" + (f" (version {version})" if version else ""))
        return
    yield Finding(
        code=TOOLKIT_MISSING,
        severity=Severity.WARNING,
        title="Container engines are installed but the NVIDIA Container Toolkit is not: "
        '`docker run --gpus all` fails with \'could not select device driver "" with '
        "capabilities: [[gpu]]'",
        evidence=(
            ("container engines", _engines(facts)),
            (
                "NVIDIA Container Toolkit",
                "none of nvidia-container-runtime-hook, nvidia-ctk, "
                "nvidia-container-cli in /usr/bin, /usr/local/bin",
            ),
        ),
        remediation=Remediation(
            summary="Install the NVIDIA Container Toolkit and register it with the engine",
            steps=(
                INSTALL_TOOLKIT,
                *configure_steps(
                    facts.engines[0].name if facts.engines[0].name in CTK_RUNTIME else "docker"
                ),
                "docker run --rm --gpus all ubuntu nvidia-smi   # must list the GPUs",
            ),
            needs_root=True,
        ),
    )


def _docker(facts: ContainerHostFacts) -> EngineFacts | None:
    return next((e for e in facts.engines if e.name == "docker"), None)


def _snap(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
    docker = _docker(facts) if facts else None
    if facts is None or docker is None:
        yield not_applicable(why or "Docker is not installed")
        return
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
    facts, why = _host(ctx)
    docker = _docker(facts) if facts else None
    if facts is None or docker is None or not docker.rootless:
        yield not_applicable(why or "rootless Docker is not in use")
        return
    config = facts.toolkit.config
    if not isinstance(config, Found):
        yield unknown(f"the toolkit's config.toml: {why_missing(config)}")
        return
    if config.value.no_cgroups or config.value.mode in ("cdi", "jit-cdi"):
        yield passed(f"rootless Docker with no-cgroups = true ({config.value.path})")
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
                _sudo(NO_CGROUPS_ARGV),
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
    facts, why = _host(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    if not facts.kubelet:
        yield not_applicable("not a Kubernetes node: Docker's --gpus needs only the toolkit's hook")
        return
    engines = [e for e in _cri(facts) if isinstance(e.config, Found) or _defaults(e)]
    if not engines:
        yield unknown("no containerd or CRI-O configuration could be read")
        return
    lacking = [e for e in engines if not _nvidia(e)]
    if not lacking:
        yield passed(
            "; ".join(f"{e.name} knows {' and '.join(_config(e).nvidia_runtimes)}" for e in engines)
        )
        return
    for engine in lacking:
        config = _config(engine)
        yield Finding(
            code=NO_GPU_RUNTIME,
            severity=Severity.WARNING,
            title=f"This Kubernetes node's {engine.name} has no nvidia runtime: GPU pods get "
            "no GPU and the NVIDIA device plugin cannot load NVML",
            evidence=(
                (f"{engine.name} config", ", ".join(config.files) or why_missing(engine.config)),
                ("runtimes", ", ".join(config.runtimes) or "none registered (runc)"),
            ),
            remediation=Remediation(
                summary=f"Register the NVIDIA Container Runtime with {engine.name}",
                steps=configure_steps(engine.name, default=True),
                needs_root=True,
            ),
            subject=engine.name,
        )


def _default(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
    if facts is None or not facts.kubelet:
        yield not_applicable(why or "not a Kubernetes node")
        return
    engines = [e for e in _cri(facts) if isinstance(e.config, Found) and _nvidia(e)]
    if not engines:
        yield not_applicable("no nvidia runtime to make the default (see container.no-gpu-runtime)")
        return
    wrong = [e for e in engines if _config(e).default_runtime not in _config(e).nvidia_runtimes]
    if not wrong:
        yield passed(
            "; ".join(f"{e.name} runs {_config(e).default_runtime} by default" for e in engines)
        )
        return
    for engine in wrong:
        config = _config(engine)
        yield Finding(
            code=DEFAULT_RUNTIME,
            severity=Severity.WARNING,
            title=f"{engine.name}'s default runtime is {config.default_runtime}, not nvidia: the "
            "NVIDIA device plugin fails with 'could not load NVML library' unless every GPU pod "
            "sets runtimeClassName: nvidia",
            evidence=(
                (f"{engine.name} config", ", ".join(config.files)),
                ("default runtime", config.default_runtime),
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


def _defaults(engine: EngineFacts) -> bool:
    """No config file: the engine runs its defaults (runc), which is itself a fact."""
    return not isinstance(engine.config, Found | ProbeFailed)


def _config(engine: EngineFacts) -> EngineConfig:
    if isinstance(engine.config, Found):
        return engine.config.value
    return EngineConfig(path="", runtimes=(), nvidia_runtimes=(), default_runtime="runc", cdi=False)


def _nvidia(engine: EngineFacts) -> bool:
    config = _config(engine)
    return bool(config.nvidia_runtimes) or config.cdi


# --- files that do not parse --------------------------------------------------------------------


def _invalid(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
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


# --- CDI ------------------------------------------------------------------------------------


def _nvidia_specs(facts: ContainerHostFacts) -> list[CdiSpec]:
    specs = facts.cdi_specs.value if isinstance(facts.cdi_specs, Found) else ()
    return [s for s in specs if s.kind == NVIDIA_KIND]


def cdi_wanted(facts: ContainerHostFacts) -> str:
    """Who resolves nvidia.com/gpu CDI devices here ("" when nobody is set up to)."""
    config = facts.toolkit.config
    if isinstance(config, Found) and config.value.mode == "cdi":
        return f'{config.value.path}: mode = "cdi"'
    podman = next((e for e in facts.engines if e.name == "podman"), None)
    if podman is not None:
        return f"podman ({podman.program}) gives GPUs only through CDI"
    return ""


def _cdi_missing(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    if not isinstance(facts.cdi_specs, Found):
        yield unknown(f"the CDI spec directories: {why_missing(facts.cdi_specs)}")
        return
    wanted = cdi_wanted(facts)
    specs = _nvidia_specs(facts)
    if specs:
        yield passed(f"{NVIDIA_KIND} CDI specs in {', '.join(s.path for s in specs)}")
        return
    if not wanted:
        yield not_applicable("no engine here is set up to resolve CDI devices")
        return
    mode_cdi = "mode" in wanted
    yield Finding(
        code=CDI_MISSING,
        severity=Severity.ERROR if mode_cdi else Severity.WARNING,
        title=f"No CDI spec for {NVIDIA_KIND}: containers fail with 'unresolvable CDI devices "
        f"{NVIDIA_KIND}=all'",
        evidence=(
            ("resolved through CDI by", wanted),
            ("specs found", ", ".join(s.path for s in facts.cdi_specs.value) or "none"),
        ),
        remediation=Remediation(
            summary="Generate the NVIDIA CDI spec",
            steps=(
                _sudo(cdi_generate_argv(DEFAULT_CDI_SPEC)),
                "nvidia-ctk cdi list   # nvidia.com/gpu=0 … and nvidia.com/gpu=all",
            ),
            needs_root=True,
        ),
    )


def _cdi_stale(ctx: RuleContext) -> Evaluation:
    facts, why = _host(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    specs = _nvidia_specs(facts)
    broken = [
        s for s in (facts.cdi_specs.value if isinstance(facts.cdi_specs, Found) else ()) if s.error
    ]
    if not specs and not broken:
        yield not_applicable(f"no {NVIDIA_KIND} CDI spec here")
        return
    driver = ctx.machine.driver
    current = driver.version  # the installed driver, else the loaded module
    found = False
    for spec in specs:
        stale = bool(current and spec.driver_version and spec.driver_version != current)
        if not stale and not spec.missing:
            continue
        found = True
        evidence = [("spec", spec.path), ("generated for driver", spec.driver_version or "unknown")]
        evidence.append(
            ("driver here", f"{current or 'unknown'} ({driver.version_source or 'n/a'})")
        )
        evidence.extend(("missing on the host", m) for m in spec.missing)
        yield Finding(
            code=CDI_STALE,
            severity=Severity.ERROR,
            title=f"The CDI spec {spec.path} is stale: it names "
            + (
                f"driver {spec.driver_version}, not {current}"
                if stale
                else f"{len(spec.missing)} path(s) that no longer exist"
            )
            + " (regenerate it after every driver change)",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary="Regenerate the CDI spec for the driver that is installed now",
                steps=(
                    _sudo(cdi_generate_argv(spec.path)),
                    "toolkit >= 1.18: sudo systemctl enable --now nvidia-cdi-refresh.path "
                    "(regenerates the spec when the driver changes)",
                ),
                needs_root=True,
            ),
            subject=spec.path,
        )
    for spec in broken:
        found = True
        yield Finding(
            code=CDI_STALE,
            severity=Severity.WARNING,
            title=f"The CDI spec {spec.path} cannot be used: {spec.error}",
            evidence=(("spec", spec.path), ("problem", spec.error)),
            remediation=Remediation(
                summary="Remove or regenerate the broken spec",
                steps=(f"{_sudo(cdi_generate_argv(spec.path))}   # or remove it",),
                needs_root=True,
            ),
            subject=spec.path,
        )
    if not found:
        yield passed(
            f"{plural(len(specs), f'{NVIDIA_KIND} spec')} "
            + (
                f"names driver {current} and every path it mounts exists"
                if len(specs) == 1
                else f"name driver {current} and every path they mount exists"
            )
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
        "container.cdi-spec",
        "An NVIDIA CDI spec exists where CDI gives containers the GPU",
        (CDI_MISSING,),
        _cdi_missing,
    ),
    Rule(
        "container.cdi-current",
        "The NVIDIA CDI specs match the driver and its files",
        (CDI_STALE,),
        _cdi_stale,
    ),
)
