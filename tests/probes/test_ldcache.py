"""The loader-cache parser agrees with glibc's own ``ldconfig -p`` on real cache files.

Fixtures in tests/data/ldcache were written by the real ldconfig (make-fixtures.sh records
how, generated-by.txt which glibc) in its three formats, each with its ``ldconfig -p`` listing.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from envdoctor.model.probed import Found
from envdoctor.platform.host import Deadline
from envdoctor.probes.ldcache import LdCacheError, parse_ld_cache
from envdoctor.probes.libraries import probe_libraries
from tests.fakes.host import FakeHost
from tests.fakes.ldcache import build_ld_cache, listing_entries

DATA = Path(__file__).resolve().parent.parent / "data" / "ldcache"
FORMATS = ("new", "compat", "old")
LDCONFIG = shutil.which("ldconfig") or next(
    (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if Path(p).exists()), None
)
SYSTEM_CACHE = Path("/etc/ld.so.cache")


def _listed(listing: str) -> list[tuple[int, str]]:
    return [(flags, path) for flags, _soname, path in listing_entries(listing)]


def _paths(listing: str) -> list[tuple[str, str]]:
    return [(soname, path) for _flags, soname, path in listing_entries(listing)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_reads_as_ldconfig_printed_it(fmt: str) -> None:
    entries = parse_ld_cache((DATA / f"{fmt}.cache").read_bytes())
    listing = (DATA / f"{fmt}.ldconfig-p.txt").read_text(encoding="utf-8")
    assert list(entries) == _listed(listing)
    assert len(entries) == 7 and listing.startswith("7 libs found")


def _libcuda_paths(host: FakeHost) -> list[str]:
    """The libcuda copies the probe found, after checking that it started no process."""
    libs = probe_libraries(host, deadline=Deadline(5))
    assert isinstance(libs, Found) and host.ran == []
    return [c.path for f in libs.value if f.name == "libcuda" for c in f.copies]


def test_the_probe_keeps_the_stub_and_drops_the_32_bit_copy() -> None:
    host = FakeHost.scenario("healthy_h100", links={}, ld_cache=None)
    host.binary["/etc/ld.so.cache"] = (DATA / "compat.cache").read_bytes()
    assert _libcuda_paths(host) == [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/local/cuda/lib64/stubs/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so",
    ]


def test_an_arm_machine_keeps_only_aarch64_entries() -> None:
    listing = (
        "\tlibcuda.so.1 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libcuda.so.1\n"
        "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    )
    host = FakeHost.scenario("healthy_h100", ld_cache=listing, identity={"machine": "aarch64"})
    assert _libcuda_paths(host) == ["/usr/lib/aarch64-linux-gnu/libcuda.so.1"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "unknown magic"),
        (b"\x7fELF\x02\x01\x01", "unknown magic"),
        (b"glibc-ld.so.cache1.1\x05\x00", "truncated header"),
        (b"ld.so-1.7.0\x00\xff\xff\xff\x00", "do not fit"),
    ],
)
def test_malformed_caches_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(LdCacheError, match=reason):
        parse_ld_cache(data)


@pytest.mark.parametrize(("order", "readable"), [(0, True), (2, True), (1, False), (3, False)])
def test_a_cache_in_another_byte_order_is_refused_as_ld_so_refuses_it(
    order: int, readable: bool
) -> None:
    """Header flags bits 0-1: 0 unrecorded, 1 invalid, 2 little-endian, 3 big-endian."""
    data = bytearray((DATA / "new.cache").read_bytes())
    data[28] = order
    if readable:
        assert len(parse_ld_cache(bytes(data))) == 7
    else:
        with pytest.raises(LdCacheError, match="wrong byte order"):
            parse_ld_cache(bytes(data))


def test_damaged_real_caches_fail_only_with_a_reason() -> None:
    """Truncation or flipped bits: a clean LdCacheError (or entries), never another exception."""
    rng = random.Random(7)  # noqa: S311 (a seeded, repeatable choice of bits to flip, not a secret)
    for fmt in FORMATS:
        data = (DATA / f"{fmt}.cache").read_bytes()
        for cut in range(len(data)):
            _parse_or_reason(data[:cut])
        for _ in range(300):
            damaged = bytearray(data)
            damaged[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            _parse_or_reason(bytes(damaged))


def _parse_or_reason(data: bytes) -> None:
    try:
        entries = parse_ld_cache(data)
    except LdCacheError as exc:
        assert str(exc)
    else:
        assert all(isinstance(flags, int) and isinstance(path, str) for flags, path in entries)


@pytest.mark.skipif(LDCONFIG is None, reason="no ldconfig on this machine")
def test_the_fake_hosts_cache_is_one_glibc_reads(tmp_path: Path) -> None:
    """Scenario caches are real: glibc's ldconfig lists them as the scenario wrote them."""
    listing = FakeHost.scenario("healthy_h100").data["ld_cache"]
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(build_ld_cache(listing))
    printed = subprocess.run(
        [str(LDCONFIG), "-p", "-C", str(cache)], capture_output=True, text=True, check=True
    ).stdout
    assert _listed(printed) == _listed(listing)
    assert parse_ld_cache(cache.read_bytes()) == tuple(_listed(listing))


@pytest.mark.skipif(
    LDCONFIG is None or not SYSTEM_CACHE.exists(), reason="no ldconfig or /etc/ld.so.cache here"
)
def test_this_machines_cache_reads_as_ldconfig_prints_it() -> None:
    printed = subprocess.run(
        [str(LDCONFIG), "-p"], capture_output=True, text=True, check=True
    ).stdout
    # Paths, not flags: this machine may print ABI tags the fake's table does not know.
    parsed = [path for _flags, path in parse_ld_cache(SYSTEM_CACHE.read_bytes())]
    assert parsed == [path for _soname, path in _paths(printed)]
