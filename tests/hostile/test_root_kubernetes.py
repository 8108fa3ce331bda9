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

# (manifest, container) -> why it runs as uid 0 (with no capability at all).
RUNS_AS_ROOT = {
    ("daemonset-textfile.yaml", "envdoctor"): "writes into node_exporter's root-owned host dir",
}
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
