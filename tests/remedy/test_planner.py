"""Planning without bash: module order, reboot verdicts, containers, holders, wheels, distros."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TypeVar

import pytest

from envdoctor.compat.loader import load_tables
from envdoctor.model.facts import DeviceNode, GpuProcess, KernelModule, MemoryInfo
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Absent, Found
from envdoctor.probes.holders import Container, GpuHolder, absent_fix_facts
from envdoctor.remedy import build_plan, plan_to_json, quoting, render_steps
from envdoctor.remedy.distro import driver_install_commands, family, initramfs_command
from envdoctor.remedy.model import (
    CreateNodes,
    HolderRef,
    Note,
    Plan,
    RebootRequired,
    ReinstallTorch,
    RequireNoHolders,
    RunCommand,
    SetMode,
    StopContainer,
    StopService,
    Terminate,
    UnloadModule,
    Verify,
)
from envdoctor.remedy.modules import unload_order
from envdoctor.remedy.quoting import display, sh_quote
from envdoctor.remedy.wheel import newest_variant_for
from tests import factories as f
from tests.remedy import cases
from tests.remedy.sandbox import START_TIME, Sandbox
from tests.shellcheck import BASH_STRICT, shellcheck

T = TypeVar("T")


def kinds(plan: Plan) -> list[str]:
    return [step.action.kind for step in plan.steps]


def actions(plan: Plan, kind: type[T]) -> list[T]:
    return [s.action for s in plan.steps if isinstance(s.action, kind)]


# --- the unload order ------------------------------------------------------------------------


def test_unload_order_follows_used_by() -> None:
    assert unload_order(cases.LOADED) == ("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia")


def test_unload_order_includes_users_from_outside_the_driver() -> None:
    modules = (
        KernelModule("nvidia", 20, ("nvidia_uvm", "nvidia_peermem", "gdrdrv", "nvidia_modeset")),
        KernelModule("nvidia_uvm", 2, ()),
        KernelModule("nvidia_peermem", 0, ()),
        KernelModule("ib_core", 3, ("nvidia_peermem", "mlx5_ib")),
        KernelModule("gdrdrv", 0, ()),
        KernelModule("nvidia_modeset", 1, ("nvidia_drm",)),
        KernelModule("nvidia_drm", 2, ()),
    )
    order = unload_order(modules)
    assert order == (
        "gdrdrv",
        "nvidia_peermem",
        "nvidia_drm",
        "nvidia_modeset",
        "nvidia_uvm",
        "nvidia",
    )
    assert "ib_core" not in order  # a dependency of nvidia_peermem, not a user


def test_unload_order_of_nothing_loaded() -> None:
    assert unload_order((KernelModule("nouveau", 1, ()),)) == ()


def test_unload_order_survives_a_cycle_in_bad_data() -> None:
    modules = (KernelModule("nvidia", 1, ("nvidia_x",)), KernelModule("nvidia_x", 1, ("nvidia",)))
    assert sorted(unload_order(modules)) == ["nvidia", "nvidia_x"]


# --- reload planning ----------------------------------------------------------------------------


def test_mismatch_plan_order(box: Sandbox) -> None:
    plan = cases.mismatch_plan(box)
    assert kinds(plan) == [
        "stop-service",
        "stop-container",
        "terminate",
        "terminate",
        "require-no-holders",
        *["unload-module"] * 4,
        *["load-module"] * 3,
        "create-nodes",
        "run",
        "start-service",
        "verify",
    ]
    assert all(s.section == "reload" for s in plan.steps[:-1])
    assert plan.addressed == ("driver.version-mismatch",)
    assert not plan.reboot_required and plan.needs_root
    terminated = [a.pid for a in actions(plan, Terminate)]
    assert terminated == [cases.PYTHON_PID, cases.DOCKER_PID]  # persistenced: its unit stops it


def test_a_display_server_on_the_gpu_means_reboot(box: Sandbox) -> None:
    xorg = GpuHolder(2000, "Xorg", ("/usr/lib/xorg/Xorg", ":0"), 0, "root", ("/dev/nvidia0",))
    plan = build_plan(cases.mismatch_report(), cases.fix_facts([xorg]), cases.options(box))
    assert kinds(plan) == ["reboot-required", "note"]
    assert (
        "display server" in plan.reboot_reasons[0] and "Xorg (PID 2000)" in plan.reboot_reasons[0]
    )
    assert "driver.version-mismatch" in plan.addressed


def test_pid_1_holding_the_gpu_means_reboot(box: Sandbox) -> None:
    init = GpuHolder(1, "systemd", ("/sbin/init",), 0, "root", ("/dev/nvidiactl",))
    plan = build_plan(cases.mismatch_report(), cases.fix_facts([init]), cases.options(box))
    assert plan.reboot_required and not actions(plan, Terminate)


def test_kubernetes_holders_are_drained_not_killed(box: Sandbox) -> None:
    pod = GpuHolder(
        7000,
        "python",
        ("python", "serve.py"),
        0,
        "root",
        ("/dev/nvidia0",),
        container=Container("kubernetes", "a" * 64),
    )
    plan = build_plan(cases.mismatch_report(), cases.fix_facts([pod]), cases.options(box))
    assert not actions(plan, Terminate) and not actions(plan, StopContainer)
    notes = [a.text for a in actions(plan, Note)]
    assert any("kubectl drain" in n for n in notes)
    assert actions(plan, RequireNoHolders)


def test_a_plain_containerd_holder_is_terminated(box: Sandbox) -> None:
    job = GpuHolder(
        7100,
        "python",
        ("python", "job.py"),
        0,
        "root",
        ("/dev/nvidia0",),
        container=Container("containerd", "b" * 64),
        start_time=START_TIME,
    )
    plan = build_plan(cases.mismatch_report(), cases.fix_facts([job]), cases.options(box))
    assert [a.pid for a in actions(plan, Terminate)] == [7100]
    assert [a.container for a in actions(plan, Terminate)] == ["b" * 12]
    assert not actions(plan, StopContainer)


def ollama(start_time: int = START_TIME) -> GpuHolder:
    """ollama serve, as its own user, in its confirmed system unit."""
    return GpuHolder(
        8000,
        "ollama",
        ("/usr/bin/ollama", "serve"),
        998,
        "ollama",
        ("/dev/nvidia0",),
        unit="ollama.service",
        start_time=start_time,
        cgroup="/system.slice/ollama.service",
    )


def test_a_holders_systemd_unit_is_stopped_and_started_again(box: Sandbox) -> None:
    plan = build_plan(cases.mismatch_report(), cases.fix_facts([ollama()]), cases.options(box))
    (stop,) = actions(plan, StopService)
    assert stop.unit == "ollama.service"
    assert stop.holders == (HolderRef(8000, 998, START_TIME),)  # what the script re-checks
    assert "start-service" in kinds(plan) and not actions(plan, Terminate)


def test_a_holder_that_cannot_be_re_identified_is_left_to_a_person(box: Sandbox) -> None:
    """Without its start time the script could not tell the process from a reused PID: no
    signal and no unit stop is planned for it, a note asks a person to stop it."""
    box_holder = GpuHolder(
        8001,
        "python",
        ("python", "serve.py"),
        0,
        "root",
        ("/dev/nvidia0",),
        container=Container("docker", "d" * 64, "", "/system.slice/docker-" + "d" * 64 + ".scope"),
    )
    plan = build_plan(
        cases.mismatch_report(), cases.fix_facts([ollama(-1), box_holder]), cases.options(box)
    )
    assert not actions(plan, StopService) and not actions(plan, StopContainer)
    assert not actions(plan, Terminate)
    notes = [a.text for a in actions(plan, Note)]
    assert any("stop PID 8000" in n for n in notes) and any("stop PID 8001" in n for n in notes)
    assert actions(plan, RequireNoHolders)  # and the script stops while they hold the GPU


def test_a_snapshot_plan_checks_holders_at_run_time(box: Sandbox) -> None:
    plan = build_plan(cases.mismatch_report(), absent_fix_facts("snapshot"), cases.options(box))
    assert actions(plan, RequireNoHolders) and not actions(plan, Terminate)
    assert any("not scanned" in n for n in plan.notes)


def test_unknown_modules_fall_back_to_the_canonical_order(box: Sandbox) -> None:
    rep = cases.mismatch_report()
    facts = f.facts(kernel=f.kernel(modules=Absent("/proc/modules does not exist")))
    plan = build_plan(cases.report(facts, *rep.findings), cases.fix_facts(), cases.options(box))
    unloaded = [a.name for a in actions(plan, UnloadModule)]
    assert unloaded == [
        "nvidia_peermem",
        "nvidia_drm",
        "nvidia_modeset",
        "nvidia_uvm",
        "nvidia_vgpu_vfio",
        "nvidia",
    ]


def test_kernel_fixes_are_not_planned_inside_a_container(box: Sandbox) -> None:
    rep = cases.mismatch_report()
    facts = f.facts(host=f.host(containers=("docker",)), kernel=rep.facts.kernel)
    plan = build_plan(cases.report(facts, *rep.findings), cases.fix_facts(), cases.options(box))
    assert kinds(plan) == ["note", "verify"]
    assert plan.unaddressed == ("driver.version-mismatch",)


# --- other findings ------------------------------------------------------------------------------


def test_nouveau_and_no_driver_install_the_driver_then_reboot(box: Sandbox) -> None:
    rep = cases.nouveau_plan(box)
    assert kinds(rep)[-2:] == ["reboot-required", "note"]
    facts = f.facts(kernel=f.kernel(modules=f.modules("nouveau")), nvml=Absent("no NVML"))
    both = cases.report(
        facts,
        cases.finding("driver.nouveau-loaded"),
        cases.finding("driver.not-installed", steps=("sudo apt install nvidia-driver-580-open",)),
    )
    plan = build_plan(both, cases.fix_facts(), cases.options(box))
    runs = [a.argv for a in actions(plan, RunCommand)]
    assert runs == [
        ("update-initramfs", "-u"),
        ("apt-get", "update"),
        ("apt-get", "install", "-y", "nvidia-driver-580-open"),
    ]
    assert len(plan.reboot_reasons) == 2


def test_no_driver_install_without_an_nvidia_gpu(box: Sandbox) -> None:
    facts = f.cpu_machine()
    plan = build_plan(
        cases.report(facts, cases.finding("driver.not-installed")),
        cases.fix_facts(),
        cases.options(box),
    )
    assert kinds(plan) == ["verify"]
    assert plan.unaddressed == ("driver.not-installed",)


def test_pre_turing_gpus_get_the_proprietary_modules(box: Sandbox) -> None:
    facts = f.facts(nvml=f.nvml(gpus=(f.gpu(0, compute_capability=Found("6.1")),)))
    rep = cases.report(facts, cases.finding("driver.gpu-unsupported", ("needs", "driver ≥ 535")))
    plan = build_plan(rep, cases.fix_facts(os_ids=Found(("rocky", "rhel"))), cases.options(box))
    runs = [a.argv for a in actions(plan, RunCommand)]
    assert runs == [
        ("dnf", "module", "enable", "-y", "nvidia-driver:535-dkms"),
        ("dnf", "install", "-y", "cuda-drivers"),
    ]


@pytest.mark.parametrize("capability", ["\u00b2.0", "9" * 5000 + ".0", "nine"])
def test_a_capability_that_is_no_number_is_not_pre_turing(box: Sandbox, capability: str) -> None:
    """A snapshot's compute capability is any text: "²" passed isdigit() and int() raised."""
    facts = f.facts(nvml=f.nvml(gpus=(f.gpu(0, compute_capability=Found(capability)),)))
    rep = cases.report(facts, cases.finding("driver.gpu-unsupported", ("needs", "driver ≥ 535")))
    plan = build_plan(rep, cases.fix_facts(os_ids=Found(("rocky", "rhel"))), cases.options(box))
    runs = [a.argv for a in actions(plan, RunCommand)]
    assert ("dnf", "install", "-y", "nvidia-open") in runs  # read as a new GPU: open modules
    assert "a pre-Turing GPU needs the proprietary kernel modules" not in " ".join(plan.notes)


def test_missing_per_gpu_nodes(box: Sandbox) -> None:
    nodes = Found((DeviceNode("/dev/nvidia-uvm", True, "0666", True, True),))
    facts = f.facts(kernel=f.kernel(device_nodes=nodes))
    rep = cases.report(facts, cases.finding("device.node-missing"))
    plan = build_plan(rep, cases.fix_facts(), cases.options(box))
    argvs = [a.argv for a in actions(plan, CreateNodes)]
    assert argvs == [
        ("nvidia-modprobe", "-u", "-c", "0"),
        ("nvidia-modprobe", "-c", "255"),
        ("nvidia-modprobe", "-c", "0"),
    ]


def test_permission_denied_restores_the_driver_default_mode(box: Sandbox) -> None:
    nodes = Found(
        (
            DeviceNode("/dev/nvidia0", True, "0600", False, False),
            DeviceNode("/dev/nvidiactl", True, "0666", True, True),
        )
    )
    facts = f.facts(kernel=f.kernel(device_nodes=nodes))
    rep = cases.report(facts, cases.finding("device.permission-denied"))
    plan = build_plan(rep, cases.fix_facts(), cases.options(box))
    modes = actions(plan, SetMode)
    assert [(m.path, m.mode) for m in modes] == [("/dev/nvidia0", "0666")]
    assert any("NVreg_DeviceFileMode" in a.text for a in actions(plan, Note))


def test_memory_held_stops_only_the_holders_named(box: Sandbox) -> None:
    procs = (
        GpuProcess(4242, Found("python"), Found(70 << 30)),
        GpuProcess(9999, Found("other-ns"), Found(5 << 30)),
    )
    gpu0 = f.gpu(0, memory=Found(MemoryInfo(80 << 30, 79 << 30, 1 << 30)), processes=Found(procs))
    facts = f.facts(nvml=f.nvml(gpus=(gpu0,)))
    finding = Finding("gpu.memory-held", Severity.ERROR, "held", subject="0")
    holders = [
        GpuHolder(
            4242, "python", ("python", "train.py"), 1000, "alice", ("/dev/nvidia0",), start_time=1
        ),
        GpuHolder(
            5555, "python", ("python", "mine.py"), 1000, "bob", ("/dev/nvidia0",), start_time=2
        ),
    ]
    plan = build_plan(cases.report(facts, finding), cases.fix_facts(holders), cases.options(box))
    assert [a.pid for a in actions(plan, Terminate)] == [4242]
    assert any("9999" in a.text for a in actions(plan, Note))
    assert "unload-module" not in kinds(plan)


# --- torch wheels ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "variant"),
    [
        ("13.0", "cu130"),
        ("12.9", "cu129"),
        ("12.2", "cu121"),
        ("12.0", "cu118"),
        ("11.4", None),
        ("x", None),
        ("9" * 5000 + ".0", None),  # a snapshot's driver CUDA version: int() of it raised
        ("\u00b9\u00b3.0", None),  # superscript 13: no number
    ],
)
def test_newest_variant_for_the_driver(cuda: str, variant: str | None) -> None:
    assert newest_variant_for(cuda) == variant


def test_wheel_advice_from_a_finding_wins_over_the_fallback(box: Sandbox) -> None:
    rep = cases.report(
        cases.too_old_facts(box),
        cases.finding(
            "torch.driver-too-old",
            steps=("pip install torch==2.7.1 --index-url https://download.pytorch.org/whl/cu118",),
        ),
    )
    plan = build_plan(rep, cases.fix_facts(), cases.options(box))
    (action,) = actions(plan, ReinstallTorch)
    assert (action.requirement, action.variant) == ("torch==2.7.1", "cu118")


def test_wheel_from_the_compatibility_tables(box: Sandbox) -> None:
    tables = load_tables(None, {})
    rep = cases.report(cases.too_old_facts(box), cases.finding("torch.driver-too-old"))
    plan = build_plan(rep, cases.fix_facts(), cases.options(box, tables=tables))
    (action,) = actions(plan, ReinstallTorch)
    assert action.requirement.startswith("torch==2.")
    assert action.variant.startswith("cu12")  # the driver runs CUDA 12.2
    assert action.index_url == f"https://download.pytorch.org/whl/{action.variant}"


def test_no_wheel_without_the_drivers_cuda(box: Sandbox) -> None:
    facts = f.facts(nvml=Absent("no NVML"), torch=f.torch(Found(f.torch_build(cuda=""))))
    plan = build_plan(
        cases.report(facts, cases.finding("torch.cpu-build")), cases.fix_facts(), cases.options(box)
    )
    assert not actions(plan, ReinstallTorch)
    assert plan.unaddressed == ("torch.cpu-build",)


# --- distributions, quoting, renderings --------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "name", "fam"),
    [
        (("ubuntu", "debian"), "", "ubuntu"),
        (("rocky", "rhel", "centos", "fedora"), "", "rhel"),
        ((), "Debian GNU/Linux 12 (bookworm)", "debian"),
        ((), "openSUSE Leap 15.6", "suse"),
        ((), "Fedora Linux 41", "fedora"),
        ((), "NixOS 24.05", ""),
    ],
)
def test_family(ids: tuple[str, ...], name: str, fam: str) -> None:
    assert family(ids, name) == fam


def test_unknown_distribution_gets_a_note_not_a_guess() -> None:
    assert driver_install_commands("", "580", open_modules=True) == ()
    assert initramfs_command("") is None


@pytest.mark.parametrize(
    "value", ["plain", "with space", "$(reboot)", "it's", "a\nb", "\x1b[0m", "é"]
)
def test_sh_quote_round_trips_through_bash(value: str) -> None:
    out = subprocess.run(
        ["bash", "-c", f"printf '%s' {sh_quote(value)}"], capture_output=True, check=True
    )
    assert out.stdout.decode() == value
    assert sh_quote(value).isprintable()
    assert "\n" not in display(value)


# every 1- and 2-character word over the characters shells and shellcheck treat specially; the
# rest are the words that once made a fix script fail shellcheck
_SPECIAL = "~/$`'\"\\{}[]*?!#&;|<>()=+-.,:@% \tab1é\u2018\u2019\u202e\x1b\n"
HOSTILE_WORDS = sorted(
    set(_SPECIAL)
    | {c + d for c in _SPECIAL for d in _SPECIAL}
    | {"~/", "~/.cache/x y", "~/a,b", "=", "==", "+=", "=x", "a+=", "1=", "then", "$(reboot)"}
    | {"/home/proj,v2/venv/bin/python", "Bob\u2019s", "a,b", "--x=a,b", "x+=y", "11=", "a[1]=x"}
    | {"--output=/etc/cdi/nvidia.yaml", "-1=b", "NAME=VALUE", "a==b", "_=x"}
)


def test_every_hostile_word_is_read_back_exactly_and_passes_shellcheck() -> None:
    """Process argvs and paths of `~/` (SC2088), `=` or `+=` (SC2283-SC2285), `a,b` and `a+=` in
    an array (SC2054, SC2191) and curly quotes (SC1112) made fix scripts fail shellcheck while
    bash read them right: the quoting must satisfy both, wherever the script puts a word (an
    argument, an assignment, an array)."""
    quoted = [sh_quote(word) for word in HOSTILE_WORDS]
    printed = [f"printf '%s\\0' {word}" for word in quoted]
    read = subprocess.run(
        ["bash", "-c", "\n".join(printed)], capture_output=True, check=True, timeout=60
    )
    assert read.stdout.decode().split("\0")[:-1] == HOSTILE_WORDS
    # the fix script's own header: SC2016 and SC1003 are off there, on purpose and explained
    header = Path(quoting.__file__).with_name("script.sh.in").read_text().splitlines()
    assert header[1].startswith("# shellcheck disable=")
    # one script per place (shellcheck's time grows faster than a script's length)
    for place in ("f {}", "V={}", "A=({} {})"):
        script = [header[0], header[1], "f() { :; }", *(place.format(w, w) for w in quoted)]
        script.append('f "$V" "${A[@]}"')
        assert shellcheck("\n".join(script) + "\n", *BASH_STRICT) == "", place


def test_sh_quote_refuses_nul() -> None:
    with pytest.raises(ValueError, match="NUL"):
        sh_quote("a\0b")


def test_steps_and_json_renderings(box: Sandbox) -> None:
    plan = cases.mismatch_plan(box)
    text = render_steps(plan)
    assert text.splitlines()[0] == "envdoctor fix: 16 steps (test machine)"
    assert " 6. Unload the nvidia_drm kernel module [root]" in text
    assert "      $ rmmod nvidia_drm" in text
    data = json.loads(json.dumps(plan_to_json(plan)))
    assert data["schema_version"] == 1
    assert [s["kind"] for s in data["steps"]][:3] == ["stop-service", "stop-container", "terminate"]
    assert data["steps"][5]["commands"] == [["rmmod", "nvidia_drm"]]
    assert data["holders"][1]["container"]["name"] == "vllm"
    assert data["needs_root"] is True and data["reboot_required"] is False


def test_every_plan_ends_with_a_verdict(box: Sandbox) -> None:
    for plan in (cases.mismatch_plan(box), cases.cpu_wheel_plan(box), cases.nouveau_plan(box)):
        assert isinstance(plan.steps[-1].action, Verify | Note)
        if plan.reboot_required:
            assert any(isinstance(s.action, RebootRequired) for s in plan.steps)


@pytest.mark.parametrize("word", ["then", "fi", "do", "{", "[[", "esac"])
def test_reserved_words_are_quoted_and_read_back(word: str) -> None:
    """A process argv of `then` once made the script's kill line a shellcheck error (SC1010)."""
    import subprocess

    from envdoctor.remedy.quoting import sh_quote

    quoted = sh_quote(word)
    assert quoted.startswith("'")
    read = subprocess.run(
        ["bash", "-c", f"printf %s {quoted}"], capture_output=True, text=True, check=True
    )
    assert read.stdout == word
