"""FakeHost: a whole machine from a scenario YAML (format: tests/scenarios/README.md)."""

from __future__ import annotations

import copy
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import (
    MAX_KMSG_BYTES,
    MAX_READ_BYTES,
    CommandResult,
    FileInfo,
    Identity,
)
from envdoctor.platform.nvml import NvmlError, NvmlSession
from envdoctor.probes.torch_build import MARK
from tests.fakes.ldcache import build_ld_cache
from tests.fakes.nvml import FakeNvml

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def load_scenario(name: str) -> dict[str, Any]:
    """A scenario's data, with ``extends: BASE`` merged over its base scenario.

    Each caller gets its own copy: tests change what they were given."""
    data = copy.deepcopy(_parsed(SCENARIOS / f"{name}.yaml"))
    base = data.pop("extends", None)
    return merge(load_scenario(base), data) if base else data


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    """A scenario file parsed once per test process (with libyaml where PyYAML has it): the
    suite builds ~700 machines from ~30 files, and PyYAML's pure-Python parser made that a
    tenth of its CPU time. The files do not change while the tests run."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge mappings; a ``null`` in ``over`` deletes the key."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


class FakeHost:
    """Implements the Host protocol from data; records every command it was asked to run."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.files: dict[str, str] = {k: str(v) for k, v in (data.get("files") or {}).items()}
        self.nodes: dict[str, dict[str, Any]] = dict(data.get("nodes") or {})
        self.links: dict[str, str] = dict(data.get("links") or {})
        self.unreadable: set[str] = set(data.get("unreadable") or [])
        self.environ: dict[str, str] = {k: str(v) for k, v in (data.get("env") or {}).items()}
        self.commands: list[dict[str, Any]] = list(data.get("commands") or [])
        self.binary: dict[str, bytes] = {}
        listing = data.get("ld_cache")
        if listing is not None:  # the loader's cache, and ldconfig -p printing it
            self.binary["/etc/ld.so.cache"] = build_ld_cache(str(listing))
            self.commands.append({"argv": ["ldconfig", "-p"], "stdout": str(listing)})
        for path, layout in (data.get("pci_config") or {}).items():
            # a PCI function's config space (issue 39: ACS): {size, at: {offset: "hex bytes"}}
            raw = bytearray(int(layout.get("size", 4096)))
            for offset, hexdata in (layout.get("at") or {}).items():
                chunk = bytes.fromhex(str(hexdata).replace(" ", ""))
                start = int(str(offset), 0)
                raw[start : start + len(chunk)] = chunk
            self.binary[path] = bytes(raw)
        self.programs: dict[str, str] = dict(data.get("which") or {})
        self.opens: dict[str, str] = {k: str(v) for k, v in (data.get("opens") or {}).items()}
        self.ran: list[tuple[str, ...]] = []
        self.opened: list[str] = []
        self.nvml_opened = 0

    @classmethod
    def scenario(cls, name: str, **overrides: Any) -> FakeHost:
        return cls(merge(load_scenario(name), overrides))

    # --- files ---------------------------------------------------------------------------

    def _all_paths(self) -> set[str]:
        return {*self.files, *self.binary, *self.nodes, *self.links}

    def _is_dir(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return path in (self.data.get("dirs") or []) or any(
            p.startswith(prefix) for p in self._all_paths()
        )

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        if path in self.unreadable:
            return ProbeFailed(f"permission denied reading {path}")
        if path in self.files:
            return Found(self.files[path][:limit])
        return Absent(f"{path} does not exist")

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        if path in self.binary and path not in self.unreadable:
            return Found(self.binary[path][:limit])
        text = self.read_text(path, limit=limit)
        return Found(text.value.encode()) if isinstance(text, Found) else text

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        if "/dev/kmsg" in self.unreadable:
            return ProbeFailed("permission denied reading /dev/kmsg")
        kmsg = self.data.get("kmsg")
        return Absent("/dev/kmsg does not exist") if kmsg is None else Found(str(kmsg)[:limit])

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        if path in self.unreadable:
            return ProbeFailed(f"permission denied listing {path}")
        if not self._is_dir(path):
            return Absent(f"{path} does not exist")
        prefix = path.rstrip("/") + "/"
        names = {
            p[len(prefix) :].split("/", 1)[0] for p in self._all_paths() if p.startswith(prefix)
        }
        names |= {
            d[len(prefix) :].split("/", 1)[0]
            for d in self.data.get("dirs") or []
            if d.startswith(prefix)
        }
        return Found(tuple(sorted(n for n in names if n)))

    def stat(self, path: str) -> Probed[FileInfo]:
        if path in self.nodes:
            node = self.nodes[path] or {}
            return Found(
                FileInfo(
                    is_char_device=bool(node.get("char", True)),
                    is_dir=False,
                    mode=int(str(node.get("mode", "0666")), 8),
                    readable=bool(node.get("readable", True)),
                    writable=bool(node.get("writable", True)),
                    uid=int(node.get("uid", 0)),
                    gid=int(node.get("gid", 0)),
                )
            )
        if path in self.files or path in self.links:
            return Found(FileInfo(False, False, 0o644, True, False))
        if self._is_dir(path):
            return Found(FileInfo(False, True, 0o755, True, False))
        return Absent(f"{path} does not exist")

    def realpath(self, path: str) -> str:
        seen = 0
        while path in self.links and seen < 16:
            path, seen = self.links[path], seen + 1
        return path

    # --- process environment ------------------------------------------------------------

    def env(self) -> Mapping[str, str]:
        return self.environ

    def which(self, program: str) -> str | None:
        return self.programs.get(program)

    def identity(self) -> Identity:
        ident = self.data.get("identity") or {}
        return Identity(
            user=str(ident.get("user", "alice")),
            uid=int(ident.get("uid", 1000)),
            machine=str(ident.get("machine", "x86_64")),
            kernel_release=str(ident.get("kernel_release", "6.8.0-85-generic")),
            python=str(ident.get("python", "/usr/bin/python3")),
        )

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        args = tuple(argv)
        self.ran.append(args)
        if args[1:2] == ("-P",) and not self._has_safe_path():
            return self._refuse_safe_path(args)
        at = args.index("-c", 1, 3) if "-c" in args[1:3] else 0  # python [-P] -c SRC
        code = args[at + 1] if 0 < at < len(args) - 1 else ""
        if "ENVDOCTOR-TORCH-JSON" in code:
            return self._torch(args, timeout)
        program = args[0].rsplit("/", 1)[-1]
        for spec in self.commands:
            want = spec["argv"]
            if want[0].rsplit("/", 1)[-1] == program and list(args[1:]) == want[1:]:
                return self._result(args, spec, timeout)
        return CommandResult(args, "not-found", error=f"{args[0]}: not found")

    def _has_safe_path(self) -> bool:
        """Whether the scenario's interpreter (``torch.python_version``) knows ``-P`` (3.11+)."""
        version = str((self.data.get("torch") or {}).get("python_version", "3.12.3"))
        return tuple(int(p) for p in version.split(".")[:2]) >= (3, 11)

    def _refuse_safe_path(self, args: tuple[str, ...]) -> CommandResult:
        """What CPython before 3.11 answers to ``-P``, before it runs anything."""
        usage = f"Unknown option: -P\nusage: {args[0]} [option] ... [-c cmd | -m mod | file | -]\n"
        return CommandResult(args, "ok", returncode=2, stderr=usage)

    def _result(self, args: tuple[str, ...], spec: dict[str, Any], timeout: float) -> CommandResult:
        status = spec.get("status", "ok")
        if status == "timeout":
            return CommandResult(args, "timeout", returncode=-9, seconds=timeout)
        return CommandResult(
            args,
            status,
            returncode=int(spec.get("returncode", 0)),
            stdout=str(spec.get("stdout", "")),
            stderr=str(spec.get("stderr", "")),
            error=str(spec.get("error", "")),
        )

    def _torch(self, args: tuple[str, ...], timeout: float) -> CommandResult:
        spec = self.data.get("torch")
        if spec is None:
            return CommandResult(args, "not-found", error=f"{args[0]}: not found")
        if "child" in spec:  # the child's JSON, as torch_child.py would print it
            stdout = MARK + json.dumps(spec["child"]) + "\n"
            return CommandResult(args, "ok", stdout=stdout, stderr=str(spec.get("stderr", "")))
        if spec.get("sleep"):
            time.sleep(float(spec["sleep"]))
        return self._result(args, spec, timeout)

    def open_device(self, path: str, *, timeout: float) -> str:
        """``opens:`` answers first (e.g. EPERM for a cgroup denial); else a listed node opens
        as its mode allows and any other path does not exist."""
        self.opened.append(path)
        if path in self.opens:
            return self.opens[path]
        node = self.nodes.get(path)
        if path not in self.nodes:
            return "ENOENT"
        node = node or {}
        return "ok" if node.get("readable", True) and node.get("writable", True) else "EACCES"

    # --- NVML ----------------------------------------------------------------------------

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        self.nvml_opened += 1
        nvml = self.data.get("nvml") or {"error": "LibraryNotFound"}
        if "error" in nvml:
            raise NvmlError(nvml["error"], nvml.get("message", f"fake NVML: {nvml['error']}"))
        return FakeNvml(nvml)
