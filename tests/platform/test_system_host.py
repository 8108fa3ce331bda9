"""The real seam: bounded subprocesses, file reads under a root, and NVML error translation."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.model.probed import Absent, Found
from envdoctor.platform import nvml as nvml_mod
from envdoctor.platform.nvml import NvmlError, PynvmlSession, _Worker
from envdoctor.platform.system import SystemHost


def test_run_kills_the_whole_process_group_at_the_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild-survived"
    child = f"import time; time.sleep(1.5); open({str(marker)!r}, 'w')"
    script = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)\n"
    start = time.monotonic()
    result = SystemHost().run([sys.executable, "-c", script], timeout=0.5)
    assert result.status == "timeout"
    assert time.monotonic() - start < 5
    time.sleep(2.0)
    assert not marker.exists(), "the grandchild outlived the timeout"


def test_run_reports_missing_programs_and_exit_codes() -> None:
    host = SystemHost()
    assert host.run(["/nonexistent/prog"], timeout=1).status == "not-found"
    result = host.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=10)
    assert (result.status, result.returncode, result.stdout) == ("ok", 3, "out\n")


def test_files_are_read_under_a_root(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").write_text("nvidia 1 0 - Live 0x0\n")
    host = SystemHost(root=str(tmp_path))
    assert host.read_text("/proc/modules") == Found("nvidia 1 0 - Live 0x0\n")
    assert isinstance(host.read_text("/proc/driver/nvidia/version"), Absent)
    assert host.list_dir("/proc") == Found(("modules",))


class _NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _fake_pynvml(**functions: Any) -> SimpleNamespace:
    return SimpleNamespace(NVMLError=_NVMLError, **functions)


def _raise(code: int) -> Any:
    def fn(*_: object) -> object:
        raise _NVMLError(code)

    return fn


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (12, NvmlErrorKind.LIBRARY_NOT_FOUND),
        (9, NvmlErrorKind.DRIVER_NOT_LOADED),
        (18, NvmlErrorKind.LIB_RM_VERSION_MISMATCH),
        (4, NvmlErrorKind.NO_PERMISSION),
        (15, NvmlErrorKind.GPU_IS_LOST),
        (999, NvmlErrorKind.UNKNOWN),
        (3, NvmlErrorKind.NOT_SUPPORTED),
        (10, NvmlErrorKind.TIMEOUT),
        (42, NvmlErrorKind.OTHER),
    ],
)
def test_nvml_errors_translate_to_kinds(code: int, kind: str) -> None:
    session = PynvmlSession(_fake_pynvml(nvmlSystemGetDriverVersion=_raise(code)), _Worker(), 1.0)
    with pytest.raises(NvmlError) as info:
        session.driver_version()
    assert info.value.kind == kind


def test_a_hung_nvml_call_times_out_and_later_calls_fail_fast() -> None:
    session = PynvmlSession(
        _fake_pynvml(
            nvmlSystemGetDriverVersion=lambda: time.sleep(30), nvmlDeviceGetCount=lambda: 1
        ),
        _Worker(),
        0.2,
    )
    start = time.monotonic()
    with pytest.raises(NvmlError) as first:
        session.driver_version()
    with pytest.raises(NvmlError) as second:
        session.device_count()
    assert time.monotonic() - start < 2
    assert first.value.kind == second.value.kind == NvmlErrorKind.TIMEOUT


def test_shadowed_pynvml_is_reported_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_mod, "_load_native_library", lambda: None)  # a driver is installed
    monkeypatch.setitem(sys.modules, "pynvml", SimpleNamespace(__file__="/x/pynvml.py"))
    with pytest.raises(NvmlError) as info:
        nvml_mod.open_pynvml(1.0)
    assert "nvidia-ml-py" in info.value.message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the soname check is Linux's")
def test_the_isolated_session_starts_no_child_where_the_driver_library_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A machine without the driver is common: SystemHost.open_nvml answers from the loader's
    reason, before nvml_isolated (its child, json and subprocess) is imported."""
    monkeypatch.setattr(nvml_mod, "NATIVE_LIBRARY", "libenvdoctor-absent.so.1")
    monkeypatch.delitem(sys.modules, "envdoctor.platform.nvml_isolated", raising=False)
    with pytest.raises(NvmlError) as info:
        SystemHost().open_nvml(timeout=1.0)
    assert info.value.kind == NvmlErrorKind.LIBRARY_NOT_FOUND
    assert "envdoctor.platform.nvml_isolated" not in sys.modules


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the soname check is Linux's")
def test_missing_native_library_names_the_loaders_reason_without_importing_pynvml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nvml_mod, "NATIVE_LIBRARY", "libenvdoctor-absent.so.1")
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    with pytest.raises(NvmlError) as info:
        nvml_mod.open_pynvml(1.0)
    assert info.value.kind == NvmlErrorKind.LIBRARY_NOT_FOUND
    assert "No such file or directory" in info.value.message  # the dynamic loader's reason
    assert "pynvml" not in sys.modules


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the soname check is Linux's")
def test_a_hung_library_load_times_out_like_any_nvml_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """dlopen from a hung network mount: NVML's timeout, not a hang of `envdoctor check`."""
    monkeypatch.setattr(nvml_mod, "_load_native_library", lambda: time.sleep(30))
    start = time.monotonic()
    with pytest.raises(NvmlError) as info:
        nvml_mod.open_pynvml(0.2)
    assert info.value.kind == NvmlErrorKind.TIMEOUT
    assert time.monotonic() - start < 2


def test_real_nvml_without_a_driver_is_library_not_found() -> None:
    try:
        nvml_mod.open_pynvml(2.0).close()
    except NvmlError as exc:
        assert exc.kind in {NvmlErrorKind.LIBRARY_NOT_FOUND, NvmlErrorKind.DRIVER_NOT_LOADED}
    else:
        pytest.skip("NVML works on this machine")


def test_the_user_is_looked_up_once_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host, kernel and library probes all ask; NSS (LDAP, sssd) may be slow to answer."""
    import pwd

    calls: list[int] = []
    real = pwd.getpwuid

    def counting(uid: int) -> Any:
        calls.append(uid)
        return real(uid)

    monkeypatch.setattr(pwd, "getpwuid", counting)
    host = SystemHost()
    assert host.identity() is host.identity()
    assert len(calls) == 1


def test_which_finds_executables_on_absolute_path_entries_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for directory in (first, second):
        directory.mkdir()
    (first / "nvcc").mkdir()  # a directory of that name is not the program
    (first / "ldconfig").write_text("#!/bin/sh\n")  # not executable
    for tool in ("nvcc", "ldconfig"):
        (second / tool).write_text("#!/bin/sh\n")
        (second / tool).chmod(0o755)
    monkeypatch.chdir(first)
    (first / "lsof").write_text("#!/bin/sh\n")
    (first / "lsof").chmod(0o755)
    host = SystemHost(environ={"PATH": f".::bin:{first}:{second}"})
    assert host.which("nvcc") == str(second / "nvcc")
    assert host.which("ldconfig") == str(second / "ldconfig")
    assert host.which("lsof") == str(first / "lsof")  # through the absolute entry, not "."
    assert SystemHost(environ={"PATH": ".:"}).which("lsof") is None  # the current directory: never
    assert host.which(str(second / "nvcc")) == str(second / "nvcc")
    assert host.which("no-such-tool") is None


def test_a_child_that_closes_its_output_and_runs_on_is_a_timeout() -> None:
    result = SystemHost().run(["sh", "-c", "exec >&- 2>&-; sleep 5"], timeout=0.5)
    assert (result.status, result.returncode) == ("timeout", -9)


def test_run_finds_programs_as_which_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative PATH entry is searched by neither: Popen's own search would have taken it
    from the child's directory ("/"), running a program that ``which`` says is not there. A
    relative path is not run at all: it names a program in the current directory."""
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho ran\n")
    tool.chmod(0o755)
    relative = os.path.relpath(tool.parent, "/")  # "tmp/…/bin": from "/", an existing directory
    host = SystemHost(environ={"PATH": f"{relative}:{tmp_path / 'empty'}"})
    assert host.which("tool") is None
    assert host.run(["tool"], timeout=10).status == "not-found"
    assert host.run(["tool"], timeout=10, env={"PATH": str(tool.parent)}).stdout == "ran\n"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tool").symlink_to(tool)
    for relative_path in ("bin/tool", "./tool"):
        result = host.run([relative_path], timeout=10)
        assert (result.status, result.stdout) == ("error", "")
        assert "a relative path" in result.error
