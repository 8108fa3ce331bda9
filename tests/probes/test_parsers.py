"""Parsers and probes: what envdoctor reads from /proc, ldconfig and the torch child."""

from __future__ import annotations

import json
from typing import Any

import pytest

from envdoctor.model.facts import TorchBroken, TorchBuild
from envdoctor.model.probed import Absent, Found, ProbeFailed
from envdoctor.platform.host import CommandResult, Deadline
from envdoctor.probes.kernel import parse_driver_version, parse_modules
from envdoctor.probes.libraries import probe_libraries
from envdoctor.probes.nvml import cuda_version_string, probe_nvml
from envdoctor.probes.torch_build import MARK, parse_child
from tests.conftest import scenario_facts
from tests.fakes.host import FakeHost


def test_modules_keep_refcount_and_users() -> None:
    text = "nvidia 104071168 14 nvidia_uvm,nvidia_modeset, Live 0x0 (OE)\nnvidia_drm 135168 0 - Live 0x0 (OE)\n"
    mods = parse_modules(Found(text))
    assert isinstance(mods, Found)
    nvidia, drm = mods.value
    assert (nvidia.name, nvidia.refcount, nvidia.used_by) == (
        "nvidia",
        14,
        ("nvidia_uvm", "nvidia_modeset"),
    )
    assert drm.used_by == ()


def test_open_and_proprietary_kernel_modules_are_told_apart() -> None:
    open_line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22)  Tue Sep 23 2025"
    prop_line = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023"
    )
    opened, proprietary = (
        parse_driver_version(Found(open_line)),
        parse_driver_version(Found(prop_line)),
    )
    assert isinstance(opened, Found) and isinstance(proprietary, Found)
    assert (opened.value.version, opened.value.flavor) == ("580.95.05", "open")
    assert (proprietary.value.version, proprietary.value.flavor) == ("535.129.03", "proprietary")


def test_missing_proc_entry_says_the_module_is_not_loaded() -> None:
    result = parse_driver_version(Absent("/proc/driver/nvidia/version does not exist"))
    assert isinstance(result, Absent) and "not loaded" in result.reason


def test_unrecognised_proc_entry_is_a_probe_failure_with_the_line() -> None:
    result = parse_driver_version(Found("garbage\n"))
    assert isinstance(result, ProbeFailed) and result.detail == "garbage"


def test_cuda_version_encoding() -> None:
    assert [cuda_version_string(v) for v in (13000, 12080, 11040)] == ["13.0", "12.8", "11.4"]


def test_nvml_field_not_supported_keeps_the_reason() -> None:
    facts = scenario_facts("healthy_h100")
    assert isinstance(facts.nvml, Found)
    pending = facts.nvml.value.gpus[0].retired_pages_pending
    assert isinstance(pending, Absent) and "NotSupported" in pending.reason


def test_nvml_session_is_closed() -> None:
    host = FakeHost.scenario("healthy_h100")
    sessions: list[object] = []
    original = host.open_nvml

    def spy(**kwargs: Any) -> object:
        session = original(**kwargs)
        sessions.append(session)
        return session

    host.open_nvml = spy  # type: ignore[method-assign,assignment]  # spying on the fake
    probe_nvml(host, deadline=Deadline(5))
    assert [getattr(s, "closed", None) for s in sessions] == [True]


def test_process_in_another_pid_namespace_keeps_why_its_name_is_unknown() -> None:
    facts = scenario_facts("memory_held", nvml={"gpus": [{"processes": [[99999, 1024]]}]})
    assert isinstance(facts.nvml, Found)
    procs = facts.nvml.value.gpus[0].processes
    assert isinstance(procs, Found)
    name = procs.value[0].name
    assert isinstance(name, Absent) and "PID namespace" in name.reason


def test_stub_libcuda_on_ld_library_path_comes_first() -> None:
    host = FakeHost.scenario(
        "healthy_h100",
        env={"LD_LIBRARY_PATH": "/usr/local/cuda/lib64/stubs"},
        files={"/usr/local/cuda/lib64/stubs/libcuda.so": "stub"},
    )
    libs = probe_libraries(host, deadline=Deadline(5))
    assert isinstance(libs, Found)
    cuda = next(f for f in libs.value if f.name == "libcuda")
    assert cuda.copies[0].origin == "LD_LIBRARY_PATH"
    assert cuda.copies[0].path == "/usr/local/cuda/lib64/stubs/libcuda.so"
    assert cuda.copies[1].version == "580.159.04"


@pytest.mark.parametrize("unreadable", [[], ["/etc/ld.so.cache"]], ids=["cache", "ldconfig-p"])
def test_the_loader_cache_skips_32_bit_copies(unreadable: list[str]) -> None:
    """Read from the file, or from ``ldconfig -p`` when the file cannot be read."""
    host = FakeHost.scenario("healthy_h100", unreadable=unreadable)
    libs = probe_libraries(host, deadline=Deadline(5))
    assert isinstance(libs, Found)
    assert [a[1:] for a in host.ran] == ([("-p",)] if unreadable else [])
    paths = {f.name: [c.path for c in f.copies] for f in libs.value}
    assert paths["libcuda"] == [
        "/lib/x86_64-linux-gnu/libcuda.so.1",
        "/lib/x86_64-linux-gnu/libcuda.so",
    ]
    assert paths["libnvidia-ml"] == ["/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]


def test_a_cache_in_an_unknown_format_falls_back_to_ldconfig() -> None:
    host = FakeHost.scenario("healthy_h100")
    host.binary["/etc/ld.so.cache"] = b"glibc-ld.so.cache1.2 from a future glibc"
    libs = probe_libraries(host, deadline=Deadline(5))
    assert isinstance(libs, Found) and [a[1:] for a in host.ran] == [("-p",)]


def test_no_cache_and_a_hung_ldconfig_is_a_probe_failure_with_both_reasons() -> None:
    host = FakeHost.scenario(
        "healthy_h100",
        ld_cache=None,
        commands=[{"argv": ["ldconfig", "-p"], "status": "timeout"}],
    )
    libs = probe_libraries(host, deadline=Deadline(5))
    assert isinstance(libs, ProbeFailed) and libs.error == "cannot read the loader cache"
    assert libs.detail.startswith("/etc/ld.so.cache does not exist; ")
    assert "did not finish" in libs.detail


def _child(data: dict[str, object], returncode: int = 0, stdout_prefix: str = "") -> CommandResult:
    return CommandResult(
        ("py", "-c", "…"), "ok", returncode, stdout_prefix + MARK + json.dumps(data) + "\n"
    )


def test_child_not_installed_is_absent_with_the_interpreter() -> None:
    result = parse_child(
        _child({"installed": False, "error": "No module named 'torch'"}), "/usr/bin/python3"
    )
    assert isinstance(result, Absent) and "/usr/bin/python3" in result.reason


def test_child_import_error_is_found_broken() -> None:
    data = {
        "installed": True,
        "import_error": "ImportError: x",
        "traceback": "tb",
        "version": "2.11.0",
    }
    result = parse_child(_child(data), "py")
    assert isinstance(result, Found) and isinstance(result.value, TorchBroken)
    assert result.value.version == Found("2.11.0")


def test_child_noise_before_the_result_line_is_ignored() -> None:
    facts = scenario_facts("healthy_h100")
    assert isinstance(facts.torch.torch, Found) and isinstance(facts.torch.torch.value, TorchBuild)


def test_child_killed_by_signal_names_the_signal() -> None:
    result = parse_child(CommandResult(("py",), "ok", -11, "", "Segmentation fault"), "py")
    assert (
        isinstance(result, ProbeFailed)
        and "SIGSEGV" in result.error
        and result.detail == "Segmentation fault"
    )


def test_child_timeout_and_missing_interpreter() -> None:
    timeout = parse_child(CommandResult(("py",), "timeout", -9, seconds=20.0), "py")
    missing = parse_child(CommandResult(("py",), "not-found"), "/nope/python")
    assert isinstance(timeout, ProbeFailed) and "within 20 s" in timeout.error
    assert isinstance(missing, ProbeFailed) and "/nope/python does not exist" in missing.error


def test_child_malformed_result_is_a_probe_failure() -> None:
    result = parse_child(_child({"installed": True, "version": "x"}), "py")
    assert isinstance(result, ProbeFailed) and "malformed" in result.error


def test_container_detection() -> None:
    facts = scenario_facts(
        "healthy_h100",
        files={"/.dockerenv": "", "/proc/1/cgroup": "0::/kubepods/besteffort/pod1/abc\n"},
        env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
    )
    assert facts.host.containers == ("docker", "kubernetes")
    assert scenario_facts("healthy_h100").host.containers == ()


def test_wsl_detection() -> None:
    facts = scenario_facts(
        "healthy_h100", files={"/proc/sys/kernel/osrelease": "5.15.167.4-microsoft-standard-WSL2\n"}
    )
    assert facts.host.wsl
