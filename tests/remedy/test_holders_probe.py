"""The holder probe through the Host seam: /proc fd scan, lsof cross-check, containers, services."""

from __future__ import annotations

from typing import Any

import pytest

from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.host import Deadline
from envdoctor.probes.holders import (
    GPU_SERVICES,
    Container,
    container_of,
    probe_fix_facts,
    probe_services,
    split_cmdline,
    unit_of,
)
from tests.fakes.host import FakeHost
from tests.remedy.sandbox import stat_line

DOCKER_ID = "4f" * 32
DOCKER_CGROUP = f"/system.slice/docker-{DOCKER_ID}.scope"


def show(*units: tuple[str, str, str]) -> dict[str, Any]:
    """`systemctl show --property=User,ControlGroup -- UNIT…` answering (unit, User, cgroup)."""
    return {
        "argv": ["systemctl", "show", "--property=User,ControlGroup", "--", *(u[0] for u in units)],
        "stdout": "\n".join(f"User={user}\nControlGroup={group}\n" for _, user, group in units),
    }


NODES = ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")


def machine(**over: Any) -> FakeHost:
    data: dict[str, Any] = {
        "files": {
            "/etc/passwd": "root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n",
            "/etc/os-release": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n',
            # a training job of alice
            "/proc/4242/cmdline": "python\0train.py\0--lr\x000.1\0",
            "/proc/4242/status": "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n",
            "/proc/4242/stat": stat_line(4242, "python", 9_000),
            "/proc/4242/cgroup": "0::/user.slice/user-1000.slice/session-3.scope\n",
            # a container process
            "/proc/5151/cmdline": "python3\0serve.py\0",
            "/proc/5151/status": "Name:\tpython3\nUid:\t0\t0\t0\t0\n",
            "/proc/5151/stat": stat_line(5151, "python3", 9_100),
            "/proc/5151/cgroup": f"0::/system.slice/docker-{DOCKER_ID}.scope\n",
            # persistenced under its unit
            "/proc/1234/cmdline": "/usr/bin/nvidia-persistenced\0--user\0nvidia-persistenced\0",
            "/proc/1234/status": "Name:\tnvidia-persistenc\nUid:\t0\t0\t0\t0\n",
            "/proc/1234/stat": stat_line(1234, "nvidia-persiste", 1_500),
            "/proc/1234/cgroup": "0::/system.slice/nvidia-persistenced.service\n",
            # not a GPU process
            "/proc/1/cmdline": "/sbin/init\0",
            "/proc/1/cgroup": "0::/init.scope\n",
        },
        "dirs": ["/proc/1/fd", "/proc/777/fd"],
        "links": {
            "/proc/self": "/proc/777",
            "/proc/4242/fd/3": "/dev/nvidia0",
            "/proc/4242/fd/4": "/dev/nvidia-uvm",
            "/proc/4242/fd/5": "/home/alice/log.txt",
            "/proc/5151/fd/7": "/dev/nvidiactl",
            "/proc/1234/fd/2": "/dev/nvidiactl",
            "/proc/777/fd/9": "/dev/nvidiactl",  # envdoctor itself: never listed
        },
        "nodes": {n: {"mode": "0666"} for n in NODES},
        "which": {
            "lsof": "/usr/bin/lsof",
            "systemctl": "/usr/bin/systemctl",
            "docker": "/usr/bin/docker",
        },
        "commands": [
            {"argv": ["lsof", "-t", "-w", "--", *NODES], "stdout": "1234\n4242\n5151\n777\n"},
            {
                "argv": ["systemctl", "is-active", *GPU_SERVICES],
                "stdout": "inactive\ninactive\ninactive\ninactive\ninactive\ninactive\nactive\n",
                "returncode": 3,
            },
            {
                "argv": ["docker", "inspect", "--format", "{{.Name}}", DOCKER_ID],
                "stdout": "/vllm\n",
            },
            show(("nvidia-persistenced.service", "", "/system.slice/nvidia-persistenced.service")),
        ],
    }
    data.update(over)
    return FakeHost(data)


def test_holders_from_the_fd_scan() -> None:
    facts = probe_fix_facts(machine(), deadline=Deadline(5))
    assert facts.self_pid == 777
    assert isinstance(facts.holders, Found)
    by_pid = {h.pid: h for h in facts.holders.value}
    assert sorted(by_pid) == [1234, 4242, 5151]
    job = by_pid[4242]
    assert job.argv == ("python", "train.py", "--lr", "0.1")
    assert (job.user, job.uid, job.name) == ("alice", 1000, "python")
    assert job.devices == ("/dev/nvidia0", "/dev/nvidia-uvm")
    assert job.container is None and job.unit == ""
    assert job.seen_by == ("proc", "lsof")
    assert by_pid[5151].container == Container("docker", DOCKER_ID, "vllm", DOCKER_CGROUP)
    assert by_pid[1234].unit == "nvidia-persistenced.service"
    assert (job.start_time, by_pid[5151].start_time, by_pid[1234].start_time) == (9000, 9100, 1500)
    assert by_pid[5151].cgroup == DOCKER_CGROUP
    assert facts.active_services == Found(("nvidia-persistenced",))
    assert facts.os_ids == Found(("ubuntu", "debian"))
    assert facts.notes == ()


def test_a_passwd_with_odd_uids_still_names_the_user() -> None:
    """A container's /etc/passwd may be writable by its user (OpenShift's arbitrary uids): an
    entry with "²" or 5000 digits as its uid ended fix in "internal error" (int() raised)."""
    host = machine()
    host.files["/etc/passwd"] = (
        "odd:x:\u00b2:0::/:/bin/sh\nhuge:x:" + "9" * 5000 + ":0::/:/bin/sh\n"
    ) + host.files["/etc/passwd"]
    facts = probe_fix_facts(host, deadline=Deadline(5))
    assert isinstance(facts.holders, Found)
    job = next(h for h in facts.holders.value if h.pid == 4242)
    assert (job.user, job.uid) == ("alice", 1000)


def test_a_pid_only_lsof_saw_is_kept_and_noted() -> None:
    host = machine()
    host.files["/proc/6000/cmdline"] = "mystery\0"
    host.commands[0]["stdout"] = "4242\n6000\n"
    facts = probe_fix_facts(host, deadline=Deadline(5))
    assert isinstance(facts.holders, Found)
    extra = next(h for h in facts.holders.value if h.pid == 6000)
    assert extra.seen_by == ("lsof",) and extra.devices == () and extra.argv == ("mystery",)
    assert any("PID 6000 was reported by lsof only" in n for n in facts.notes)


def test_fuser_is_the_fallback_cross_check() -> None:
    host = machine(which={"fuser": "/usr/bin/fuser"})
    host.commands.append({"argv": ["fuser", *NODES], "stdout": " 4242m 5151\n"})
    facts = probe_fix_facts(host, deadline=Deadline(5))
    assert isinstance(facts.holders, Found)
    assert {h.pid: h.seen_by for h in facts.holders.value}[4242] == ("proc", "fuser")
    assert facts.active_services == Absent(
        "systemctl is not installed (no systemd services to stop)"
    )


def test_unreadable_processes_are_counted_not_fatal() -> None:
    host = machine(unreadable=["/proc/4242/fd"], which={})
    facts = probe_fix_facts(host, deadline=Deadline(5))
    assert isinstance(facts.holders, Found)
    assert 4242 not in {h.pid for h in facts.holders.value}
    assert any("the open files of 1 process could not be read" in n for n in facts.notes)
    assert any("neither lsof nor fuser" in n for n in facts.notes)


def test_no_proc_at_all() -> None:
    facts = probe_fix_facts(FakeHost({}), deadline=Deadline(5))
    assert isinstance(facts.holders, Absent)


def test_services_probe_failure_keeps_its_reason() -> None:
    host = machine()
    host.commands[1] = {"argv": ["systemctl", "is-active", *GPU_SERVICES], "status": "timeout"}
    assert isinstance(probe_services(host, deadline=Deadline(5)), ProbeFailed)


K8S_POD = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c4d.slice"


@pytest.mark.parametrize(
    ("cgroup", "runtime", "own"),
    [
        (f"12:memory:/docker/{DOCKER_ID}\n", "docker", f"/docker/{DOCKER_ID}"),
        (f"0::{DOCKER_CGROUP}\n", "docker", DOCKER_CGROUP),
        (
            f"0::/machine.slice/libpod-{DOCKER_ID}.scope/container\n",
            "podman",
            f"/machine.slice/libpod-{DOCKER_ID}.scope",
        ),
        (
            f"0::{K8S_POD}/cri-containerd-{DOCKER_ID}.scope\n",
            "kubernetes",
            f"{K8S_POD}/cri-containerd-{DOCKER_ID}.scope",
        ),
        (
            f"11:devices:/kubepods/besteffort/pod1a2b-3c4d/{DOCKER_ID}\n",
            "kubernetes",
            f"/kubepods/besteffort/pod1a2b-3c4d/{DOCKER_ID}",
        ),
        (
            f"0::/system.slice/crio-{DOCKER_ID}.scope\n",
            "cri-o",
            f"/system.slice/crio-{DOCKER_ID}.scope",
        ),
    ],
)
def test_container_of(cgroup: str, runtime: str, own: str) -> None:
    assert container_of(cgroup) == Container(runtime, DOCKER_ID, cgroup=own)


def test_not_a_container() -> None:
    assert container_of("0::/user.slice/user-1000.slice/session-2.scope\n") is None
    assert unit_of("0::/system.slice/ollama.service\n") == "ollama.service"
    assert unit_of("0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n") == ""


def test_split_cmdline() -> None:
    assert split_cmdline("a\0b\0") == ("a", "b")
    assert split_cmdline("a b") == ("a b",)  # rewritten by setproctitle
    assert split_cmdline("") == ()
    assert split_cmdline("a\0\0") == ("a", "")
