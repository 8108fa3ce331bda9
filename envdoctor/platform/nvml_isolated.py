"""NVML in a child process: a crash or a hang inside the library costs one GPU, never the doctor.

``IsolatedSession`` is an ``NvmlSession`` whose calls run in a child Python process (the same
interpreter, started with ``-I``) that holds the real pynvml session. Each request goes down a
pipe as one JSON line; the child answers each on a thread of its own, and before each NVML
function it reaches it sends that function's name, so the parent always knows which C entry
point each request is in. Every answer reaches the parent as soon as it exists: what was read
before a crash or a hang is kept.

- A call that does not answer within its bound (the session's per-call timeout, shrunk to what
  is left of the deadline) kills the child; that GPU is then *not responding* (every later query
  of it fails at once, naming the call that blocked) and a fresh child reads the other GPUs.
- A child that dies (SIGSEGV, abort) fails the call it was in with ``Crashed``, naming the NVML
  function, the signal and the GPU; the GPU's other queries are not retried (each would crash a
  child again), a fresh child serves the rest. When several calls were in flight, each is tried
  once more with one call at a time, so the one that crashes again is the one named.
- ``nvmlInit`` has its own, larger bound: without persistence mode it takes seconds.
- The child never holds envdoctor's stdout or stderr: a ``$(envdoctor probe)`` returns as soon
  as the verdict is printed, whatever the child is stuck in.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from envdoctor.model.facts import NvmlErrorKind
from envdoctor.platform.nvml import NvmlError, NvmlProcess
from envdoctor.platform.nvml_links import INTERCONNECT_METHODS, IsolatedInterconnect

CHILD_PROGRAM = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from envdoctor.platform.nvml_isolated import child_main; child_main()"
)
CLOSE_WAIT = 0.5
"""How long ``close`` waits for the child to shut NVML down before it kills it."""

CALL_SHARE = 0.6
"""A call may take this share of what is left of the deadline, at most."""
INIT_SHARE = 0.8
"""nvmlInit may take this share (nothing but NVML's failure is left to judge when it fails)."""

PERSISTENCE_HINT = (
    "without persistence mode (nvidia-persistenced not running) the driver sets every GPU up "
    "again on each nvmlInit, which takes seconds: sudo systemctl enable --now "
    "nvidia-persistenced (or nvidia-smi -pm 1), then run envdoctor again"
)


class _Waiter:
    def __init__(self, method: str, index: int | None) -> None:
        self.method = method
        self.index = index
        self.function = ""  # the NVML C function the child last entered for this request
        self.reply: dict[str, Any] | None = None
        self.done = threading.Event()


class _Child:
    """One child process and the requests it has in flight."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lock = threading.Lock()
        self.waiting: dict[int, _Waiter] = {}
        self.next_id = 0
        self.dead = False
        self.killed_for: int | None = None  # the request whose hang made the parent kill it
        self.in_flight_at_death = 0
        self.init: dict[str, Any] | None = None
        self.init_done = threading.Event()
        threading.Thread(target=self._read, name="envdoctor-nvml-reader", daemon=True).start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        for line in stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "init" in message:
                self.init = message
                self.init_done.set()
                continue
            with self.lock:
                waiter = self.waiting.get(message.get("id", -1))
                if waiter is None:
                    continue
                if "fn" in message:
                    waiter.function = str(message["fn"])
                    continue
                del self.waiting[message["id"]]
            waiter.reply = message
            waiter.done.set()
        self.proc.wait()
        with self.lock:
            self.dead = True
            self.in_flight_at_death = len(self.waiting)
            orphans = list(self.waiting.values())
            self.waiting.clear()
        self.init_done.set()
        for waiter in orphans:
            waiter.done.set()

    def send(self, method: str, index: int | None, args: tuple[Any, ...]) -> tuple[int, _Waiter]:
        waiter = _Waiter(method, index)
        with self.lock:
            if self.dead:
                waiter.done.set()
                return -1, waiter
            request = self.next_id
            self.next_id += 1
            self.waiting[request] = waiter
        line = json.dumps({"id": request, "m": method, "a": list(args)}) + "\n"
        try:
            stdin = self.proc.stdin
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(line.encode())
            stdin.flush()
        except (OSError, ValueError):  # the child is gone: the reader sees it too
            pass
        return request, waiter

    def kill(self, request: int | None = None) -> None:
        with self.lock:
            if self.killed_for is None:
                self.killed_for = request if request is not None else -1
        _kill(self.proc)

    def signal_name(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "an unknown cause"
        if code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit status {code}"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # already gone, or not a group leader
        with contextlib.suppress(OSError):
            proc.kill()


def _where(index: int | None) -> str:
    return "NVML" if index is None else f"GPU {index}"


class IsolatedSession(IsolatedInterconnect):
    """``NvmlSession`` over a child process (see the module's docstring)."""

    def __init__(
        self,
        timeout: float,
        init_timeout: float,
        remaining: Callable[[], float] | None = None,
        *,
        parallel: int = 16,
    ) -> None:
        self._timeout = timeout
        self._init_timeout = max(init_timeout, timeout)
        self._remaining = remaining or (lambda: float("inf"))
        self._child: _Child | None = None
        self._start_lock = threading.Lock()
        self._gate = threading.Condition()
        self._limit = parallel
        self._in_flight = 0
        self._broken: dict[int | None, NvmlError] = {}
        self.init_seconds: float | None = None
        """How long the first nvmlInit took (a slow one: persistence mode is off)."""
        self.children = 0
        self._start()  # the first child: nvmlInit's failure is the session's to raise

    # --- children -------------------------------------------------------------------------

    def _bound(self, seconds: float, share: float) -> float:
        """``seconds``, or ``share`` of what is left of the deadline when that is less: the
        rest is for judging and printing (probe's whole budget is one second)."""
        return max(0.05, min(seconds, share * self._remaining()))

    def _start(self) -> _Child:
        bound = self._bound(self._init_timeout, INIT_SHARE)
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", CHILD_PROGRAM, json.dumps(sys.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        child = _Child(proc)
        self.children += 1
        if not child.init_done.wait(bound) or child.init is None:
            if child.dead and (child.proc.returncode or 0) > 0:  # not NVML: the child itself
                raise self._remember(
                    None,
                    NvmlError(
                        NvmlErrorKind.OTHER,
                        f"the NVML child process ({sys.executable}) exited with "
                        f"{child.signal_name()} before it initialised NVML",
                    ),
                )
            if child.dead:
                raise self._remember(
                    None,
                    NvmlError(
                        NvmlErrorKind.CRASHED,
                        f"NVML crashed ({child.signal_name()}) in nvmlInitWithFlags",
                    ),
                )
            child.kill()
            raise self._remember(
                None,
                NvmlError(
                    NvmlErrorKind.TIMEOUT,
                    f"nvmlInit did not return within {bound:.1f} s; {PERSISTENCE_HINT}",
                ),
            )
        if child.init.get("init") != "ok":
            child.kill()
            raise self._remember(
                None,
                NvmlError(str(child.init.get("kind", "Other")), str(child.init.get("msg", ""))),
            )
        if self.init_seconds is None:
            self.init_seconds = time.monotonic() - started
        self._child = child
        return child

    def _remember(self, index: int | None, error: NvmlError) -> NvmlError:
        self._broken.setdefault(index, error)
        return error

    def _current(self) -> _Child:
        with self._start_lock:
            if None in self._broken:
                raise self._broken[None]
            child = self._child
            if child is None or child.dead or child.killed_for is not None:
                child = self._start()
            return child

    # --- calls ----------------------------------------------------------------------------

    def _enter(self) -> None:
        with self._gate:
            while self._in_flight >= self._limit:
                self._gate.wait()
            self._in_flight += 1

    def _leave(self) -> None:
        with self._gate:
            self._in_flight -= 1
            self._gate.notify_all()

    def _call(self, method: str, index: int | None, *args: Any) -> Any:
        retried = False
        while True:
            for key in (None, index):
                if key in self._broken:
                    earlier = self._broken[key]
                    raise NvmlError(earlier.kind, f"not read: {earlier.message}")
            self._enter()
            try:
                child = self._current()
                if self._remaining() <= 0:
                    raise NvmlError(NvmlErrorKind.TIMEOUT, "not read: the time budget was spent")
                request, waiter = child.send(method, index, args)
                if request < 0:
                    continue  # the child died before it got the request: ask a fresh one
                bound = self._bound(self._timeout, CALL_SHARE)
                if not waiter.done.wait(bound):
                    child.kill(request)
                    call = waiter.function or method
                    raise self._remember(
                        index,
                        NvmlError(
                            NvmlErrorKind.NOT_RESPONDING,
                            f"{_where(index)} did not answer {call} within {bound:.1f} s"
                            + (
                                " (what the time budget left for it)"
                                if bound < self._timeout
                                else ""
                            )
                            + ": blocked in the driver; its other queries were not tried",
                        ),
                    )
                if waiter.reply is not None:
                    return _result(waiter.reply)
                if child.killed_for is not None and child.killed_for != request:
                    continue  # innocent: another call's hang killed the child; ask a fresh one
                if child.in_flight_at_death <= 1 or retried:
                    call = waiter.function or method
                    raise self._remember(
                        index,
                        NvmlError(
                            NvmlErrorKind.CRASHED,
                            f"NVML crashed ({child.signal_name()}) in {call} on {_where(index)}",
                        ),
                    )
                with self._gate:
                    self._limit = 1  # one call at a time, so that the crash names its call
                retried = True
            finally:
                self._leave()

    def close(self) -> None:
        child, self._child = self._child, None
        if child is None or child.dead:
            return
        stdin = child.proc.stdin
        try:
            assert stdin is not None  # started with stdin=PIPE
            stdin.write(b'{"m": "close"}\n')
            stdin.flush()
            stdin.close()
            child.proc.wait(CLOSE_WAIT)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            child.kill()

    # --- NvmlSession ----------------------------------------------------------------------

    def driver_version(self) -> str:
        return str(self._call("driver_version", None))

    def cuda_driver_version(self) -> int:
        return int(self._call("cuda_driver_version", None))

    def device_count(self) -> int:
        return int(self._call("device_count", None))

    def name(self, index: int) -> str:
        return str(self._call("name", index, index))

    def uuid(self, index: int) -> str:
        return str(self._call("uuid", index, index))

    def pci_bus_id(self, index: int) -> str:
        return str(self._call("pci_bus_id", index, index))

    def compute_capability(self, index: int) -> tuple[int, int]:
        major, minor = self._call("compute_capability", index, index)
        return int(major), int(minor)

    def memory(self, index: int) -> tuple[int, int, int, int]:
        total, used, free, reserved = self._call("memory", index, index)
        return int(total), int(used), int(free), int(reserved)

    def persistence_mode(self, index: int) -> bool:
        return bool(self._call("persistence_mode", index, index))

    def compute_mode(self, index: int) -> str:
        return str(self._call("compute_mode", index, index))

    def mig_mode(self, index: int) -> tuple[bool, bool]:
        current, pending = self._call("mig_mode", index, index)
        return bool(current), bool(pending)

    def mig_devices(self, index: int) -> tuple[tuple[str, str], ...]:
        return tuple((str(u), str(n)) for u, n in self._call("mig_devices", index, index))

    def ecc_uncorrectable(self, index: int) -> tuple[int, int]:
        vol, agg = self._call("ecc_uncorrectable", index, index)
        return int(vol), int(agg)

    def retired_pages_pending(self, index: int) -> bool:
        return bool(self._call("retired_pages_pending", index, index))

    def row_remap(self, index: int) -> tuple[int, int, bool, bool]:
        corr, unc, pending, failure = self._call("row_remap", index, index)
        return int(corr), int(unc), bool(pending), bool(failure)

    def processes(self, index: int) -> tuple[NvmlProcess, ...]:
        return tuple(NvmlProcess(int(p), u) for p, u in self._call("processes", index, index))

    def throttle_reasons(self, index: int) -> tuple[str, ...]:
        return tuple(str(r) for r in self._call("throttle_reasons", index, index))

    def pcie_link(self, index: int) -> tuple[int, int, int, int]:
        gen, width, max_gen, max_width = self._call("pcie_link", index, index)
        return int(gen), int(width), int(max_gen), int(max_width)

    def temperature(self, index: int) -> int:
        return int(self._call("temperature", index, index))

    def power_draw(self, index: int) -> int:
        return int(self._call("power_draw", index, index))

    def power_limit(self, index: int) -> int:
        return int(self._call("power_limit", index, index))

    def utilization(self, index: int) -> tuple[int, int]:
        gpu, memory = self._call("utilization", index, index)
        return int(gpu), int(memory)

    def ecc_corrected(self, index: int) -> tuple[int, int]:
        vol, agg = self._call("ecc_corrected", index, index)
        return int(vol), int(agg)

    def retired_pages(self, index: int) -> tuple[int, int]:
        single, double = self._call("retired_pages", index, index)
        return int(single), int(double)

    def fabric_info(self, index: int) -> tuple[str, str, int]:
        state, status, clique = self._call("fabric_info", index, index)
        return str(state), str(status), int(clique)

    # per-GPU health (issue 39): the driver's verdict, thermal limits, clocks

    def recovery_action(self, index: int) -> int:
        return int(self._call("recovery_action", index, index))

    def temperature_threshold(self, index: int, which: str) -> int:
        return int(self._call("temperature_threshold", index, index, which))

    def sm_clocks(self, index: int) -> tuple[int, int]:
        current, highest = self._call("sm_clocks", index, index)
        return int(current), int(highest)


def _result(reply: dict[str, Any]) -> Any:
    if reply.get("ok"):
        return reply.get("v")
    raise NvmlError(str(reply.get("kind", NvmlErrorKind.OTHER)), str(reply.get("msg", "")))


# --- the child --------------------------------------------------------------------------------

_SESSION_METHODS = frozenset(
    {
        "driver_version",
        "cuda_driver_version",
        "device_count",
        "name",
        "uuid",
        "pci_bus_id",
        "compute_capability",
        "memory",
        "persistence_mode",
        "compute_mode",
        "mig_mode",
        "mig_devices",
        "ecc_uncorrectable",
        "retired_pages_pending",
        "row_remap",
        "processes",
        "throttle_reasons",
        "pcie_link",
        "temperature",
        "power_draw",
        "power_limit",
        "utilization",
        "ecc_corrected",
        "retired_pages",
        "fabric_info",
        # per-GPU health (issue 39)
        "recovery_action",
        "temperature_threshold",
        "sm_clocks",
    }
)


class _Tracing:
    """pynvml, with each ``nvml*`` function announcing itself to the parent before it runs."""

    def __init__(self, module: Any, announce: Callable[[str], None]) -> None:
        self._module = module
        self._announce = announce

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not (name.startswith("nvml") and callable(value)):
            return value
        announce = self._announce

        def traced(*args: Any, **kwargs: Any) -> Any:
            announce(name)
            return value(*args, **kwargs)

        return traced


def child_main() -> None:
    """The child: open NVML, then answer one JSON request a line until told to close."""
    from envdoctor.platform.nvml import InlineWorker, open_pynvml

    out: IO[bytes] = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing the library prints can corrupt the answers
    lock = threading.Lock()
    local = threading.local()

    def send(message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        with lock:
            out.write(data)
            out.flush()

    def announce(function: str) -> None:
        request = getattr(local, "request", None)
        if request is not None:
            send({"id": request, "fn": function})

    try:
        session = open_pynvml(
            3600.0,
            worker=InlineWorker(),
            wrap=lambda module: _Tracing(module, announce),
            skip_load=True,
        )
    except NvmlError as exc:
        send({"init": "error", "kind": exc.kind, "msg": exc.message})
        return
    send({"init": "ok"})

    def answer(request: dict[str, Any]) -> None:
        local.request = request["id"]
        method = request.get("m", "")
        try:
            if method not in _SESSION_METHODS and method not in INTERCONNECT_METHODS:
                raise NvmlError(NvmlErrorKind.OTHER, f"no such NVML query: {method}")
            value = getattr(session, method)(*request.get("a", ()))
            if method == "processes":
                value = [[p.pid, p.used_memory] for p in value]
            send({"id": request["id"], "ok": True, "v": value})
        except NvmlError as exc:
            send({"id": request["id"], "ok": False, "kind": exc.kind, "msg": exc.message})
        except Exception as exc:  # noqa: BLE001 (a reading's own bug is that reading's error)
            send(
                {
                    "id": request["id"],
                    "ok": False,
                    "kind": NvmlErrorKind.OTHER,
                    "msg": f"{type(exc).__name__}: {exc}",
                }
            )

    for line in sys.stdin.buffer:
        request = json.loads(line)
        if request.get("m") == "close":
            session.close()
            break
        threading.Thread(target=answer, args=(request,), daemon=True).start()
    out.flush()
    os._exit(0)  # daemon threads may still be inside NVML: do not wait for them
