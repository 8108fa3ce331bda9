"""deploy/kubernetes: every manifest parses, and every envdoctor command in it honours the
contracts of what runs it (exec probe timeouts, NPD's exit codes, timeout and 80-byte message)."""

from __future__ import annotations

import copy
import functools
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from envdoctor.cli.app import parse
from envdoctor.cli.common import AppContext
from envdoctor.fleet.requirements import parse_requirements
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke
from tests.shellcheck import shellcheck

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
STARTUP_MARGIN_S = 1.0  # what the interpreter needs to start, beyond envdoctor's own budget


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of every manifest (a copy each time: a test may change what it is given)."""
    for name, doc in _parsed():
        yield name, copy.deepcopy(doc)


@functools.cache
def _parsed() -> tuple[tuple[str, dict[str, Any]], ...]:
    """The manifests parsed once per test process, with libyaml where PyYAML has it (they are
    read while pytest collects, in every xdist worker)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(
        (path.name, doc)
        for path in MANIFESTS
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader)
        if doc
    )


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["kind"] == "Pod":
        spec: dict[str, Any] = doc["spec"]
        return spec
    if doc["kind"] in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
        template: dict[str, Any] = doc["spec"]["template"]["spec"]
        return template
    return None


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def probe_args(argv: list[str]) -> list[str] | None:
    """The arguments after `envdoctor probe`, if argv runs it."""
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "envdoctor" and argv[1] == "probe":
        return argv[2:]
    return None


@dataclass
class ProbeArgs:
    timeout: float
    format: str
    output: str | None
    verbose: bool
    require: tuple[str, ...]


def parse_probe(args: list[str]) -> ProbeArgs:
    parsed = parse(["probe", *args])
    parse_requirements(parsed.texts("require"))  # every gate in a manifest must be valid
    fmt = "json" if parsed.flag("json") else parsed.text("format") or "text"
    return ProbeArgs(
        parsed.number("timeout"),
        fmt,
        parsed.text("output"),
        parsed.flag("verbose"),
        parsed.texts("require"),
    )


def go_duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a Go duration: {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def test_every_manifest_parses_into_named_kubernetes_objects() -> None:
    assert {p.name for p in MANIFESTS} >= {
        "gpu-pod-probes.yaml",
        "daemonset-textfile.yaml",
        "node-problem-detector.yaml",
    }
    for name, doc in documents():
        assert doc.get("apiVersion") and doc.get("kind"), name
        assert doc["metadata"]["name"], name
        for container in containers(doc):
            assert container["name"] and container["image"], name


def test_gpu_pod_has_a_gate_and_a_startup_probe_within_their_budgets() -> None:
    (doc,) = [d for n, d in documents() if n == "gpu-pod-probes.yaml"]
    spec = pod_spec(doc)
    assert spec is not None
    (gate,) = spec["initContainers"]
    gate_args = probe_args(gate["command"])
    assert gate_args is not None
    gate_ns = parse_probe(gate_args)
    assert gate_ns.require, "the init container is a gate: it should --require something"
    assert gate["resources"]["limits"]["nvidia.com/gpu"] >= 1
    (main,) = spec["containers"]
    probe = main["startupProbe"]
    args = probe_args(probe["exec"]["command"])
    assert args is not None
    namespace = parse_probe(args)
    assert namespace.timeout + STARTUP_MARGIN_S <= probe["timeoutSeconds"]
    assert namespace.format == "text"  # kubelet shows the verdict line


def test_every_exec_probe_running_envdoctor_fits_its_timeout() -> None:
    found = 0
    for name, doc in documents():
        for container in containers(doc):
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = container.get(kind)
                if probe is None or "exec" not in probe:
                    continue
                args = probe_args(probe["exec"]["command"])
                if args is None:
                    continue
                found += 1
                timeout = parse_probe(args).timeout
                assert timeout + STARTUP_MARGIN_S <= probe.get("timeoutSeconds", 1), (name, kind)
    assert found


def script_of(container: dict[str, Any]) -> str:
    assert container["command"][:2] == ["/bin/sh", "-c"]
    (script,) = container["args"]
    assert isinstance(script, str)
    return script


def test_daemonset_writes_the_textfile_into_a_host_directory() -> None:
    (doc,) = [d for n, d in documents() if n == "daemonset-textfile.yaml"]
    (container,) = containers(doc)
    script = script_of(container)
    lines = [line.strip() for line in script.splitlines() if "envdoctor probe" in line]
    (line,) = lines
    namespace = parse_probe(shlex.split(line)[2:])
    assert namespace.format == "prometheus"
    assert namespace.output is not None
    output = PurePosixPath(namespace.output)
    assert output.suffix == ".prom"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    directory = str(output.parent)
    assert directory in mounts
    spec = pod_spec(doc)
    assert spec is not None
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "hostPath" in volumes[mounts[directory]]
    resources = container.get("resources", {})
    assert "nvidia.com/gpu" not in resources.get("limits", {})  # never takes a workload's GPU


def test_embedded_shell_scripts_pass_shellcheck() -> None:
    checked = 0
    for name, doc in documents():
        for container in containers(doc):
            if container.get("command", [])[:2] != ["/bin/sh", "-c"]:
                continue
            script = "#!/bin/sh\n" + script_of(container)
            assert shellcheck(script, "-s", "sh") == "", f"{name}: {container['name']}"
            checked += 1
    assert checked, "no embedded /bin/sh -c script found"


def npd_config() -> tuple[dict[str, Any], dict[str, Any]]:
    """The custom-plugin config (from its ConfigMap) and the NPD DaemonSet."""
    docs = [d for n, d in documents() if n == "node-problem-detector.yaml"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
    ((key, text),) = config_map["data"].items()
    config: dict[str, Any] = json.loads(text)
    config["_key"] = key
    config["_configmap"] = config_map["metadata"]["name"]
    return config, daemonset


def test_npd_plugin_config_is_what_npd_accepts() -> None:
    config, _ = npd_config()
    # The checks of NPD's pkg/custompluginmonitor/types/config.go (ApplyConfiguration, Validate).
    assert config["plugin"] == "custom"
    global_timeout = go_duration(config["pluginConfig"].get("timeout", "5s"))
    go_duration(config["pluginConfig"].get("invoke_interval", "30s"))
    assert config["pluginConfig"].get("max_output_length", 80) <= 80
    defaults = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert rule["type"] in ("temporary", "permanent")
        assert go_duration(rule.get("timeout", "5s")) <= global_timeout
        if rule["type"] == "permanent":
            assert rule["condition"] in defaults


def test_npd_rule_runs_envdoctor_probe_within_its_timeout() -> None:
    config, _ = npd_config()
    (rule,) = config["rules"]
    args = probe_args([rule["path"], *rule["args"]])
    assert args is not None
    namespace = parse_probe(args)
    assert namespace.format == "text" and not namespace.verbose
    assert namespace.timeout + STARTUP_MARGIN_S <= go_duration(rule["timeout"])


def test_npd_daemonset_loads_the_config_map() -> None:
    config, daemonset = npd_config()
    (container,) = containers(daemonset)
    spec = pod_spec(daemonset)
    assert spec is not None
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (volume,) = [
        n for n, v in volumes.items() if v.get("configMap", {}).get("name") == config["_configmap"]
    ]
    flag = f"--config.custom-plugin-monitor={mounts[volume]}/{config['_key']}"
    assert flag in container["command"]


@pytest.mark.parametrize(("scenario", "code"), [("healthy_h100", 0), ("gpu_lost", 1)])
def test_npd_command_honours_npds_contract(scenario: str, code: int) -> None:
    config, _ = npd_config()
    (rule,) = config["rules"]
    host = FakeHost.scenario(scenario)
    result = cli_invoke(list(rule["args"]), obj=AppContext(host=host, python=PYTHON))
    assert result.exit_code == code  # 0 OK, 1 NonOK, anything else Unknown
    message = result.output.strip()  # NPD trims the output, then keeps max_output_length bytes
    assert "\n" not in message
    assert len(message.encode()) <= config["pluginConfig"].get("max_output_length", 80)
