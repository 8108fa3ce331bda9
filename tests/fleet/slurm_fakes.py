"""A recording ``scontrol`` shim (a tiny fake slurmctld) and a host that runs Slurm for real.

The shim is a real executable run through ``SystemHost.run`` (so argv, PATH lookup, timeouts and
exit codes are real); it records every call and keeps the node's state in a JSON file. Its
``show node`` output has the layout of Slurm 22.05's ``scontrol show node``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envdoctor.platform.host import CommandResult
from envdoctor.platform.system import SystemHost
from tests.fakes.host import FakeHost

SHIM = r"""
import json, os, sys, time
state_path, log_path = os.environ["FAKE_SLURM_STATE"], os.environ["FAKE_SLURM_LOG"]
with open(log_path, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
state = json.load(open(state_path))
time.sleep(state.get("sleep", 0))
args = sys.argv[1:]
if args == ["-o", "show", "node"]:
    # every node, one a line, as Slurm's one-line format prints them (the reason last)
    me = {"name": state["name"], "base": state["base"], "flags": state["flags"],
          "reason": state["reason"], "stamp": state.get("stamp", "2026-05-01T12:00:00")}
    for n in [me, *state.get("others", [])]:
        flags = "".join("+" + f for f in n.get("flags", []))
        line = (f"NodeName={n['name']} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 "
                f"State={n.get('base', 'IDLE')}{flags} ThreadsPerCore=1 "
                f"Partitions={n.get('partitions', state.get('partitions', 'debug'))} Owner=N/A")
        if n.get("reason"):
            line += f" Reason={n['reason']} [root@{n.get('stamp', '2026-05-01T12:00:00')}]"
        print(line)
    sys.exit(0)
if args[:2] == ["show", "node"]:
    if args[2] != state["name"]:
        print(f"Node {args[2]} not found", file=sys.stderr)
        sys.exit(1)
    flags = "".join("+" + f for f in state["flags"])
    print(f"NodeName={state['name']} Arch=x86_64 CoresPerSocket=1 ")
    print("   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.34")
    print(f"   State={state['base']}{flags} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A")
    print(f"   Partitions={state.get('partitions', 'debug')} ")
    print("   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")
    if state["reason"]:
        print(f"   Reason={state['reason']} [root@2026-05-01T12:00:00]")
    print()
    sys.exit(0)
if args[0] == "update":
    fields = dict(a.split("=", 1) for a in args[1:])
    if fields.get("State") == "DRAIN":
        if "Reason" not in fields:
            print("You must specify a reason when DRAINING a node", file=sys.stderr)
            sys.exit(1)
        state["flags"] = sorted(set(state["flags"]) | {"DRAIN"})
        state["reason"] = fields["Reason"]
    elif fields.get("State") == "RESUME":
        if "DRAIN" not in state["flags"] and state["base"] != "DOWN":
            print("slurm_update error: Invalid node state specified", file=sys.stderr)
            sys.exit(1)
        state["flags"] = [f for f in state["flags"] if f != "DRAIN"]
        state["base"] = "IDLE" if state["base"] == "DOWN" else state["base"]
        state["reason"] = ""
    json.dump(state, open(state_path, "w"))
    sys.exit(0)
print("scontrol shim: unexpected call", args, file=sys.stderr)
sys.exit(2)
"""


@dataclass
class FakeSlurm:
    """The shim's directory, state and call log."""

    bin_dir: Path
    state_path: Path
    log_path: Path

    @classmethod
    def create(cls, root: Path, *, name: str = "gpu-node-17", **state: Any) -> FakeSlurm:
        bin_dir = root / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "scontrol"
        shim.write_text(f"#!{sys.executable}\n{SHIM}", encoding="utf-8")
        shim.chmod(0o755)
        fake = cls(bin_dir, root / "slurm-state.json", root / "scontrol-calls.jsonl")
        fake.set(name=name, base="IDLE", flags=[], reason="", **state)
        fake.log_path.write_text("")
        return fake

    def set(self, **state: Any) -> None:
        current = json.loads(self.state_path.read_text()) if self.state_path.exists() else {}
        current.update(state)
        self.state_path.write_text(json.dumps(current))

    @property
    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state_path.read_text())
        return data

    @property
    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    @property
    def environ(self) -> dict[str, str]:
        return {
            "PATH": str(self.bin_dir),
            "FAKE_SLURM_STATE": str(self.state_path),
            "FAKE_SLURM_LOG": str(self.log_path),
            "ENVDOCTOR_STATE_DIR": str(self.bin_dir.parent / "envdoctor-state"),
        }


class SlurmHost(FakeHost):
    """A scenario machine whose Slurm commands run for real (shim or Slurm) via SystemHost."""

    def __init__(self, scenario: str, environ: Mapping[str, str], **overrides: Any) -> None:
        # the drain budget's state directory: the test's own, never the machine's /var/lib
        state = environ.get("ENVDOCTOR_STATE_DIR") or tempfile.mkdtemp(prefix="envdoctor-state-")
        overrides["env"] = {"ENVDOCTOR_STATE_DIR": state, **overrides.get("env", {})}
        super().__init__(FakeHost.scenario(scenario, **overrides).data)
        self.system = SystemHost(environ=dict(environ))

    def which(self, program: str) -> str | None:
        if program == "scontrol":
            return self.system.which(program)
        return super().which(program)

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        if argv and argv[0].rsplit("/", 1)[-1] == "scontrol":
            return self.system.run(argv, timeout=timeout)
        return super().run(argv, timeout=timeout, env=env)
