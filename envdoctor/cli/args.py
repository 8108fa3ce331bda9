"""A command's parsed options (``invocation.args``): a read-only mapping from each Typer
parameter's name (``with_host``, ``format``, ``timeout`` …) to its typed value.

The typed accessors (``flag``, ``text``, ``path`` …) read the same mapping; they are what the
command modules were written against, and they keep a missing value's type stable (a list
option left out is ``()``, a path is a ``Path``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class Args(Mapping[str, Any]):
    """The values of one command line, by parameter name; ``given`` says which the user typed
    (the rest are their declared defaults); ``where`` is the command as typed ("spec init")."""

    __slots__ = ("_given", "_values", "where")

    def __init__(
        self, values: Mapping[str, Any], *, given: frozenset[str] = frozenset(), where: str = ""
    ) -> None:
        self._values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        self._given = given
        self.where = where

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:  # a programming error: the command declares no such parameter
            raise KeyError(f"{self.where}: no option {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Args({self.where!r}, {self._values!r})"

    def given(self, name: str) -> bool:
        """Whether the user typed the option (its value may equal the default)."""
        return name in self._given

    def flag(self, name: str) -> bool:
        return bool(self[name])

    def text(self, name: str) -> str | None:
        value = self[name]
        return None if value is None else str(value)

    def path(self, name: str) -> Path | None:
        value = self[name]
        return None if value is None else Path(value)

    def number(self, name: str) -> float:
        return float(self[name])

    def integer(self, name: str) -> int | None:
        value = self[name]
        return None if value is None else int(value)

    def texts(self, name: str) -> tuple[str, ...]:
        return tuple(str(v) for v in self[name] or ())

    def integers(self, name: str) -> tuple[int, ...]:
        return tuple(int(v) for v in self[name] or ())
