"""`envdoctor fix` end to end: scenario hosts → real probes and rules → plan → script."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.probes.holders import GPU_SERVICES
from tests.conftest import PYTHON, SCENARIO_NAMES
from tests.fakes.host import FakeHost
from tests.remedy.sandbox import stat_line
from tests.runner import invoke as cli_invoke
from tests.shellcheck import BASH_STRICT, shellcheck

# driver_mismatch, plus what `fix` looks at: holders of /dev/nvidia*, an active persistenced.
HOLDERS: dict[str, Any] = {
    "links": {
        "/proc/self": "/proc/31337",
        "/proc/4242/fd/3": "/dev/nvidia0",
        "/proc/1234/fd/3": "/dev/nvidiactl",
    },
    "files": {
        "/proc/4242/status": "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n",
        "/proc/4242/stat": stat_line(4242, "python", 777_000),
        "/proc/1234/status": "Name:\tnvidia-persiste\nUid:\t112\t112\t112\t112\n",
        "/proc/1234/stat": stat_line(1234, "nvidia-persiste", 1_500),
        "/proc/1234/cgroup": "0::/system.slice/nvidia-persistenced.service\n",
        "/etc/passwd": "root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n",
    },
    "which": {"systemctl": "/usr/bin/systemctl"},
    "commands": [
        {
            "argv": ["systemctl", "is-active", *GPU_SERVICES],
            "stdout": "inactive\n" * (len(GPU_SERVICES) - 1) + "active\n",
            "returncode": 3,
        },
        {
            "argv": [
                "systemctl",
                "show",
                "--property=User,ControlGroup",
                "--",
                "nvidia-persistenced.service",
            ],
            "stdout": "User=\nControlGroup=/system.slice/nvidia-persistenced.service\n",
        },
    ],
}


def invoke(host: FakeHost, *args: str):  # type: ignore[no-untyped-def]  # click's Result
    return cli_invoke(["fix", *args], obj=AppContext(host=host, python=PYTHON))


def mismatch_host() -> FakeHost:
    host = FakeHost.scenario("driver_mismatch", **HOLDERS)
    host.commands.extend(FakeHost.scenario("healthy_h100").commands)  # keep ldconfig
    return host


def test_fix_plans_the_reload_for_a_live_mismatch() -> None:
    result = invoke(mismatch_host(), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert "driver.version-mismatch" in plan["addressed"]
    steps = [(s["kind"], s["commands"]) for s in plan["steps"]]
    assert steps[0] == ("stop-service", [["systemctl", "stop", "nvidia-persistenced"]])
    assert steps[1][0] == "terminate" and steps[1][1][0] == ["kill", "-s", "TERM", "4242"]
    assert [c[0][1] for k, c in steps if k == "unload-module"] == [
        "nvidia_drm",
        "nvidia_modeset",
        "nvidia_uvm",
        "nvidia",
    ]
    assert steps[-1][0] == "verify"
    holders = {h["pid"]: h for h in plan["holders"]}
    assert holders[4242]["argv"] == ["python", "train.py", "--epochs", "100"]
    assert holders[1234]["unit"] == "nvidia-persistenced.service"


def test_fix_writes_an_executable_script(tmp_path: Path) -> None:
    out = tmp_path / "fix.sh"
    result = invoke(mismatch_host(), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    script = out.read_text()
    assert script.startswith("#!/usr/bin/env -S -i bash\n")
    assert "set -euo pipefail" in script
    assert f"sudo {out} --apply" in result.output
    assert shellcheck(script, *BASH_STRICT) == ""


def test_fix_steps_format() -> None:
    result = invoke(mismatch_host(), "--format", "steps")
    assert result.exit_code == 0, result.output
    assert "answers: driver.version-mismatch" in result.output
    assert "$ rmmod nvidia_drm" in result.output


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_every_scenario_gives_a_clean_script(scenario: str) -> None:
    result = invoke(FakeHost.scenario(scenario))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("#!/usr/bin/env -S -i bash\n")
    assert shellcheck(result.output, *BASH_STRICT) == ""


def test_fix_from_a_snapshot_probes_nothing_live(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    host = FakeHost.scenario("uvm_missing")
    collected = cli_invoke(["collect", "-o", str(snap)], obj=AppContext(host=host, python=PYTHON))
    assert collected.exit_code == 0, collected.output
    offline = FakeHost({})
    result = cli_invoke(
        ["fix", "--snapshot", str(snap), "--format", "json"], obj=AppContext(host=offline)
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert offline.ran == []
    assert ["nvidia-modprobe", "-u", "-c", "0"] in [c for s in plan["steps"] for c in s["commands"]]
    assert plan["steps"][-1]["commands"] == [["envdoctor", "check"]]


def test_bad_timeout_is_a_usage_error() -> None:
    result = invoke(FakeHost.scenario("healthy_h100"), "--timeout", "0")
    assert result.exit_code == 2
    assert "--timeout" in result.output


def test_a_script_written_to_a_bare_name_is_run_as_dot_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fix -o live.sh`: `live.sh --apply` would look on PATH; the hint must say ./live.sh."""
    monkeypatch.chdir(tmp_path)
    result = invoke(mismatch_host(), "-o", "live.sh")
    assert result.exit_code == 0, result.output
    assert "sudo ./live.sh --apply" in result.output


# A kernel upgrade DKMS did not build for: `modprobe nvidia` fails ("Module nvidia not found in
# directory /lib/modules/…"); the plan builds the module first, or says what to install.
NOT_BUILT = {
    "argv": ["modinfo", "-n", "nvidia"],
    "stderr": "modinfo: ERROR: Module nvidia not found.\n",  # kmod's modinfo, verbatim
    "returncode": 1,
}
BUILT = {
    "argv": ["modinfo", "-n", "nvidia"],
    "stdout": "/lib/modules/6.8.0-87-generic/updates/dkms/nvidia.ko.zst\n",
}


def _module_plan(modinfo: dict[str, Any], which: dict[str, str]) -> dict[str, Any]:
    host = FakeHost.scenario("driver_module_not_loaded", which=which)
    host.commands.append(modinfo)
    result = invoke(host, "--format", "json")
    assert result.exit_code == 0, result.output
    plan: dict[str, Any] = json.loads(result.output)
    return plan


def test_a_module_not_built_for_this_kernel_is_built_before_it_is_loaded() -> None:
    plan = _module_plan(NOT_BUILT, {"modinfo": "/usr/sbin/modinfo", "dkms": "/usr/sbin/dkms"})
    commands = [c for s in plan["steps"] for c in s["commands"]]
    build = commands.index(["dkms", "autoinstall"])
    load = next(i for i, c in enumerate(commands) if c[:2] == ["modprobe", "nvidia"])
    assert build < load
    assert "no nvidia module is built for kernel 6.8.0-87-generic" in json.dumps(plan["steps"])


def test_without_dkms_the_plan_says_what_to_install_instead_of_a_modprobe_that_fails() -> None:
    plan = _module_plan(NOT_BUILT, {"modinfo": "/usr/sbin/modinfo"})
    commands = [c for s in plan["steps"] for c in s["commands"]]
    assert not any(c[:2] == ["modprobe", "nvidia"] for c in commands)
    assert any("DKMS is not installed" in n and "linux-modules-nvidia" in n for n in plan["notes"])


def test_a_built_module_is_loaded_without_a_rebuild() -> None:
    plan = _module_plan(BUILT, {"modinfo": "/usr/sbin/modinfo", "dkms": "/usr/sbin/dkms"})
    commands = [c for s in plan["steps"] for c in s["commands"]]
    assert ["dkms", "autoinstall"] not in commands
    assert any(c[:2] == ["modprobe", "nvidia"] for c in commands)


def test_modinfo_runs_only_for_a_plan_that_loads_the_module() -> None:
    which = {"modinfo": "/usr/sbin/modinfo", "dkms": "/usr/sbin/dkms"}
    for scenario, asked in (("driver_mismatch", False), ("driver_module_not_loaded", True)):
        host = FakeHost.scenario(scenario, which=which)
        host.commands.append(BUILT)
        assert invoke(host, "--format", "json").exit_code == 0
        assert (("modinfo", "-n", "nvidia") in host.ran) is asked, scenario


def _fix_on_a_terminal(scenario: str, *args: str) -> tuple[int, str, str]:
    result = cli_invoke(
        ["fix", "--color", "never", *args],
        obj=AppContext(host=FakeHost.scenario(scenario), python=PYTHON),
        tty=("stdout",),
    )
    return result.exit_code, result.stdout, result.stderr


def test_on_a_terminal_fix_shows_the_steps_and_how_to_get_the_script() -> None:
    """Issue 37: `envdoctor fix` on a terminal printed a bash script of hundreds of lines; a
    person reads the steps, and is told how to get the script."""
    code, out, err = _fix_on_a_terminal("uvm_missing")
    assert code == 0
    assert out.startswith("envdoctor fix: 2 steps")
    assert "$ nvidia-modprobe -u -c 0" in out and "#!/" not in out
    assert "envdoctor fix -o fix.sh" in err
    # asked for by name, or written to a file, it is still the script
    assert _fix_on_a_terminal("uvm_missing", "--format", "script")[1].startswith("#!")


def test_on_a_healthy_machine_fix_says_there_is_nothing_to_fix() -> None:
    code, out, err = _fix_on_a_terminal("cpu_only")
    assert code == 0
    assert out.startswith("envdoctor fix: nothing to fix on ")
    assert out.count("\n") == 1 and err == ""
