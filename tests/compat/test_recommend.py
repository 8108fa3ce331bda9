"""``envdoctor recommend``: golden outputs on six machines, pins, JSON, and the CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.compat.loader import load_tables
from envdoctor.compat.recommend import (
    Machine,
    Recommendation,
    machine_from_facts,
    recommend,
)
from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import Facts
from envdoctor.model.probed import Absent, Found
from envdoctor.render.recommend import _python_range, render_markdown, render_text, to_json
from envdoctor.snapshot import dump_snapshot
from tests import factories as f
from tests.compat.machines import MACHINES, machine, named
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke

TABLES = load_tables()
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("ENVDOCTOR_UPDATE_GOLDEN") == "1"


def rec_for(facts: Facts, pin: str | None = None) -> Recommendation:
    return recommend(TABLES, machine_from_facts(facts, TABLES), pin=pin)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path} (run with ENVDOCTOR_UPDATE_GOLDEN=1)"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_golden_text(name: str) -> None:
    check_golden(f"recommend-{name}.txt", render_text(TABLES, rec_for(named(name))))


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_golden_json(name: str) -> None:
    data = to_json(TABLES, rec_for(named(name)))
    data["envdoctor_version"] = "(this envdoctor)"  # pinned: everything a release leaves alone
    check_golden(f"recommend-{name}.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")


EXPECTED = {
    "h100-580": ("2.14.1", "cu130"),
    "a100-535": ("2.14.1", "cu126"),
    "v100-580": ("2.14.1", "cu126"),
    "rtx3090-550": ("2.14.1", "cu126"),
    "rtx5090-570": ("2.11.0", "cu128"),
    "gtx1080-535": ("2.14.1", "cu126"),
}


@pytest.mark.parametrize(("name", "want"), sorted(EXPECTED.items()))
def test_choices(name: str, want: tuple[str, str]) -> None:
    rec = rec_for(named(name))
    assert rec.choice is not None
    assert (rec.choice.version, rec.choice.variant.name) == want
    assert rec.status == "ok" and rec.exit_code == 0
    vision, audio = {"2.14.1": ("0.29.1", "2.11.0"), "2.11.0": ("0.26.0", "2.11.0")}[want[0]]
    assert rec.choice.command == (  # the whole set, from one index
        f"pip install torch=={want[0]} torchvision=={vision} torchaudio=={audio} "
        f"--index-url https://download.pytorch.org/whl/{want[1]}"
    )


def test_rtx_5090_explains_what_newer_torch_needs() -> None:
    text = render_text(TABLES, rec_for(named("rtx5090-570")))
    assert (
        "torch 2.14.1 cu126: GPU 0 (NVIDIA GeForce RTX 5090) is sm_120; cu126 has no kernels"
        in text
    )
    assert "with a driver ≥ 580.65.06, torch 2.14.1 cu130 would work too" in text


def test_a_driver_that_cannot_run_the_gpu_blocks() -> None:
    rec = rec_for(machine("NVIDIA GeForce RTX 5090", "12.0", "560.35.03", "12.6", "proprietary"))
    assert rec.status == "blocked" and rec.exit_code == 1
    assert any("needs ≥ 570.26" in b for b in rec.blockers)
    assert any("open NVIDIA kernel modules" in b for b in rec.blockers)


def test_a_gh200_is_named_grace_hopper_in_every_line() -> None:
    text = render_text(TABLES, rec_for(machine("NVIDIA GH200 480GB", "9.0", "580.105.08", "13.0")))
    assert "GPU 0: NVIDIA GH200 480GB (sm_90, Grace Hopper)" in text
    assert "Hopper)" not in text.replace("Grace Hopper)", "")


def test_gh200_on_the_proprietary_modules_is_a_blocker_h100_is_not() -> None:
    gh200 = rec_for(machine("NVIDIA GH200 480GB", "9.0", "580.105.08", "13.0", "proprietary"))
    assert gh200.status == "blocked" and gh200.exit_code == 1
    assert gh200.blockers == (
        "GPU 0 (NVIDIA GH200 480GB, Grace Hopper sm_90): Grace Hopper runs only with the open "
        "NVIDIA kernel modules",
    )
    h100 = rec_for(machine("NVIDIA H100 80GB HBM3", "9.0", "580.105.08", "13.0", "proprietary"))
    assert h100.status == "ok" and not h100.blockers
    assert gh200.choice is not None and h100.choice is not None  # same wheel; fix the driver
    assert gh200.choice.command == h100.choice.command


def test_v100_on_an_old_driver_gets_2_7_1_cu118() -> None:
    """R470 runs CUDA 11.8 wheels through minor-version compatibility; 2.8+ ship no CUDA 11."""
    rec = rec_for(machine("Tesla V100-SXM2-32GB", "7.0", "470.82.01", "11.4", "proprietary"))
    assert rec.choice is not None
    assert (rec.choice.version, rec.choice.variant.name) == ("2.7.1", "cu118")
    assert rec.choice.command.endswith(
        "torch==2.7.1 torchvision==0.22.1 torchaudio==2.7.1 "
        "--index-url https://download.pytorch.org/whl/cu118"
    )


@pytest.mark.parametrize(
    ("name", "pin", "variant"),
    [
        # RELEASE.md: 2.10's stable CUDA is 12.6 and 12.8, 13.0 is experimental
        pytest.param("h100-580", "2.10", "cu128", id="2.10-stable-cu128-over-experimental-cu130"),
        # 2.7: stable 11.8 and 12.6, experimental 12.8 (the driver runs all three natively)
        pytest.param("h100-580", "2.7", "cu126", id="2.7-stable-cu126-over-experimental-cu128"),
        # Blackwell has kernels only in 2.7's experimental cu128: it is the one that works
        pytest.param("rtx5090-570", "2.7", "cu128", id="2.7-experimental-when-only-it-works"),
        # 2.4: stable 11.8 and 12.1, experimental 12.4
        pytest.param("a100-535", "2.4", "cu121", id="2.4-stable-cu121-over-experimental-cu124"),
    ],
)
def test_a_stable_variant_beats_an_experimental_one_in_a_pinned_release(
    name: str, pin: str, variant: str
) -> None:
    rec = rec_for(named(name), pin=pin)
    assert rec.choice is not None and rec.choice.variant.name == variant
    experimental = f"{variant} is an experimental variant of torch {pin}"
    assert (experimental in rec.choice.notes) is rec.choice.variant.experimental


def test_pinned_release() -> None:
    rec = rec_for(named("h100-580"), pin="2.11")
    assert rec.choice is not None and rec.choice.command.endswith(
        "torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cu130"
    )
    rec = rec_for(named("h100-580"), pin="2.10.0+cu128")
    assert rec.choice is not None and rec.choice.variant.name == "cu128"
    rec = rec_for(named("v100-580"), pin="2.11.0+cu128")  # Volta dropped from cu128 in 2.11
    assert rec.choice is None and rec.exit_code == 1
    assert "has no kernels for sm_70" in render_text(TABLES, rec)


def test_pin_errors() -> None:
    with pytest.raises(EnvdoctorError, match="not in the compatibility tables"):
        rec_for(named("h100-580"), pin="3.0")
    with pytest.raises(EnvdoctorError, match="no cu999 variant"):
        rec_for(named("h100-580"), pin="2.11.0+cu999")


def test_torch_1x_uses_local_versions() -> None:
    rec = rec_for(named("v100-580"), pin="1.13")
    assert rec.choice is not None  # 1.13's stable CUDA is 11.6; 11.7 is its experimental one
    assert rec.choice.command == (
        "pip install torch==1.13.1+cu116 torchvision==0.14.1+cu116 torchaudio==0.13.1 "
        "--extra-index-url https://download.pytorch.org/whl/cu116"
    )


def test_no_driver_means_the_cpu_build() -> None:
    cpu = f.cpu_machine(torch=f.torch(Absent("torch is not installed")))
    rec = rec_for(cpu)
    assert rec.status == "cpu-only" and rec.exit_code == 0
    assert (
        rec.cpu_command == "pip install torch==2.14.1 torchvision==0.29.1 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cpu"
    )
    kept = rec_for(f.cpu_machine())  # torch 2.13.0+cpu installed: its version is kept
    assert kept.cpu_command == (
        "pip install torch==2.13.0 torchvision==0.28.0 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cpu"
    )
    with_gpu = rec_for(
        f.facts(nvml=Absent("NVML: driver not loaded"), kernel=f.kernel(driver=Absent("no module")))
    )
    assert with_gpu.status == "none" and with_gpu.blockers


def test_installed_version_is_kept_in_the_variant_that_fits() -> None:
    """2.13.0+cpu on an H100 → 2.13.0 from a CUDA index, not a newer release (issue 12)."""
    cpu_wheel = f.facts(
        torch=f.torch(Found(f.torch_build(version="2.13.0+cpu", cuda="", arch_list=())))
    )
    rec = rec_for(cpu_wheel)
    assert rec.choice is not None and rec.kept_installed
    assert rec.choice.version == "2.13.0" and rec.choice.variant.name.startswith("cu")
    assert any("keeps the installed torch 2.13.0" in n for n in rec.notes)
    assert any("newest release is torch 2.14.1" in n for n in rec.notes)
    pinned = rec_for(cpu_wheel, pin="2.14")
    assert pinned.choice is not None and pinned.choice.version == "2.14.1"


def test_unknown_compute_capability_is_noted_not_guessed() -> None:
    m = machine_from_facts(named("h100-580"), TABLES)
    blind = Machine(
        driver=m.driver, driver_cuda=m.driver_cuda, gpus=(m.gpus[0].__class__(0, "GPU", None),)
    )
    rec = recommend(TABLES, blind)
    assert rec.choice is not None and any(
        "compute capability unknown" in n for n in rec.choice.notes
    )


# --- the CLI ---------------------------------------------------------------------------------


def write_snapshot(tmp_path: Path, facts: Facts) -> Path:
    path = tmp_path / "snapshot.json"
    path.write_text(dump_snapshot(facts, redact=False), encoding="utf-8")
    return path


def test_cli_recommend_from_a_snapshot(tmp_path: Path) -> None:
    snap = write_snapshot(tmp_path, named("a100-535"))
    result = cli_invoke(
        ["recommend", "--snapshot", str(snap)],
        obj=AppContext(host=FakeHost.scenario("healthy_h100")),
    )
    assert result.exit_code == 0, result.output
    assert result.output == (GOLDEN / "recommend-a100-535.txt").read_text(encoding="utf-8")


def test_cli_recommend_json_and_pin(tmp_path: Path) -> None:
    snap = write_snapshot(tmp_path, named("rtx5090-570"))
    result = cli_invoke(
        ["recommend", "--snapshot", str(snap), "--json", "--torch", "2.14"],
        obj=AppContext(host=FakeHost.scenario("healthy_h100")),
    )
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert (data["kind"], data["outcome"], data["recommendation"]) == ("recommend", "none", None)
    assert {r["variant"] for r in data["rejected"]} == {"cu126", "cu130", "cu132"}


def test_cli_recommend_live_through_the_host_seam() -> None:
    result = cli_invoke(["recommend"], obj=AppContext(host=FakeHost.scenario("healthy_h100")))
    assert result.exit_code == 0, result.output
    assert (  # the installed torch 2.11.0+cu130 fits: its version is kept
        "pip install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 "
        "--index-url https://download.pytorch.org/whl/cu130" in result.output
    )


def test_cli_bad_pin_is_exit_2(tmp_path: Path) -> None:
    snap = write_snapshot(tmp_path, named("a100-535"))
    result = cli_invoke(
        ["recommend", "--snapshot", str(snap), "--torch", "9.9"],
        obj=AppContext(host=FakeHost.scenario("healthy_h100")),
    )
    assert result.exit_code == 2
    assert "torch 9.9 is not in the compatibility tables" in result.output


def test_cli_tables_validate_and_show(tmp_path: Path) -> None:
    ok = cli_invoke(["tables", "validate"])
    assert ok.exit_code == 0 and "pytorch: 17 rows" in ok.output
    (tmp_path / "bad.yaml").write_text(
        "schema: 1\ntable: cudnn\nreleases:\n  - "
        "{cudnn: '>=9.30,<9.31', packages: [{cuda: '>=13.0,<14'}]}\n",
        encoding="utf-8",
    )
    bad = cli_invoke(["tables", "validate", str(tmp_path)])
    assert bad.exit_code == 2
    assert f"{tmp_path / 'bad.yaml'}:4: cudnn releases: every row needs a source" in bad.output
    assert "Traceback" not in bad.output
    shown = cli_invoke(
        ["tables", "show", "pytorch"], obj=AppContext(host=FakeHost.scenario("healthy_h100"))
    )
    assert shown.exit_code == 0 and "torch 2.14 (latest 2.14.1" in shown.output
    as_json = cli_invoke(
        ["tables", "show", "driver-branches", "--json"],
        obj=AppContext(host=FakeHost.scenario("healthy_h100")),
    )
    assert json.loads(as_json.output)["driver_branches"][0]["branch"] == 410
    unknown = cli_invoke(
        ["tables", "show", "gpus"], obj=AppContext(host=FakeHost.scenario("healthy_h100"))
    )
    assert unknown.exit_code == 2


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_markdown_says_what_the_text_says(name: str) -> None:
    rec = rec_for(named(name))
    text, markdown = render_text(TABLES, rec), render_markdown(TABLES, rec)
    command = rec.choice.command if rec.choice else rec.cpu_command
    if command:
        assert f"```sh\n{command}\n```" in markdown  # to copy as it is
    shown = re.sub(r"\\(.)", r"\1", markdown)  # what a reader sees, escapes undone
    for line in text.splitlines():  # every heading and item
        words = line.strip().lstrip("-✗ ").rstrip(":")
        assert words in shown, words


def test_markdown_shows_a_hostile_gpu_name_as_text(tmp_path: Path) -> None:
    hostile = "H100 <img src=x onerror=alert(1)> **bold** [link](http://x) \x1b]0;title\x07|"
    facts = machine(hostile, "9.0", "580.95.05", "13.0")
    snap = write_snapshot(tmp_path, facts)
    result = cli_invoke(
        ["recommend", "--snapshot", str(snap), "--format", "markdown"],
        obj=AppContext(host=FakeHost.scenario("healthy_h100")),
    )
    assert result.exit_code == 0, result.output
    outside_code = re.sub(r"```.*?```", "", result.output, flags=re.DOTALL)
    assert not re.search(r"(?<!\\)[<>\[\]|]", outside_code)  # every one escaped
    assert "**bold**" not in result.output
    assert "\\<img src=x onerror=alert(1)\\>" in result.output
    assert "\x1b" not in result.output and "\x07" not in result.output


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (">=3.10,<3.16", "3.10 to 3.15"),
        ("<3.15,>=3.9", "3.9 to 3.14"),
        (">= 3.10, < 3.13", "3.10 to 3.12"),
        ("==3.12", "3.12"),
        (">=3.14,<3.15", "3.14"),  # not "3.14 to 3.14"
        # the tables' checker takes these too; no last minor below the bound reads right
        (">=3.10,<4.0", "3.10, below 4.0"),  # was "3.10 to 4.-1"
        (">=3.10,<3.14.2", "3.10, below 3.14.2"),  # was "3.10 to 3.14.2", as if 3.14.2 were in
        (">=3.10,<3.15.0", "3.10, below 3.15.0"),
        (">=3.14.5,<3.15", "3.14.5, below 3.15"),  # not "3.14.5 to 3.14"
        # no table gets these past the checker (a 10-digit part, not a version): said, not read
        (">=3.10,<3.00000000001", "3.10, below 3.00000000001"),
        ("<3.\u00b2,>=3.10", "3.10, below 3.\u00b2"),
    ],
)
def test_the_python_range_is_said_as_people_say_it(spec: str, said: str) -> None:
    assert _python_range(spec) == said
