"""scripts/test-tmpdir: the suite's temporary files on a RAM file system, never in a place that
someone else prepared.

/dev/shm is writable by everyone, as /tmp is: a directory, link or file put at
``envdoctor-tests-UID`` by another user must not become the place where the suite writes and
runs its programs. Each case uses a directory of its own on /dev/shm as the RAM file system
(``ENVDOCTOR_TEST_RAM``), so the suite's own directory is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.shellcheck import shellcheck

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test-tmpdir"
CHECKOUT_CACHE = Path(__file__).resolve().parents[1] / ".test-cache"  # git-ignored
SHM = Path("/dev/shm")
NOBODY = 65534


def _on_tmpfs(path: Path) -> bool:
    done = subprocess.run(
        ["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() == "tmpfs"


@pytest.fixture
def ram() -> Iterator[Path]:
    if not SHM.is_dir() or not _on_tmpfs(SHM) or not os.access(SHM, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm")
    root = Path(tempfile.mkdtemp(dir=SHM, prefix="test-tmpdir-"))
    root.chmod(0o1777)  # as /dev/shm itself
    yield root
    shutil.rmtree(root, ignore_errors=True)


def chosen(ram: Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "ENVDOCTOR_TEST_TMP")}
    environ.update(ENVDOCTOR_TEST_RAM=str(ram), **env)
    done = subprocess.run(
        [str(SCRIPT)], capture_output=True, text=True, env=environ, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.strip()


def test_a_new_directory_of_ours_on_tmpfs_is_chosen(ram: Path) -> None:
    mine = ram / f"envdoctor-tests-{os.getuid()}"
    assert chosen(ram) == str(mine)
    assert mine.is_dir() and not mine.is_symlink()
    assert mine.stat().st_mode & 0o777 == 0o700
    assert list(mine.iterdir()) == []  # its probe program is gone
    assert chosen(ram) == str(mine)  # and the next run takes it again


def test_the_users_tmpdir_is_kept_and_disk_turns_it_off(ram: Path, tmp_path: Path) -> None:
    assert chosen(ram, TMPDIR=str(tmp_path)) == str(tmp_path)
    assert chosen(ram, ENVDOCTOR_TEST_TMP="disk") == ""
    assert not (ram / f"envdoctor-tests-{os.getuid()}").exists()


def test_a_file_system_that_is_not_tmpfs_is_not_taken() -> None:
    # the checkout's file system: the suite's own temporary directory is on tmpfs where it can be
    CHECKOUT_CACHE.mkdir(exist_ok=True)
    disk = Path(tempfile.mkdtemp(dir=CHECKOUT_CACHE, prefix="test-tmpdir-"))
    try:
        if _on_tmpfs(disk):
            pytest.skip("the checkout itself is on tmpfs")
        assert chosen(disk) == ""
        assert list(disk.iterdir()) == []
    finally:
        shutil.rmtree(disk, ignore_errors=True)


def test_too_little_room_or_a_root_others_may_rename_in_is_not_taken(ram: Path) -> None:
    free_kib = shutil.disk_usage(ram).free // 1024
    assert chosen(ram, ENVDOCTOR_TEST_RAM_MIN_KIB=str(free_kib + 1024 * 1024)) == ""
    ram.chmod(0o777)  # not sticky: another user could swap our directory for theirs
    assert chosen(ram) == ""
    assert list(ram.iterdir()) == []


def test_a_link_put_there_by_someone_else_is_not_followed(ram: Path, tmp_path: Path) -> None:
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    (ram / f"envdoctor-tests-{os.getuid()}").symlink_to(target)
    assert chosen(ram) == ""
    assert list(target.iterdir()) == []  # nothing was written through the link


def test_a_directory_others_may_enter_is_not_taken(ram: Path) -> None:
    shared = ram / f"envdoctor-tests-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    assert chosen(ram) == ""
    assert list(shared.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user owns needs root")
def test_a_directory_another_user_owns_is_not_taken(ram: Path) -> None:
    theirs = ram / f"envdoctor-tests-{os.getuid()}"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    assert chosen(ram) == ""
    assert list(theirs.iterdir()) == []


def test_a_file_in_its_place_is_not_taken(ram: Path) -> None:
    (ram / f"envdoctor-tests-{os.getuid()}").write_text("not a directory\n")
    assert chosen(ram) == ""


def test_shellcheck_clean() -> None:
    assert shellcheck(SCRIPT) == ""
