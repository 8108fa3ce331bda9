"""Issue 13, item 13: every Kubernetes manifest asks for the least privilege its workload needs.

Before the fix no manifest set runAsNonRoot, dropped capabilities, chose a seccomp profile or
kept the service-account token out, and every image was :latest. The exceptions below are the
ones the manifests explain in their comments (and docs/security.md): each is named here with its
reason, so a new manifest or container gets the strict rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from envdoctor import __version__
from tests.fleet.test_kubernetes import MANIFESTS, containers, documents, pod_spec

# (manifest, container) -> why it runs as uid 0 (with no capability at all). None since issue
# 35: the textfile DaemonSet ran as uid 0 with a writable hostPath; it runs as 65534 in a
# directory prepared for that user.
RUNS_AS_ROOT: dict[tuple[str, str], str] = {}
# manifest -> why its pods get a service-account token.
NEEDS_TOKEN = {"node-problem-detector.yaml": "NPD sets the node condition through the API"}
# Images that carry envdoctor: pinned to this release, so a release bump updates them.
ENVDOCTOR_IMAGES = ("/envdoctor:", "-envdoctor:")


def workloads() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(manifest, object, pod spec) for every object that runs pods."""
    found = []
    for name, doc in documents():
        spec = pod_spec(doc)
        if spec is not None:
            found.append((name, doc, spec))
    return found


def every_container() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(manifest, pod spec, container) for every container and init container."""
    return [(name, spec, c) for name, doc, spec in workloads() for c in containers(doc)]


def by_workload() -> list[Any]:
    return [pytest.param(*w, id=f"{w[0]}:{w[1]['kind']}") for w in workloads()]


def by_container() -> list[Any]:
    return [pytest.param(*c, id=f"{c[0]}:{c[2]['name']}") for c in every_container()]


def test_there_is_something_to_check() -> None:
    assert len(MANIFESTS) >= 3 and len(every_container()) >= 4


@pytest.mark.parametrize(("name", "doc", "spec"), by_workload())
def test_pods_use_runtime_default_seccomp_and_no_token_unless_needed(
    name: str, doc: dict[str, Any], spec: dict[str, Any]
) -> None:
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
    assert spec["automountServiceAccountToken"] is (name in NEEDS_TOKEN), name
    for key in ("hostPID", "hostIPC", "hostNetwork"):
        assert not spec.get(key), (name, key)


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_containers_drop_every_capability_and_never_escalate(
    name: str, spec: dict[str, Any], container: dict[str, Any]
) -> None:
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
    assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
    assert context["readOnlyRootFilesystem"] is True, (name, container["name"])
    assert not context.get("privileged"), (name, container["name"])


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_containers_run_as_non_root_where_the_workload_allows(
    name: str, spec: dict[str, Any], container: dict[str, Any]
) -> None:
    """The effective settings: the container's securityContext over the pod's."""
    merged = {**spec.get("securityContext", {}), **container["securityContext"]}
    if (name, container["name"]) in RUNS_AS_ROOT:
        assert merged["runAsUser"] == 0 and merged["runAsNonRoot"] is False
        return
    assert merged["runAsNonRoot"] is True, (name, container["name"])
    assert isinstance(merged.get("runAsUser"), int) and merged["runAsUser"] > 0


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_images_are_pinned(name: str, spec: dict[str, Any], container: dict[str, Any]) -> None:
    image: str = container["image"]
    repository, _, tag = image.rpartition(":")
    assert "@sha256:" in image or (repository and "/" not in tag), f"{name}: {image} has no tag"
    assert tag not in ("", "latest"), f"{name}: {image}"
    if any(marker in image for marker in ENVDOCTOR_IMAGES):
        assert tag == __version__, f"{name}: {image} is not envdoctor {__version__}"


def test_the_exceptions_still_exist() -> None:
    """An exception for a container or manifest that is gone would excuse the next one."""
    names = {(n, c["name"]) for n, _, c in every_container()}
    assert set(RUNS_AS_ROOT) <= names
    assert set(NEEDS_TOKEN) <= {n for n, _, _ in workloads()}


# --- issue 35 ---------------------------------------------------------------------------------


def _merged(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    return {**spec.get("securityContext", {}), **container.get("securityContext", {})}


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_no_root_container_mounts_a_writable_host_path(
    name: str, spec: dict[str, Any], container: dict[str, Any]
) -> None:
    host_paths = {v["name"] for v in spec.get("volumes", []) if "hostPath" in v}
    writable = [
        m
        for m in container.get("volumeMounts", [])
        if m["name"] in host_paths and not m.get("readOnly")
    ]
    if writable:
        merged = _merged(spec, container)
        assert merged.get("runAsNonRoot") is True and merged.get("runAsUser", 0) > 0, name
    for volume in spec.get("volumes", []):
        if "hostPath" in volume:  # never created by the kubelet as root's
            assert volume["hostPath"].get("type") != "DirectoryOrCreate", (name, volume["name"])


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_all_gpus_only_for_nvml_in_a_pod_that_requests_none(
    name: str, spec: dict[str, Any], container: dict[str, Any]
) -> None:
    env = _env(container)
    if env.get("NVIDIA_VISIBLE_DEVICES") != "all":
        return
    requested = any(
        "nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {})
        for c in spec.get("containers", [])
    )
    if not requested:  # monitoring: NVML only, no CUDA library mounted
        assert env.get("NVIDIA_DRIVER_CAPABILITIES") == "utility", (name, container["name"])


@pytest.mark.parametrize(("name", "doc", "spec"), by_workload())
def test_every_service_account_is_defined_and_bound(
    name: str, doc: dict[str, Any], spec: dict[str, Any]
) -> None:
    account = spec.get("serviceAccountName")
    if account is None:
        return
    objects = [d for n, d in documents() if n == name]
    namespace = doc["metadata"].get("namespace")
    assert any(
        d["kind"] == "ServiceAccount"
        and d["metadata"]["name"] == account
        and d["metadata"].get("namespace") == namespace
        for d in objects
    ), f"{name}: ServiceAccount {account} is not defined"
    bindings = [d for d in objects if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert any(
        s.get("kind") == "ServiceAccount" and s.get("name") == account
        for b in bindings
        for s in b.get("subjects", [])
    ), f"{name}: ServiceAccount {account} is bound to no role"


@pytest.mark.parametrize(("name", "spec", "container"), by_container())
def test_probes_leave_time_for_the_interpreter_under_load(
    name: str, spec: dict[str, Any], container: dict[str, Any]
) -> None:
    """0.8 s was measured for the interpreter's start on a loaded node: the kubelet's timeout
    must cover envdoctor's --timeout budget and that start, with room to spare."""
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container.get(kind)
        if not probe or "exec" not in probe:
            continue
        command = probe["exec"]["command"]
        budget = float(command[command.index("--timeout") + 1]) if "--timeout" in command else 1.0
        assert probe.get("timeoutSeconds", 1) >= budget + 3, (name, container["name"], kind)
