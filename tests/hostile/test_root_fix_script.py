"""The fix script root runs (issue 35): nothing an unprivileged user shapes (the environment,
a snapshot, a table) decides what it runs or where it acts.

- the environment: ``ENVDOCTOR_FIX_ROOT`` made `chmod 0666` go through a user's symlink to
  /etc/shadow under ``sudo -E``; now the script reads no variable at all (its first line starts
  bash with ``env -i``; started as ``bash fix.sh`` it drops exported functions and sets PATH);
- a snapshot: its interpreter path won over ``--python``, and its device-node paths became
  ``chmod 0666 /dev/../etc/shadow``; a plan made from a snapshot is for reading unless
  ``--on-this-machine``; the script re-checks each node right before its chmod;
- a table: ``https://download.pytorch.org@evil.example/whl/cu130`` passed as PyTorch's index.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.compat.index import index_url_problem, untrusted_index
from envdoctor.remedy import render_script
from envdoctor.remedy.model import (
    LoadModule,
    Plan,
    ReinstallTorch,
    SetMode,
    Step,
    WriteFile,
)
from envdoctor.remedy.planner import NOUVEAU_CONF, NOUVEAU_TEXT
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.hostile.users import needs_root, sh_as_other
from tests.remedy.sandbox import Sandbox
from tests.runner import invoke

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


# --- the environment ------------------------------------------------------------------------------


@needs_root
def test_a_fake_root_in_the_environment_is_not_taken(box: Sandbox, shared_dir: Path) -> None:
    """A user prepares a "root" whose blacklist file and device node are links to root's files;
    root runs the script with that user's environment (sudo -E, a CI job)."""
    victim = box.base / "passwd"
    victim.write_text("root:x:0:0::/root:/bin/bash\n")
    victim.chmod(0o644)
    sh_as_other(
        f"mkdir -p fake/etc/modprobe.d fake/dev\n"
        f"ln -s {victim} fake/etc/modprobe.d/blacklist-nouveau.conf\n"
        f"ln -s {victim} fake/dev/nvidia0\n",
        cwd=shared_dir,
    )
    plan = Plan(
        steps=(
            Step("Blacklist nouveau", WriteFile(NOUVEAU_CONF, NOUVEAU_TEXT)),
            Step("Open /dev/nvidia0", SetMode("/dev/nvidia0", "0666")),
        )
    )
    run = box.run(
        render_script(plan),
        "--apply",
        "--yes",
        env={"ENVDOCTOR_FIX_ROOT": str(shared_dir / "fake")},
    )
    assert run.returncode == 0, run.stderr
    assert victim.read_text() == "root:x:0:0::/root:/bin/bash\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    # the one root the script acts on is the one its command line named
    assert (box.root / NOUVEAU_CONF.lstrip("/")).read_text() == NOUVEAU_TEXT


def test_exported_functions_and_path_choose_no_command(box: Sandbox, tmp_path: Path) -> None:
    """`chmod` exported as a bash function, and a directory of look-alikes first on PATH."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil-bin"
    evil.mkdir()
    for name in ("chmod", "mkdir", "id", "modprobe"):
        (evil / name).write_text(f"#!/bin/sh\necho {name} >>{marker}\n")
        (evil / name).chmod(0o755)
    plan = Plan(
        steps=(
            Step("Blacklist nouveau", WriteFile(NOUVEAU_CONF, NOUVEAU_TEXT)),
            Step("Load nvidia", LoadModule("nvidia")),
        )
    )
    run = box.run(
        render_script(plan),
        "--apply",
        "--yes",
        env={
            "PATH": f"{evil}:{box.bin}",
            "BASH_FUNC_chmod%%": f"() {{ echo function >>{marker}; }}",
            "BASH_FUNC_modprobe%%": f"() {{ echo function >>{marker}; }}",
        },
    )
    assert run.returncode == 0, run.stderr
    assert not marker.exists(), marker.read_text()
    assert ("modprobe", "nvidia") in run.calls
    assert ("chmod", "0644", "--", str(box.root / NOUVEAU_CONF.lstrip("/"))) in run.calls


def test_the_waits_come_from_the_command_line_only(box: Sandbox) -> None:
    """ENVDOCTOR_FIX_TERM_WAIT in the environment is not a wait; a bad --term-wait refuses."""
    plan = Plan(steps=(Step("Load nvidia", LoadModule("nvidia")),))
    ignored = box.run(render_script(plan), env={"ENVDOCTOR_FIX_TERM_WAIT": "x"})
    assert ignored.returncode == 0, ignored.stderr
    refused = box.run(render_script(plan), "--term-wait", "x")
    assert refused.returncode == 2
    assert "waits must be whole seconds" in refused.stderr


# --- a plan made from a snapshot ------------------------------------------------------------------


def test_a_plan_from_a_snapshot_is_for_reading(box: Sandbox) -> None:
    plan = Plan(
        steps=(Step("Load nvidia", LoadModule("nvidia")),),
        snapshot="/tmp/their-machine.json",
        source="the machine in /tmp/their-machine.json",
    )
    script = render_script(plan)
    assert "# Made from the snapshot /tmp/their-machine.json" in script
    refused = box.run(script, "--apply", "--yes")
    assert refused.returncode == 2
    assert "made from a snapshot" in refused.stderr and "--on-this-machine" in refused.stderr
    assert refused.calls == []
    dry = box.run(script)  # reading it is what it is for
    assert dry.returncode == 0 and dry.calls == []
    confirmed = box.run(script, "--apply", "--yes", "--on-this-machine")
    assert confirmed.returncode == 0, confirmed.stderr
    assert ("modprobe", "nvidia") in confirmed.calls


def _snapshot(tmp_path: Path, scenario: str, edit: dict[str, object]) -> Path:
    snap = tmp_path / f"{scenario}.json"
    host = FakeHost.scenario(scenario)
    collected = invoke(["collect", "-o", str(snap)], obj=AppContext(host=host, python=PYTHON))
    assert collected.exit_code == 0, collected.output
    doc = json.loads(snap.read_text())
    for dotted, value in edit.items():
        *path, last = dotted.split(".")
        node = doc["facts"]
        for key in path:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    snap.write_text(json.dumps(doc))
    return snap


def _plan(snap: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, object]:
    # probes nothing (a snapshot); knows PYTHON as an executable for --python
    offline = FakeHost({"env": env or {}, "nodes": {PYTHON: {"char": False, "mode": "0755"}}})
    result = invoke(
        ["fix", "--snapshot", str(snap), "--format", "json", *extra],
        obj=AppContext(host=offline, python=PYTHON),
    )
    assert result.exit_code == 0, result.output
    plan: dict[str, object] = json.loads(result.output)
    return plan


def _commands(plan: dict[str, object]) -> list[list[str]]:
    return [c for s in plan["steps"] for c in s["commands"]]  # type: ignore[attr-defined]  # JSON


def test_the_snapshots_interpreter_is_never_run(tmp_path: Path) -> None:
    evil = "/tmp/alice/venv/bin/python"
    snap = _snapshot(tmp_path, "cpu_wheel_on_gpu", {"torch.python": evil})
    unnamed = _plan(snap)
    assert all(evil not in c for c in _commands(unnamed))
    assert any("name the one to repair with --python" in n for n in unnamed["notes"])  # type: ignore[attr-defined]  # JSON
    named = _plan(snap, "--python", PYTHON)
    pips = [c for c in _commands(named) if "pip" in c]
    assert pips and all(c[0] == PYTHON for c in pips), pips
    assert all(evil not in c for c in _commands(named))


def test_a_snapshots_device_path_gets_no_chmod(tmp_path: Path) -> None:
    nodes = "kernel.device_nodes.found"
    denied = {"mode": "0600", "readable": False, "writable": False, "gid": 0}
    snap = _snapshot(
        tmp_path,
        "no_permission",
        {
            f"{nodes}.3": {
                **denied,
                "path": "/dev/../etc/shadow",
                "is_char_device": True,
                "uid": 0,
            },
            f"{nodes}.4": {**denied, "path": "/dev/nvidiactl", "is_char_device": True, "uid": 0},
        },
    )
    plan = _plan(snap)
    chmods = [c for c in _commands(plan) if c[0] == "chmod"]
    assert chmods, "the other nodes still get their mode"
    assert all("shadow" not in " ".join(c) for c in chmods), chmods
    assert any("/dev/../etc/shadow" in n for n in plan["notes"])  # type: ignore[attr-defined]  # JSON


@needs_root  # mknod
def test_the_script_changes_the_mode_of_nvidia_character_devices_only(box: Sandbox) -> None:
    """What is at the path when the script runs decides, whatever the plan says."""
    dev = box.root / "dev"
    secret = box.base / "shadow"
    secret.write_text("root:$6$secret\n")
    secret.chmod(0o600)
    os.mknod(dev / "nvidia0", 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    os.mknod(dev / "nvidia1", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's number
    (dev / "nvidia2").symlink_to(secret)
    (dev / "nvidia3").write_text("")
    (dev / "nvidia3").chmod(0o600)
    (box.root / "proc" / "devices").write_text("Character devices:\n  1 mem\n195 nvidia\n")
    paths = ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/../shadow")
    plan = Plan(steps=tuple(Step(f"Open {p}", SetMode(p, "0666")) for p in paths))
    run = box.run(render_script(plan), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert [c for c in run.calls if c[0] == "chmod"] == [
        ("chmod", "0666", "--", str(dev / "nvidia0"))
    ]
    assert stat.S_IMODE((dev / "nvidia0").stat().st_mode) == 0o666
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((dev / "nvidia1").stat().st_mode) == 0o600
    for path, why in (
        ("/dev/nvidia1", "its major number 1 is not the NVIDIA driver's"),
        ("/dev/nvidia2", "it is not a character device"),
        ("/dev/nvidia3", "it is not a character device"),
        ("/dev/../shadow", "it is not the name of an NVIDIA device node"),
    ):
        assert f"the mode of {path} was not changed: {why}" in run.stderr


# --- the index torch comes from ---------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://download.pytorch.org@evil.example/whl/cu130",
        "https://download.pytorch.org:x@evil.example/whl/cu130",
        "https://evil.example\\@download.pytorch.org/whl/cu130",
        "http://download.pytorch.org/whl/cu130",
        "https://download.pytorch.org:8443/whl/cu130",
        "https://download.pytorch.org/whl/cu130?x=1",
        "https://download.pytorch.org/whl/cu130 --extra-index-url https://evil.example",
        "https:///whl/cu130",
    ],
)
def test_an_index_that_only_looks_like_pytorchs_is_refused(url: str) -> None:
    assert index_url_problem(url) or untrusted_index(url)


def test_only_pytorchs_host_or_one_named_on_the_command_line_is_trusted() -> None:
    assert untrusted_index("https://download.pytorch.org/whl/cu130") == ""
    assert "not PyTorch's" in untrusted_index("https://evil.example/whl/cu130")
    assert untrusted_index("https://Mirror.Example/whl/cu130", ["mirror.example"]) == ""


def _tables(tmp_path: Path, index_url: str) -> Path:
    tables = tmp_path / "tables"
    shutil.copytree(REPO / "compat_tables", tables)
    pytorch = tables / "pytorch.yaml"
    text = pytorch.read_text()
    default = 'index_url: "https://download.pytorch.org/whl/{variant}"'
    assert default in text
    pytorch.write_text(text.replace(default, f'index_url: "{index_url}"'))
    return tables


def test_a_table_with_userinfo_before_the_host_is_refused(tmp_path: Path) -> None:
    tables = _tables(tmp_path, "https://download.pytorch.org@evil.example/whl/{variant}")
    snap = _snapshot(tmp_path, "cpu_wheel_on_gpu", {})
    result = invoke(
        ["fix", "--snapshot", str(snap), "--python", PYTHON],
        obj=AppContext(host=FakeHost({"env": {"ENVDOCTOR_TABLES": str(tables)}}), python=PYTHON),
    )
    assert result.exit_code == 2
    assert "user information" in result.output
    assert "evil.example" not in "".join(
        line for line in result.output.splitlines() if "pip" in line
    )


def test_a_tables_own_host_needs_index_host(tmp_path: Path) -> None:
    tables = _tables(tmp_path, "https://evil.example/whl/{variant}")
    snap = _snapshot(tmp_path, "cpu_wheel_on_gpu", {})
    env = {"ENVDOCTOR_TABLES": str(tables)}
    plain = _plan(snap, "--python", PYTHON, env=env)
    assert all("evil.example" not in " ".join(c) for c in _commands(plain))
    assert any("--index-host" in n for n in plain["notes"])  # type: ignore[attr-defined]  # JSON
    named = _plan(snap, "--python", PYTHON, "--index-host", "evil.example", env=env)
    assert any("https://evil.example/whl/" in " ".join(c) for c in _commands(named))


def test_the_script_checks_the_index_host_again(box: Sandbox) -> None:
    """A plan put together by hand (or edited) still installs from no other host."""
    url = "https://download.pytorch.org@evil.example/whl/cu130"
    plan = Plan(steps=(Step("Reinstall", ReinstallTorch(box.python, "torch", url, "cu130")),))
    run = box.run(render_script(plan), "--apply", "--yes")
    assert run.returncode == 0, run.stderr
    assert [c for c in run.calls if "install" in c] == []
    assert "torch was not reinstalled" in run.stderr
