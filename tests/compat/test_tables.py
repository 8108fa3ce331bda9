"""The shipped tables are sourced and consistent; malformed tables fail with file:line."""

from __future__ import annotations

import textwrap
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envdoctor.compat.loader import intervals_overlap, load_tables
from envdoctor.compat.locations import shipped_dir
from envdoctor.compat.tables import TABLE_NAMES
from envdoctor.compat.versions import parse_cuda
from envdoctor.errors import EnvdoctorError

TABLES = load_tables()
ROW_FIELDS = (
    "cuda_releases",
    "minor_version_floors",
    "minor_version_limitations",
    "forward_compat_gpus",
    "forward_compat_packages",
    "driver_branches",
    "architectures",
    "cudnn",
    "torch_releases",
)


def all_rows() -> list[object]:
    rows: list[object] = []
    for field in ROW_FIELDS:
        rows.extend(getattr(TABLES, field))
    rows.extend(v for r in TABLES.torch_releases for v in r.variants)
    return rows


def test_shipped_tables_are_found_and_complete() -> None:
    assert shipped_dir().name == "compat_tables"
    for field in ROW_FIELDS:
        assert getattr(TABLES, field), field
    names = {p.stem.replace("_", "-") for p in shipped_dir().glob("*.yaml")}
    assert names == set(TABLE_NAMES)


def test_every_row_has_a_source_with_a_url_or_repo_path() -> None:
    for row in all_rows():
        source = row.source  # type: ignore[attr-defined]
        assert source, row
        assert all("https://" in s or "/" in s for s in source), row


def test_cuda_releases_cover_10_0_to_13_4_and_drivers_never_go_back() -> None:
    versions = {parse_cuda(r.cuda) for r in TABLES.cuda_releases}
    for want in [
        (10, 0),
        (10, 1),
        (10, 2),
        *((11, m) for m in range(9)),
        *((12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)),
        *((13, m) for m in range(5)),
    ]:
        assert want in versions, want
    linux = [r.linux_driver for r in TABLES.cuda_releases if r.linux_driver]
    assert linux == sorted(linux, key=lambda d: tuple(int(p) for p in d.split(".")))


def test_minor_version_floors() -> None:
    floors = {f.major: f.linux_driver for f in TABLES.minor_version_floors}
    assert floors == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def test_cudnn_ranges_do_not_overlap() -> None:
    rows = TABLES.cudnn
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            assert not intervals_overlap(a.cudnn, b.cudnn), (a.cudnn, b.cudnn)
        for j, p in enumerate(a.packages):
            for q in a.packages[j + 1 :]:
                assert not intervals_overlap(p.cuda, q.cuda)


def test_every_torch_variant_cuda_has_a_driver_row() -> None:
    for release in TABLES.torch_releases:
        for variant in release.variants:
            row = TABLES.full_feature_driver(variant.cuda_version)
            assert row is not None and row.linux_driver, (release.torch, variant.name)
            if variant.cuda_version[0] >= 11:
                assert TABLES.minor_version_floor(variant.cuda_version[0]) is not None


def test_torch_variant_facts_from_the_build_scripts() -> None:
    r211 = TABLES.torch_release("2.11.0+cu130")
    assert r211 is not None and [v.name for v in r211.variants] == ["cu126", "cu128", "cu130"]
    cu130 = r211.variant("cu130")
    assert cu130 is not None and "sm_70" not in cu130.arch_list
    assert cu130.arch_list[-1] == "sm_120"  # release wheels: +PTX stripped (PR #175567)
    assert cu130.index_url == "https://download.pytorch.org/whl/cu130"
    cu128 = r211.variant("cu128")
    assert cu128 is not None and "sm_70" not in cu128.arch_list  # Volta dropped in 2.11
    r210 = TABLES.torch_release("2.10")
    assert r210 is not None and "sm_70" in (r210.variant("cu128") or cu128).arch_list
    assert TABLES.torch_variant("2.11.0", "12.8") == cu128


def test_release_wheels_have_ptx_only_where_it_was_seen() -> None:
    """Release builds strip +PTX; 2.7 cu128 and 2.10 cu130 kept it (their wheels report it)."""
    for version in ("2.11", "2.12", "2.13", "2.14"):
        release = TABLES.torch_release(version)
        assert release is not None
        for variant in release.variants:
            if variant.cuda_version >= (13, 0):
                assert not any(a.startswith("compute_") for a in variant.arch_list), variant
    for wheel in ("2.7.1+cu128", "2.10.0+cu130"):
        kept = TABLES.torch_variant(wheel)
        assert kept is not None and kept.arch_list[-1] == "compute_120", wheel


# RELEASE.md, "Release Compatibility Matrix", the "Experimental CUDA" column
RELEASE_MD_EXPERIMENTAL = {
    "2.14": set(),
    "2.13": {"cu132"},
    "2.12": {"cu132"},
    "2.11": set(),
    "2.10": {"cu130"},
    "2.9": {"cu130"},
    "2.8": {"cu129"},
    "2.7": {"cu128"},
    "2.6": {"cu126"},
    "2.5": set(),
    "2.4": {"cu124"},
    "2.3": {"cu121"},
    "2.2": {"cu121"},
    "2.1": {"cu121"},
    "2.0": {"cu118"},
    "1.13": {"cu117"},
    "1.12": {"cu116"},
}


def test_experimental_flags_follow_release_md() -> None:
    flagged = {
        r.torch: {v.name for v in r.variants if v.experimental} for r in TABLES.torch_releases
    }
    assert flagged == RELEASE_MD_EXPERIMENTAL


def test_every_bundled_cudnn_has_a_row_that_covers_the_wheels_cuda() -> None:
    """Else `check` says nothing about it, or calls an official wheel's own cuDNN incompatible."""
    for release in TABLES.torch_releases:
        for variant in release.variants:
            assert variant.cudnn, (release.torch, variant.name)
            row = TABLES.cudnn_release(variant.cudnn)
            assert row is not None, (release.torch, variant.name, variant.cudnn)
            assert row.package_for(variant.cuda_version) is not None, (
                release.torch,
                variant.name,
                row.cudnn,
            )


def test_driver_branches_report_cuda_versions() -> None:
    row = TABLES.branch_row("580.159.04")
    assert row is not None and row.cuda == "13.0"
    row = TABLES.branch_row("566.14")  # not listed: the nearest lower branch
    assert row is not None and row.branch == 565


def test_architectures() -> None:
    blackwell = TABLES.architecture("12.0")
    assert (
        blackwell is not None
        and blackwell.kernel_modules == "open"
        and blackwell.first_driver == "570.26"
    )
    pascal = TABLES.architecture("6.1")
    assert pascal is not None and pascal.last_driver_branch == 580 and pascal.last_cuda == "12.9"
    b200 = TABLES.architecture("10.0")
    assert b200 is not None and b200.first_driver == "570.133.20"  # GPU Operator: HGX B200


def test_gh200_needs_the_open_modules_h100_does_not() -> None:
    gh200 = TABLES.architecture_for("9.0", "NVIDIA GH200 480GB")
    h100 = TABLES.architecture_for("9.0", "NVIDIA H100 80GB HBM3")
    assert gh200 is not None and h100 is not None
    assert (gh200.arch, gh200.kernel_modules) == ("Grace Hopper", "open")
    assert (h100.arch, h100.kernel_modules) == ("Hopper", "any")
    assert any("open-source-gpu-kernel-modules" in s for s in gh200.source)
    # a product matches only its own compute capability, case-insensitively
    assert TABLES.architecture_for("9.0", "nvidia gh200 480gb") == gh200
    assert TABLES.architecture_for("8.0", "GH200 lookalike") == TABLES.architecture("8.0")


def test_every_unconfirmed_row_says_what_is_missing() -> None:
    marks = [
        (row, getattr(row, "confirmed"), getattr(row, "missing"))  # noqa: B009 (any row type)
        for row in all_rows()
        if hasattr(row, "confirmed")
    ]
    assert any(not confirmed for _, confirmed, _ in marks)
    for row, confirmed, missing in marks:
        assert bool(missing.strip()) is (not confirmed), row
    assert not next(b for b in TABLES.driver_branches if b.branch == 620).confirmed
    update1 = next(r for r in TABLES.cuda_releases if r.cuda == "13.4.2")
    assert (update1.label, update1.confirmed) == ("13.4 Update 1", False)
    assert "minimum Linux driver" in update1.missing


def test_the_2_6_and_2_7_wheels_are_confirmed() -> None:
    for version in ("2.6", "2.7"):
        release = TABLES.torch_release(version)
        assert release is not None and all(v.confirmed for v in release.variants), version
    cu118 = TABLES.torch_variant("2.7.1+cu118")
    assert cu118 is not None and "sm_70" in cu118.arch_list and "sm_37" in cu118.arch_list


# --- malformed tables -----------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "extra.yaml") -> Path:
    (tmp_path / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return tmp_path


BRANCH_HEADER = """\
schema: 1
table: driver-branches
sources:
  site: {title: "Our site notes", url: "https://example.org/notes"}
branches:
"""


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1"}\n',
            6,
            "needs a source",
            id="no-source",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.x", example: "999.1", source: site}\n',
            6,
            "not a CUDA version",
            id="bad-version",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site, colour: red}\n',
            6,
            "unknown key 'colour'",
            id="unknown-key",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "998.1", source: site}\n',
            6,
            "not on branch",
            id="example-off-branch",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: nowhere}\n',
            6,
            "neither in this file",
            id="unknown-source",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site}\n  - '
            '{branch: 999, cuda: "14.0", example: "999.2", source: site}\n',
            7,
            "duplicate branch",
            id="duplicate",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "10.0", example: "999.1", source: site}\n',
            6,
            "less than branch",
            id="inconsistent",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site, confirmed: false}\n',
            6,
            "needs missing:",
            id="unconfirmed-without-missing",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site, missing: "x"}\n',
            6,
            "only for rows marked confirmed: false",
            id="missing-on-a-confirmed-row",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site, confirmed: false,'
            ' missing: ""}\n',
            6,
            "expected text",
            id="empty-missing",
        ),
        pytest.param(
            '  - {branch: 999, cuda: "14.0", example: "999.1", source: site\n',
            7,
            "invalid YAML",
            id="syntax",
        ),
    ],
)
def test_malformed_tables_name_file_and_line(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    write(tmp_path, BRANCH_HEADER + body)
    with pytest.raises(EnvdoctorError) as err:
        load_tables(str(tmp_path))
    assert err.value.where == f"{tmp_path / 'extra.yaml'}:{line}"
    assert message in err.value.message


PRODUCTS = """
    schema: 1
    table: architectures
    sources:
      site: {title: "Our site notes", url: "https://example.org/notes"}
    products:
      - {product: Test Hopper, cc: "CC", names: ["TH100"], kernel_modules: MODULES, source: site}
"""


def test_user_products_override_by_gpu_name(tmp_path: Path) -> None:
    write(tmp_path, PRODUCTS.replace('"CC"', '"8.0"').replace("MODULES", "open"))
    tables = load_tables(str(tmp_path))
    arch = tables.architecture_for("8.0", "NVIDIA TH100-SXM")
    assert arch is not None and (arch.arch, arch.kernel_modules) == ("Test Hopper", "open")
    assert tables.architecture_for("8.0", "NVIDIA A100-SXM4-80GB") == tables.architecture("8.0")
    gh200 = tables.architecture_for("9.0", "NVIDIA GH200 480GB")  # the shipped product stays
    assert gh200 is not None and gh200.kernel_modules == "open"


@pytest.mark.parametrize(
    ("cc", "modules", "message"),
    [
        pytest.param("4.2", "open", "no architectures row for compute capability 4.2", id="cc"),
        pytest.param("8.0", "closed", "kernel_modules: one of open, proprietary, any", id="mod"),
    ],
)
def test_bad_products_are_rejected(tmp_path: Path, cc: str, modules: str, message: str) -> None:
    write(tmp_path, PRODUCTS.replace('"CC"', f'"{cc}"').replace("MODULES", modules))
    with pytest.raises(EnvdoctorError) as err:
        load_tables(str(tmp_path))
    assert message in err.value.message
    assert err.value.where == f"{tmp_path / 'extra.yaml'}:6"


def test_overlapping_cudnn_ranges_are_rejected(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        schema: 1
        table: cudnn
        releases:
          - cudnn: ">=9.16,<9.18"
            packages: [{cuda: ">=13.0,<14"}]
            source: https://example.org/cudnn
    """,
    )
    with pytest.raises(EnvdoctorError, match="overlap") as err:
        load_tables(str(tmp_path))
    assert err.value.where.endswith("extra.yaml:4")


def test_specifiers_must_be_ranges(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        schema: 1
        table: cudnn
        releases:
          - cudnn: "~=9.30"
            packages: [{cuda: ">=13.0,<14"}]
            source: https://example.org/cudnn
    """,
    )
    with pytest.raises(EnvdoctorError, match="must be a range"):
        load_tables(str(tmp_path))


def test_wrong_schema_and_unknown_table(tmp_path: Path) -> None:
    write(tmp_path, "schema: 2\ntable: cudnn\n")
    with pytest.raises(EnvdoctorError, match="schema 2 is not supported"):
        load_tables(str(tmp_path))
    write(tmp_path, "schema: 1\ntable: gpus\n")
    with pytest.raises(EnvdoctorError, match="unknown table 'gpus'"):
        load_tables(str(tmp_path))


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(EnvdoctorError, match="no such directory"):
        load_tables(str(tmp_path / "nope"))
    with pytest.raises(EnvdoctorError, match="ENVDOCTOR_TABLES"):
        load_tables(env={"ENVDOCTOR_TABLES": str(tmp_path / "nope")})


# --- extending and overriding ---------------------------------------------------------------

SITE_TORCH = """
    schema: 1
    table: pytorch
    sources:
      site: {title: "Our private torch builds", url: "https://wheels.example.org/"}
    releases:
      - torch: "2.11"
        latest: "2.11.0"
        python: ">=3.10,<3.15"
        source: site
        variants:
          - {name: cu130, cuda: "13.0", arch: "8.0;9.0", index_url: "https://wheels.example.org/cu130", source: site}
"""


def test_user_tables_override_rows_by_key(tmp_path: Path) -> None:
    write(tmp_path, SITE_TORCH, "torch.yaml")
    tables = load_tables(str(tmp_path))
    release = tables.torch_release("2.11")
    assert release is not None and [v.name for v in release.variants] == ["cu130"]
    assert release.variants[0].index_url == "https://wheels.example.org/cu130"
    assert tables.torch_release("2.14") is not None  # the other shipped rows stay
    assert tables.origins[-1] == str(tmp_path)


def test_env_var_and_option_apply_in_order(tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    write(env_dir, SITE_TORCH)
    opt_dir = tmp_path / "opt"
    opt_dir.mkdir()
    write(opt_dir, SITE_TORCH.replace('arch: "8.0;9.0"', 'arch: "9.0"'))
    tables = load_tables(str(opt_dir), env={"ENVDOCTOR_TABLES": str(env_dir)})
    variant = tables.torch_variant("2.11.0+cu130")
    assert variant is not None and variant.arch_list == ("sm_90",)
    only_env = load_tables(env={"ENVDOCTOR_TABLES": str(env_dir)})
    variant = only_env.torch_variant("2.11.0+cu130")
    assert variant is not None and variant.arch_list == ("sm_80", "sm_90")


def test_replace_mode_replaces_whole_sections(tmp_path: Path) -> None:
    write(tmp_path, SITE_TORCH.replace("table: pytorch", "table: pytorch\n    replace: true"))
    tables = load_tables(str(tmp_path))
    assert [r.torch for r in tables.torch_releases] == ["2.11"]


def test_user_rows_are_checked_against_shipped_ones(tmp_path: Path) -> None:
    write(
        tmp_path,
        SITE_TORCH.replace('cuda: "13.0", arch', 'cuda: "13.9", arch').replace(
            "name: cu130", "name: cu139"
        ),
    )
    with pytest.raises(EnvdoctorError, match="no cuda-toolkits release row") as err:
        load_tables(str(tmp_path))
    assert "extra.yaml:" in err.value.where


def test_rows_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        TABLES.torch_releases[0].latest = "9"  # type: ignore[misc]


def test_specifier_cuda_matching() -> None:
    release = TABLES.cudnn_release("9.10.2.21")
    assert release is not None
    assert release.package_for((12, 8)) is not None and release.package_for((13, 0)) is None
    assert Version("12.9") in SpecifierSet(release.packages[0].cuda)


# --- companions: torchvision/torchaudio released with each torch patch release (#37) -----------

COMPANIONS = """
    companions:
      - {torch: "2.11.0", torchvision: "0.26.0", torchaudio: "2.11.0", source: site}
"""


def _with_companions(rows: str) -> str:
    return SITE_TORCH.replace(
        "        source: site\n        variants:",
        "        source: site\n"
        + textwrap.indent(textwrap.dedent(rows).strip("\n"), "        ")
        + "\n        variants:",
    )


def test_a_release_gives_the_companions_of_its_patch_releases(tmp_path: Path) -> None:
    write(tmp_path, _with_companions(COMPANIONS))
    release = load_tables(str(tmp_path)).torch_release("2.11.0+cu130")
    assert release is not None
    row = release.companions_of("2.11.0+cu130")
    assert row is not None and (row.torchvision, row.torchaudio) == ("0.26.0", "2.11.0")
    assert row.source == ("Our private torch builds: https://wheels.example.org/",)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        pytest.param(
            COMPANIONS.replace('torchvision: "0.26.0"', 'torchvision: "0.26"'),
            "is not a release like 0.28.0",
            id="feature-version",
        ),
        pytest.param(
            COMPANIONS.replace('torchvision: "0.26.0"', 'torchvision: "0.26.0+cu130"'),
            "is not a version like",
            id="local-tag",
        ),
        pytest.param(
            COMPANIONS.replace(", source: site}", "}"), "every row needs a source", id="no-source"
        ),
        pytest.param(
            COMPANIONS.replace('torch: "2.11.0"', 'torch: "2.10.0"'),
            "is not a 2.11.x patch release",
            id="other-release",
        ),
        pytest.param(
            COMPANIONS.replace('torch: "2.11.0"', 'torch: "2.11.1"'),
            "newer than latest",
            id="beyond-latest",
        ),
        pytest.param(
            COMPANIONS.replace('torchaudio: "2.11.0"', 'torchaudio: "2.11.0", vision: "x"'),
            "vision",
            id="unknown-key",
        ),
        pytest.param(
            COMPANIONS
            + '      - {torch: "2.11.0", torchvision: "0.26.1", torchaudio: "2.11.0", source: site}\n',
            "2.11.0",
            id="duplicate",
        ),
    ],
)
def test_a_malformed_companions_row_is_an_error_at_its_line(
    tmp_path: Path, rows: str, message: str
) -> None:
    write(tmp_path, _with_companions(rows))
    with pytest.raises(EnvdoctorError) as err:
        load_tables(str(tmp_path))
    assert err.value.where.startswith(f"{tmp_path / 'extra.yaml'}:")
    assert message in err.value.message, err.value.message


def test_the_latest_patch_needs_its_companions(tmp_path: Path) -> None:
    write(tmp_path, _with_companions(COMPANIONS).replace('latest: "2.11.0"', 'latest: "2.11.1"'))
    with pytest.raises(EnvdoctorError, match=r"no row for the latest patch release 2\.11\.1"):
        load_tables(str(tmp_path))


def test_every_shipped_torch_release_has_its_companions_for_every_patch_up_to_latest() -> None:
    for release in load_tables().torch_releases:
        assert release.companions_of(release.latest) is not None, release.torch
        for row in release.companions:
            assert row.source, (release.torch, row.torch)
