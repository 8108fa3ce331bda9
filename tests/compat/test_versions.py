"""Property tests on the version logic: parsing, arch compatibility, ranges, driver verdicts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envdoctor.compat.judge import DriverFit, judge_arch, judge_driver
from envdoctor.compat.loader import intervals_overlap, load_tables
from envdoctor.compat.versions import (
    ArchTarget,
    expand_torch_arch_list,
    is_version,
    parse_arch,
    parse_cuda,
    parse_cudnn,
    parse_driver,
    torch_release_of,
)

TABLES = load_tables()
majors = st.integers(min_value=1, max_value=15)
minors = st.integers(min_value=0, max_value=9)
ccs = st.tuples(majors, minors)
drivers = st.tuples(
    st.integers(min_value=300, max_value=700),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=99),
)
cudas = st.tuples(st.integers(min_value=10, max_value=13), st.integers(min_value=0, max_value=9))


def driver_text(d: tuple[int, int, int]) -> str:
    return f"{d[0]}.{d[1]}.{d[2]:02d}"


@given(drivers, drivers)
def test_driver_order_is_numeric_not_lexical(
    a: tuple[int, int, int], b: tuple[int, int, int]
) -> None:
    pa, pb = parse_driver(driver_text(a)), parse_driver(driver_text(b))
    assert pa == a and pb == b
    assert (pa < pb) == (a < b)


@given(cudas, st.integers(min_value=0, max_value=200))
def test_cuda_parses_dotted_and_integer_forms(cuda: tuple[int, int], patch: int) -> None:
    assert parse_cuda(f"{cuda[0]}.{cuda[1]}") == cuda
    assert parse_cuda(f"{cuda[0]}.{cuda[1]}.{patch}") == cuda
    assert parse_cuda(f"V{cuda[0]}.{cuda[1]}.{patch}") == cuda
    assert parse_cuda(str(cuda[0] * 1000 + cuda[1] * 10)) == cuda


@given(st.integers(min_value=7, max_value=9), st.integers(0, 30), st.integers(0, 99))
def test_cudnn_integer_encoding_round_trips(major: int, minor: int, patch: int) -> None:
    if major < 9:
        minor = minor % 10  # cuDNN 7/8 encode the minor in one digit
        number = major * 1000 + minor * 100 + patch
    else:
        number = major * 10000 + minor * 100 + patch
    assert parse_cudnn(str(number)) == (major, minor, patch)
    assert parse_cudnn(f"{major}.{minor}.{patch}.5") == (major, minor, patch)


@given(ccs, ccs)
def test_sass_runs_on_the_same_major_at_a_higher_minor(
    built: tuple[int, int], gpu: tuple[int, int]
) -> None:
    target = parse_arch(f"sm_{built[0]}{built[1]}")
    assert target == ArchTarget(ptx=False, cc=built)
    assert target.runs_natively_on(gpu) == (gpu[0] == built[0] and gpu[1] >= built[1])
    assert not target.jits_to(gpu)


@given(ccs, ccs)
def test_ptx_jits_to_every_newer_gpu(built: tuple[int, int], gpu: tuple[int, int]) -> None:
    target = parse_arch(f"compute_{built[0]}{built[1]}")
    assert target is not None and target.jits_to(gpu) == (gpu >= built)
    specific = parse_arch(f"sm_{built[0]}{built[1]}a")
    assert specific is not None and specific.runs_natively_on(gpu) == (gpu == built)


@given(st.lists(ccs, min_size=1, max_size=8, unique=True), st.booleans(), ccs)
def test_judge_arch_matches_the_expanded_list(
    built: list[tuple[int, int]], ptx: bool, gpu: tuple[int, int]
) -> None:
    spec = ";".join(f"{m}.{n}" for m, n in built) + ("+PTX" if ptx else "")
    names = expand_torch_arch_list(spec)
    assert names is not None
    targets = tuple(t for t in (parse_arch(n) for n in names) if t is not None)
    verdict = judge_arch(targets, gpu)
    native = any(b[0] == gpu[0] and b[1] <= gpu[1] for b in built)
    jit = ptx and gpu >= built[-1]
    assert verdict.works == (native or jit)
    assert judge_arch(targets, gpu, ptx_jit_ok=False).works == native


versions = st.tuples(st.integers(0, 20), st.integers(0, 20)).map(
    lambda v: Version(f"{v[0]}.{v[1]}")
)


@given(versions, versions, versions, versions)
def test_interval_overlap_agrees_with_sampling(
    a: Version, b: Version, c: Version, d: Version
) -> None:
    lo1, hi1 = sorted((a, b))
    lo2, hi2 = sorted((c, d))
    if lo1 == hi1 or lo2 == hi2:
        return
    s1, s2 = f">={lo1},<{hi1}", f">={lo2},<{hi2}"
    points = [Version(f"{x}.{y}") for x in range(21) for y in range(21)] + [
        Version(f"{x}.{y}.5") for x in range(21) for y in range(21)
    ]
    shared = any(p in SpecifierSet(s1) and p in SpecifierSet(s2) for p in points)
    assert intervals_overlap(s1, s2) == shared
    assert intervals_overlap(s1, s2) == intervals_overlap(s2, s1)


@given(drivers, drivers, cudas)
def test_a_newer_driver_never_runs_less(
    a: tuple[int, int, int], b: tuple[int, int, int], cuda: tuple[int, int]
) -> None:
    """Monotonic: if a driver runs CUDA X.Y, every newer driver does too (and no worse)."""
    low, high = sorted((a, b))
    rank = {
        DriverFit.TOO_OLD: 0,
        DriverFit.UNKNOWN: 0,
        DriverFit.MINOR_VERSION: 1,
        DriverFit.NATIVE: 2,
    }
    verdicts = []
    for d in (low, high):
        text = driver_text(d)
        row = TABLES.branch_row(text)
        verdicts.append(
            judge_driver(
                TABLES, driver=text, driver_cuda=parse_cuda(row.cuda) if row else None, cuda=cuda
            )
        )
    assert rank[verdicts[1].fit] >= rank[verdicts[0].fit]


@given(drivers, cudas)
def test_the_needed_driver_is_enough(d: tuple[int, int, int], cuda: tuple[int, int]) -> None:
    text = driver_text(d)
    row = TABLES.branch_row(text)
    verdict = judge_driver(
        TABLES, driver=text, driver_cuda=parse_cuda(row.cuda) if row else None, cuda=cuda
    )
    if verdict.fit is DriverFit.TOO_OLD and verdict.needed:
        needed_row = TABLES.branch_row(verdict.needed)
        again = judge_driver(
            TABLES,
            driver=verdict.needed,
            driver_cuda=parse_cuda(needed_row.cuda) if needed_row else None,
            cuda=cuda,
        )
        assert again.fit in (DriverFit.NATIVE, DriverFit.MINOR_VERSION)


@given(
    st.integers(1, 3),
    st.integers(0, 20),
    st.integers(0, 9),
    st.sampled_from(["", "+cu130", "+cpu"]),
)
def test_torch_release_of(major: int, minor: int, patch: int, local: str) -> None:
    release, variant = torch_release_of(f"{major}.{minor}.{patch}{local}") or ("", None)
    assert release == f"{major}.{minor}"
    assert variant == (local[1:] or None)


@given(st.from_regex(r"[0-9.]{0,12}|[0-9]{1,3}(\.[0-9]{1,3}){0,7}[a-z+-]?[0-9]?", fullmatch=True))
def test_what_is_version_accepts_packaging_reads_as_that_release(text: str) -> None:
    """is_version no longer asks packaging: what it accepts must still be a PEP 440 release."""
    if is_version(text):
        assert Version(text).release == tuple(int(n) for n in text.split("."))


@given(st.lists(st.integers(0, 999_999_999), min_size=1, max_size=7))
def test_a_plain_release_is_a_version(numbers: list[int]) -> None:
    assert is_version(".".join(map(str, numbers)))
    assert not is_version(".".join(map(str, numbers)) + "+cu130")
