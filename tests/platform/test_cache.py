"""The per-user cache directory: where it is, and that nothing unsafe or foreign is ever read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from envdoctor.platform.cache import MAX_ENTRY_BYTES, CacheDir, cache_location, user_cache


def test_location_follows_xdg_then_home() -> None:
    assert cache_location({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}) == "/x/cache/envdoctor"
    # A relative XDG_CACHE_HOME is invalid (XDG base directory spec): ignored.
    assert cache_location({"XDG_CACHE_HOME": "rel", "HOME": "/h/"}) == "/h/.cache/envdoctor"
    assert cache_location({"HOME": "relative"}) is None
    assert cache_location({}) is None and user_cache({}) is None


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_round_trip_creates_private_directories_and_files(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "xdg" / "envdoctor"))
    assert cache.read("entry.json") is None
    assert cache.write("entry.json", {"a": [1, "é"]})
    assert cache.read("entry.json") == {"a": [1, "é"]}
    assert _mode(tmp_path / "xdg") == 0o700 and _mode(tmp_path / "xdg" / "envdoctor") == 0o700
    assert _mode(tmp_path / "xdg" / "envdoctor" / "entry.json") == 0o600
    assert cache.write("entry.json", {"b": 2}) and cache.read("entry.json") == {"b": 2}
    assert sorted(os.listdir(cache.path)) == ["entry.json"]  # no temporary file left behind
    cache.remove("entry.json")
    cache.remove("entry.json")  # already gone: nothing happens
    assert cache.read("entry.json") is None and os.listdir(cache.path) == []


def test_unsafe_or_corrupt_entries_are_misses(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "envdoctor"))
    assert cache.write("good.json", {"ok": True})
    root = Path(cache.path)
    (root / "link.json").symlink_to(root / "good.json")
    assert cache.read("link.json") is None  # never follows a symlink
    (root / "open.json").write_text('{"ok": true}')
    (root / "open.json").chmod(0o644)
    assert cache.read("open.json") is None  # readable by others: not ours alone
    for name, text in (("corrupt.json", '{"ok": tr'), ("list.json", "[1, 2]"), ("empty.json", "")):
        (root / name).write_text(text)
        (root / name).chmod(0o600)
        assert cache.read(name) is None, name
    big = root / "big.json"
    big.write_text('{"x": "' + "y" * MAX_ENTRY_BYTES + '"}')
    big.chmod(0o600)
    assert cache.read("big.json") is None
    assert not cache.write("huge.json", {"x": "y" * MAX_ENTRY_BYTES})
    (root / "dir.json").mkdir(mode=0o700)
    assert cache.read("dir.json") is None


def test_a_directory_open_to_others_or_a_symlink_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    CacheDir(str(shared)).write("e.json", {"ok": True})
    shared.chmod(0o755)
    assert CacheDir(str(shared)).read("e.json") is None
    assert not CacheDir(str(shared)).write("f.json", {})
    shared.chmod(0o700)
    link = tmp_path / "link"
    link.symlink_to(shared)
    assert CacheDir(str(link)).read("e.json") is None
    assert not CacheDir(str(link)).write("f.json", {})


def test_another_users_entries_and_directories_are_never_trusted(tmp_path: Path) -> None:
    """The owner is compared with the effective uid: pretend to be someone else."""
    mine = CacheDir(str(tmp_path / "home" / ".cache" / "envdoctor"))
    assert mine.write("e.json", {"ok": True})
    other = CacheDir(mine.path)
    other.uid = mine.uid + 1
    assert other.read("e.json") is None
    assert not other.write("e.json", {"evil": True})
    assert mine.read("e.json") == {"ok": True}
    # Nor does it create a cache beneath a directory it does not own (root with a user's HOME).
    elsewhere = CacheDir(str(tmp_path / "alice" / ".cache" / "envdoctor"))
    elsewhere.uid = mine.uid + 1
    assert not elsewhere.write("e.json", {})
    assert not (tmp_path / "alice").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_of_another_user_in_my_directory_is_ignored(tmp_path: Path) -> None:
    cache = CacheDir(str(tmp_path / "envdoctor"))
    assert cache.write("e.json", {"ok": True})
    os.chown(Path(cache.path) / "e.json", 12345, 12345)
    assert cache.read("e.json") is None
