"""On a GPU host: the CDI specs that give containers the GPU where CDI does (Podman, the
toolkit's cdi mode, containerd and CRI-O with CDI on).

What a CDI runtime resolves, as container-device-interface's cache does (pkg/cdi: spec-dirs.go,
cache.go): every ``.json`` and ``.yaml`` file of each spec directory (a ``.yml`` one is never
read); a device two directories define comes from the later directory; a device two specs of
one directory define is dropped, so asking for it fails with "unresolvable CDI devices".
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from envdoctor.model.containers import (
    CDI_DIRS,
    DEFAULT_CDI_SPEC,
    NVIDIA_KIND,
    CdiSpec,
    ContainerHostFacts,
    clean_dir,
)
from envdoctor.model.finding import Finding, Remediation, Severity
from envdoctor.model.outcome import not_applicable, passed, unknown
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.units import plural
from envdoctor.rules.base import Evaluation, Rule, RuleContext
from envdoctor.rules.container_common import host_side, sudo

CDI_MISSING = "container.cdi-missing"
CDI_STALE = "container.cdi-stale"
CDI_CONFLICT = "container.cdi-conflict"
LEGACY_HOOK = "nvidia-container-runtime-hook"
CDI_HOOK = "nvidia-cdi-hook"
"""Docker's --gpus runs the legacy hook where it is on PATH, else asks CDI where nvidia-cdi-hook
is (moby daemon/devices_nvidia_linux.go)."""
IGNORED_SUFFIX = ".yml"
"""A spec file name CDI never reads (it reads ``.json`` and ``.yaml`` only)."""
SERVED_BY = ("its devices come from", "it clashes with", "another spec serves its kind")
"""Evidence labels of a stale or broken spec that another spec serves (or would, once this one
is gone): such a spec is removed, not regenerated (a second spec of the kind beside the one that
works would clash with it). ``envdoctor fix`` reads them (remedy/containers.py)."""


def cdi_generate_argv(path: str, kind: str = NVIDIA_KIND) -> tuple[str, ...]:
    """Writes the NVIDIA CDI spec for the installed driver to ``path`` (of another kind than
    nvidia.com/gpu with nvidia-ctk's ``--vendor`` and ``--class``)."""
    argv: tuple[str, ...] = ("nvidia-ctk", "cdi", "generate", f"--output={path}")
    if kind != NVIDIA_KIND:
        vendor, _, cls = kind.partition("/")
        argv = (*argv, f"--vendor={vendor}", f"--class={cls}")
    return argv


def spec_dirs(facts: ContainerHostFacts) -> tuple[str, ...]:
    config = facts.toolkit.config
    return config.value.spec_dirs if isinstance(config, Found) else CDI_DIRS


def nvidia_kinds(facts: ContainerHostFacts) -> tuple[str, ...]:
    """nvidia.com/gpu, and the kind the toolkit's runtime asks for in cdi mode."""
    config = facts.toolkit.config
    kind = config.value.default_kind if isinstance(config, Found) else NVIDIA_KIND
    return (NVIDIA_KIND,) if kind == NVIDIA_KIND else (NVIDIA_KIND, kind)


@dataclass(frozen=True, slots=True)
class Need:
    """A kind something here asks CDI for: the toolkit's runtime in cdi mode (every GPU
    container then fails without it), or Podman (only its --device requests do)."""

    kind: str
    who: str
    runtime: bool


def wanted(facts: ContainerHostFacts) -> list[Need]:
    """Everything here that gives GPUs only through CDI, and the kind it asks for."""
    out: list[Need] = []
    config = facts.toolkit.config
    if isinstance(config, Found) and config.value.mode == "cdi":
        kind = config.value.default_kind
        shown = "" if kind == NVIDIA_KIND else f', default-kind = "{kind}"'
        out.append(Need(kind, f'{config.value.path}: mode = "cdi"{shown}', runtime=True))
    if all(n.kind != NVIDIA_KIND for n in out):
        programs = dict(facts.toolkit.programs)
        podman = next((e for e in facts.engines if e.name == "podman"), None)
        docker = next((e for e in facts.engines if e.name == "docker"), None)
        if podman is not None:
            who = f"podman ({podman.program}) gives GPUs only through CDI"
            out.append(Need(NVIDIA_KIND, who, runtime=False))
        elif docker is not None and CDI_HOOK in programs and LEGACY_HOOK not in programs:
            who = f"docker ({docker.program}): --gpus asks CDI (only {CDI_HOOK} is installed)"
            out.append(Need(NVIDIA_KIND, who, runtime=False))
    return out


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a CDI runtime makes of the NVIDIA specs here.

    ``read`` the specs it reads (parsed, of an NVIDIA kind, not ``.yml``); ``conflicts`` each
    (kind, device, the specs of one directory that both define it), which CDI drops whatever a
    later directory defines; ``shadowed`` each spec all of whose devices come from one spec of a
    later directory instead.
    """

    read: tuple[CdiSpec, ...]
    conflicts: tuple[tuple[str, str, tuple[str, ...]], ...]
    shadowed: tuple[tuple[str, str], ...]  # (the spec, the one its devices come from)
    resolving: tuple[str, ...] = ()  # the specs at least one device resolves from

    def kinds(self) -> set[str]:
        return {s.kind for s in self.read}


def _directory(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def priorities(dirs: tuple[str, ...]) -> dict[str, int]:
    """Each spec directory's priority: its place in the list (CDI's cache scans them in order;
    a directory listed twice is scanned twice, and its later place is the one that counts)."""
    return {clean_dir(d): i for i, d in enumerate(dirs)}


def resolve(facts: ContainerHostFacts) -> Resolution:
    """CDI's cache over the NVIDIA specs (container-device-interface pkg/cdi/cache.go,
    refresh): the directories in order, each one's files in name order; a device of a later
    directory replaces an earlier one's, one two specs of a directory define is a conflict, and
    every device that was ever in conflict is dropped at the end."""
    specs = facts.cdi_specs.value if isinstance(facts.cdi_specs, Found) else ()
    kinds = nvidia_kinds(facts)
    read = tuple(
        s for s in specs if s.kind in kinds and not s.error and not s.path.endswith(IGNORED_SUFFIX)
    )
    rank = priorities(spec_dirs(facts))

    def priority(spec: CdiSpec) -> int:
        return rank.get(_directory(spec.path), -1)

    devices: dict[tuple[str, str], CdiSpec] = {}
    clashes: dict[tuple[str, str], list[str]] = {}
    for spec in sorted(read, key=lambda s: (priority(s), s.path)):
        for device in spec.devices:
            key = (spec.kind, device)
            other = devices.get(key)
            if other is not None and priority(other) == priority(spec):
                clashes.setdefault(key, [other.path])
                if spec.path not in clashes[key]:
                    clashes[key].append(spec.path)
                continue
            devices[key] = spec
    conflicts = tuple(sorted((*key, tuple(paths)) for key, paths in clashes.items()))
    shadowed = []
    for spec in read:
        keys = [(spec.kind, d) for d in spec.devices]
        winners = {devices[k].path for k in keys}
        later = all(k not in clashes and priority(devices[k]) > priority(spec) for k in keys)
        if later and len(winners) == 1:
            shadowed.append((spec.path, winners.pop()))
    live = {spec.path for key, spec in devices.items() if key not in clashes}
    return Resolution(
        read=read, conflicts=conflicts, shadowed=tuple(shadowed), resolving=tuple(sorted(live))
    )


def keeper(paths: tuple[str, ...], stale: set[str]) -> str:
    """The spec of a clash to keep: a current one, and the one at the name nvidia-ctk and
    nvidia-cdi-refresh write (nvidia.yaml), first. Both CDI rules choose with this."""
    return min(paths, key=lambda p: (p in stale, p.rpartition("/")[2] != "nvidia.yaml", p))


def stale_paths(resolution: Resolution, current: str | None) -> set[str]:
    """The specs of another driver than ``current``, or naming paths that are gone."""
    return {
        s.path
        for s in resolution.read
        if s.missing or (current and s.driver_version and s.driver_version != current)
    }


def resolvable(facts: ContainerHostFacts) -> list[CdiSpec]:
    """The NVIDIA specs a CDI-enabled engine resolves at least one device from."""
    resolution = resolve(facts)
    return [s for s in resolution.read if s.path in resolution.resolving]


# --- rules ---------------------------------------------------------------------------------------


def _missing(ctx: RuleContext) -> Evaluation:
    facts, why = host_side(ctx)
    if facts is None:
        yield not_applicable(why)
        return
    if not isinstance(facts.cdi_specs, Found):
        yield unknown(f"the CDI spec directories: {why_missing(facts.cdi_specs)}")
        return
    resolution = resolve(facts)
    needs = wanted(facts)
    if not needs:
        if resolution.read:
            paths = ", ".join(s.path for s in resolution.read)
            yield passed(f"NVIDIA CDI specs in {paths}")
        else:
            yield not_applicable(
                "nothing here gives GPUs through CDI alone (the toolkit is not in cdi mode, "
                "no Podman)"
            )
        return
    lacking = [n for n in needs if n.kind not in resolution.kinds()]
    if not lacking:
        shown = ", ".join(f"{s.kind} in {s.path}" for s in resolution.read)
        clashed = {p for _, _, paths in resolution.conflicts for p in paths}
        dropped = [s.path for s in resolution.read if s.path in clashed - set(resolution.resolving)]
        clash = f" (no device of {', '.join(dropped)} resolves: container.cdi-unique)"
        yield passed(f"CDI specs: {shown}" + (clash if dropped else ""))
        return
    everything = facts.cdi_specs.value
    for need in lacking:
        kind = need.kind
        path = spec_path_for(kind)
        ignored = [s.path for s in everything if s.path.endswith(IGNORED_SUFFIX)]
        found = ", ".join(f"{s.path} ({s.kind or s.error})" for s in everything)
        evidence = [
            ("resolved through CDI by", need.who),
            ("kind", kind),
            ("specs found", found or "none"),
        ]
        if ignored:
            evidence.append(("never read (CDI reads .yaml and .json only)", ", ".join(ignored)))
        yield Finding(
            code=CDI_MISSING,
            severity=Severity.ERROR if need.runtime else Severity.WARNING,
            title=f"No CDI spec for {kind}: containers fail with 'unresolvable CDI devices "
            f"{kind}=all'",
            evidence=tuple(evidence),
            remediation=Remediation(
                summary="Generate the NVIDIA CDI spec",
                steps=(
                    sudo(cdi_generate_argv(path, kind)),
                    *(f"sudo rm {shlex.quote(p)}   # CDI never reads a .yml file" for p in ignored),
                    f"nvidia-ctk cdi list   # {kind}=0 … and {kind}=all",
                ),
                needs_root=True,
            ),
            subject=kind,
        )


def spec_path_for(kind: str) -> str:
    """Where envdoctor's fixes write the spec of a kind: /etc/cdi/nvidia.yaml for
    nvidia.com/gpu, /etc/cdi/<vendor>-<class>.yaml for another."""
    return (
        DEFAULT_CDI_SPEC if kind == NVIDIA_KIND else f"{CDI_DIRS[0]}/{kind.replace('/', '-')}.yaml"
    )


def _resolved(ctx: RuleContext) -> tuple[ContainerHostFacts, Resolution] | str:
    """The host's facts and what CDI makes of its specs, or why CDI rules do not apply."""
    facts, why = host_side(ctx)
    return why if facts is None else (facts, resolve(facts))


def _stale(ctx: RuleContext) -> Evaluation:
    side = _resolved(ctx)
    if isinstance(side, str):
        yield not_applicable(side)
        return
    facts, resolution = side
    everything = facts.cdi_specs.value if isinstance(facts.cdi_specs, Found) else ()
    kinds = nvidia_kinds(facts)
    # a spec CDI never reads (.yml) or of another vendor is not NVIDIA's to regenerate
    broken = [
        s
        for s in everything
        if s.error and not s.path.endswith(IGNORED_SUFFIX) and (not s.kind or s.kind in kinds)
    ]
    if not resolution.read and not broken:
        yield not_applicable("no NVIDIA CDI spec here")
        return
    driver = ctx.machine.driver
    current = driver.version  # the installed driver, else the loaded module
    stale = stale_paths(resolution, current)
    # the spec each one clashing with others gives way to (the one container.cdi-unique keeps)
    clashing: dict[str, list[str]] = {}
    for _, _, paths in resolution.conflicts:
        kept = keeper(paths, stale)
        for path in paths:
            if path != kept and kept not in clashing.setdefault(path, []):
                clashing[path].append(kept)
    found = False
    for spec in resolution.read:
        if spec.path not in stale:
            continue
        found = True
        yield _stale_finding(spec, current, driver.version_source, resolution, clashing)
    for spec in broken:
        found = True
        yield _broken_finding(spec, resolution)
    if not found:
        count = len(resolution.read)
        yield passed(
            f"{plural(count, 'NVIDIA CDI spec')} "
            + (
                f"names driver {current} and every path it mounts exists"
                if count == 1
                else f"name driver {current} and every path they mount exists"
            )
        )


def _broken_finding(spec: CdiSpec, resolution: Resolution) -> Finding:
    kind = spec.kind or NVIDIA_KIND
    evidence = [("spec", spec.path), ("kind", spec.kind or "unknown"), ("problem", spec.error)]
    serving = [s.path for s in resolution.read if s.kind == kind and s.path in resolution.resolving]
    if serving:
        evidence.append((SERVED_BY[2], ", ".join(serving)))
        steps: tuple[str, ...] = (f"sudo rm {shlex.quote(spec.path)}",)
    else:
        steps = (
            f"{sudo(cdi_generate_argv(spec.path, kind))}   # or remove it: "
            f"sudo rm {shlex.quote(spec.path)}",
        )
    return Finding(
        code=CDI_STALE,
        severity=Severity.WARNING,
        title=f"The CDI spec {spec.path} cannot be used: {spec.error}",
        evidence=tuple(evidence),
        remediation=Remediation(
            summary="Remove the broken spec" + ("" if serving else " (or regenerate it)"),
            steps=steps,
            needs_root=True,
        ),
        subject=spec.path,
    )


def _stale_finding(
    spec: CdiSpec,
    current: str | None,
    source: str,
    resolution: Resolution,
    clashing: dict[str, list[str]],
) -> Finding:
    stale = bool(current and spec.driver_version and spec.driver_version != current)
    evidence = [("spec", spec.path), ("kind", spec.kind)]
    evidence.append(("generated for driver", spec.driver_version or "unknown"))
    evidence.append(("driver here", f"{current or 'unknown'} ({source or 'n/a'})"))
    evidence.extend(("missing on the host", m) for m in spec.missing)
    what = (
        f"driver {spec.driver_version}, not {current}"
        if stale
        else f"{len(spec.missing)} path(s) that no longer exist"
    )
    remove = f"sudo rm {shlex.quote(spec.path)}"
    regenerate = sudo(cdi_generate_argv(spec.path, spec.kind))
    over = dict(resolution.shadowed).get(spec.path)
    severity = Severity.ERROR
    steps: tuple[str, ...]
    if clashing.get(spec.path):
        # another spec of the same directory defines these devices too and is the one kept: the
        # conflict's fix removes this one (container.cdi-unique), so this finding says the same
        others = ", ".join(clashing[spec.path])
        evidence.append((SERVED_BY[1], others))
        title = f"is stale ({what}) and clashes with {others} in its directory: remove it"
        summary, steps = "Remove the stale spec", (remove,)
    elif over:
        # CDI takes every device of this spec from a later directory's spec: it is dead weight,
        # not the cause of a failure (until that other spec goes)
        evidence.append((SERVED_BY[0], over))
        severity = Severity.WARNING
        title = f"is stale ({what}) but unused: CDI takes its devices from {over}"
        summary, steps = (
            "Remove the stale spec (or regenerate it)",
            (f"{remove}   # or: {regenerate}",),
        )
    else:
        title = f"is stale: it names {what} (regenerate it after every driver change)"
        summary = "Regenerate the CDI spec for the driver that is installed now"
        steps = (
            regenerate,
            "toolkit >= 1.18: sudo systemctl enable --now nvidia-cdi-refresh.path "
            "(regenerates the spec when the driver changes)",
        )
    return Finding(
        code=CDI_STALE,
        severity=severity,
        title=f"The CDI spec {spec.path} {title}",
        evidence=tuple(evidence),
        remediation=Remediation(summary=summary, steps=steps, needs_root=True),
        subject=spec.path,
    )


def _conflict(ctx: RuleContext) -> Evaluation:
    side = _resolved(ctx)
    if isinstance(side, str):
        yield not_applicable(side)
        return
    _, resolution = side
    stale = stale_paths(resolution, ctx.machine.driver.version)
    if len(resolution.read) < 2:
        yield not_applicable(f"{plural(len(resolution.read), 'NVIDIA CDI spec')}: nothing to clash")
        return
    if not resolution.conflicts:
        yield passed(f"no device is defined twice in one directory ({len(resolution.read)} specs)")
        return
    by_specs: dict[tuple[str, ...], list[str]] = {}
    for kind, device, paths in resolution.conflicts:
        by_specs.setdefault(paths, []).append(f"{kind}={device}")
    for clashing, devices in by_specs.items():
        kept = keeper(clashing, stale)
        paths = (kept, *sorted(p for p in clashing if p != kept))
        shown = ", ".join(devices[:8]) + (
            f" and {len(devices) - 8} more" if len(devices) > 8 else ""
        )
        example = next((d for d in devices if d.endswith("=all")), devices[0])
        yield Finding(
            code=CDI_CONFLICT,
            severity=Severity.ERROR,
            title=f"{' and '.join(paths)} define the same CDI devices in one directory: CDI drops "
            f"every such device, so asking for one fails with 'unresolvable CDI devices "
            f"{example}'",
            evidence=(
                ("specs", ", ".join(paths)),
                ("devices both define", shown),
            ),
            remediation=Remediation(
                summary=f"Keep one NVIDIA spec per directory ({paths[0]}): remove the others",
                steps=(
                    *(f"sudo rm {shlex.quote(p)}" for p in paths[1:]),
                    "nvidia-ctk cdi list   # every device listed once",
                ),
                needs_root=True,
            ),
            subject=paths[0],
        )


RULES = (
    Rule(
        "container.cdi-spec",
        "An NVIDIA CDI spec exists where CDI gives containers the GPU",
        (CDI_MISSING,),
        _missing,
    ),
    Rule(
        "container.cdi-current",
        "The NVIDIA CDI specs match the driver and its files",
        (CDI_STALE,),
        _stale,
    ),
    Rule(
        "container.cdi-unique",
        "No CDI device is defined by two specs of one directory",
        (CDI_CONFLICT,),
        _conflict,
    ),
)
