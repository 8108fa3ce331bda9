"""Run envdoctor's CLI in-process, as a user would from a shell: argv in; exit code, stdout and
stderr out. The machine is a ``FakeHost`` (``obj=AppContext(host=…)``) or the real one."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from envdoctor.cli.common import AppContext
from envdoctor.cli.main import dispatch


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    output: str
    """stdout and stderr as a terminal shows them: interleaved in the order written."""
    stdout_bytes: bytes = b""
    exception: BaseException | None = None
    """What escaped the CLI's boundary (never anything, unless ENVDOCTOR_DEBUG is set)."""


class _Combined:
    def __init__(self) -> None:
        self.parts: list[str] = []


class _Capture(io.TextIOBase):
    """A text stream with a ``buffer`` (``run`` writes the command's bytes there) that also
    records what it is given into the combined output."""

    def __init__(self, combined: _Combined, *, tty: bool = False) -> None:
        self._combined = combined
        self._tty = tty
        self._parts: list[str] = []
        self.raw = bytearray()
        self.buffer = _Bytes(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a plain attribute on real streams
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: str) -> int:
        self._parts.append(text)
        self._combined.parts.append(text)
        self.raw += text.encode("utf-8", errors="replace")
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


class _Bytes:
    def __init__(self, owner: _Capture) -> None:
        self._owner = owner

    def write(self, data: bytes) -> int:
        text = data.decode("utf-8", errors="replace")
        self._owner._parts.append(text)
        self._owner._combined.parts.append(text)
        self._owner.raw += data
        return len(data)

    def flush(self) -> None:
        pass


def invoke(
    args: Sequence[str],
    *,
    obj: AppContext | None = None,
    input: bytes | str | None = None,
    env: Mapping[str, str] | None = None,
    tty: Sequence[str] = (),
) -> Result:
    """``envdoctor ARGS`` with stdin ``input`` (a pipe when given, else an empty non-tty);
    ``tty``: the streams ("stdout", "stderr") that say they are a terminal."""
    combined = _Combined()
    out = _Capture(combined, tty="stdout" in tty)
    err = _Capture(combined, tty="stderr" in tty)
    data = input.encode() if isinstance(input, str) else (input or b"")
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, out, err
    escaped: BaseException | None = None
    code = 2
    try:
        with _environ(env):
            code = dispatch(list(args), app=obj)
    except Exception as exc:  # noqa: BLE001 (reported to the test, which decides)
        escaped = exc
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return Result(
        code, out.getvalue(), err.getvalue(), "".join(combined.parts), bytes(out.raw), escaped
    )


@contextmanager
def _environ(env: Mapping[str, str] | None) -> Iterator[None]:
    if not env:
        yield
        return
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_probe(
    argv: Sequence[str],
    *,
    host: object,
    python: str | None = None,
    stdout: object = None,
    hard_exit: object = None,
) -> int:
    """``envdoctor probe ARGV`` with the probe's own seams: its output stream and the watchdog's
    hard exit (tests must not end the test process)."""
    from envdoctor.cli import probe
    from envdoctor.cli.app import parse
    from envdoctor.cli.boundary import guarded

    def body() -> int:
        args = parse(["probe", *argv])
        return probe.probe(
            args,
            host=host,  # type: ignore[arg-type]  # a Host (FakeHost in tests)
            python=python,
            out=stdout,  # type: ignore[arg-type]  # a text stream
            hard_exit=hard_exit,  # type: ignore[arg-type]  # a callable
        )

    return guarded(body)
