"""One call on its own thread, for work that waits (a child process, a file system) while the
caller goes on. ``concurrent.futures`` would do, but it imports ``logging`` (~5 ms of start-up)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Background(Generic[T]):
    """``function(*args, **kwargs)`` started now; ``result`` waits for it and returns what it
    returned or raises what it raised. The thread is not a daemon: the interpreter waits for it
    at exit, as it does for a thread pool's."""

    def __init__(self, function: Callable[..., T], *args: object, **kwargs: object) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(function, args, kwargs), name="envdoctor-background"
        )
        self._thread.start()

    def _run(
        self, function: Callable[..., T], args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        try:
            self._value = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 (handed to the caller by result())
            self._error = exc

    def join(self) -> None:
        """Wait for the call to end (what it raised stays for ``result``)."""
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast("T", self._value)
