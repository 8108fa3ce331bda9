"""SystemHost: the real machine behind the Host seam.

``subprocess``, ``shutil`` and ``signal`` are imported on first use (~7 ms): the start-up probe
starts no process and looks for no program, so it never pays for them.
"""

from __future__ import annotations

import contextlib
import os
import stat as statmod
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import (
    MAX_KMSG_BYTES,
    MAX_READ_BYTES,
    CommandResult,
    FileInfo,
    Identity,
)
from envdoctor.platform.nvml import NvmlSession, preload_native_library

if TYPE_CHECKING:
    import subprocess

MAX_OUTPUT_BYTES = 4 << 20  # per stream: ldconfig -p is ~100 KiB, the torch probe a few KiB
EXIT_DRAIN = 0.2  # seconds to keep reading after the child exited (a grandchild may hold a pipe)
KMSG_RECORD_BYTES = 1 << 16
"""One read of /dev/kmsg returns one record and fails (EINVAL) if it does not fit; the kernel
caps a record at about 1 KiB of text plus its key=value lines, so 64 KiB is always enough."""
MAX_OVERWRITTEN = 1000
"""EPIPEs tolerated in one read of /dev/kmsg (a kernel logging faster than it can be read)."""


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
        except OSError as exc:
            return _unreadable(path, exc)

    def list_dir(self, path: str) -> Probed[tuple[str, ...]]:
        try:
            return Found(tuple(sorted(os.listdir(self._path(path)))))
        except (FileNotFoundError, NotADirectoryError):
            return Absent(f"{path} does not exist")
        except PermissionError:
            return ProbeFailed(f"permission denied listing {path}")
        except OSError as exc:
            return ProbeFailed(f"cannot list {path}: {exc.strerror or exc}")

    def read_kmsg(self, *, limit: int = MAX_KMSG_BYTES) -> Probed[str]:
        """Reads /dev/kmsg non-blocking, one record per read, until the kernel has no more.

        A blocking read would wait for the next kernel message; a file read (``read_bytes``)
        would too. EPIPE means the oldest record was overwritten while reading: the next read
        goes on from the new oldest one. ``limit`` bounds the bytes, and so the reads.
        """
        path = "/dev/kmsg"
        try:
            fd = os.open(self._path(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            return _unreadable(path, exc)
        chunks: list[bytes] = []
        size = overwritten = 0
        try:
            while size < limit and overwritten < MAX_OVERWRITTEN:
                try:
                    chunk = os.read(fd, KMSG_RECORD_BYTES)
                except BlockingIOError:  # EAGAIN: every record has been read
                    break
                except BrokenPipeError:  # EPIPE: overwritten under us; go on from the oldest
                    overwritten += 1
                    continue
                except OSError as exc:
                    return _unreadable(path, exc)
                if not chunk:  # a regular file (a test root): its end
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        return Found(b"".join(chunks)[:limit].decode("utf-8", errors="replace"))

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
        """As ``shutil.which`` finds it (an executable file, not a directory), without importing
        shutil (~8 ms of start-up: it brings in the compression modules)."""
        if "/" in program:
            return program if _executable(program) else None
        return _search_path(program, self._env)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        import subprocess

        args = tuple(argv)
        child_env = dict(self._env if env is None else env)
        # The program is found here, as ``which`` finds it, not by Popen: Popen searches every
        # PATH entry, relative ones included, and the child resolves them from its own working
        # directory ("/"), so "bin" ran /bin's program while ``which`` said there was none. A
        # relative path is refused: it names a file in the current directory, whose programs
        # are never run (root may run envdoctor in anyone's directory).
        if args[0].startswith("/"):
            program: str | None = args[0]
        elif "/" in args[0]:
            return CommandResult(
                args, "error", error=f"{args[0]}: a relative path (not run from this directory)"
            )
        else:
            program = _search_path(args[0], child_env)
        if program is None:
            return CommandResult(args, "not-found", error=f"{args[0]}: not found")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                executable=program,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd="/",  # a child never imports or runs what the caller's directory holds
                start_new_session=True,  # so a timeout kills the whole process group
            )
        except FileNotFoundError:
            return CommandResult(args, "not-found", error=f"{args[0]}: not found")
        except OSError as exc:
            return CommandResult(args, "error", error=exc.strerror or str(exc))
        _LIVE_GROUPS.add(proc.pid)  # its own session: the group's id is its PID
        if _ENDING:  # SIGTERM came while Popen started it: it must not outlive envdoctor
            _kill_group(proc)
        try:
            status, out, err = _collect(proc, timeout)
        except BaseException:
            _kill_group(proc)  # Ctrl-C: never leave the child behind
            _reap(proc)
            raise
        finally:
            _LIVE_GROUPS.discard(proc.pid)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        if status != "ok":
            _kill_group(proc)
            _reap(proc)
        return CommandResult(
            args,
            status,
            returncode=proc.returncode if proc.returncode is not None else -9,
            stdout=_decode(out),
            stderr=_decode(err),
            error=f"printed more than {MAX_OUTPUT_BYTES >> 20} MiB" if status == "overflow" else "",
            seconds=timeout if status == "timeout" else time.monotonic() - start,
        )

    def open_nvml(
        self,
        *,
        timeout: float,
        init_timeout: float = 0.0,
        remaining: Callable[[], float] | None = None,
    ) -> NvmlSession:
        """In a child process (``nvml_isolated``): a crash or a hang in the library there
        costs the GPU it was reading, never envdoctor. The driver's library is loaded here
        first: where it is missing, nvml_isolated (json, subprocess) is never imported."""
        preload_native_library(timeout)
        from envdoctor.platform.nvml_isolated import IsolatedSession

        return IsolatedSession(timeout, init_timeout, remaining)

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


def _unreadable(path: str, exc: OSError) -> Absent | ProbeFailed:
    """Why ``path`` could not be read, as the file reads say it."""
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return Absent(f"{path} does not exist")
    if isinstance(exc, PermissionError):
        return ProbeFailed(f"permission denied reading {path}")
    return ProbeFailed(f"cannot read {path}: {exc.strerror or exc}")


def _open_close(path: str) -> str:
    import errno

    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    os.close(fd)
    return "ok"


_LIVE_GROUPS: set[int] = set()  # the process groups of ``run``'s children still running
_ENDING: list[int] = []  # the SIGTERM being acted on (children_end_with_sigterm)


@contextmanager
def children_end_with_sigterm() -> Iterator[None]:
    """Within the block (in the main thread), SIGTERM to envdoctor first kills the process
    group of every child ``SystemHost.run`` started that still runs (the torch probe may be on
    another thread), then ends envdoctor as SIGTERM does. An ignored SIGTERM stays ignored."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        yield
        return

    def _end(signum: int, frame: object) -> None:
        _ENDING.append(signum)
        # twice: a child another thread's Popen is starting now is registered a moment later
        for pause in (0.2, 0.0):
            for group in tuple(_LIVE_GROUPS):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
            time.sleep(pause)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, _end)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _collect(proc: subprocess.Popen[bytes], timeout: float) -> tuple[str, bytes, bytes]:
    """(status, stdout, stderr) of a running child, read as it comes.

    Bounded in both ways while reading, not after: at most ``MAX_OUTPUT_BYTES`` kept per stream
    (status "overflow" past it: a child that prints forever is stopped, not collected into
    gigabytes), and ``timeout`` seconds in all (status "timeout"). Once the child has exited,
    its pipes are read for ``EXIT_DRAIN`` more seconds at most: a grandchild that inherited them
    (``sleep 600 &``) does not hold envdoctor. The caller kills the group when it is not "ok".
    """
    import selectors
    import subprocess  # loaded already by run(); named here for TimeoutExpired

    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out: bytearray(), err: bytearray()}

    def result(status: str) -> tuple[str, bytes, bytes]:
        return status, bytes(kept[out]), bytes(kept[err])

    end = time.monotonic() + timeout
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in kept:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if proc.poll() is not None:
                exited_at = now if exited_at is None else exited_at
                if now - exited_at >= EXIT_DRAIN:
                    # What still holds a pipe is a grandchild in the child's group; the group id
                    # stays reserved while it has members, so killing it cannot hit a stranger.
                    _kill_group(proc)
                    break
            if now >= end:
                return result("timeout")
            for key, _ in selector.select(min(end - now, 0.1)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer = kept[key.fd]
                buffer += chunk
                if len(buffer) > MAX_OUTPUT_BYTES:
                    del buffer[MAX_OUTPUT_BYTES:]
                    return result("overflow")
    try:
        proc.wait(timeout=max(end - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:  # it closed its output but is still running
        return result("timeout")
    return result("ok")


REAP_S = 5.0
"""How long a killed child is waited for: one stuck in the kernel (state D, e.g. in the driver
during cuInit) is not reaped until the kernel lets go, and the command must not wait with it."""


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a child sent SIGKILL, at most ``REAP_S`` seconds."""
    import contextlib
    import subprocess

    # still in the kernel past that: reported as killed (-9); the kernel reaps it later
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=REAP_S)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _search_path(program: str, env: Mapping[str, str]) -> str | None:
    """``program`` on ``env``'s PATH, absolute entries only: a relative entry ("", ".", "bin")
    means the current directory, which is never trusted."""
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        if entry.startswith("/"):
            candidate = os.path.join(entry, program)
            if _executable(candidate):
                return candidate
    return None


def _executable(path: str) -> bool:
    return os.access(path, os.X_OK) and not os.path.isdir(path)  # access: False when missing
