"""SystemHost: the real machine behind the Host seam.

``subprocess``, ``shutil`` and ``signal`` are imported on first use (~7 ms): the start-up probe
starts no process and looks for no program, so it never pays for them.
"""

from __future__ import annotations

import os
import stat as statmod
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import MAX_READ_BYTES, FileInfo, Identity
from envdoctor.platform.nvml import NvmlSession, open_pynvml

if TYPE_CHECKING:
    import subprocess

    from envdoctor.platform.commands import CommandResult

MAX_OUTPUT_CHARS = 4 << 20


class SystemHost:
    """Reads the live machine. ``root`` lets a whole tree (e.g. a chroot) stand in for ``/``."""

    def __init__(self, root: str = "/", environ: Mapping[str, str] | None = None) -> None:
        self._root = root.rstrip("/")
        self._env = dict(os.environ if environ is None else environ)
        self._identity: Identity | None = None

    def _path(self, path: str) -> str:
        return self._root + path if self._root else path

    def read_text(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[str]:
        data = self.read_bytes(path, limit=limit)
        if isinstance(data, Found):
            return Found(data.value.decode("utf-8", errors="replace"))
        return data

    def read_bytes(self, path: str, *, limit: int = MAX_READ_BYTES) -> Probed[bytes]:
        try:
            with open(self._path(path), "rb") as handle:
                return Found(handle.read(limit))
        except (FileNotFoundError, NotADirectoryError):
            return Absent(f"{path} does not exist")
        except PermissionError:
            return ProbeFailed(f"permission denied reading {path}")
        except OSError as exc:
            return ProbeFailed(f"cannot read {path}: {exc.strerror or exc}")

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        try:
            return Found(tuple(sorted(os.listdir(self._path(path)))))
        except (FileNotFoundError, NotADirectoryError):
            return Absent(f"{path} does not exist")
        except PermissionError:
            return ProbeFailed(f"permission denied listing {path}")
        except OSError as exc:
            return ProbeFailed(f"cannot list {path}: {exc.strerror or exc}")

    def stat(self, path: str) -> Probed[FileInfo]:
        full = self._path(path)
        try:
            st = os.stat(full)
        except FileNotFoundError:
            return Absent(f"{path} does not exist")
        except OSError as exc:
            return ProbeFailed(f"cannot stat {path}: {exc.strerror or exc}")
        return Found(
            FileInfo(
                is_char_device=statmod.S_ISCHR(st.st_mode),
                is_dir=statmod.S_ISDIR(st.st_mode),
                mode=statmod.S_IMODE(st.st_mode),
                readable=os.access(full, os.R_OK),
                writable=os.access(full, os.W_OK),
                uid=st.st_uid,
                gid=st.st_gid,
            )
        )

    def realpath(self, path: str) -> str:
        try:
            resolved = os.path.realpath(self._path(path))
        except OSError:  # e.g. /proc/1/fd/N without ptrace rights: readlink is refused
            return path
        if self._root and resolved.startswith(self._root + "/"):
            return resolved[len(self._root) :]
        return resolved

    def env(self) -> Mapping[str, str]:
        return self._env

    def which(self, program: str) -> str | None:
        import shutil

        return shutil.which(program, path=self._env.get("PATH", os.defpath))

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        import subprocess

        from envdoctor.platform.commands import CommandResult

        args = tuple(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(self._env if env is None else env),
                start_new_session=True,  # so a timeout kills the whole process group
            )
        except FileNotFoundError:
            return CommandResult(args, "not-found", error=f"{args[0]}: not found")
        except OSError as exc:
            return CommandResult(args, "error", error=exc.strerror or str(exc))
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return CommandResult(
                args,
                "timeout",
                returncode=proc.returncode,
                stdout=_decode(out),
                stderr=_decode(err),
                seconds=timeout,
            )
        except BaseException:
            _kill_group(proc)  # Ctrl-C: never leave the child behind
            proc.wait()
            raise
        return CommandResult(
            args,
            "ok",
            returncode=proc.returncode,
            stdout=_decode(out),
            stderr=_decode(err),
            seconds=time.monotonic() - start,
        )

    def open_nvml(self, *, timeout: float) -> NvmlSession:
        return open_pynvml(timeout)

    def open_device(self, path: str, *, timeout: float) -> str:
        """On a worker thread, so that a driver stuck in open() costs ``timeout``, not a hang;
        the thread is a daemon and is left behind if it never returns."""
        import threading

        answer: list[str] = []
        full = self._path(path)

        def attempt() -> None:
            answer.append(_open_close(full))

        worker = threading.Thread(target=attempt, name="envdoctor-open", daemon=True)
        worker.start()
        worker.join(timeout)
        return answer[0] if answer else "timeout"

    def identity(self) -> Identity:
        """Looked up once: several probes ask, and the user lookup may go to LDAP or sssd."""
        if self._identity is None:
            self._identity = self._look_up_identity()
        return self._identity

    def _look_up_identity(self) -> Identity:
        uid = os.getuid()
        try:
            import pwd

            user = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            user = self._env.get("USER", str(uid))
        uname = os.uname()
        return Identity(
            user=user,
            uid=uid,
            machine=uname.machine,
            kernel_release=uname.release,
            python=sys.executable,
        )


def _open_close(path: str) -> str:
    import errno

    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    os.close(fd)
    return "ok"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _decode(data: bytes | None) -> str:
    return (data or b"")[:MAX_OUTPUT_CHARS].decode("utf-8", errors="replace")
