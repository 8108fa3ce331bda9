"""The container layer: each recorded failure is diagnosed with its code and its fix, the
parsers survive hostile files, and the facts round-trip through a snapshot."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.model.codec import decode, encode
from envdoctor.model.containers import NOT_READ
from envdoctor.model.facts import Facts
from envdoctor.model.probed import Found
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes import collect_facts
from envdoctor.probes.engine_config import ConfigError, docker_config, parse_toml, toolkit_config
from envdoctor.rules.container_inside import judge_requirement
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost, load_scenario
from tests.runner import invoke as cli_invoke

# scenario → (the one container code, its severity, a fix command or note that must be planned)
CASES = {
    "container_cgroup_denied": ("container.cgroup-denied", "error", "create-dev-char-symlinks"),
    "container_shm_small": ("container.shm-small", "warning", "--shm-size"),
    "container_require_cuda": ("container.require-cuda-unmet", "error", "Upgrade the host"),
    "container_libs_missing": ("container.driver-libs-missing", "error", "--gpus all"),
    "container_capabilities": ("container.driver-capabilities", "error", "compute,utility"),
    "container_image_driver": ("container.library-mismatch", "error", "without driver packages"),
    "host_toolkit_missing": ("container.toolkit-missing", "warning", "--runtime=docker"),
    "host_docker_snap": ("container.docker-snap", "warning", "snap remove docker"),
    "host_k8s_default_runtime": (
        "container.default-runtime",
        "warning",
        "--runtime=containerd --set-as-default",
    ),
    "host_k8s_no_runtime": (
        "container.no-gpu-runtime",
        "warning",
        "--runtime=containerd --set-as-default",
    ),
    "host_docker_rootless": (
        "container.rootless-cgroups",
        "warning",
        "nvidia-container-cli.no-cgroups",
    ),
    "host_cdi_stale": (
        "container.cdi-stale",
        "error",
        "cdi generate --output=/etc/cdi/nvidia.yaml",
    ),
    "host_cdi_missing": (
        "container.cdi-missing",
        "error",
        "cdi generate --output=/etc/cdi/nvidia.yaml",
    ),
    "host_cdi_conflict": ("container.cdi-conflict", "error", "Keep one NVIDIA CDI spec"),
    "host_cdi_yml": (
        "container.cdi-missing",
        "warning",
        "cdi generate --output=/etc/cdi/nvidia.yaml",
    ),
    "host_cdi_shadowed": ("container.cdi-stale", "warning", "Remove /etc/cdi/nvidia.yaml"),
    "host_docker_cdi_mode": (
        "container.gpus-flag-refused",
        "warning",
        "--runtime=docker --set-as-default",
    ),
    "host_k8s_dropin_replaces": (
        "container.no-gpu-runtime",
        "warning",
        "--runtime=containerd --set-as-default",
    ),
    "host_k8s_containerd2_no_runtime": (
        "container.no-gpu-runtime",
        "warning",
        "--runtime=containerd --set-as-default",
    ),
    "host_k8s_crio_no_runtime": (
        "container.no-gpu-runtime",
        "warning",
        "--runtime=crio --set-as-default",
    ),
}


def _cli(host: FakeHost, *args: str) -> Any:
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


def _evidence(finding: dict[str, Any]) -> dict[str, str]:
    return {e["label"]: e["value"] for e in finding["evidence"]}


def _check(name: str, **over: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        _cli(FakeHost.scenario(name, **over), "check", "--json").output
    )
    return data


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_failure_has_its_code_and_fix(name: str) -> None:
    code, severity, step = CASES[name]
    report = _check(name)
    mine = [
        (f["code"], f["severity"]) for f in report["findings"] if f["code"].startswith("container.")
    ]
    assert mine == [(code, severity)], report["findings"]
    plan = json.loads(_cli(FakeHost.scenario(name), "fix", "--format", "json").output)
    assert code in plan["addressed"]
    planned = " ".join(
        " ".join(str(c) for c in s["commands"]) + " " + s["title"] for s in plan["steps"]
    )
    script = _cli(FakeHost.scenario(name), "fix").output
    assert step in planned or step in script, (planned, script)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.startswith("container_")))
def test_probe_gives_the_container_verdict_without_a_process(name: str) -> None:
    host = FakeHost.scenario(name)
    result = _cli(host, "probe")
    code, severity, _ = CASES[name]
    assert host.ran == []  # no subprocess in the probe tier
    if severity == "error":
        assert result.exit_code == 1 and result.output.startswith(f"unhealthy: {code}")
    else:
        assert result.exit_code == 0 and result.output.startswith("healthy (1 warning)")


def test_unknown_error_is_the_cgroup_only_when_open_says_eperm() -> None:
    """NVML 'Unknown Error' in a container: the cgroup first, proven by open(2) (issue 12)."""
    denied = _check("container_cgroup_denied")
    nvml = {c["name"]: c for c in denied["checks"]}["gpu.nvml"]
    assert nvml["outcome"] == "failed" and "container.cgroup-denied" in nvml["reason"]
    # the same NVML error, but the nodes open: not the cgroup, NVML's own finding stays
    opened = _check(
        "container_cgroup_denied",
        opens={"/dev/nvidiactl": "ok", "/dev/nvidia-uvm": "ok", "/dev/nvidia0": "ok"},
    )
    codes = {f["code"] for f in opened["findings"]}
    assert "container.cgroup-denied" not in codes and "gpu.nvml-failed" in codes
    # EPERM where the mode bits deny is a permission problem, not the cgroup
    root_only = {
        p: {"mode": "0600", "readable": False, "writable": False}
        for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0")
    }
    perm = _check("container_cgroup_denied", nodes=root_only)
    codes = {f["code"] for f in perm["findings"]}
    assert "container.cgroup-denied" not in codes and "device.permission-denied" in codes


def test_the_nodes_are_opened_only_in_a_container_whose_nvml_failed() -> None:
    healthy = FakeHost.scenario("container_shm_small")
    _cli(healthy, "check", "--json")
    assert healthy.opened == []
    denied = FakeHost.scenario("container_cgroup_denied")
    _cli(denied, "probe")
    assert denied.opened == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"]


@pytest.mark.parametrize(
    ("visible", "cause"),
    [
        (None, "was not asked for a GPU"),
        ("void", "asks the NVIDIA runtime for no GPU"),
        ("all", "no NVIDIA hook ran"),
    ],
)
def test_no_gpu_access_names_its_cause(visible: str | None, cause: str) -> None:
    env = {"NVIDIA_VISIBLE_DEVICES": visible} if visible else {}
    report = _check("container_no_gpu", env=env)
    (finding,) = [f for f in report["findings"] if f["code"] == "container.no-gpu-access"]
    assert cause in _evidence(finding)["why"]
    assert "env.nvidia-visible-devices" not in {f["code"] for f in report["findings"]}


@pytest.mark.parametrize(
    ("requirement", "props", "met"),
    [
        ("cuda>=12.4", {"cuda": "13.0"}, True),
        ("cuda>=13.1", {"cuda": "13.0"}, False),
        (
            "cuda>=13.1 brand=tesla,driver>=470,driver<471",
            {"cuda": "13.0", "driver": "580.95.05"},
            False,
        ),
        (
            "cuda>=13.1 brand=tesla,driver>=580,driver<581",
            {"cuda": "13.0", "driver": "580.95.05"},
            None,
        ),
        ("cuda>=13.1 driver>=580", {"cuda": "13.0", "driver": "580.95.05"}, True),
        ("cuda>=12.0,driver>=600", {"cuda": "13.0", "driver": "580.95.05"}, False),
        ("garbage", {"cuda": "13.0"}, True),
    ],
)
def test_requirements_read_as_libnvidia_container_reads_them(
    requirement: str, props: dict[str, str], met: bool | None
) -> None:
    """Spaces OR, commas AND, unknown properties skipped; brand is unknown here."""
    assert judge_requirement(requirement, props) is met


@pytest.mark.parametrize(
    ("cuda_version", "unmet"),
    [
        ("13.1.0", "cuda>=13.1"),
        ("13.0.2", None),  # the driver runs CUDA 13.0
        ("v13.1", "cuda>=13.1"),
        ("14", "cuda>=14.0"),  # Go's semver reads "14" as 14.0
        ("13.1.0-rc1", "cuda>=13.1"),
        ("13.1.0.1", None),  # no semver: the toolkit refuses the container, nothing to judge
        ("13.1-rc1", None),  # a prerelease needs major.minor.patch
        ("13.01", None),  # no leading zeros
        ("13.1.0-rc1+b1", "cuda>=13.1"),
        ("13.1.0-01", None),  # nor in a numeric prerelease identifier
        ("13.1.0-rc..1", None),
        ("thirteen", None),
    ],
)
def test_a_legacy_image_is_held_to_its_cuda_version(cuda_version: str, unmet: str | None) -> None:
    """An image with CUDA_VERSION and no NVIDIA_REQUIRE_CUDA: the toolkit requires
    cuda>=MAJOR.MINOR of it (internal/config/image/cuda_image.go, IsLegacy)."""
    report = _check(
        "container_require_cuda", env={"NVIDIA_REQUIRE_CUDA": None, "CUDA_VERSION": cuda_version}
    )
    found = [f for f in report["findings"] if f["code"] == "container.require-cuda-unmet"]
    assert [v for f in found for v in _evidence(f).values() if v.startswith("cuda>=")] == (
        [unmet] if unmet else []
    )


def test_disable_require_turns_the_check_off() -> None:
    report = _check("container_require_cuda", env={"NVIDIA_DISABLE_REQUIRE": "true"})
    assert "container.require-cuda-unmet" not in {f["code"] for f in report["findings"]}


# --- hostile and broken files ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ['{"runtimes": {"nvidia": ', "[1, 2]", "\x00\x01\x02binary", "[" * 100_000, '{"runtimes": 3}'],
)
def test_a_broken_daemon_json_is_one_line_not_a_traceback(text: str) -> None:
    with pytest.raises(ConfigError):
        docker_config(text, "/etc/docker/daemon.json")


def test_a_broken_daemon_json_is_a_finding() -> None:
    report = _check("host_toolkit_missing", files={"/etc/docker/daemon.json": '{"runtimes": {'})
    (finding,) = [f for f in report["findings"] if f["code"] == "container.config-invalid"]
    assert "not valid JSON" in _evidence(finding)["docker config"]


@pytest.mark.parametrize(
    "text", ["[nvidia-container-runtime\nmode=", "a = [" * 50_000, "x = 1\nx = 2"]
)
def test_a_broken_toml_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        toolkit_config(text, "/etc/nvidia-container-runtime/config.toml")


def test_toolkit_config_defaults() -> None:
    config = toolkit_config("", "/etc/nvidia-container-runtime/config.toml")
    assert (config.mode, config.no_cgroups, config.spec_dirs) == (
        "auto",
        False,
        ("/etc/cdi", "/var/run/cdi"),
    )
    assert config.default_kind == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ('"management.nvidia.com/gpu"', "management.nvidia.com/gpu"),
        ('"example_vendor.com/gpu"', "example_vendor.com/gpu"),  # CDI allows "_" in a vendor
        ('"no-class"', "nvidia.com/gpu"),  # not vendor/class: the toolkit's default stands
        ('"/gpu"', "nvidia.com/gpu"),
        ('"nvidia.com/gpu/extra"', "nvidia.com/gpu"),
        ("42", "nvidia.com/gpu"),
        ('"nvidia.com/gp\u00fc"', "nvidia.com/gpu"),  # not ASCII
    ],
)
def test_the_toolkit_default_kind_is_read_or_its_default_kept(value: str, kind: str) -> None:
    text = f"[nvidia-container-runtime.modes.cdi]\ndefault-kind = {value}\n"
    assert toolkit_config(text, "config.toml").default_kind == kind


@pytest.mark.parametrize(
    ("version", "runtimes"), [(3, ("nvidia", "runsc")), (2, ("runsc",))], ids=["2.x", "1.x"]
)
def test_a_drop_in_merges_as_the_containerd_of_its_config_version_does(
    version: int, runtimes: tuple[str, ...]
) -> None:
    """containerd 2.x (config version 3) merges an imported file's plugin tables into the
    config's (its server/config mergeConfig replaces no plugin section); 1.x (version 2) takes
    the whole table of each plugin the imported file names (checked against the real 1.6 above)."""
    from envdoctor.probes.engine_config import CRI_PLUGIN, containerd_config, merge_files

    plugin = CRI_PLUGIN[version]
    nvidia = {"options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}
    base: dict[str, Any] = {
        "version": version,
        "plugins": {plugin: {"containerd": {"runtimes": {"nvidia": nvidia}}}},
    }
    drop_in: dict[str, Any] = {"plugins": {plugin: {"containerd": {"runtimes": {"runsc": {}}}}}}
    files = [("config.toml", base), ("drop-in.toml", drop_in)]
    merged = containerd_config(merge_files(files, by_key=version >= 3), ("config.toml",))
    assert merged.runtimes == runtimes


@pytest.mark.parametrize(
    "spec",
    [
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [\n",  # malformed YAML
        "\x00\x01binary",
        "kind: nvidia.com/gpu\ndevices: []\n",  # no cdiVersion, no devices
        "a: &a [*a, *a]\n",  # a self-referencing alias
        "- just\n- a list\n",
        # a "billion laughs" alias bomb: refused by the one YAML reader, never expanded
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n",
        "devices: " + "[" * 5000 + "]" * 5000 + "\n",  # nesting the C parser would overflow on
    ],
)
def test_a_broken_cdi_spec_is_a_warning(spec: str) -> None:
    report = _check("host_cdi_stale", files={"/etc/cdi/nvidia.yaml": spec})
    stale = [f for f in report["findings"] if f["code"] == "container.cdi-stale"]
    assert [f["severity"] for f in stale] == ["warning"]
    assert "container.cdi-missing" in {f["code"] for f in report["findings"]}


def test_a_json_cdi_spec_that_matches_the_driver_passes() -> None:
    spec = {
        "cdiVersion": "0.6.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
        "containerEdits": {
            "deviceNodes": [{"path": "/dev/nvidiactl"}],
            "mounts": [
                {"hostPath": "/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "containerPath": "/x"}
            ],
        },
    }
    report = _check(
        "host_cdi_stale",
        files={
            "/etc/cdi/nvidia.yaml": None,
            "/var/run/cdi/nvidia.json": json.dumps(spec),
            "/lib/x86_64-linux-gnu/libcuda.so.580.159.04": "",
        },
    )
    assert not [f for f in report["findings"] if f["code"].startswith("container.")]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["container.cdi-current"]["outcome"] == "passed"


def test_an_unreadable_spec_directory_is_unknown_not_absent() -> None:
    report = _check("host_cdi_missing", unreadable=["/etc/cdi"], dirs=["/etc/cdi"])
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["container.cdi-spec"]["outcome"] == "unknown"


# --- the seam and the snapshot ----------------------------------------------------------------


def test_system_host_opens_and_names_the_errno(tmp_path: Path) -> None:
    host = SystemHost()
    assert host.open_device("/dev/null", timeout=2.0) == "ok"
    assert host.open_device(str(tmp_path / "nothing"), timeout=2.0) == "ENOENT"
    assert host.open_device(str(tmp_path), timeout=2.0) == "EISDIR"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # O_NONBLOCK: a FIFO with no writer does not block the open
    assert host.open_device(str(fifo), timeout=2.0) == "ok"


def test_container_facts_survive_a_snapshot() -> None:
    facts = collect_facts(FakeHost.scenario("host_cdi_stale"), python=PYTHON, deadline=Deadline(30))
    again = decode(Facts, json.loads(json.dumps(encode(facts))))
    assert again.containers == facts.containers
    specs = facts.containers.host.value.cdi_specs  # type: ignore[union-attr]  # read above
    assert isinstance(specs, Found) and specs.value[0].driver_version == "550.54.14"
    old = encode(facts)
    del old["containers"]
    assert decode(Facts, old).containers == NOT_READ


def test_toolkit_versions_are_read_by_the_full_tier_only() -> None:
    full = collect_facts(
        FakeHost.scenario("host_docker_snap"), python=PYTHON, deadline=Deadline(30)
    )
    toolkit = full.containers.host.value.toolkit  # type: ignore[union-attr]  # read above
    assert (toolkit.ctk_version, toolkit.lib_version) == (Found("1.17.8"), Found("1.17.8"))
    asked = FakeHost.scenario("host_docker_snap")
    collect_facts(asked, python=PYTHON, deadline=Deadline(30))
    cli = [argv for argv in asked.ran if argv[0].endswith("/nvidia-container-cli")]
    assert len(cli) == 1  # its one --version answers for itself and libnvidia-container
    host = FakeHost.scenario("host_docker_snap")
    collect_facts(host, python=PYTHON, deadline=Deadline(30), fast=True)
    assert host.ran == []


# --- the real containerd ----------------------------------------------------------------------


def _containerd(*args: str, cwd: str | None = None) -> str:
    import shutil
    import subprocess

    program = shutil.which("containerd") or (
        "/usr/bin/containerd" if Path("/usr/bin/containerd").exists() else None
    )
    if program is None:
        pytest.skip("containerd is not installed (scripts/install-test-tools installs it)")
    done = subprocess.run(
        [program, *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )
    if done.returncode != 0:
        pytest.skip(f"containerd {' '.join(args)} failed here: {done.stderr.strip()[:200]}")
    return done.stdout


def test_containerd_default_config_parses_as_runc_only() -> None:
    from envdoctor.probes.engine_config import containerd_config

    text = _containerd("config", "default")
    config = containerd_config(parse_toml(text, "default"), ("default",))
    assert config.version in (2, 3) and config.default_runtime == "runc"
    assert "runc" in config.runtimes and config.nvidia_runtimes == ()


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        # nvidia-ctk's drop-in repeats the whole CRI section: merged either way
        ("host_k8s_default_runtime", (("nvidia",), "runc")),
        # a drop-in naming the CRI plugin for one runtime: containerd 1.x takes the plugin's whole
        # table from it, and the nvidia runtime of config.toml is gone
        ("host_k8s_dropin_replaces", ((), "runc")),
    ],
)
def test_our_merge_of_drop_ins_is_what_containerd_reads(
    tmp_path: Path, scenario: str, expected: tuple[tuple[str, ...], str]
) -> None:
    """The scenario's config and drop-in, merged by envdoctor and by `containerd config dump`."""
    from envdoctor.probes.containers import probe_container_host
    from envdoctor.probes.engine_config import containerd_config

    files = load_scenario(scenario)["files"]
    drop_ins = tmp_path / "conf.d"
    drop_ins.mkdir()
    for path, text in files.items():
        if path.startswith("/etc/containerd/conf.d/"):
            (drop_ins / Path(path).name).write_text(text)
    main = tmp_path / "config.toml"
    main.write_text(
        files["/etc/containerd/config.toml"].replace("/etc/containerd/conf.d", str(drop_ins))
    )
    dumped = containerd_config(
        parse_toml(_containerd("--config", str(main), "config", "dump"), "dump"), ("dump",)
    )
    # envdoctor asks the same containerd its version, as the full tier does
    host = FakeHost.scenario(scenario, commands=_real_release())
    ours = probe_container_host(host, deadline=Deadline(30), fast=False)
    (engine,) = [e for e in ours.engines if e.name == "containerd"]
    assert isinstance(engine.config, Found)
    mine = engine.config.value
    assert (mine.nvidia_runtimes, mine.default_runtime) == (
        dumped.nvidia_runtimes,
        dumped.default_runtime,
    )
    assert mine.release  # read from the real containerd
    if mine.release.startswith("1."):  # 2.x merges key by key: the scenario's 1.x outcome
        assert (mine.nvidia_runtimes, mine.default_runtime) == expected
        assert mine.merge == "section"


def _real_release() -> list[dict[str, Any]]:
    """The installed containerd's `--version`, as a scenario command."""
    return [{"argv": ["containerd", "--version"], "stdout": _containerd("--version")}]


@pytest.mark.parametrize("relative_glob", [False, True], ids=["absolute glob", "relative glob"])
def test_imports_of_imported_files_are_followed_as_containerd_follows_them(
    tmp_path: Path, relative_glob: bool
) -> None:
    """containerd reads each file's own imports after it, a relative path from that file's
    directory; containerd 1.x globs a relative pattern from its working directory (/ for the
    daemon, so "conf.d/*.toml" finds nothing there)."""
    from envdoctor.probes.containers import probe_container_host
    from envdoctor.probes.engine_config import containerd_config

    cri = '[plugins."io.containerd.grpc.v1.cri".containerd'
    files = {
        "conf.d/10-a.toml": 'version = 2\nimports = ["../extra/b.toml"]\n'
        f'{cri}.runtimes.runsc]\nruntime_type = "io.containerd.runsc.v1"\n',
        "extra/b.toml": f'version = 2\n{cri}]\ndefault_runtime_name = "nvidia"\n'
        f'{cri}.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
        f'{cri}.runtimes.nvidia.options]\nBinaryName = "/usr/bin/nvidia-container-runtime"\n',
    }

    def main(root: str) -> str:
        where = "conf.d" if relative_glob else f"{root}/conf.d"
        return f'version = 2\nimports = ["{where}/*.toml"]\n'

    for name, text in {**files, "config.toml": main(str(tmp_path))}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    dump = _containerd("--config", str(tmp_path / "config.toml"), "config", "dump", cwd="/")
    dumped = containerd_config(parse_toml(dump, "dump"), ("dump",))
    host = FakeHost.scenario(
        "host_k8s_default_runtime",
        files={
            "/etc/containerd/conf.d/99-nvidia.toml": None,
            "/etc/containerd/config.toml": main("/etc/containerd"),
            **{f"/etc/containerd/{name}": text for name, text in files.items()},
        },
        commands=_real_release(),
    )
    (engine,) = probe_container_host(host, deadline=Deadline(30), fast=False).engines
    assert isinstance(engine.config, Found)
    mine = engine.config.value
    # (the dump adds containerd's built-in runc to what the files say: compare the nvidia part)
    assert (mine.nvidia_runtimes, mine.default_runtime) == (
        dumped.nvidia_runtimes,
        dumped.default_runtime,
    )
    assert mine.release  # read from the real containerd
    if mine.release.startswith("1."):  # 2.x globs a relative pattern from the file's directory
        assert mine.default_runtime == ("runc" if relative_glob else "nvidia")


def test_a_cpu_machine_in_a_container_has_no_gpu_checks_left_undecided() -> None:
    """Seen on this CI machine (a Docker container, no NVIDIA hardware): "did the NVIDIA hook
    mount the driver's libraries" said *unknown* (NVML not found) instead of not applicable."""
    report = _check("cpu_only", files={"/.dockerenv": ""})
    outcomes = {c["name"]: (c["outcome"], c["reason"]) for c in report["checks"]}
    for name in (
        "container.driver-libraries",
        "container.library-version",
        "container.require-cuda",
    ):
        outcome, reason = outcomes[name]
        assert outcome == "not-applicable", (name, reason)
        assert "no NVIDIA GPU" in reason
    assert report["status"] == "healthy"


@pytest.mark.parametrize("name", ["nvidia.yaml", "nvidia.json"])
def test_a_spec_over_the_size_limit_is_refused_in_either_format(name: str) -> None:
    """JSON is YAML: one limit for both (a 2 MiB JSON spec was read, the same as YAML was not)."""
    spec = {"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [], "pad": "x" * (2 << 20)}
    report = _check(
        "host_cdi_stale", files={"/etc/cdi/nvidia.yaml": None, f"/etc/cdi/{name}": json.dumps(spec)}
    )
    stale = [f for f in report["findings"] if f["code"] == "container.cdi-stale"]
    assert [f["severity"] for f in stale] == ["warning"]
    assert "larger than 1 MiB: not read" in json.dumps(stale)


SHM_LINE = "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,{options} 0 0\n"


@pytest.mark.parametrize(
    ("options", "small"),
    [
        ("size=65536k,inode64", True),  # Docker's default: 64 MiB
        ("size=67108864", True),  # the same in bytes
        ("inode64,size=8g", False),
        ("inode64", False),  # no size: half the RAM, the kernel's default
        ("size=²,inode64", False),  # what the kernel never writes is no size, not a crash
        ("size=" + "9" * 5000 + "k", False),
        ("size=٦٤m", False),  # Arabic-Indic digits: the kernel writes ASCII only
    ],
)
def test_the_shm_size_is_read_from_ascii_digits_only(options: str, small: bool) -> None:
    mounts = "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n" + SHM_LINE.format(
        options=options
    )
    report = _check("container_shm_small", files={"/proc/self/mounts": mounts})
    codes = {f["code"] for f in report["findings"]}
    assert ("container.shm-small" in codes) is small
    assert report["exit_code"] in (0, 1)


# --- what the host-side findings say and plan ----------------------------------------------


def _finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [f for f in report["findings"] if f["code"] == code]
    assert len(found) == 1, [f["code"] for f in report["findings"]]
    return found[0]


def _reason(report: dict[str, Any], rule: str) -> str:
    (check,) = [c for c in report["checks"] if c["name"] == rule]
    return str(check["reason"])


def test_rootless_docker_in_cdi_mode_passes_without_claiming_no_cgroups() -> None:
    config = (
        '[nvidia-container-cli]\nno-cgroups = false\n[nvidia-container-runtime]\nmode = "cdi"\n'
    )
    report = _check(
        "host_docker_rootless", files={"/etc/nvidia-container-runtime/config.toml": config}
    )
    reason = _reason(report, "container.rootless")
    assert "no-cgroups = true" not in reason and 'mode = "cdi"' in reason
    # and Docker's --gpus is what breaks in that mode
    assert "container.gpus-flag-refused" in {f["code"] for f in report["findings"]}


def test_a_podman_host_without_the_toolkit_is_told_about_podman_not_docker() -> None:
    report = _check("host_podman_no_toolkit")
    steps = " ".join(_finding(report, "container.toolkit-missing")["remediation"]["steps"])
    assert "cdi generate --output=/etc/cdi/nvidia.yaml" in steps and "podman run" in steps
    assert "docker" not in steps
    plan = json.loads(
        _cli(FakeHost.scenario("host_podman_no_toolkit"), "fix", "--format", "json").output
    )
    commands = [" ".join(map(str, c)) for s in plan["steps"] for c in s["commands"]]
    assert not any("runtime configure" in c or "docker" in c for c in commands), commands
    assert any("cdi generate --output=/etc/cdi/nvidia.yaml" in c for c in commands), commands


def test_a_yml_spec_is_named_as_never_read() -> None:
    evidence = _evidence(_finding(_check("host_cdi_yml"), "container.cdi-missing"))
    assert evidence["never read (CDI reads .yaml and .json only)"] == "/etc/cdi/nvidia.yml"


def test_a_missing_spec_of_the_default_kind_is_generated_with_its_vendor_and_class() -> None:
    report = _check(
        "host_cdi_default_kind",
        files={"/var/run/cdi/management.nvidia.com-gpu.yaml": None},
    )
    finding = _finding(report, "container.cdi-missing")
    assert finding["severity"] == "error"
    assert "management.nvidia.com/gpu=all" in finding["title"]
    steps = " ".join(finding["remediation"]["steps"])
    assert "--vendor=management.nvidia.com --class=gpu" in steps
    host = FakeHost.scenario(
        "host_cdi_default_kind", files={"/var/run/cdi/management.nvidia.com-gpu.yaml": None}
    )
    plan = json.loads(_cli(host, "fix", "--format", "json").output)
    commands = [" ".join(map(str, c)) for s in plan["steps"] for c in s["commands"]]
    assert any(
        "--output=/etc/cdi/management.nvidia.com-gpu.yaml" in c and "--class=gpu" in c
        for c in commands
    ), commands


def test_cri_o_without_a_default_runtime_is_not_said_to_run_runc() -> None:
    drop_in = (
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
        'runtime_type = "oci"\n'
    )
    report = _check(
        "host_k8s_crio_no_runtime", files={"/etc/crio/crio.conf.d/99-nvidia.toml": drop_in}
    )
    assert "knows nvidia" in _reason(report, "container.runtime")
    evidence = _evidence(_finding(report, "container.default-runtime"))
    assert evidence["default runtime"].startswith("CRI-O's own (crun since CRI-O 1.31")


def _current_spec_files() -> dict[str, str]:
    """host_cdi_current's spec, with the hook and libraries it names, to add to a scenario."""
    spec = load_scenario("host_cdi_current")["files"]["/etc/cdi/nvidia.yaml"]
    return {
        "/etc/cdi/nvidia.yaml": spec,
        "/usr/bin/nvidia-cdi-hook": "",
        "/lib/x86_64-linux-gnu/libcuda.so.580.159.04": "",
        "/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04": "",
    }


def test_cdi_with_a_spec_that_resolves_gives_pods_the_gpu_without_an_nvidia_runtime() -> None:
    report = _check("host_k8s_containerd2_no_runtime", files=_current_spec_files())
    assert "resolves CDI devices (/etc/cdi/nvidia.yaml)" in _reason(report, "container.runtime")
    assert not [f for f in report["findings"] if f["code"].startswith("container.")]


# --- CDI as its cache resolves specs (container-device-interface pkg/cdi/cache.go) ----------


def _codes(report: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in report["findings"] if f["code"].startswith("container."))


def test_a_conflict_drops_the_device_even_where_a_later_directory_defines_it() -> None:
    """CDI keeps a device that was ever in conflict in its conflict set, and deletes it at the
    end, whatever a later directory's spec says: the host is not healthy."""
    current = load_scenario("host_cdi_current")["files"]["/etc/cdi/nvidia.yaml"]
    report = _check("host_cdi_conflict", files={"/var/run/cdi/nvidia.yaml": current})
    assert _codes(report) == ["container.cdi-conflict"]
    assert report["status"] == "unhealthy"
    assert "no device is defined twice" not in _reason(report, "container.cdi-unique")


def test_a_directory_listed_twice_is_one_directory() -> None:
    config = (
        '[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime.modes.cdi]\n'
        'spec-dirs = ["/etc/cdi", "/var/run/cdi", "/etc/cdi/"]\n'
    )
    report = _check("host_cdi_current", files={"/etc/nvidia-container-runtime/config.toml": config})
    assert _codes(report) == [] and report["status"] == "healthy"


@pytest.mark.parametrize(
    ("devices", "problem"),
    [
        (
            '[{name: "0", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}, '
            '{name: "0", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}]',
            "device '0' is defined twice",
        ),
        ("[{name: all}]", "device 'all' has no container edits"),
    ],
)
def test_a_spec_cdi_refuses_is_broken_not_a_conflict(devices: str, problem: str) -> None:
    spec = f"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: {devices}\n"
    report = _check("host_cdi_current", files={"/etc/cdi/other.yaml": spec})
    assert _codes(report) == ["container.cdi-stale"]
    finding = _finding(report, "container.cdi-stale")
    assert finding["severity"] == "warning" and problem in finding["title"]


def test_a_broken_yml_or_foreign_spec_is_not_regenerated_as_nvidia_s() -> None:
    foreign = "cdiVersion: 0.5.0\nkind: vendor.example/fpga\ndevices: []\n"
    report = _check(
        "host_cdi_yml",
        files={"/etc/cdi/nvidia.yml": "not: [valid", "/etc/cdi/fpga.yaml": foreign},
    )
    assert _codes(report) == ["container.cdi-missing"]


def test_docker_without_the_legacy_hook_asks_cdi_and_is_not_refused() -> None:
    report = _check(
        "host_docker_cdi_mode",
        files={"/usr/bin/nvidia-container-runtime-hook": None},
    )
    assert _codes(report) == []
    assert "asks CDI" in _reason(report, "container.gpus-flag")


def test_a_spec_path_with_a_space_stays_one_argument_in_the_steps() -> None:
    spec = load_scenario("host_cdi_current")["files"]["/etc/cdi/nvidia.yaml"]
    report = _check("host_cdi_current", files={"/etc/cdi/nvidia copy.yaml": spec})
    steps = _finding(report, "container.cdi-conflict")["remediation"]["steps"]
    # the spec at nvidia-ctk's own name is the one kept
    assert "sudo rm '/etc/cdi/nvidia copy.yaml'" in steps, steps


@pytest.mark.parametrize(
    ("version", "codes"),
    [
        (
            "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n",
            ["container.no-gpu-runtime"],
        ),
        # containerd 2.x reads a version 2 config too, and merges its drop-ins key by key
        (
            "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811c\n",
            [],
        ),
        (None, ["container.no-gpu-runtime"]),  # unread: the config's version (2) decides
    ],
    ids=["1.6", "2.1", "unread"],
)
def test_drop_ins_merge_as_the_running_containerd_merges_them(
    version: str | None, codes: list[str]
) -> None:
    commands = [{"argv": ["containerd", "--version"], "stdout": version}] if version else []
    report = _check("host_k8s_dropin_replaces", commands=commands)
    assert _codes(report) == codes
    host = FakeHost.scenario("host_k8s_dropin_replaces", commands=commands)
    _cli(host, "probe")
    assert host.ran == []  # the probe tier asks containerd nothing


def test_a_conflict_with_a_stale_spec_keeps_the_current_one_and_the_stale_one_is_an_error() -> None:
    """A stale spec that clashes with a current one in its directory is not "unused": CDI drops
    the devices. The fix removes the stale one, and nothing says CDI takes devices from either."""
    stale = load_scenario("host_cdi_stale")["files"]["/etc/cdi/nvidia.yaml"]
    report = _check(
        "host_cdi_conflict",
        files={
            "/etc/cdi/nvidia.yaml": stale,
            "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14": "",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14": "",
        },
    )
    conflict = _finding(report, "container.cdi-conflict")
    assert conflict["remediation"]["steps"][0] == "sudo rm /etc/cdi/nvidia.yaml"
    stale_finding = _finding(report, "container.cdi-stale")
    assert stale_finding["severity"] == "error" and "unused" not in stale_finding["title"]
    # both findings remove the stale one; nothing regenerates it into a second clash
    assert stale_finding["remediation"]["steps"] == ["sudo rm /etc/cdi/nvidia.yaml"]
    assert "no device of" in _reason(report, "container.cdi-spec")


def test_a_device_name_cdi_refuses_makes_the_spec_broken_not_a_conflict() -> None:
    spec = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        '  - {name: "0", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}\n'
        '  - {name: "gpu 0", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}\n'
    )
    report = _check("host_cdi_current", files={"/etc/cdi/extra.yaml": spec})
    assert _codes(report) == ["container.cdi-stale"]
    finding = _finding(report, "container.cdi-stale")
    assert "device name 'gpu 0' is invalid" in finding["title"]
    # nvidia.yaml serves the kind: the broken one is removed, not regenerated beside it (a
    # second current spec would clash with the first and drop every device)
    assert finding["remediation"]["steps"] == ["sudo rm /etc/cdi/extra.yaml"]
    host = FakeHost.scenario("host_cdi_current", files={"/etc/cdi/extra.yaml": spec})
    plan = json.loads(_cli(host, "fix", "--format", "json").output)
    commands = [" ".join(map(str, c)) for s in plan["steps"] for c in s["commands"]]
    assert not any("cdi generate" in c for c in commands), commands


def test_containerd_2_has_cdi_on_for_a_version_2_config_too() -> None:
    files = _current_spec_files()
    release = "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c\n"
    commands = [{"argv": ["containerd", "--version"], "stdout": release}]
    report = _check("host_k8s_no_runtime", files=files, commands=commands)
    assert "resolves CDI devices" in _reason(report, "container.runtime")
    assert _codes(report) == []
    # containerd 1.x (unread, version 2 config) has CDI off unless enable_cdi says so
    assert _codes(_check("host_k8s_no_runtime", files=files)) == ["container.no-gpu-runtime"]


@pytest.mark.parametrize("mode", ["cdi", "auto"])
def test_docker_with_no_nvidia_hook_at_all_is_told_so(mode: str) -> None:
    report = _check(
        "host_docker_cdi_mode",
        files={
            "/usr/bin/nvidia-container-runtime-hook": None,
            "/usr/bin/nvidia-cdi-hook": None,
            "/etc/nvidia-container-runtime/config.toml": f'[nvidia-container-runtime]\nmode = "{mode}"\n',
        },
    )
    finding = _finding(report, "container.toolkit-missing")
    assert finding["title"].startswith("Docker finds no NVIDIA hook")
    assert "gpus-flag-refused" not in " ".join(_codes(report))
    (check,) = [c for c in report["checks"] if c["name"] == "container.gpus-flag"]
    assert check["outcome"] != "passed", check  # it said "its hook serves docker run --gpus"


CONTAINERD_2 = [
    {
        "argv": ["containerd", "--version"],
        "stdout": "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc\n",
    }
]


@pytest.mark.parametrize("version", ['"3"', "99", "-1", "true", "2.0"])
@pytest.mark.parametrize(
    "where", ["/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"]
)
def test_a_config_version_containerd_cannot_load_is_an_invalid_config(
    version: str, where: str
) -> None:
    """containerd decodes ``version`` into an integer and refuses one above 3
    (ValidateVersion): such a file is no working nvidia setup, whatever runtimes it names."""
    text = load_scenario("host_k8s_default_runtime")["files"][where]
    files = {where: text.replace("version = 2", f"version = {version}", 1)}
    report = _check("host_k8s_default_runtime", files=files, commands=CONTAINERD_2)
    finding = _finding(report, "container.config-invalid")
    assert "is not a config version containerd loads" in " ".join(_evidence(finding).values())


@pytest.mark.parametrize(
    "spelling", ["/etc/cdi", "/etc/cdi/", "//etc/cdi", "/etc/cdi/.", "/etc/../etc/cdi", "/etc//cdi"]
)
def test_a_spec_dir_is_one_directory_however_it_is_spelled(spelling: str) -> None:
    """CDI cleans its spec-dirs as Go's filepath.Clean does: listed twice under two spellings,
    /etc/cdi is still one directory (its spec must not be "shadowed" by itself)."""
    from envdoctor.model.containers import clean_dir

    assert clean_dir(spelling) == "/etc/cdi"
    config = (
        '[nvidia-container-runtime]\nmode = "cdi"\n[nvidia-container-runtime.modes.cdi]\n'
        f'spec-dirs = ["/etc/cdi", "/var/run/cdi", "{spelling}"]\n'
    )
    report = _check("host_cdi_current", files={"/etc/nvidia-container-runtime/config.toml": config})
    assert _codes(report) == []


def test_two_stale_specs_that_clash_are_fixed_into_one_not_two() -> None:
    """The clash keeps nvidia.yaml; the other stale copy is removed, not regenerated beside it
    (two current specs would still clash and drop every device)."""
    stale = load_scenario("host_cdi_stale")["files"]["/etc/cdi/nvidia.yaml"]
    host_files = {"/etc/cdi/nvidia-old.yaml": stale}
    report = _check("host_cdi_stale", files=host_files)
    conflict = _finding(report, "container.cdi-conflict")
    assert conflict["remediation"]["steps"][0] == "sudo rm /etc/cdi/nvidia-old.yaml"
    stale_steps = {
        f["subject"]: f["remediation"]["steps"][0]
        for f in report["findings"]
        if f["code"] == "container.cdi-stale"
    }
    assert stale_steps["/etc/cdi/nvidia-old.yaml"] == "sudo rm /etc/cdi/nvidia-old.yaml"
    assert "generate --output=/etc/cdi/nvidia.yaml" in stale_steps["/etc/cdi/nvidia.yaml"]
    plan = json.loads(
        _cli(
            FakeHost.scenario("host_cdi_stale", files=host_files), "fix", "--format", "json"
        ).output
    )
    generated = [
        " ".join(map(str, c))
        for s in plan["steps"]
        for c in s["commands"]
        if "cdi generate" in " ".join(map(str, c))
    ]
    assert generated == ["nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"], generated


def test_a_shadowed_spec_is_not_blamed_on_a_clash() -> None:
    report = _check("host_cdi_shadowed")
    assert "cdi-unique" not in _reason(report, "container.cdi-spec")


def test_docker_with_only_the_cdi_hook_needs_a_spec() -> None:
    """Docker's --gpus asks CDI where nvidia-cdi-hook is its only hook: no spec, no GPU."""
    report = _check(
        "host_docker_cdi_mode",
        files={
            "/usr/bin/nvidia-container-runtime-hook": None,
            "/etc/cdi/nvidia.yaml": None,
            "/etc/nvidia-container-runtime/config.toml": '[nvidia-container-runtime]\nmode = "auto"\n',
        },
    )
    finding = _finding(report, "container.cdi-missing")
    assert finding["severity"] == "warning"
    assert "only nvidia-cdi-hook is installed" in _evidence(finding)["resolved through CDI by"]


V3_NVIDIA_ROOT = """version = 3
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins.'io.containerd.cri.v1.runtime'.containerd]
default_runtime_name = 'nvidia'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
BinaryName = '/usr/bin/nvidia-container-runtime'
"""


@pytest.mark.parametrize(
    "drop_in",
    [
        'version = 2\n[debug]\nlevel = "debug"\n',  # a leftover of containerd 1.7, no CRI table
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]\n'
        'runtime_type = "io.containerd.runsc.v1"\n',  # an older drop-in adding a runtime
    ],
    ids=["no CRI table", "a v2 CRI table"],
)
def test_containerd_2_keeps_a_version_3_root_beside_an_older_drop_in(drop_in: str) -> None:
    files = {
        "/etc/containerd/config.toml": V3_NVIDIA_ROOT,
        "/etc/containerd/conf.d/10-old.toml": drop_in,
    }
    report = _check("host_k8s_containerd2_no_runtime", files=files, commands=CONTAINERD_2)
    assert "knows nvidia" in _reason(report, "container.runtime")
    assert "runs nvidia by default" in _reason(report, "container.default-runtime")
    assert _codes(report) == []
