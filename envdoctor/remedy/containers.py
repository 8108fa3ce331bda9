"""Fix steps for the container findings: register the runtime, regenerate CDI specs, and the
run flags a person must change (notes: envdoctor cannot restart someone's container for them).

Every command is printed by the dry-run script like any other step (remedy/script.py); the ones
that change the host need root.
"""

from __future__ import annotations

from collections.abc import Iterator

from envdoctor.engine import Report
from envdoctor.model.containers import NVIDIA_KIND
from envdoctor.model.finding import Finding, Severity
from envdoctor.remedy.model import Action, Note, RunCommand
from envdoctor.rules import container_cdi as cdi
from envdoctor.rules import container_host as host
from envdoctor.rules import container_inside as inside

ContainerStep = tuple[str, Action, str]
"""(title, action, the code it addresses)."""

# The flags a person changes where the container is started (docker run, a pod spec).
RUN_NOTES = {
    inside.CGROUP_DENIED: "Recreate this container (docker rm -f …; docker run …, or delete the "
    "pod): a new container gets its device rules back. On the host, keep it from recurring: "
    "sudo nvidia-ctk system create-dev-char-symlinks --create-all (toolkit >= 1.12.0) with its "
    "udev rule, or run GPU containers in CDI mode",
    inside.CAPABILITIES: "Restart the container with -e NVIDIA_DRIVER_CAPABILITIES=compute,utility",
    inside.LIBS_MISSING: "Restart the container with --gpus all (Kubernetes: the nvidia runtime) "
    "instead of bare --device /dev/nvidia* flags",
    inside.LIBRARY_MISMATCH: "Rebuild the image without driver packages (libnvidia-compute-*, "
    "nvidia-utils-*), or restart the container after the host's driver upgrade",
    inside.REQUIRE_UNMET: "Upgrade the host's driver, or run an image built for the CUDA version "
    "the driver runs",
    inside.SHM_SMALL: "Restart the container with --shm-size=16g (or --ipc=host); Kubernetes: "
    "mount an emptyDir with medium: Memory at /dev/shm",
    host.DOCKER_SNAP: "Replace the Docker snap: sudo snap remove docker; install docker.io (or "
    "docker-ce), then sudo nvidia-ctk runtime configure --runtime=docker",
    host.CONFIG_INVALID: "Fix the configuration file named in the finding (its parse error is in "
    "the evidence); `nvidia-ctk runtime configure` rewrites the engine's",
    cdi.CDI_CONFLICT: "Keep one NVIDIA CDI spec per spec directory: remove the others named in "
    "the finding (envdoctor does not delete a spec it did not write)",
}


HOST_NOTES = frozenset({host.DOCKER_SNAP, host.CONFIG_INVALID, cdi.CDI_CONFLICT})
"""The notes above that are about the host itself, not about how a container is started."""


def container_steps(report: Report) -> Iterator[ContainerStep]:
    """The steps for every container finding of at least a warning, in the report's order."""
    seen: set[tuple[str, ...]] = set()
    for finding in report.findings:
        if finding.severity < Severity.WARNING or not finding.code.startswith("container."):
            continue
        for title, action in _steps(finding):
            key = (title, *_argv(action))
            if key not in seen:
                seen.add(key)
                yield title, action, finding.code


def _argv(action: Action) -> tuple[str, ...]:
    return action.argv if isinstance(action, RunCommand) else ()


def _steps(finding: Finding) -> list[tuple[str, Action]]:
    code = finding.code
    if code == host.TOOLKIT_MISSING:
        install = (
            "Install the NVIDIA Container Toolkit (NVIDIA's package repository must be set up)",
            Note(host.INSTALL_TOOLKIT),
        )
        if finding.subject == "podman":  # Podman reads CDI specs; nvidia-ctk cannot configure it
            return [install, _generate(cdi.spec_path_for(NVIDIA_KIND), NVIDIA_KIND)]
        return [install, *_configure(finding.subject or "docker")]
    if code in (host.NO_GPU_RUNTIME, host.DEFAULT_RUNTIME):
        return _configure(finding.subject or "containerd", default=True)
    if code == host.GPUS_REFUSED:
        return _configure("docker", default=True)
    if code == host.ROOTLESS:
        return [
            (
                "Let the NVIDIA hook run without cgroups (rootless Docker)",
                RunCommand(host.NO_CGROUPS_ARGV),
            )
        ]
    if code == cdi.CDI_MISSING:
        kind = finding.subject or NVIDIA_KIND
        return [_generate(cdi.spec_path_for(kind), kind)]
    if code == cdi.CDI_STALE:
        evidence = dict(finding.evidence)
        served = [f"{label} {evidence[label]}" for label in cdi.SERVED_BY if label in evidence]
        if served:  # another spec serves its devices: remove it, do not make a second one
            note = f"Remove {finding.subject} ({served[0]}); envdoctor does not delete specs"
            return [(f"{code}: {finding.subject}", Note(note))]
        kind = evidence.get("kind", "")
        return [_generate(finding.subject, kind if "/" in kind else NVIDIA_KIND)]
    run_note = RUN_NOTES.get(code)
    where = "on the host" if code in HOST_NOTES else "where the container is started"
    return [(f"{code}: {where}", Note(run_note))] if run_note else []


def _generate(path: str, kind: str) -> tuple[str, Action]:
    return (
        f"Generate the NVIDIA CDI spec ({kind}) for the installed driver into {path}",
        RunCommand(cdi.cdi_generate_argv(path, kind)),
    )


def _configure(engine: str, *, default: bool = False) -> list[tuple[str, Action]]:
    register, restart = host.configure_argv(engine, default=default)
    return [
        (f"Register the nvidia runtime with {engine}", RunCommand(register)),
        (f"Restart {engine} to load its new configuration", RunCommand(restart)),
    ]
