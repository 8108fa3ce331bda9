"""The script's safety rules: root, confirmation, PID re-checks, failures, hostile names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from envdoctor.probes.holders import Container, GpuHolder
from envdoctor.remedy import Plan, build_plan, render_script
from envdoctor.remedy.model import RequireNoHolders, Step, Terminate, Verify
from tests.remedy import cases
from tests.remedy.cases import CONTAINER_CGROUP, CONTAINER_ID, PYTHON_ARGV, PYTHON_PID
from tests.remedy.sandbox import START_TIME, Sandbox
from tests.shellcheck import BASH_STRICT, shellcheck, shellcheck_sandboxed


def test_apply_refuses_without_root(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    box.state("uid", "1000")
    run = box.run(render_script(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 2
    assert run.calls == [("id", "-u")]
    assert "needs root" in run.stderr
    assert box.pids() == {PYTHON_PID, cases.DOCKER_PID, cases.PERSISTENCED_PID}


def test_apply_asks_for_confirmation(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    script = render_script(cases.mismatch_plan(box))
    refused = box.run(script, "--apply", stdin="n\n")
    assert refused.returncode == 2
    assert refused.calls == [("id", "-u")]
    assert "not confirmed" in refused.stderr
    eof = box.run(script, "--apply")  # no answer at all
    assert eof.returncode == 2
    assert eof.calls == [("id", "-u")]
    accepted = box.run(script, "--apply", stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert ("rmmod", "nvidia") in accepted.calls


def test_unknown_option_is_a_usage_error(box: Sandbox) -> None:
    run = box.run(render_script(cases.uvm_missing_plan(box)), "--aply")
    assert run.returncode == 2
    assert run.calls == []
    assert "unknown option" in run.stderr


def test_missing_programs_are_refused_before_anything_changes(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    (box.bin / "rmmod").unlink()
    run = box.run(render_script(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 2
    assert "missing commands: rmmod" in run.stderr
    assert run.calls == [("id", "-u")]


def test_a_reused_pid_is_not_signalled(box: Sandbox) -> None:
    """The PID now runs another program (still holding the GPU): no signal, and the script stops
    before unloading anything, listing the holder and what it already did."""
    cases.mismatch_machine(box)
    (box.root / "proc" / str(PYTHON_PID) / "cmdline").write_bytes(b"bash\0-c\0other job\0")
    run = box.run(render_script(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 1
    assert not any(c[0] == "kill" for c in run.calls)
    assert not any(c[0] == "rmmod" for c in run.calls)
    assert f"PID {PYTHON_PID} is not the process this plan saw: it now runs another command" in (
        run.stderr
    )
    assert "FAILED at step" in run.stderr
    assert "processes still hold /dev/nvidia*" in run.stderr
    assert "already done:" in run.stderr
    assert "stopped nvidia-persistenced (to start it again: systemctl start" in run.stderr
    assert f"stopped container {CONTAINER_ID}" in run.stderr


def test_a_pid_that_let_go_is_left_alone(box: Sandbox) -> None:
    cases.mismatch_machine(box)
    for link in (box.root / "proc" / str(PYTHON_PID) / "fd").iterdir():
        link.unlink()  # still running, no longer holding the GPU
    run = box.run(render_script(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert not any(c[0] == "kill" for c in run.calls)
    assert PYTHON_PID in box.pids()


def _terminate_plan(box: Sandbox, pid: int) -> Plan:
    return Plan(
        steps=(
            Step("Terminate it", Terminate(pid, PYTHON_ARGV, 0, START_TIME)),
            Step("Verify", Verify(box.verify)),
        ),
        source="test",
    )


def test_never_pid_1(box: Sandbox) -> None:
    box.process(1, PYTHON_ARGV)
    run = box.run(render_script(_terminate_plan(box, 1)), "--apply", "--yes")
    assert run.returncode == 1
    assert "refusing to signal PID 1" in run.stderr
    assert not any(c[0] == "kill" for c in run.calls)


def test_never_the_scripts_parent(box: Sandbox) -> None:
    parent = os.getpid()  # the sandbox runs bash directly: its parent is this test process
    box.process(parent, PYTHON_ARGV)
    run = box.run(render_script(_terminate_plan(box, parent)), "--apply", "--yes")
    assert run.returncode == 1
    assert f"refusing to signal PID {parent}" in run.stderr
    assert not any(c[0] == "kill" for c in run.calls)


def test_a_failed_step_stops_with_what_was_done(box: Sandbox) -> None:
    """A module the plan did not know about uses nvidia: rmmod fails, nothing is loaded back."""
    cases.mismatch_machine(box)
    box.modules((*cases.LOADED[:-1], cases.LOADED[-1].__class__("nvidia", 15, ("gdrdrv",))))
    run = box.run(render_script(cases.mismatch_plan(box)), "--apply", "--yes")
    assert run.returncode == 1
    assert run.calls[-1] == ("rmmod", "nvidia")
    assert not any(c[0] in ("modprobe", "nvidia-smi") for c in run.calls)
    err = run.stderr
    assert "FAILED at step" in err and "rmmod nvidia exited with status 1" in err
    assert "hint: something still uses the module" in err
    for done in ("stopped nvidia-persistenced", "unloaded nvidia_drm", "unloaded nvidia_uvm"):
        assert done in err


HOSTILE = (
    "$(touch pwned)",
    "`reboot`",
    "'; reboot; echo '",
    'a"b$HOME\\',
    "line\nreboot\n",
    "\x1b]0;title\x07\x1b[2J",
    "-rf",
    "\u202eevil",
    "",
)


def _hostile_plan(box: Sandbox, argv: tuple[str, ...], name: str = "$(reboot)") -> Plan:
    holder = GpuHolder(
        PYTHON_PID,
        name,
        argv,
        0,
        "$(reboot)",
        ("/dev/nvidia0",),
        container=Container("docker", CONTAINER_ID, name, CONTAINER_CGROUP),
        start_time=START_TIME,
    )
    report = cases.mismatch_report()
    return build_plan(report, cases.fix_facts([holder]), cases.options(box))


def test_hostile_names_execute_nothing(box: Sandbox) -> None:
    argv = ("python", *HOSTILE)
    box.modules(cases.LOADED)
    box.loaded_driver("580.95.05")
    box.process(PYTHON_PID, argv)
    box.container(CONTAINER_ID, running=False)
    plan = _hostile_plan(box, argv)
    script = render_script(plan)
    assert shellcheck_sandboxed(script, box.base, *BASH_STRICT) == ""
    for line in script.splitlines():
        assert line.isprintable(), f"unprintable script line: {line!r}"
    dry = box.run(script)
    assert dry.returncode == 0 and dry.calls == []
    run = box.run(script, "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    programs = [c[0] for c in run.calls]
    assert "reboot" not in programs and "touch" not in programs
    assert ("kill", "-s", "TERM", str(PYTHON_PID)) in run.calls
    assert not (box.base / "pwned").exists() and not Path("pwned").exists()
    assert "\x1b" not in run.stdout + run.stderr + dry.stdout  # no terminal escapes reach it


ANY_TEXT = st.characters(exclude_characters="\0", codec="utf-8")
HOLDER = st.tuples(
    st.lists(st.text(ANY_TEXT, max_size=12), min_size=1, max_size=4),  # argv
    st.text(ANY_TEXT, max_size=15),  # name
)
FIRST_PID = 5_000_101  # above pid_max, as every sandbox PID (tests/remedy/cases.py)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(holders=st.lists(HOLDER, min_size=1, max_size=10))
def test_any_process_name_is_only_data(
    holders: list[tuple[list[str], str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """For arbitrary argv and names: shellcheck-clean, and the shims see exactly the plan.

    Each example puts one to ten hostile holders in one script: as many names as before
    (27 a run on average, counted over 30 runs; one per script at first) for 6 shellcheck and
    sandbox runs instead of 25 of each (about 0.75 s each here: shellcheck reads the whole
    ~700-line script whatever the names), and names also meet in one script. Shrinking still
    ends at a single holder."""
    gpu_holders = [
        GpuHolder(
            FIRST_PID + i, name, tuple(argv), 0, name, ("/dev/nvidia0",), start_time=START_TIME
        )
        for i, (argv, name) in enumerate(holders)
    ]
    assume(not any(h.is_display_server for h in gpu_holders))  # the plan is then "reboot"
    base = tmp_path_factory.mktemp("prop")
    box = Sandbox(base / "sandbox")
    box.modules(cases.LOADED)
    box.loaded_driver("580.95.05")
    for holder in gpu_holders:  # its stat's name field is hostile too
        box.process(holder.pid, holder.argv, comm=holder.name[:15])
    box.container(CONTAINER_ID, running=False)
    plan = build_plan(
        cases.mismatch_report(),
        cases.fix_facts(gpu_holders),
        cases.options(box),
    )
    script = render_script(plan)
    assert shellcheck(script, *BASH_STRICT) == ""
    run = box.run(script, "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert run.calls == [
        ("id", "-u"),
        ("modinfo", "-F", "version", "nvidia"),
        *(("kill", "-s", "TERM", str(h.pid)) for h in gpu_holders),
        ("rmmod", "nvidia_drm"),
        ("rmmod", "nvidia_modeset"),
        ("rmmod", "nvidia_uvm"),
        ("rmmod", "nvidia"),
        ("modprobe", "nvidia"),
        ("modprobe", "nvidia_modeset"),
        ("modprobe", "nvidia_drm"),
        ("nvidia-modprobe", "-u", "-c", "0"),
        ("nvidia-smi",),
        ("envdoctor", "check"),
    ]


def test_require_no_holders_lists_unknown_holders(box: Sandbox) -> None:
    box.process(PYTHON_PID, ("mystery", "job"))
    plan = Plan(steps=(Step("Check", RequireNoHolders()), Step("Verify", Verify(box.verify))))
    run = box.run(render_script(plan), "--apply", "--yes")
    assert run.returncode == 1
    assert f"still holding /dev/nvidia*: PID {PYTHON_PID} mystery job" in run.stderr


def test_help_prints_the_header_and_runs_nothing(box: Sandbox) -> None:
    run = box.run(render_script(cases.mismatch_plan(box)), "--help")
    assert run.returncode == 0 and run.calls == []
    assert run.stdout.startswith("# envdoctor fix: a remediation script for test machine.")
    assert "Usage: this-script [--apply] [--yes]" in run.stdout
