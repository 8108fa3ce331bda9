"""``@record``: envdoctor's frozen, slotted dataclasses, made without compiling any method.

On Python 3.11 ``@dataclass`` compiles every generated method on its own (``exec``, ~0.1 ms
each); a frozen class with equality gets six: ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__``. ``check`` imports about 85 such classes: as
dataclasses they took ~70 ms, half of its judging time. A record is a real dataclass
(``fields``, ``replace``, ``asdict``, pickling and pattern matching work) made by ``@dataclass``
with none of those methods; its ``__init__``, ``__eq__``, ``__hash__`` and ``__repr__`` are
closures over its field names instead, and ``__setattr__`` / ``__delattr__`` are shared ones
that refuse, with the same behaviour as the generated ones: positional and keyword arguments,
defaults, ``default_factory`` and ``__post_init__``; equal only to an instance of the same class
whose compared fields are equal, hashed on those fields, shown as ``Name(field=value, ...)``;
``field(compare=False)``, ``field(repr=False)`` and ``field(hash=...)`` are honoured, and a
method written in the class body is kept. Making one costs ~0.15 ms; making an instance ~0.7 µs
more than a generated ``__init__`` (a few hundred per run: well under a millisecond).

When to retire it: when the oldest Python envdoctor supports makes a frozen slotted dataclass
in about the time a record takes (3.13 compiles a class's methods in one ``exec``, still ~3x a
record here), replace ``@record`` with ``@dataclass(frozen=True, slots=True)`` if
``benchmarks/bench_check.py`` shows no loss.
"""

from __future__ import annotations

import dataclasses
import inspect  # dataclasses imports it: no cost here
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # a typing-only marker (3.11+ typing has it; 3.10 does not): nothing to do at run time

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorator: decorator


T = TypeVar("T")


_MISSING = dataclasses.MISSING


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, slots=True)`` with shared methods (see the module docstring)."""
    if not cls.__doc__:
        # @dataclass would write one from inspect.signature, which for a class without its own
        # __init__ tokenizes and parses object's text signature: 2 ms for the first, 0.2 ms each
        cls.__doc__ = f"{cls.__name__}({', '.join(inspect.get_annotations(cls))})"
    made: Any = dataclasses.dataclass(init=False, repr=False, eq=False, slots=True)(cls)
    fields = dataclasses.fields(made)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)
    stored = tuple(f.name for f in fields)
    made_here: dict[str, Callable[..., Any]] = {
        "__init__": _init_of(made, fields),
        **_equality(compared, hashed),
        "__repr__": _repr_of(shown),
        **_pickling(stored),
    }
    for name, method in made_here.items():
        method.__qualname__ = f"{made.__qualname__}.{name}"
    methods: dict[str, Callable[..., Any]] = {
        **made_here,
        "__setattr__": _refuse_setattr,
        "__delattr__": _refuse_delattr,
    }
    own = cls.__dict__  # as @dataclass does, a method written in the class body stays
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    for name, method in methods.items():
        if name in own and (name != "__hash__" or explicit_hash):
            continue
        setattr(made, name, method)
    return made  # type: ignore[no-any-return]  # the dataclass made from cls


def _init_of(made: Any, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """``__init__``: positional, then keyword arguments, then defaults, then ``__post_init__``."""
    names = tuple(f.name for f in fields if f.init)
    defaults = {f.name: f.default for f in fields if f.default is not _MISSING}
    factories = {f.name: f.default_factory for f in fields if f.default_factory is not _MISSING}
    not_given = tuple(  # field(init=False) with a default: set by __init__ all the same
        f.name for f in fields if not f.init and (f.name in defaults or f.name in factories)
    )
    post_init = hasattr(made, "__post_init__")
    set_field = object.__setattr__

    def __init__(self: object, *args: object, **kwargs: object) -> None:  # noqa: N807
        given = len(args)
        if given > len(names):
            raise TypeError(
                f"{made.__qualname__}() takes {len(names)} positional arguments "
                f"but {given} were given"
            )
        for name, value in zip(names, args):  # noqa: B905 (args is the shorter one)
            set_field(self, name, value)
        used = 0
        for name in names[given:]:
            if name in kwargs:
                set_field(self, name, kwargs[name])
                used += 1
            elif name in defaults:
                set_field(self, name, defaults[name])
            elif name in factories:
                set_field(self, name, factories[name]())
            else:
                raise TypeError(f"{made.__qualname__}() missing argument {name!r}")
        if used != len(kwargs):  # a keyword given twice, or one that is not a field
            for name in kwargs:
                if name not in names[given:]:
                    problem = "multiple values for" if name in names else "an unexpected keyword"
                    raise TypeError(f"{made.__qualname__}() got {problem} argument {name!r}")
        for name in not_given:
            set_field(self, name, defaults[name] if name in defaults else factories[name]())
        if post_init:
            self.__post_init__()  # type: ignore[attr-defined]  # present: checked above

    return __init__


def _equality(compared: tuple[str, ...], hashed: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    def __eq__(self: object, other: object) -> bool:  # noqa: N807 (installed as the method)
        if other.__class__ is self.__class__:  # tuples, as @dataclass compares (identity first)
            mine = tuple([getattr(self, name) for name in compared])
            return mine == tuple([getattr(other, name) for name in compared])
        return NotImplemented

    def __hash__(self: object) -> int:  # noqa: N807
        return hash(tuple([getattr(self, name) for name in hashed]))

    return {"__eq__": __eq__, "__hash__": __hash__}


def _repr_of(shown: tuple[str, ...]) -> Callable[[object], str]:
    def __repr__(self: object) -> str:  # noqa: N807
        inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in shown])
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _pickling(stored: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """State as a list of field values (assignment refuses, so unpickling sets the slots)."""

    def __getstate__(self: object) -> list[object]:  # noqa: N807
        return [getattr(self, name) for name in stored]

    def __setstate__(self: object, state: list[object]) -> None:  # noqa: N807
        for name, value in zip(stored, state):  # noqa: B905 (made by __getstate__ above)
            object.__setattr__(self, name, value)

    return {"__getstate__": __getstate__, "__setstate__": __setstate__}
