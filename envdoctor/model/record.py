"""``@record``: envdoctor's frozen, slotted dataclasses, made without compiling six methods each.

On Python 3.11 ``@dataclass`` compiles every generated method on its own (``exec``, ~0.1 ms
each); a frozen class with equality gets six: ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__``. The start-up probe imports about 35 such
classes, so that was ~18 ms of a ~55 ms probe. A record is a real dataclass (``fields``,
``replace``, ``asdict`` and pattern matching work) whose ``__eq__``, ``__hash__`` and
``__repr__`` are closures over its field names instead, with the same behaviour as the
generated ones: equal only to an instance of the same class whose compared fields are equal,
hashed on those fields, shown as ``Name(field=value, ...)``; ``field(compare=False)``,
``field(repr=False)`` and ``field(hash=...)`` are honoured, and a method written in the class
body is kept.

When to retire it: Python 3.13's dataclasses compile a class's methods in one ``exec``; once the
oldest Python envdoctor supports does that, replace ``@record`` with
``@dataclass(frozen=True, slots=True)`` if ``benchmarks/bench_probe.py`` shows no loss (on 3.11
here a record takes ~0.5 ms to make, a frozen slotted dataclass ~0.7 ms).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # a typing-only marker (3.11+ typing has it; 3.10 does not): nothing to do at run time

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorator: decorator


T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, slots=True)`` with shared equality, hash and repr."""
    made: Any = dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)(cls)
    fields = dataclasses.fields(made)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: object, other: object) -> bool:  # noqa: N807 (installed as the method)
        if other.__class__ is self.__class__:  # tuples, as @dataclass compares (identity first)
            mine = tuple([getattr(self, name) for name in compared])
            return mine == tuple([getattr(other, name) for name in compared])
        return NotImplemented

    def __hash__(self: object) -> int:  # noqa: N807
        return hash(tuple([getattr(self, name) for name in hashed]))

    def __repr__(self: object) -> str:  # noqa: N807
        inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in shown])
        return f"{self.__class__.__qualname__}({inner})"

    own = cls.__dict__  # as @dataclass does, a method written in the class body stays
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    for method in (__eq__, __hash__, __repr__):
        if method.__name__ in own and (method is not __hash__ or explicit_hash):
            continue
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
        setattr(made, method.__name__, method)
    return made  # type: ignore[no-any-return]  # the dataclass made from cls
