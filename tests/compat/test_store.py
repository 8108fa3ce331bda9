"""The checked tables are reused from the user's cache only while nothing they come from changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from envdoctor.compat.loader import load_tables
from envdoctor.compat.store import ENTRY, cached_tables
from envdoctor.errors import EnvdoctorError
from envdoctor.platform.cache import CacheDir
from tests.compat.test_tables import SITE_TORCH as TABLE_SITE_TORCH

# A site table (tests/compat/test_tables.py's), its one index URL marked so it can be found.
SITE_TORCH = textwrap.dedent(TABLE_SITE_TORCH).replace("example.org/cu130", "example.org/AAAA")


def envdoctor(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        check=False,
    )


def index_url(args: list[str], cache: Path) -> str:
    done = envdoctor(["tables", "show", "pytorch", "--json", *args], cache)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    return "AAAA" if "example.org/AAAA" in text else "BBBB" if "example.org/BBBB" in text else ""


def test_an_edited_table_is_read_again_not_served_from_the_cache(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    table = site / "torch.yaml"
    table.write_text(SITE_TORCH)
    cache = tmp_path / "cache"
    assert index_url(["--tables", str(site)], cache) == "AAAA"
    assert (cache / "envdoctor" / ENTRY).is_file()
    assert index_url(["--tables", str(site)], cache) == "AAAA"  # from the cache
    table.write_text(SITE_TORCH.replace("AAAA", "BBBB"))  # same size: only the bytes differ
    assert index_url(["--tables", str(site)], cache) == "BBBB"
    assert index_url([], cache) == ""  # without --tables: the shipped rows again


def test_no_cache_neither_reads_nor_writes_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done = envdoctor(["tables", "show", "pytorch", "--no-cache"], cache)
    assert done.returncode == 0, done.stderr
    assert not (cache / "envdoctor" / ENTRY).exists()


PROBE = textwrap.dedent(
    """
    import os, sys
    from envdoctor.compat.store import cached_tables
    from envdoctor.platform.cache import user_cache
    tables = cached_tables(None, {}, user_cache(os.environ))
    print(len(tables.torch_releases), "yaml" in sys.modules, "envdoctor.compat.loader" in sys.modules)
    """
)


def test_a_hit_imports_neither_the_yaml_reader_nor_the_loader(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60
        ).stdout.split()
        for _ in range(2)
    ]
    shipped = str(len(load_tables().torch_releases))
    assert runs == [[shipped, "True", "True"], [shipped, "False", "False"]]


def test_an_entry_that_does_not_decode_is_a_miss(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "envdoctor"))
    first = cached_tables(None, {}, cache)
    entry = cache.read(ENTRY)
    assert entry is not None and first == load_tables()
    entry["tables"]["torch_releases"] = "not a list"  # the same key, a shape it cannot read
    assert cache.write(ENTRY, entry)
    assert cached_tables(None, {}, cache) == first
    stored = cache.read(ENTRY)
    assert stored is not None and isinstance(stored["tables"]["torch_releases"], list)  # mended


def test_an_entry_for_other_tables_is_not_used(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "envdoctor"))
    cached_tables(None, {}, cache)
    entry = cache.read(ENTRY)
    assert entry is not None
    entry["key"] = "0" * 64
    entry["tables"]["torch_releases"] = []  # would remove every torch row, were it used
    assert cache.write(ENTRY, entry)
    assert cached_tables(None, {}, cache).torch_releases == load_tables().torch_releases


def test_a_fifo_among_the_tables_is_an_error_not_a_hang(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    os.mkfifo(site / "torch.yaml")  # nobody writes it: opening it to read would block
    cache = CacheDir(str(tmp_path / "envdoctor"))
    errors: list[Exception] = []

    def load() -> None:
        try:
            cached_tables(str(site), {}, cache)
        except EnvdoctorError as exc:
            errors.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "reading the tables blocked on a FIFO"
    assert len(errors) == 1 and "not a regular file" in str(errors[0])


def test_a_broken_table_fails_even_when_an_earlier_good_one_is_cached(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "torch.yaml").write_text(SITE_TORCH)
    cache = tmp_path / "cache"
    assert index_url(["--tables", str(site)], cache) == "AAAA"
    (site / "torch.yaml").write_text(SITE_TORCH.replace("schema: 1", "schema: 7"))
    done = envdoctor(["tables", "show", "pytorch", "--tables", str(site)], cache)
    assert done.returncode == 2 and "schema 7 is not supported" in done.stderr


@pytest.mark.parametrize("command", [["check", "--json"], ["recommend", "--json"]])
def test_the_commands_that_judge_use_and_fill_the_cache(tmp_path: Path, command: list[str]) -> None:
    cache = tmp_path / "cache"
    done = envdoctor(command, cache)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)
    assert (cache / "envdoctor" / ENTRY).is_file()


def test_an_empty_tables_directory_is_refused_even_after_a_cached_run(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "cache"))
    cached_tables(None, {}, cache)  # the shipped tables, now stored
    empty = tmp_path / "mine"
    empty.mkdir()
    with pytest.raises(EnvdoctorError, match=r"no \*\.yaml"):
        cached_tables(str(empty), {}, cache)  # the same files, one more directory: not a hit
