"""Issue 13, item 2: a cgroup path a user controls never makes root stop a service or container.

A user with a delegated subtree (``user@1000.service``) can create any cgroup names below it.
Before the fix, a GPU process in ``…/user@1000.service/app.slice/system.slice/sshd.service``
made the plan "Stop sshd.service", and ``…/docker-<64 hex>.scope`` made it `docker stop` that
id, and nothing checked either at apply time. Now: recognition is anchored at the top of the
hierarchy (probe), a unit is kept only when systemd confirms it and the holder is root's or the
unit's user's (probe), and the script re-verifies both before it acts (apply time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envdoctor.model.probed import Found
from envdoctor.platform.host import Deadline
from envdoctor.probes.holders import GPU_SERVICES, container_of, probe_fix_facts, unit_of
from envdoctor.remedy import Plan, Step, build_plan, render_script
from envdoctor.remedy.model import (
    HolderRef,
    StopContainer,
    StopService,
    Terminate,
    Verify,
)
from tests.fakes.host import FakeHost
from tests.remedy import cases
from tests.remedy.sandbox import START_TIME, Sandbox, stat_line

HEX = "ab" * 32
DELEGATED = "/user.slice/user-1000.slice/user@1000.service/app.slice"
NODES = ("/dev/nvidia0", "/dev/nvidiactl")
PID = 4242


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    """A fake machine the generated scripts run in (tests/remedy/sandbox.py)."""
    return Sandbox(tmp_path / "sandbox")


LOOK_ALIKES = [
    f"0::{DELEGATED}/system.slice/sshd.service\n",
    f"0::{DELEGATED}/system.slice/nvidia-persistenced.service\n",
    f"0::{DELEGATED}/docker-{HEX}.scope\n",
    f"0::{DELEGATED}/system.slice/docker-{HEX}.scope\n",
    f"0::{DELEGATED}/machine.slice/libpod-{HEX}.scope\n",
    f"0::{DELEGATED}/kubepods/besteffort/pod1/{HEX}\n",
    f"0::{DELEGATED}/docker/{HEX}\n",
    # a cgroup named "x:name=systemd:" does not make the rest of the line systemd's path
    f"0::{DELEGATED}/x:name=systemd:/system.slice/sshd.service\n",
    # on cgroup v1, systemd's own hierarchy decides, not a controller line
    f"1:name=systemd:{DELEGATED}/session.scope\n4:memory:/docker/{HEX}\n",
]


@pytest.mark.parametrize("cgroup", LOOK_ALIKES)
def test_a_users_look_alike_path_names_no_unit_and_no_container(cgroup: str) -> None:
    assert unit_of(cgroup) == ""
    assert container_of(cgroup) is None


def machine(cgroup: str, *, uid: int = 1000, show: str | None = None) -> FakeHost:
    """One GPU holder (PID 4242, python train.py) in ``cgroup``; systemd answers ``show``."""
    commands: list[dict[str, Any]] = [
        {"argv": ["lsof", "-t", "-w", "--", *NODES], "stdout": f"{PID}\n"},
        {
            "argv": ["systemctl", "is-active", *GPU_SERVICES],
            "stdout": "inactive\n" * len(GPU_SERVICES),
            "returncode": 3,
        },
    ]
    unit = unit_of(cgroup)
    if show is not None and unit:
        argv = ["systemctl", "show", "--property=User,ControlGroup", "--", unit]
        commands.append({"argv": argv, "stdout": show})
    return FakeHost(
        {
            "files": {
                "/etc/passwd": "root:x:0:0::/root:/bin/bash\n"
                "ollama:x:998:998::/usr/share/ollama:/bin/false\n"
                "alice:x:1000:1000::/home/alice:/bin/bash\n",
                f"/proc/{PID}/cmdline": "python\0train.py\0",
                f"/proc/{PID}/status": f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n",
                f"/proc/{PID}/stat": stat_line(PID, "python", START_TIME),
                f"/proc/{PID}/cgroup": cgroup,
            },
            "dirs": ["/proc/777/fd"],
            "links": {"/proc/self": "/proc/777", f"/proc/{PID}/fd/3": "/dev/nvidia0"},
            "nodes": {n: {"mode": "0666"} for n in NODES},
            "which": {
                "lsof": "/usr/bin/lsof",
                "systemctl": "/usr/bin/systemctl",
                "docker": "/usr/bin/docker",
            },
            "commands": commands,
        }
    )


def plan_for(host: FakeHost, box: Sandbox) -> Plan:
    facts = probe_fix_facts(host, deadline=Deadline(5))
    return build_plan(cases.mismatch_report(), facts, cases.options(box))


def actions(plan: Plan, kind: type[Any]) -> list[Any]:
    return [s.action for s in plan.steps if isinstance(s.action, kind)]


@pytest.mark.parametrize("cgroup", LOOK_ALIKES)
def test_a_look_alike_holder_is_terminated_by_pid_only(cgroup: str, box: Sandbox) -> None:
    """The user's process itself is still stopped (it holds the GPU), with its identity
    re-checked; sshd.service, persistenced's unit and the named container are left alone."""
    plan = plan_for(machine(cgroup, show="User=\nControlGroup=/system.slice/sshd.service\n"), box)
    assert not actions(plan, StopService) and not actions(plan, StopContainer)
    (kill,) = actions(plan, Terminate)
    assert (kill.pid, kill.uid, kill.start_time) == (PID, 1000, START_TIME)


def holder_unit(host: FakeHost) -> tuple[str, tuple[str, ...]]:
    facts = probe_fix_facts(host, deadline=Deadline(5))
    assert isinstance(facts.holders, Found)
    (holder,) = facts.holders.value
    return holder.unit, facts.notes


OLLAMA = "0::/system.slice/ollama.service\n"
OLLAMA_SHOW = "User=ollama\nControlGroup=/system.slice/ollama.service\n"


def test_a_confirmed_unit_of_its_own_user_is_kept() -> None:
    assert holder_unit(machine(OLLAMA, uid=998, show=OLLAMA_SHOW)) == ("ollama.service", ())
    assert holder_unit(machine(OLLAMA, uid=0, show=OLLAMA_SHOW))[0] == "ollama.service"


@pytest.mark.parametrize(
    ("cgroup", "uid", "show", "why"),
    [
        # another user's process inside a system service (no pam_systemd, a service's child)
        (OLLAMA, 1000, OLLAMA_SHOW, "not owned by root or by ollama.service's user (ollama)"),
        # systemd places the unit elsewhere: the path is not the unit's own cgroup
        (
            OLLAMA,
            998,
            "User=ollama\nControlGroup=/system.slice/other.slice/ollama.service\n",
            "not in ollama.service's own cgroup",
        ),
        # systemd does not know the unit at all
        (OLLAMA, 998, "User=\nControlGroup=\n", "not in ollama.service's own cgroup (none)"),
        # `systemctl show` did not answer
        (OLLAMA, 998, None, "systemd did not confirm ollama.service"),
        # a user logged in over ssh without pam_systemd: root or not, sshd is never stopped
        (
            "0::/system.slice/sshd.service\n",
            0,
            "User=\nControlGroup=/system.slice/sshd.service\n",
            "sshd.service carries logins",
        ),
        (
            "0::/system.slice/cron.service\n",
            1000,
            "User=\nControlGroup=/system.slice/cron.service\n",
            "cron.service carries logins",
        ),
    ],
)
def test_a_unit_is_dropped_unless_stopping_it_is_right(
    cgroup: str, uid: int, show: str | None, why: str, box: Sandbox
) -> None:
    host = machine(cgroup, uid=uid, show=show)
    unit, notes = holder_unit(host)
    assert unit == ""
    assert any(why in note and "the PID itself is terminated" in note for note in notes), notes
    plan = plan_for(machine(cgroup, uid=uid, show=show), box)
    assert not actions(plan, StopService)
    assert [a.pid for a in actions(plan, Terminate)] == [PID]


# --- apply time: the script re-verifies before `systemctl stop` / `docker stop` ----------------

UNIT_CGROUP = "/system.slice/ollama.service"
BOX_CGROUP = f"/system.slice/docker-{HEX}.scope"
MAIN_PID = 5_000_100
HOLDER_PID = 5_000_101


def stop_unit_plan(box: Sandbox, uid: int = 998, start: int = START_TIME) -> Plan:
    action = StopService("ollama.service", (HolderRef(HOLDER_PID, uid, start),))
    return Plan(steps=(Step("Stop ollama", action), Step("Verify", Verify(box.verify))))


def stop_box_plan(box: Sandbox) -> Plan:
    action = StopContainer("docker", HEX, BOX_CGROUP, (HolderRef(HOLDER_PID, 0, START_TIME),))
    return Plan(steps=(Step("Stop it", action), Step("Verify", Verify(box.verify))))


def unit_machine(
    box: Sandbox, holder_cgroup: str = UNIT_CGROUP, systemd: str = UNIT_CGROUP
) -> None:
    box.process(HOLDER_PID, ("/usr/bin/ollama", "serve"), uid=998, cgroup=holder_cgroup)
    box.service("ollama.service", pids=(HOLDER_PID,), cgroup=systemd)


def test_a_verified_unit_is_stopped(box: Sandbox) -> None:
    unit_machine(box)
    run = box.run(render_script(stop_unit_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert run.calls == [
        ("id", "-u"),
        ("systemctl", "is-active", "--quiet", "ollama.service"),
        ("systemctl", "show", "-p", "ControlGroup", "--value", "ollama.service"),
        ("systemctl", "stop", "ollama.service"),
        ("envdoctor", "check"),
    ]
    assert HOLDER_PID not in box.pids()


@pytest.mark.parametrize(
    ("holder_cgroup", "systemd", "plan_uid", "plan_start"),
    [
        # by now the process lives in a user's look-alike of the unit's path
        (f"{DELEGATED}/system.slice/ollama.service", UNIT_CGROUP, 998, START_TIME),
        # systemd gives no cgroup, or the root cgroup (which contains everything)
        (UNIT_CGROUP, "", 998, START_TIME),
        (UNIT_CGROUP, "/", 998, START_TIME),
        # the PID is another process now: other start time, or other owner
        (UNIT_CGROUP, UNIT_CGROUP, 998, START_TIME - 1),
        (UNIT_CGROUP, UNIT_CGROUP, 1000, START_TIME),
    ],
)
def test_an_unverified_unit_is_not_stopped(
    box: Sandbox, holder_cgroup: str, systemd: str, plan_uid: int, plan_start: int
) -> None:
    unit_machine(box, holder_cgroup, systemd)
    run = box.run(render_script(stop_unit_plan(box, plan_uid, plan_start)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert ("systemctl", "stop", "ollama.service") not in run.calls
    assert "ollama.service was not stopped: no process this plan saw is in its cgroup" in run.stderr
    assert HOLDER_PID in box.pids()


def test_a_path_with_name_systemd_inside_does_not_fool_the_script(box: Sandbox) -> None:
    unit_machine(box)
    hostile = f"0::{DELEGATED}/x:name=systemd:{UNIT_CGROUP}\n"
    (box.root / "proc" / str(HOLDER_PID) / "cgroup").write_text(hostile)
    run = box.run(render_script(stop_unit_plan(box)), "--apply", "--yes")
    assert ("systemctl", "stop", "ollama.service") not in run.calls
    assert "was not stopped" in run.stderr


def box_machine(
    box: Sandbox, main_cgroup: str = BOX_CGROUP, holder_cgroup: str = BOX_CGROUP
) -> None:
    box.process(MAIN_PID, ("/usr/bin/tini", "--", "serve"), cgroup=main_cgroup)
    box.process(HOLDER_PID, ("python", "serve.py"), cgroup=holder_cgroup)
    box.container(HEX, pids=(MAIN_PID, HOLDER_PID))


def test_a_verified_container_is_stopped(box: Sandbox) -> None:
    box_machine(box)
    run = box.run(render_script(stop_box_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert run.calls == [
        ("id", "-u"),
        ("docker", "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", HEX),
        ("docker", "stop", HEX),
        ("envdoctor", "check"),
    ]


@pytest.mark.parametrize(
    ("main_cgroup", "holder_cgroup", "message"),
    [
        # the runtime's container runs elsewhere than the cgroup the plan saw
        ("/system.slice/docker-" + "cd" * 32 + ".scope", BOX_CGROUP, "its main PID (5000100"),
        # the holder only named itself after the container
        (BOX_CGROUP, f"{DELEGATED}/docker-{HEX}.scope", "no process this plan saw is in it"),
        (BOX_CGROUP, f"{BOX_CGROUP}x", "no process this plan saw is in it"),
    ],
)
def test_an_unverified_container_is_not_stopped(
    box: Sandbox, main_cgroup: str, holder_cgroup: str, message: str
) -> None:
    box_machine(box, main_cgroup, holder_cgroup)
    run = box.run(render_script(stop_box_plan(box)), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert ("docker", "stop", HEX) not in run.calls
    assert f"container {HEX} was not stopped: {message}" in run.stderr
    assert {MAIN_PID, HOLDER_PID} <= box.pids()
