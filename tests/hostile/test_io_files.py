"""Issue 13 items 7 and 8: one file writer for every ``-o`` and for ``run --save``.

``-o`` replaces a regular file atomically (by a file of the invoking user's, with a mode from
its umask: issue 35), writes through a FIFO or a character device instead of replacing it,
follows only a symbolic link that its user or root owns, refuses what it must not touch, and
never leaves a half-written file or a temporary one behind. ``--save`` never follows a link and never writes into another
user's file. CI runs as root: the tests that need it (other owners, device nodes) run there.
"""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.snapshot import dump_snapshot
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.hostile.child import envdoctor
from tests.hostile.users import sh_as_other
from tests.runner import invoke as cli_invoke

NOBODY = 65534


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def drop_to_other() -> None:  # pragma: no cover (runs in the child)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snap.json"
    path.write_text(dump_snapshot(scenario_facts("healthy_h100")), encoding="utf-8")
    return path


def invoke(*args: str) -> object:
    host = FakeHost.scenario("healthy_h100")
    return cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))


def check_to(snap: Path, target: Path | str) -> tuple[int, str]:
    result = cli_invoke(["check", "--snapshot", str(snap), "-o", str(target)])
    return result.exit_code, result.output


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --- regular files ------------------------------------------------------------------------------


def with_umask(mask: int, snap: Path, target: Path) -> tuple[int, str]:
    old = os.umask(mask)
    try:
        return check_to(snap, target)
    finally:
        os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_has_its_mode_from_the_umask(
    snap: Path, tmp_path: Path, mask: int, mode: int
) -> None:
    code, output = with_umask(mask, snap, tmp_path / "report.txt")
    assert code == 0, output
    assert stat.S_IMODE((tmp_path / "report.txt").stat().st_mode) == mode
    assert (tmp_path / "report.txt").read_text().startswith("envdoctor ")


def test_an_existing_file_is_replaced_by_a_new_one_of_the_umasks_mode(
    snap: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.txt"
    target.write_text("old")
    target.chmod(0o666)
    inode = target.stat().st_ino
    assert with_umask(0o022, snap, target)[0] == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # never the old file's mode
    assert target.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert target.read_text().startswith("envdoctor ") and leftovers(tmp_path) == []


@as_root
def test_root_never_keeps_another_users_file_as_theirs(snap: Path, shared_dir: Path) -> None:
    """Issue 35: `fix -o /tmp/fix.sh` over a user's 0777 file kept it theirs: they rewrote
    root's script before root ran it."""
    target = shared_dir / "fix.sh"
    sh_as_other(f"printf '#!/bin/sh\\n' >{target}; chmod 0777 {target}")
    result = invoke("fix", "-o", str(target))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    info = target.stat()
    assert (info.st_uid, info.st_gid) == (0, 0)
    assert stat.S_IMODE(info.st_mode) & 0o022 == 0  # 0777 less root's umask: no one else writes
    # the user can no longer rewrite it
    rewrite = subprocess.run(
        ["/bin/sh", "-c", f"echo evil >{target}"],
        preexec_fn=drop_to_other,
        capture_output=True,
        check=False,
    )
    assert rewrite.returncode != 0
    assert target.read_text().startswith("#!/usr/bin/env -S -i bash")


def test_an_unredacted_snapshot_is_private(tmp_path: Path) -> None:
    fresh, existing = tmp_path / "fresh.json", tmp_path / "existing.json"
    existing.write_text("{}")
    existing.chmod(0o664)
    for target in (fresh, existing):
        result = invoke("collect", "--no-redact", "-o", str(target))
        assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
        assert stat.S_IMODE(target.stat().st_mode) == 0o600, target
    redacted = tmp_path / "redacted.json"
    assert invoke("collect", "-o", str(redacted)).exit_code == 0  # type: ignore[attr-defined]
    assert stat.S_IMODE(redacted.stat().st_mode) == 0o666 & ~current_umask()


def test_a_fix_script_is_executable_new_or_replaced(tmp_path: Path) -> None:
    fresh, existing = tmp_path / "fix.sh", tmp_path / "old.sh"
    existing.write_text("#!/bin/sh\n")
    existing.chmod(0o640)
    for target in (fresh, existing):
        result = invoke("fix", "-o", str(target))
        assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o777 & ~current_umask()
    assert stat.S_IMODE(existing.stat().st_mode) == 0o777 & ~current_umask()  # not its 0640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(snap: Path, tmp_path: Path) -> None:
    """A file-size limit makes the write fail half-way (EFBIG), as a full disk would."""
    target = tmp_path / "report.json"
    target.write_text("the old report\n")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    result = envdoctor("check", "--snapshot", str(snap), "--json", "-o", str(target), limit=limit)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"envdoctor: error: {target}: cannot write the output file")
    assert target.read_text() == "the old report\n"
    assert leftovers(tmp_path) == []


# --- what must never be replaced ------------------------------------------------------------


def test_dev_full_is_written_through_and_stays_a_device(snap: Path) -> None:
    before = os.stat("/dev/full")
    code, output = check_to(snap, "/dev/full")
    assert code == 2
    assert (
        output
        == "envdoctor: error: /dev/full: cannot write the output file: No space left on device\n"
    )
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_dev_null_takes_the_report(snap: Path) -> None:
    assert check_to(snap, "/dev/null") == (0, "")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_is_written_through_to_its_reader(snap: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as reader:  # blocks until a writer opens it
            got.append(reader.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    outcomes = []
    for _ in range(200):  # until the reader thread has the FIFO open
        code, output = check_to(snap, fifo)
        outcomes.append(output)
        if code == 0:
            break
        assert "a FIFO that no process reads" in output  # never a hang meanwhile
        threading.Event().wait(0.02)
    reader.join(timeout=30)
    assert got and got[0].startswith(b"envdoctor "), outcomes[-1]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(snap: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    code, output = check_to(snap, fifo)
    assert code == 2 and "a FIFO that no process reads" in output
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_proc_self_fd_1_writes_to_stdout(snap: Path) -> None:
    result = envdoctor("check", "--snapshot", str(snap), "--json", "-o", "/proc/self/fd/1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("{") and '"status": "healthy"' in result.stdout


def test_a_symlink_of_ours_leads_to_its_file_and_stays_a_link(snap: Path, tmp_path: Path) -> None:
    real = tmp_path / "reports" / "2026-05-01.txt"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "latest.txt"
    link.symlink_to(real)
    assert check_to(snap, link)[0] == 0
    assert link.is_symlink() and real.read_text().startswith("envdoctor ")
    assert stat.S_IMODE(real.stat().st_mode) == 0o666 & ~current_umask()
    assert leftovers(real.parent) == [] and leftovers(tmp_path) == []


@as_root
def test_a_symlink_planted_by_another_user_is_not_followed(snap: Path, tmp_path: Path) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("root:secret\n")
    trap = tmp_path / "report.txt"
    trap.symlink_to(victim)
    os.lchown(trap, NOBODY, NOBODY)
    code, output = check_to(snap, trap)
    assert code == 2 and "belongs to another user (uid 65534); not followed" in output
    assert victim.read_text() == "root:secret\n" and trap.is_symlink()


def test_a_dangling_symlink_and_a_directory_are_refused(snap: Path, tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert "a symbolic link to a file that does not exist" in check_to(snap, dangling)[1]
    assert not (tmp_path / "nowhere").exists()
    assert "it is a directory" in check_to(snap, tmp_path)[1]


@as_root
def test_a_block_device_is_refused(snap: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    try:
        os.mknod(disk, stat.S_IFBLK | 0o600, os.makedev(7, 0))
    except PermissionError:
        pytest.skip("this container may not create device nodes")
    code, output = check_to(snap, disk)
    assert code == 2 and "a block device" in output
    assert stat.S_ISBLK(disk.lstat().st_mode)


# --- run --save -----------------------------------------------------------------------------


def run_save(save: Path) -> subprocess.CompletedProcess[str]:
    return envdoctor("run", "--save", str(save), "--", "echo", "hello")


def test_save_writes_a_new_log_0644_and_truncates_its_own(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    assert run_save(log).returncode == 0
    assert log.read_text() == "hello\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o666 & ~current_umask()
    log.write_text("a much longer old log\n" * 10)
    assert run_save(log).returncode == 0
    assert log.read_text() == "hello\n"


def test_save_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    link = tmp_path / "train.log"
    link.symlink_to(victim)
    result = run_save(link)
    assert result.returncode == 2
    assert "is a symbolic link: --save does not follow links" in result.stderr
    assert result.stdout == ""  # refused before the command ran
    assert victim.read_text() == "keep me\n"


@as_root
def test_save_never_writes_into_another_users_file(tmp_path: Path) -> None:
    theirs = tmp_path / "train.log"
    theirs.write_text("their log\n")
    os.chown(theirs, NOBODY, NOBODY)
    result = run_save(theirs)
    assert result.returncode == 2 and "belongs to another user (uid 65534)" in result.stderr
    assert theirs.read_text() == "their log\n"
