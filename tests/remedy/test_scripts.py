"""Generated fix scripts, executed in the sandbox: exact commands, order, dry run, idempotency."""

from __future__ import annotations

import pytest

from envdoctor.remedy import Plan, render_script
from tests.remedy import cases
from tests.remedy.cases import CONTAINER_ID, DOCKER_PID, PERSISTENCED_PID, PYTHON_PID
from tests.remedy.sandbox import Sandbox
from tests.shellcheck import BASH_STRICT, shellcheck_sandboxed

VERIFY = ("envdoctor", "check")  # the verify shim, as it records itself

PLANS = {
    "mismatch": cases.mismatch_plan,
    "nouveau": cases.nouveau_plan,
    "uvm-missing": cases.uvm_missing_plan,
    "cpu-wheel": cases.cpu_wheel_plan,
    "driver-too-old": cases.too_old_plan,
}


def script_for(plan: Plan) -> str:
    return render_script(plan)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_script_is_shellcheck_clean(name: str, box: Sandbox) -> None:
    assert shellcheck_sandboxed(script_for(PLANS[name](box)), box.base, *BASH_STRICT) == ""


@pytest.mark.parametrize("name", sorted(PLANS))
def test_dry_run_runs_nothing_and_changes_nothing(name: str, box: Sandbox) -> None:
    cases.mismatch_machine(box)
    before = (box.pids(), box.loaded_modules())
    run = box.run(script_for(PLANS[name](box)))
    assert run.returncode == 0, run.stderr
    assert run.calls == []
    assert (box.pids(), box.loaded_modules()) == before
    assert "DRY RUN" in run.stdout
    assert "would run:" in run.stdout or "would check" in run.stdout or "NOTE" in run.stdout


def test_version_mismatch_with_holders(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    plan = cases.mismatch_plan(box)
    run = box.run(script_for(plan), "--apply", "--yes")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.calls == [
        ("id", "-u"),
        ("modinfo", "-F", "version", "nvidia"),
        ("systemctl", "is-active", "--quiet", "nvidia-persistenced"),
        ("systemctl", "stop", "nvidia-persistenced"),
        ("docker", "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", CONTAINER_ID),
        ("docker", "stop", CONTAINER_ID),
        ("kill", "-s", "TERM", str(PYTHON_PID)),
        ("sleep", "1"),
        ("sleep", "1"),
        ("kill", "-s", "KILL", str(PYTHON_PID)),
        # the container's PID went with `docker stop`: no signal for it
        ("rmmod", "nvidia_drm"),
        ("rmmod", "nvidia_modeset"),
        ("rmmod", "nvidia_uvm"),
        ("rmmod", "nvidia"),
        ("modprobe", "nvidia"),
        ("modprobe", "nvidia_modeset"),
        ("modprobe", "nvidia_drm"),
        ("nvidia-modprobe", "-u", "-c", "0"),
        ("nvidia-smi",),
        ("systemctl", "is-active", "--quiet", "nvidia-persistenced"),
        ("systemctl", "start", "nvidia-persistenced"),
        VERIFY,
    ]
    assert box.pids() == set()
    assert sorted(box.loaded_modules()) == [
        "nvidia",
        "nvidia_drm",
        "nvidia_modeset",
        "nvidia_uvm",
        "video",
    ]
    assert f"PID {PYTHON_PID} killed with SIGKILL" in run.stdout
    # The persistenced PID is covered by stopping its service, never signalled directly.
    assert not any(c[0] == "kill" and c[-1] == str(PERSISTENCED_PID) for c in run.calls)
    assert not any(c[0] == "kill" and c[-1] == str(DOCKER_PID) for c in run.calls)


def test_version_mismatch_second_run_leaves_the_fixed_machine_alone(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    script = script_for(cases.mismatch_plan(box))
    first = box.run(script, "--apply", "--yes")
    assert first.returncode == 0, first.stderr
    second = box.run(script, "--apply", "--yes")
    assert second.returncode == 0, second.stderr
    assert second.calls == [("id", "-u"), ("modinfo", "-F", "version", "nvidia"), VERIFY]
    assert "reload skipped" in second.stdout


def test_a_cooperative_process_gets_sigterm_only(box: Sandbox) -> None:
    cases.mismatch_machine(box, python_stubborn=False)
    run = box.run(script_for(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    kills = [c for c in run.calls if c[0] in ("kill", "sleep")]
    assert kills == [("kill", "-s", "TERM", str(PYTHON_PID))]


def test_nouveau_loaded(box: Sandbox) -> None:
    run = box.run(script_for(cases.nouveau_plan(box)), "--apply", "--yes")
    conf = box.root / "etc" / "modprobe.d" / "blacklist-nouveau.conf"
    assert run.returncode == 3, run.stderr  # done, reboot required
    assert run.calls == [
        ("id", "-u"),
        ("chmod", "0644", "--", str(conf)),
        ("update-initramfs", "-u"),
    ]
    assert conf.read_text() == "blacklist nouveau\noptions nouveau modeset=0\n"
    assert "REBOOT REQUIRED" in run.stdout
    again = box.run(script_for(cases.nouveau_plan(box)), "--apply", "--yes")
    assert again.returncode == 3
    assert conf.read_text() == "blacklist nouveau\noptions nouveau modeset=0\n"


def test_uvm_node_missing(box: Sandbox) -> None:
    box.modules(cases.LOADED)
    run = box.run(script_for(cases.uvm_missing_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert run.calls == [("id", "-u"), ("nvidia-modprobe", "-u", "-c", "0"), VERIFY]


def pip_calls(index: str, *, safe: bool = True) -> list[tuple[str, ...]]:
    """A torch reinstall: ask whether python takes -P (runs no code), pip show, pip install."""
    python = ("python", "-P") if safe else ("python",)
    return [
        ("python", "-P", "-V"),
        (*python, "-m", "pip", "show", "torch"),
        (*python, "-m", "pip", "install", "--force-reinstall", "torch", "--index-url", index),
    ]


def test_cpu_only_wheel(box: Sandbox) -> None:
    box.state("torch", "2.13.0+cpu")
    box.state("torch_after", "2.13.0+cu130")
    script = script_for(cases.cpu_wheel_plan(box))
    run = box.run(script, "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    index = "https://download.pytorch.org/whl/cu130"
    assert run.calls == [*pip_calls(index), VERIFY]  # no `id -u`: nothing here needs root
    again = box.run(script, "--apply", "--yes")
    assert again.calls == [*pip_calls(index)[:2], VERIFY]


def test_an_interpreter_without_safe_path_runs_pip_from_root_dir(box: Sandbox) -> None:
    """Python 3.10 refuses -P: pip runs without it (from /, as everything in the script)."""
    box.state("python_safe_path", "no")
    box.state("torch", "2.13.0+cpu")
    run = box.run(script_for(cases.cpu_wheel_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    index = "https://download.pytorch.org/whl/cu130"
    assert [c for c in run.calls if c[0] == "python"] == pip_calls(index, safe=False)


def test_driver_too_old_reinstalls_a_wheel_the_driver_runs(box: Sandbox) -> None:
    run = box.run(script_for(cases.too_old_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    index = "https://download.pytorch.org/whl/cu121"  # CUDA 12.2 driver: the newest ≤ 12.2
    assert run.calls == [*pip_calls(index), VERIFY]


def test_driver_too_old_can_upgrade_the_driver_instead(box: Sandbox) -> None:
    run = box.run(script_for(cases.too_old_plan(box, prefer="driver")), "--apply", "--yes")
    assert run.returncode == 3, run.stderr
    assert run.calls == [
        ("id", "-u"),
        ("apt-get", "update"),
        ("apt-get", "install", "-y", "nvidia-driver-580-open"),
    ]
    assert "REBOOT REQUIRED" in run.stdout


def test_verification_failure_is_reported(box: Sandbox) -> None:
    box.state("verify_rc", "1")
    run = box.run(script_for(cases.uvm_missing_plan(box)), "--apply", "--yes")
    assert run.returncode == 1
    assert "still reports problems" in run.stderr
