"""Paths other users own (issue 35): root's writes and reads never go through them.

- ``-o`` and ``run --save`` followed a directory symlink in the middle of a path, whoever owned
  it (``run --save /srv/shared/logs/train`` wrote root's file into a directory the link's owner
  chose); now every name is looked up on its own (``openat``, ``O_NOFOLLOW``) and a link is
  followed only when it is the user's or root's, a directory only when it is the user's or
  root's and writable by no one else unless sticky;
- ``run --save`` into a hard link of a root file (``protected_hardlinks=0``) is refused;
- a FIFO swapped for a link between the look and the open is not followed;
- input files: another user's link to a root-only file is refused (``explain`` put the secret
  into its report), and no error message quotes a value of a file not everyone may read
  (``spec validate /etc/shadow`` printed its first line).

Each attack is made by another user (nobody) where it needs one: as root, else skipped.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import resolve
from envdoctor.render import files
from envdoctor.snapshot import dump_snapshot
from tests.conftest import scenario_facts
from tests.hostile.child import envdoctor
from tests.hostile.users import needs_root, sh_as_other

SHADOW_TEXT = "root:$6$s3cr3tsalt$hash:19000:0:99999:7:::\n"


@pytest.fixture
def root_dir(tmp_path: Path) -> Path:
    """A directory only root writes, standing in for /etc/cron.d."""
    d = tmp_path / "cron.d"
    d.mkdir()
    return d


@pytest.fixture(scope="module", autouse=True)
def _snapshot(tmp_path_factory: pytest.TempPathFactory) -> None:
    global SNAPSHOT
    SNAPSHOT = tmp_path_factory.mktemp("snap") / "snap.json"
    SNAPSHOT.write_text(dump_snapshot(scenario_facts("healthy_h100")), encoding="utf-8")


SNAPSHOT = Path()


def report_to(target: Path | str) -> subprocess.CompletedProcess[str]:
    return envdoctor("check", "--snapshot", str(SNAPSHOT), "-o", str(target))


def save_to(target: Path | str) -> subprocess.CompletedProcess[str]:
    return envdoctor("run", "--save", str(target), "--", "echo", "* * * * * root evil")


# --- writes ---------------------------------------------------------------------------------------


@needs_root
@pytest.mark.parametrize("write", [report_to, save_to], ids=["-o", "run --save"])
def test_a_users_directory_link_in_the_middle_is_not_followed(
    write: object, shared_dir: Path, root_dir: Path
) -> None:
    sh_as_other(f"ln -s {root_dir} {shared_dir}/logs")
    result = write(shared_dir / "logs" / "train")  # type: ignore[operator]  # one of the two
    assert result.returncode == 2, result.stdout
    assert "logs is a symbolic link that belongs to another user (uid 65534)" in result.stderr
    assert list(root_dir.iterdir()) == []


@needs_root
@pytest.mark.parametrize("write", [report_to, save_to], ids=["-o", "run --save"])
def test_a_directory_of_another_user_is_not_written_in(write: object, shared_dir: Path) -> None:
    sh_as_other(f"mkdir {shared_dir}/alice")
    result = write(shared_dir / "alice" / "report")  # type: ignore[operator]  # one of the two
    assert result.returncode == 2
    assert "alice belongs to another user (uid 65534)" in result.stderr
    assert list((shared_dir / "alice").iterdir()) == []


@pytest.mark.parametrize("write", [report_to, save_to], ids=["-o", "run --save"])
def test_a_group_writable_directory_without_sticky_is_refused(
    write: object, tmp_path: Path
) -> None:
    shared = tmp_path / "team"
    shared.mkdir()
    shared.chmod(0o775)
    result = write(shared / "report")  # type: ignore[operator]  # one of the two
    assert result.returncode == 2
    assert "is writable by its group and not sticky" in result.stderr
    assert list(shared.iterdir()) == []


def test_links_of_ones_own_are_followed_at_any_depth(tmp_path: Path) -> None:
    real = tmp_path / "real" / "reports"
    real.mkdir(parents=True)
    (tmp_path / "via").symlink_to(tmp_path / "real")
    (real / "r.txt").write_text("old")
    (tmp_path / "latest").symlink_to("via/reports/../reports/r.txt")
    result = report_to(tmp_path / "latest")
    assert result.returncode == 0, result.stderr
    assert (real / "r.txt").read_text().startswith("envdoctor ")


@needs_root
def test_save_refuses_a_hard_link_to_a_root_file(shared_dir: Path) -> None:
    """With protected_hardlinks=0 a user links root's file into /tmp; the link, owned by root
    like its file, is what the attack leaves: made by the user where the kernel lets them."""
    root_dir = shared_dir.parent / "cron.d"  # on the file system of the shared directory
    root_dir.mkdir()
    victim = root_dir / "root-job"
    victim.write_text("keep\n")
    trap = shared_dir / "train.log"
    if Path("/proc/sys/fs/protected_hardlinks").read_text().strip() == "0":
        sh_as_other(f"ln {victim} {trap}")
    else:  # the kernel stops the user; the state the attack needs, made by root
        os.link(victim, trap)
    result = save_to(trap)
    assert result.returncode == 2
    assert "has 2 names (hard links)" in result.stderr
    assert victim.read_text() == "keep\n"


@needs_root
def test_a_fifo_swapped_for_a_link_is_not_followed(shared_dir: Path, root_dir: Path) -> None:
    """-o looks at a user's FIFO, the user replaces it with a link to root's file, then -o
    opens it: the open does not follow the link (before, root wrote into the file)."""
    victim = root_dir / "passwd"
    victim.write_text("keep\n")
    fifo = shared_dir / "out"
    sh_as_other(f"mkfifo {fifo}")
    found = resolve(fifo, writing=True)
    try:
        assert found.info is not None and stat.S_ISFIFO(found.info.st_mode)
        sh_as_other(f"rm {fifo}; ln -s {victim} {fifo}")
        with pytest.raises(EnvdoctorError, match="changed while being opened"):
            files._write_through(found, b"root's report\n", "the output file", str(fifo))
    finally:
        os.close(found.fd)
    assert victim.read_text() == "keep\n"


# --- reads ----------------------------------------------------------------------------------------


@pytest.fixture
def secret(root_dir: Path) -> Path:
    path = root_dir / "shadow"
    path.write_text(SHADOW_TEXT)
    path.chmod(0o600)
    return path


@needs_root
@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "{}", "-o", "{out}"],
        ["spec", "validate", "{}"],
        ["check", "--snapshot", "{}", "-o", "{out}"],
    ],
    ids=["explain", "spec validate", "check --snapshot"],
)
def test_a_users_link_to_a_root_file_is_not_read(
    argv: list[str], shared_dir: Path, secret: Path, tmp_path: Path
) -> None:
    sh_as_other(f"ln -s {secret} {shared_dir}/train.log")
    out = tmp_path / "report.txt"
    result = envdoctor(*[a.format(shared_dir / "train.log", out=out) for a in argv])
    assert result.returncode == 2, result.stdout
    assert "belongs to another user (uid 65534); not followed" in result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr
    assert not out.exists() or "s3cr3t" not in out.read_text()


def test_no_error_quotes_a_file_not_everyone_may_read(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW_TEXT)
    shadow.chmod(0o600)
    spec = envdoctor("spec", "validate", str(shadow))
    assert spec.returncode == 2
    assert "s3cr3t" not in spec.stderr
    assert "not shown: " in spec.stderr and "is not readable by everyone" in spec.stderr
    snap = tmp_path / "snap.json"
    snap.write_text('{"kind": "envdoctor-snapshot", "schema_version": "s3cr3t"}')
    snap.chmod(0o600)
    checked = envdoctor("check", "--snapshot", str(snap))
    assert checked.returncode == 2 and "s3cr3t" not in checked.stderr
    # a file everyone may read anyway keeps its helpful message
    shadow.chmod(0o644)
    assert "root:$6$s3cr3t" in envdoctor("spec", "validate", str(shadow)).stderr


def test_explain_of_a_fifo_no_one_writes_is_an_error_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envdoctor import inputfile

    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    monkeypatch.setattr(inputfile, "FIFO_WAIT", 0.2)
    with pytest.raises(
        EnvdoctorError, match=re.escape("a FIFO that no process wrote to within 0.2 s")
    ):
        inputfile.open_stream(str(fifo))
    # a writer that comes is read
    writer = threading.Thread(target=lambda: fifo.write_text("RuntimeError: CUDA error\n"))
    writer.start()
    stream = inputfile.open_stream(str(fifo))
    writer.join(timeout=10)
    with stream:
        assert stream.read() == b"RuntimeError: CUDA error\n"
