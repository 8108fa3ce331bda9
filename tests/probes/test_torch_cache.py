"""Reusing an earlier `import torch` (probes/torch_cache.py and the child's side of it).

The real child runs in a real interpreter against a small fake CUDA build of torch (a package
on PYTHONPATH that counts its imports), so the digest, the manifest and the driver API answer
are the real ones, without the seconds a real torch takes (test_live.py has that one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from envdoctor.model.facts import TorchBroken, TorchBuild, TorchFacts
from envdoctor.model.probed import Found, ProbeFailed
from envdoctor.platform.cache import CacheDir
from envdoctor.platform.host import CommandResult, Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes import torch_child
from envdoctor.probes.torch_build import MARK, child_source
from envdoctor.probes.torch_cache import entry_name, probe_cached
from envdoctor.probes.torch_probe import probe_torch
from tests.fakes.host import FakeHost

FAKE_TORCH = """
import ctypes, os, types
with open(os.environ["FAKE_TORCH_IMPORTS"], "a") as log:
    log.write("import\\n")
if os.environ.get("FAKE_TORCH_BROKEN"):
    raise ImportError("libcudnn.so.9: cannot open shared object file")
from torch import version
__version__ = version.__version__


def _is_available():
    try:  # as the CUDA runtime does: libcuda is loaded by is_available()
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return False  # no GPU for the tests, whatever the machine


def _init():
    raise RuntimeError("Found no NVIDIA driver on your system.")


cuda = types.SimpleNamespace(
    is_available=_is_available,
    init=_init,
    get_arch_list=lambda: ["sm_90"],
    device_count=lambda: 0,
    nccl=types.SimpleNamespace(version=lambda: (2, 27, 3)),
)
_C = types.SimpleNamespace(_cuda_getArchFlags=lambda: "sm_80 sm_90")
backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91500))
"""
VERSION = '__version__ = "2.14.1+cu130"\ncuda = "13.0"\nhip = None\n'


class Fake:
    """A fake CUDA torch on PYTHONPATH, a host whose environment finds it, and a cache."""

    def __init__(self, root: Path) -> None:
        self.site = root / "site"
        (self.site / "torch").mkdir(parents=True)
        (self.site / "torch" / "__init__.py").write_text(FAKE_TORCH)
        (self.site / "torch" / "version.py").write_text(VERSION)
        self.log = root / "imports.log"
        self.log.write_text("")
        self.env = {
            **os.environ,
            "PYTHONPATH": str(self.site),
            "FAKE_TORCH_IMPORTS": str(self.log),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.cache = CacheDir(str(root / "cache" / "envdoctor"))

    @property
    def imports(self) -> int:
        return len(self.log.read_text().splitlines())

    def probe(self, cache: CacheDir | None = None, **env: str) -> TorchBuild | TorchBroken:
        host = SystemHost(environ={**self.env, **env})
        facts = probe_torch(host, python=sys.executable, deadline=Deadline(60), cache=cache)
        assert isinstance(facts.torch, Found), facts.torch
        return facts.torch.value

    def build(self, **env: str) -> TorchBuild:
        build = self.probe(self.cache, **env)
        assert isinstance(build, TorchBuild)
        return build


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def _libcuda_loads() -> bool:
    """Whether this machine has a driver's libcuda (asked in a child: no ctypes here)."""
    code = "import ctypes; ctypes.CDLL('libcuda.so.1')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_an_unchanged_import_is_reused_and_says_so(fake: Fake) -> None:
    first = fake.build()
    assert fake.imports == 1 and first.imported and first.from_cache == ""
    again = fake.build()
    assert fake.imports == 1, "the unchanged import ran again"
    assert again.from_cache.endswith("+00:00") and again.imported
    # The import's facts are the cached ones; whether CUDA is usable was read now.
    assert (again.version, again.cudnn_version, again.arch_list) == (
        "2.14.1+cu130",
        Found("91500"),
        ("sm_80", "sm_90"),
    )
    assert not again.cuda_available
    if not _libcuda_loads():
        assert again.unavailable_reason.startswith("no NVIDIA driver: libcuda.so.1 cannot be")
    assert fake.build().from_cache == again.from_cache and fake.imports == 1


def test_what_the_import_read_or_depends_on_invalidates_it(fake: Fake) -> None:
    fake.build()
    module = fake.site / "torch" / "__init__.py"
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert fake.build().from_cache == "" and fake.imports == 2  # a module edited (touched)
    assert fake.build().from_cache != "" and fake.imports == 2
    (fake.site / "torch" / "_new.py").write_text("")
    assert fake.build().from_cache == "" and fake.imports == 3  # a file added beside it
    assert fake.build(CUDA_VISIBLE_DEVICES="1").from_cache == "" and fake.imports == 4
    assert fake.build(LD_LIBRARY_PATH="/nowhere").from_cache == "" and fake.imports == 5
    # The last import is the one kept: back to the plain environment is a miss, then a hit.
    assert fake.build().from_cache == "" and fake.build().from_cache != ""
    assert fake.imports == 6
    # Another terminal or login changes only the session's own variables: still a hit.
    assert fake.build(TERM="xterm-kitty", SSH_CONNECTION="10.0.0.1 1 10.0.0.2 22").from_cache
    assert fake.build(KMP_DUPLICATE_LIB_OK="TRUE").from_cache == ""  # any other variable: a miss
    assert fake.imports == 7


def test_no_cache_neither_reads_nor_writes(fake: Fake) -> None:
    fake.probe(None)
    fake.probe(None)
    assert fake.imports == 2 and not Path(fake.cache.path).exists()
    fake.build()
    assert fake.probe(None).from_cache == "" and fake.imports == 4  # type: ignore[union-attr]  # a TorchBuild


def test_nvml_based_availability_is_never_answered_from_the_cache(fake: Fake) -> None:
    """With PYTORCH_NVML_BASED_CUDA_CHECK=1 torch asks NVML, not the driver API: import."""
    fake.build(PYTORCH_NVML_BASED_CUDA_CHECK="1")
    assert fake.build(PYTORCH_NVML_BASED_CUDA_CHECK="1").from_cache == ""
    assert fake.imports == 2


def test_a_failed_import_is_not_cached_and_forgets_the_last_one(fake: Fake) -> None:
    fake.build()
    assert any(Path(fake.cache.path).glob("torch-*.json"))
    broken = fake.probe(fake.cache, FAKE_TORCH_BROKEN="1")
    assert isinstance(broken, TorchBroken) and "libcudnn" in broken.error
    assert fake.probe(fake.cache, FAKE_TORCH_BROKEN="1") and fake.imports == 3
    assert not any(Path(fake.cache.path).glob("torch-*.json"))


def _entry(fake: Fake) -> Path:
    (path,) = Path(fake.cache.path).glob("torch-*.json")
    assert path.name == entry_name(sys.executable, os.path.realpath(sys.executable), os.geteuid())
    return path


@pytest.mark.parametrize(
    ("key", "value"),
    [("envdoctor", "0.0.1"), ("child", "0" * 16), ("uid", 12345), ("python", "/other/python")],
)
def test_an_entry_from_another_envdoctor_child_user_or_python_is_ignored(
    fake: Fake, key: str, value: object
) -> None:
    fake.build()
    path = _entry(fake)
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))
    assert fake.build().from_cache == "" and fake.imports == 2


def test_a_tampered_manifest_imports_again(fake: Fake) -> None:
    fake.build()
    path = _entry(fake)
    data = json.loads(path.read_text())
    manifest = torch_child.unpack(data["manifest"])
    assert manifest is not None and str(fake.site / "torch" / "__init__.py") in manifest["paths"]
    for blob in ("not base64 at all", torch_child.pack({**manifest, "digest": "0" * 64})):
        path.write_text(json.dumps({**data, "manifest": blob}))
        assert fake.build().from_cache == ""
    assert fake.imports == 3


# --- the parent's protocol, with a scripted child -----------------------------------------------


class ScriptedHost(FakeHost):
    """The torch child answers from a script; every argv is kept."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        super().__init__({"env": {}})
        self.answers = answers

    def run(
        self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        if tuple(argv[1:]) == ("-P", "-V"):  # probes/interpreter.py asks for the safe-path flag
            return CommandResult(tuple(argv), "ok", 0, "Python 3.12.3\n")
        self.ran.append(tuple(argv))
        return CommandResult(tuple(argv), "ok", 0, MARK + json.dumps(self.answers.pop(0)) + "\n")


FULL: dict[str, Any] = {
    "installed": True,
    "version": "2.14.1+cu130",
    "location": "/venv/torch",
    "cuda": "13.0",
    "hip": "",
    "cudnn_version": {"found": "91500"},
    "nccl_version": {"found": "2.27.3"},
    "arch_list": ["sm_90"],
    "cuda_available": True,
    "unavailable_reason": "",
    "device_count": {"found": 8},
    "loaded_libraries": [["libcudnn", "/venv/cudnn.so.9"], ["libcuda", "/old/libcuda.so.1"]],
    "nvidia_wheels": [],
    "imported": True,
    "manifest": "MANIFEST",
}


def _probe(host: ScriptedHost, cache: CacheDir) -> TorchBuild:
    args = ["-c", child_source()]
    probed, _ = probe_cached(host, cache, args, python="/venv/bin/python", deadline=Deadline(5))
    assert isinstance(probed, Found) and isinstance(probed.value, TorchBuild)
    return probed.value


def test_the_driver_api_answers_for_now_and_replaces_libcuda(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path))
    now = {"available": False, "reason": "cuInit failed: CUDA_ERROR_NO_DEVICE", "libcuda": "/l"}
    host = ScriptedHost([FULL, {"installed": True, "unchanged": True, "cuda_now": now}])
    first, second = _probe(host, cache), _probe(host, cache)
    assert first.cuda_available and first.device_count == Found(8)
    assert host.ran[0][-1] == "--manifest" and host.ran[1][-1] == "--unchanged-since=MANIFEST"
    assert second.from_cache and not second.cuda_available
    assert second.unavailable_reason == "cuInit failed: CUDA_ERROR_NO_DEVICE"
    assert second.loaded_libraries == (("libcudnn", "/venv/cudnn.so.9"), ("libcuda", "/l"))


@pytest.mark.parametrize("count", [float("inf"), "\u00b2", -1, 1 << 20, None])
def test_the_driver_api_s_odd_gpu_count_fails_the_probe(tmp_path: Path, count: object) -> None:
    """The driver-API child runs in the target interpreter: a count that is no count of GPUs
    (int() raised OverflowError on Infinity, escaping as "internal error") is a probe failure."""
    cache = CacheDir(str(tmp_path))
    now = {"available": True, "device_count": count}
    host = ScriptedHost([FULL, {"installed": True, "unchanged": True, "cuda_now": now}])
    _probe(host, cache)
    args = ["-c", child_source()]
    again, _ = probe_cached(host, cache, args, python="/venv/bin/python", deadline=Deadline(5))
    assert isinstance(again, ProbeFailed)
    assert "device_count is not a count of GPUs" in again.error


def test_a_stale_libcuda_imports_in_a_fresh_process(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path))
    host = ScriptedHost([FULL, {"installed": True, "stale": "libcuda"}, FULL])
    _probe(host, cache)
    again = _probe(host, cache)
    assert again.from_cache == "" and len(host.ran) == 3
    assert host.ran[2][-1] == "--manifest"  # no second --unchanged-since


def test_the_cached_answer_shows_in_the_report(tmp_path: Path) -> None:
    from dataclasses import replace

    from envdoctor.fleet.diff import diff_facts
    from envdoctor.render.summary import machine_lines
    from tests.conftest import report_of, scenario_facts

    facts = scenario_facts("healthy_h100")
    assert isinstance(facts.torch.torch, Found) and isinstance(facts.torch.torch.value, TorchBuild)
    build = replace(facts.torch.torch.value, from_cache="2026-11-21T16:24:08+00:00")
    cached = replace(facts, torch=TorchFacts(python=facts.torch.python, torch=Found(build)))
    report = report_of(cached)
    passed = {check.rule.name: check.reason for check in report.checks}
    assert "at 2026-11-21T16:24:08+00:00 (envdoctor's cache" in passed["torch.importable"]
    assert "the CUDA driver API" in passed["torch.cuda-available"]
    lines = dict(machine_lines(cached))
    assert lines["torch"].endswith("; imported at 2026-11-21T16:24:08+00:00 (cached)")
    # Whether this run reused the cache changes from run to run: diff hides it by default.
    (difference,) = diff_facts(facts, cached)
    assert difference.path == "torch.torch.from_cache" and difference.volatile


# --- the driver API, with a fake libcuda --------------------------------------------------------


class FakeLibcuda:
    """libcuda's five entry points, writing through ctypes.byref as the real ones do."""

    def __init__(self, version: int = 13000, init: int = 0, count: int = 2) -> None:
        self.version, self.init, self.count = version, init, count

    def cuDriverGetVersion(self, out: Any) -> int:  # noqa: N802 (libcuda's names)
        out._obj.value = self.version
        return 0

    def cuInit(self, flags: int) -> int:  # noqa: N802
        return self.init

    def cuDeviceGetCount(self, out: Any) -> int:  # noqa: N802
        out._obj.value = self.count
        return 0

    def cuGetErrorName(self, code: int, out: Any) -> int:  # noqa: N802
        out._obj.value = {100: b"CUDA_ERROR_NO_DEVICE", 999: b"CUDA_ERROR_UNKNOWN"}[code]
        return 0

    def cuGetErrorString(self, code: int, out: Any) -> int:  # noqa: N802
        out._obj.value = {100: b"no CUDA-capable device is detected", 999: b"unknown error"}[code]
        return 0


def test_driver_api_answers_as_the_cuda_runtime_decides() -> None:
    assert torch_child.driver_api(FakeLibcuda(), "13.0") == {
        "available": True,
        "reason": "",
        "device_count": 2,
    }
    old = torch_child.driver_api(FakeLibcuda(version=12080), "13.0")
    assert (
        not old["available"]
        and "too old for torch's CUDA 13.0: it supports CUDA 12.8" in (old["reason"])
    )
    assert torch_child.driver_api(FakeLibcuda(version=12080), "12.1")["available"]
    none = torch_child.driver_api(FakeLibcuda(init=100), "13.0")
    assert none["reason"] == (
        "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"
    )
    hidden = torch_child.driver_api(FakeLibcuda(count=0), "13.0")
    assert not hidden["available"] and "no CUDA device is visible" in hidden["reason"]


def test_check_uses_the_users_cache_unless_no_cache(fake: Fake) -> None:
    from envdoctor.cli.common import AppContext
    from tests.runner import invoke

    xdg = str(Path(fake.cache.path).parent)

    def check(*args: str) -> dict[str, Any]:
        host = SystemHost(environ={**fake.env, "XDG_CACHE_HOME": xdg})
        obj = AppContext(host=host, python=sys.executable)
        result = invoke(["check", "--json", *args], obj=obj)
        torch: dict[str, Any] = json.loads(result.stdout)["facts"]["torch"]["torch"]["found"]
        return torch

    assert check()["from_cache"] == "" and fake.imports == 1
    assert check()["from_cache"] != "" and fake.imports == 1
    assert check("--no-cache")["from_cache"] == "" and fake.imports == 2
