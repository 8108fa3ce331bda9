"""slurm-healthcheck against a real single-node Slurm (slurmctld + slurmd + munged on localhost).

The cluster is started here, in a temporary directory with its own ports and munge socket, and
stopped (by PID) afterwards. It needs root and Debian's `slurmctld slurmd slurm-client munge`
(scripts/install-test-tools installs them where it can); otherwise the tests skip and say why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.fleet.slurm import parse_show_node
from tests.conftest import PYTHON
from tests.fleet.slurm_fakes import SlurmHost
from tests.runner import invoke as cli_invoke

SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
NEEDED = ("slurmctld", "slurmd", "scontrol", "munged")


def _find(program: str) -> str | None:
    return shutil.which(program) or next(
        (f"{d}/{program}" for d in SBIN if os.access(f"{d}/{program}", os.X_OK)), None
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Cluster:
    conf: Path
    node: str
    scontrol: str

    @property
    def environ(self) -> dict[str, str]:
        return {"PATH": str(Path(self.scontrol).parent), "SLURM_CONF": str(self.conf)}

    def scontrol_run(self, *args: str) -> str:
        result = subprocess.run(
            [self.scontrol, *args],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return result.stdout

    def state(self) -> tuple[str, str]:
        node = parse_show_node(self.scontrol_run("show", "node", self.node), self.node)
        return node.state, node.reason


def _skip_reason() -> str | None:
    missing = [p for p in NEEDED if _find(p) is None]
    if missing:
        return (
            f"{', '.join(missing)} not installed (Debian slurmctld slurmd slurm-client munge; "
            "scripts/install-test-tools installs them where it can)"
        )
    if os.geteuid() != 0:
        return "starting slurmd and munged needs root"
    if not Path("/etc/munge/munge.key").exists() and _find("mungekey") is None:
        return "no munge key and no mungekey to make one"
    return None


def _wait_for_node(cluster: Cluster, deadline: float) -> str:
    last = ""
    while time.monotonic() < deadline:
        try:
            state, _ = cluster.state()
        except (subprocess.SubprocessError, ValueError) as exc:
            last = str(exc)
        else:
            if state.split("+")[0] in ("IDLE", "MIXED", "ALLOCATED"):
                return state
            last = state
        time.sleep(0.5)
    return last


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(f"no real Slurm: {reason}")
    root = tmp_path_factory.mktemp("slurm")
    munge_dir = root / "munge"
    munge_dir.mkdir(mode=0o700)
    key = munge_dir / "munge.key"
    if Path("/etc/munge/munge.key").exists():
        shutil.copyfile("/etc/munge/munge.key", key)
    else:
        subprocess.run([_find("mungekey"), "--create", f"--keyfile={key}"], check=True)  # type: ignore[list-item]  # found by _skip_reason
    key.chmod(0o600)
    (root / "state").mkdir()
    (root / "spool").mkdir()
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=envdoctor-test",
                f"SlurmctldHost={node}(127.0.0.1)",
                "AuthType=auth/munge",
                f"AuthInfo=socket={munge_dir / 'munge.socket'}",
                "CredType=cred/munge",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                f"StateSaveLocation={root / 'state'}",
                f"SlurmdSpoolDir={root / 'spool'}",
                f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                f"SlurmdPidFile={root / 'slurmd.pid'}",
                f"SlurmctldLogFile={root / 'slurmctld.log'}",
                f"SlurmdLogFile={root / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "SelectType=select/cons_tres",
                "SchedulerType=sched/builtin",
                "MpiDefault=none",
                "ReturnToService=2",
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 State=UNKNOWN",
                "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    pidfiles = [munge_dir / "munged.pid", root / "slurmctld.pid", root / "slurmd.pid"]
    cluster = Cluster(conf, node, str(_find("scontrol")))
    try:
        subprocess.run(
            [
                str(_find("munged")),
                "--force",
                f"--key-file={key}",
                f"--socket={munge_dir / 'munge.socket'}",
                f"--pid-file={pidfiles[0]}",
                f"--seed-file={munge_dir / 'munged.seed'}",
                f"--log-file={munge_dir / 'munged.log'}",
            ],
            check=True,
            timeout=30,
        )
        subprocess.run([str(_find("slurmctld")), "-i"], env=env, check=True, timeout=30)
        subprocess.run([str(_find("slurmd"))], env=env, check=True, timeout=30)
        state = _wait_for_node(cluster, time.monotonic() + 30)
        if state.split("+")[0] not in ("IDLE", "MIXED", "ALLOCATED"):
            logs = "".join(p.read_text()[-2000:] for p in root.glob("*.log"))
            pytest.skip(f"the test Slurm did not come up (node state {state!r}): {logs}")
        yield cluster
    finally:
        for pidfile in reversed(pidfiles):
            with contextlib.suppress(OSError, ValueError):  # never started, or already gone
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


def healthcheck(cluster: Cluster, scenario: str, *args: str):  # type: ignore[no-untyped-def]  # click's Result
    host = SlurmHost(scenario, cluster.environ)
    obj = AppContext(host=host, python=PYTHON)
    return cli_invoke(["slurm-healthcheck", "--node", cluster.node, *args], obj=obj)


def test_drain_resume_and_operator_drain_on_real_slurm(cluster: Cluster) -> None:
    started = time.monotonic()
    result = healthcheck(cluster, "gpu_lost")
    assert result.exit_code == 1, result.output
    state, reason = cluster.state()
    assert "DRAIN" in state.split("+")
    assert reason.startswith("envdoctor: gpu.lost: GPU 1 ")

    result = healthcheck(cluster, "gpu_lost")
    assert "already drained by envdoctor for the same reason" in result.output

    result = healthcheck(cluster, "healthy_h100")
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output
    state, reason = cluster.state()
    assert "DRAIN" not in state.split("+") and reason == ""

    cluster.scontrol_run(
        "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=rack 12 maintenance"
    )
    healthcheck(cluster, "healthy_h100")
    assert cluster.state()[1] == "rack 12 maintenance"  # an operator's drain stays
    healthcheck(cluster, "gpu_lost")
    assert cluster.state()[1] == "rack 12 maintenance"  # and keeps its reason
    cluster.scontrol_run("update", f"NodeName={cluster.node}", "State=RESUME")
    assert time.monotonic() - started < 60
