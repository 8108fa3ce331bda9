"""The checked knowledge base is reused from the user's cache only while nothing it comes from
changed (kb/store.py), and what the cache gives is exactly what reading the files gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envdoctor import cachekey
from envdoctor.errors import EnvdoctorError
from envdoctor.kb import load_default_kb, load_kb, store
from envdoctor.kb.model import KnowledgeBase
from envdoctor.kb.store import ENTRY, SHIPPED, cached_kb
from envdoctor.platform.cache import CacheDir
from tests.kb.helpers import CORPUS, HEADER_END

SIGNATURE = """\
schema: 1
signatures:
  - id: test.made-up
    title: {title}
    role: error
    confidence: 0.5
    summary: A made-up cause
    explanation: Only for this test.
    fix: ["nothing"]
    patterns:
      - regex: 'MADEUP_FAILURE code (?P<code>\\d+)'
        examples: ["MADEUP_FAILURE code 7"]
"""


@pytest.fixture
def cache(tmp_path: Path) -> CacheDir:
    return CacheDir(str(tmp_path / "envdoctor"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the shipped knowledge base, plus one signature file this test can edit."""
    copy = tmp_path / "kb"
    (copy / "signatures").mkdir(parents=True)
    for name in os.listdir(SHIPPED):
        if name.endswith(".yaml"):
            shutil.copy(os.path.join(SHIPPED, name), copy / name)
    for name in os.listdir(os.path.join(SHIPPED, "signatures")):
        shutil.copy(os.path.join(SHIPPED, "signatures", name), copy / "signatures" / name)
    (copy / "signatures" / "zz-test.yaml").write_text(SIGNATURE.format(title="First title"))
    return copy


def test_a_hit_is_what_reading_the_files_gives(cache: CacheDir) -> None:
    read = cached_kb(cache)  # an empty cache: read, checked, stored
    assert cache.read(ENTRY) is not None
    stored = cached_kb(cache)
    assert stored == read == load_default_kb()
    assert stored is not read  # decoded from the entry, not the loader's


def test_an_edited_signature_file_is_read_again(cache: CacheDir, root: Path) -> None:
    """Its bytes are the key, not its size or time: the edit keeps both."""
    path = root / "signatures" / "zz-test.yaml"
    assert cached_kb(cache, str(root)).get("test.made-up").title == "First title"
    assert cached_kb(cache, str(root)).get("test.made-up").title == "First title"  # a hit
    before = path.stat()
    path.write_text(SIGNATURE.format(title="Other title"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert cached_kb(cache, str(root)).get("test.made-up").title == "Other title"
    assert cached_kb(cache, str(root)) == load_kb(root)


def test_an_added_or_removed_signature_file_is_read_again(cache: CacheDir, root: Path) -> None:
    extra = root / "signatures" / "zz-test.yaml"
    assert "test.made-up" in cached_kb(cache, str(root)).ids
    extra.unlink()
    assert "test.made-up" not in cached_kb(cache, str(root)).ids
    extra.write_text(SIGNATURE.format(title="First title"))
    assert "test.made-up" in cached_kb(cache, str(root)).ids


def test_another_envdoctor_version_does_not_use_the_entry(
    cache: CacheDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached_kb(cache)
    first = cache.read(ENTRY)
    monkeypatch.setattr(cachekey, "__version__", "0.0.0-other")
    assert cached_kb(cache) == load_default_kb()
    second = cache.read(ENTRY)
    assert first is not None and second is not None and first["key"] != second["key"]


def test_a_file_broken_after_a_good_run_is_an_error_not_the_old_entry(
    cache: CacheDir, root: Path
) -> None:
    assert cached_kb(cache, str(root)).get("test.made-up").title == "First title"
    (root / "signatures" / "zz-test.yaml").write_text(SIGNATURE.format(title="[unclosed"))
    with pytest.raises(EnvdoctorError):
        cached_kb(cache, str(root))


def test_an_entry_that_does_not_decode_is_a_miss(cache: CacheDir) -> None:
    cached_kb(cache)
    entry = cache.read(ENTRY)
    assert entry is not None
    entry["kb"]["signatures"][0]["patterns"] = "not a list of patterns"
    assert cache.write(ENTRY, entry)
    assert cached_kb(cache) == load_default_kb()


def test_a_broken_file_is_the_loaders_error_and_is_not_stored(cache: CacheDir, root: Path) -> None:
    (root / "signatures" / "zz-test.yaml").write_text(SIGNATURE.format(title="[unclosed"))
    with pytest.raises(EnvdoctorError) as info:
        cached_kb(cache, str(root))
    assert "zz-test.yaml" in str(info.value.where)
    assert cache.read(ENTRY) is None


def test_without_a_cache_nothing_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cache given (--no-cache) means none is found on the side either."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cached_kb(None) == load_default_kb()
    assert list(tmp_path.iterdir()) == []


def _explain(log: Path, cache: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envdoctor", "explain", str(log), "--json", *options],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        check=False,
    )


def test_explain_reads_the_same_from_the_cache_as_from_the_files(tmp_path: Path) -> None:
    """Two real runs with one cache: the first reads the signatures and stores them, the second
    explains from the stored ones, and the reports are the same."""
    log = tmp_path / "train.log"
    fixture = (CORPUS / "cuda.out-of-memory" / "pytorch-40863.txt").read_bytes()
    log.write_bytes(fixture.partition(HEADER_END)[2])
    fresh = _explain(log, tmp_path / "unused", "--no-cache")
    assert not (tmp_path / "unused" / "envdoctor" / ENTRY).exists()  # --no-cache leaves it be
    runs = [_explain(log, tmp_path / "cache") for _ in range(2)]
    assert (tmp_path / "cache" / "envdoctor" / ENTRY).is_file()
    assert fresh.returncode == runs[0].returncode == runs[1].returncode == 1, fresh.stderr
    reports = [json.loads(done.stdout) for done in (fresh, *runs)]
    assert reports[0] == reports[1] == reports[2]
    assert reports[2]["causes"][0]["id"] == "cuda.out-of-memory"


def test_a_file_that_changes_while_it_is_read_is_not_stored(
    cache: CacheDir, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key was taken before the read: stored, it would name content the files no longer
    have (and serve it if they went back to the old bytes)."""
    read = store._read

    def read_then_edit(where: str) -> KnowledgeBase:
        kb = read(where)
        (root / "signatures" / "zz-test.yaml").write_text(SIGNATURE.format(title="Later title"))
        return kb

    monkeypatch.setattr(store, "_read", read_then_edit)
    assert cached_kb(cache, str(root)).get("test.made-up").title == "First title"
    assert cache.read(ENTRY) is None
    monkeypatch.setattr(store, "_read", read)
    assert cached_kb(cache, str(root)).get("test.made-up").title == "Later title"
    assert cache.read(ENTRY) is not None


def test_a_planted_entry_behind_a_symlinked_cache_directory_is_not_used(tmp_path: Path) -> None:
    """Someone who can point the cache at a directory of theirs (a shared XDG_CACHE_HOME, a
    symlink) can also work out the key: its parts are public. The entry is still never read,
    because the cache directory must be the user's own real directory (platform/cache.py)."""
    log = tmp_path / "train.log"
    fixture = (CORPUS / "cuda.out-of-memory" / "pytorch-40863.txt").read_bytes()
    log.write_bytes(fixture.partition(HEADER_END)[2])
    assert _explain(log, tmp_path / "genuine").returncode == 1
    entry = json.loads((tmp_path / "genuine" / "envdoctor" / ENTRY).read_text())
    for signature in entry["kb"]["signatures"]:
        signature["title"] = "PLANTED TITLE"
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    (planted / ENTRY).write_text(json.dumps(entry))
    (planted / ENTRY).chmod(0o600)
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "envdoctor").symlink_to(planted)
    done = _explain(log, tmp_path / "xdg")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["causes"][0]["id"] == "cuda.out-of-memory"
    assert "PLANTED" not in done.stdout
    # the same entry in the user's own directory is used: the test above can fail
    shutil.copy(planted / ENTRY, tmp_path / "genuine" / "envdoctor" / ENTRY)
    assert "PLANTED" in _explain(log, tmp_path / "genuine").stdout


def test_an_install_under_a_path_that_is_not_utf8_explains(tmp_path: Path) -> None:
    """The cache entry is named after the install's directory; a Latin-1 directory name (bytes
    that are not UTF-8) must not crash the import."""
    parent = tmp_path / os.fsdecode(b"caf\xe9")
    package = Path(cachekey.PACKAGE)
    shutil.copytree(package, parent / "envdoctor", ignore=shutil.ignore_patterns("__pycache__"))
    log = tmp_path / "oom.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    env = {**os.environ, "PYTHONPATH": str(parent), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "envdoctor", "explain", "--format", "json", str(log)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["causes"][0]["id"] == "cuda.out-of-memory"
    assert len(list((tmp_path / "cache" / "envdoctor").glob("knowledge-base-*.json"))) == 1
