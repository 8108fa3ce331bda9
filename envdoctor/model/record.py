"""``@record``: envdoctor's frozen, slotted value classes, made without ``dataclasses``.

``check`` imports about 90 such classes. As ``@dataclass(frozen=True, slots=True)`` they cost
~70 ms on Python 3.11 (every generated method is compiled on its own); with dataclasses making
the class and closures for its methods they still cost ~20 ms: importing ``dataclasses`` (which
imports ``inspect``, ``ast`` and ``tokenize``) and its per-class work (type checks of every
annotation, the field objects, the slotted copy of the class). ``@record`` does only what
envdoctor's records use, with ``dataclasses``' behaviour:

- a field is an annotated name in the class body (``ClassVar`` annotations are not fields);
  its default is the value written there or a ``field(...)``;
- ``__init__`` takes positional and keyword arguments, fills defaults and ``default_factory``
  values, and calls ``__post_init__``;
- instances are frozen (assignment and deletion raise ``FrozenInstanceError``) and slotted;
- equal only to an instance of the same class whose compared fields are equal (as tuples:
  identity first, so a NaN field equals itself), hashed on those fields, shown as
  ``Name(field=value, ...)``; ``field(compare=False)``, ``field(repr=False)`` and
  ``field(hash=...)`` are honoured, and a method written in the class body is kept;
- pickling, ``copy`` and positional patterns (``__match_args__``) work;
- ``fields``, ``replace`` and ``is_record`` stand in for ``dataclasses.fields``,
  ``dataclasses.replace`` and ``dataclasses.is_dataclass`` (a record is not a dataclass).

``tests/model/test_record.py`` holds each behaviour against a stock dataclass. Making a record
costs ~0.05 ms; making an instance ~0.7 µs more than a generated ``__init__``.

When to retire it: when the oldest Python envdoctor supports makes a frozen slotted dataclass,
``dataclasses`` import included, in about the time a record takes, replace ``@record`` with
``@dataclass(frozen=True, slots=True)`` if ``benchmarks/bench_check.py`` shows no loss.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload  # probed.py imports typing anyway

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import dataclass_transform
else:  # a typing-only marker (3.11+ typing has it; 3.10 does not): nothing to do at run time

    def dataclass_transform(**_: object) -> object:
        return lambda decorator: decorator


T = TypeVar("T")
R = TypeVar("R")


class _Missing:
    """No default was given (``dataclasses.MISSING``'s role)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """A record's field was assigned or deleted (as ``dataclasses.FrozenInstanceError``)."""


class Field:
    """One field of a record: its name and what ``field(...)`` said about it (made by ``field``,
    which holds the defaults)."""

    __slots__ = ("compare", "default", "default_factory", "hash", "init", "name", "repr")
    name: str
    default: Any
    default_factory: Any
    init: bool
    repr: bool
    compare: bool
    hash: bool | None

    def __init__(self, **said: Any) -> None:
        self.name = ""
        for key, value in said.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


@overload
def field(
    *,
    default: T,
    init: bool = ...,
    repr: bool = ...,
    compare: bool = ...,
    hash: bool | None = ...,
) -> T: ...
@overload
def field(
    *,
    default_factory: Callable[[], T],
    init: bool = ...,
    repr: bool = ...,
    compare: bool = ...,
    hash: bool | None = ...,
) -> T: ...
@overload
def field(
    *,
    init: bool = ...,
    repr: bool = ...,
    compare: bool = ...,
    hash: bool | None = ...,
) -> Any: ...
def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    init: bool = True,
    repr: bool = True,
    compare: bool = True,
    hash: bool | None = None,
) -> Any:
    """A field with a default, a factory, or left out of ``__init__``/``repr``/equality."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(
        default=default,
        default_factory=default_factory,
        init=init,
        repr=repr,
        compare=compare,
        hash=hash,
    )


def fields(obj: object) -> tuple[Field, ...]:
    """A record's (or record class's) fields, in order."""
    try:
        found: tuple[Field, ...] = obj.__record_fields__  # type: ignore[attr-defined]  # checked
    except AttributeError:
        raise TypeError(f"{obj!r} is not a record or a record instance") from None
    return found


def is_record(obj: object) -> bool:
    """Whether ``obj`` is a record class or an instance of one."""
    return hasattr(obj, "__record_fields__")


def replace(obj: R, /, **changes: Any) -> R:
    """A copy of ``obj`` with ``changes``; fields outside ``__init__`` get their defaults."""
    for f in fields(obj):
        if f.init:
            if f.name not in changes:
                changes[f.name] = getattr(obj, f.name)
        elif f.name in changes:
            raise ValueError(f"field {f.name} is declared with init=False, it cannot be replaced")
    return obj.__class__(**changes)  # an unknown name: __init__'s TypeError


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _is_class_var(annotation: object) -> bool:
    """``ClassVar[...]`` however typing is imported (``typing.ClassVar``, ``t.ClassVar``)."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.partition("[")[0].rpartition(".")[2].strip() == "ClassVar"


def _fields_of(cls: type) -> tuple[Field, ...]:
    """The fields, from the class body's annotations, checked as ``@dataclass`` checks them."""
    own = cls.__dict__
    annotations = own.get("__annotations__", {})
    for name, value in own.items():
        if type(value).__name__ == "Field" and name not in annotations:
            raise TypeError(f"{cls.__name__}.{name} is a field but has no type annotation")
    made: list[Field] = []
    for name, annotation in annotations.items():
        if _is_class_var(annotation):
            continue
        if isinstance(annotation, str) and annotation.startswith(("InitVar", "KW_ONLY")):
            raise TypeError(f"{cls.__name__}.{name}: @record has no {annotation}")
        value = own.get(name, MISSING)  # the body's own: a plain base's attribute is no default
        if type(value).__name__ == "Field" and not isinstance(value, Field):
            raise TypeError(f"{cls.__name__}.{name}: use envdoctor.model.record.field")
        f = value if isinstance(value, Field) else field(default=value)
        f.name = name
        if f.default is not MISSING and type(f.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(f.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        made.append(f)
    seen_default = False
    for f in made:
        if not f.init:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return tuple(made)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, slots=True)``, without dataclasses (see the module docstring)."""
    own = cls.__dict__
    if "__slots__" in own:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    if any(hasattr(base, "__record_fields__") for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__name__}: a record does not inherit another record's fields")
    for name in ("__setattr__", "__delattr__"):
        if name in own:
            raise TypeError(f"{cls.__name__}: cannot overwrite {name} of a frozen record")
    made_fields = _fields_of(cls)
    stored = tuple(f.name for f in made_fields)
    compared = tuple(f.name for f in made_fields if f.compare)
    hashed = tuple(f.name for f in made_fields if (f.compare if f.hash is None else f.hash))
    methods: dict[str, Callable[..., Any]] = {
        "__init__": _init_of(cls.__qualname__, made_fields, hasattr(cls, "__post_init__")),
        **_equality(compared, hashed),
        "__repr__": _repr_of(tuple(f.name for f in made_fields if f.repr)),
        **_pickling(stored),
    }
    for name, method in methods.items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
    methods["__setattr__"] = _refuse_setattr
    methods["__delattr__"] = _refuse_delattr
    # as @dataclass does, a method written in the class body stays; a body that defines __eq__
    # alone has __hash__ = None written by Python, which a frozen record replaces
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    body = {
        key: value
        for key, value in own.items()
        if key not in stored and key not in ("__dict__", "__weakref__")
    }
    body.update(
        (name, method)
        for name, method in methods.items()
        if name not in own or (name == "__hash__" and not explicit_hash)
    )
    body["__slots__"] = stored
    body["__record_fields__"] = made_fields
    body.setdefault("__match_args__", tuple(f.name for f in made_fields if f.init))
    if not own.get("__doc__"):
        body["__doc__"] = f"{cls.__name__}({', '.join(stored)})"
    metaclass: Any = type(cls)  # type for every record today; a metaclass is kept
    made = metaclass(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made  # type: ignore[no-any-return]  # the slotted class made from cls


def _init_of(
    qualname: str,
    made_fields: tuple[Field, ...],
    post_init: bool,
) -> Callable[..., None]:
    """``__init__``: positional, then keyword arguments, then defaults, then ``__post_init__``."""
    names = tuple(f.name for f in made_fields if f.init)
    defaults = {f.name: f.default for f in made_fields if f.default is not MISSING}
    factories = {f.name: f.default_factory for f in made_fields if f.default_factory is not MISSING}
    not_given = tuple(  # field(init=False) with a default: set by __init__ all the same
        f.name for f in made_fields if not f.init and (f.name in defaults or f.name in factories)
    )
    set_field = object.__setattr__

    def __init__(self: object, *args: object, **kwargs: object) -> None:  # noqa: N807
        given = len(args)
        if given > len(names):
            raise TypeError(
                f"{qualname}() takes {len(names)} positional arguments but {given} were given"
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
                raise TypeError(f"{qualname}() missing argument {name!r}")
        if used != len(kwargs):  # a keyword given twice, or one that is not a field
            for name in kwargs:
                if name not in names[given:]:
                    problem = "multiple values for" if name in names else "an unexpected keyword"
                    raise TypeError(f"{qualname}() got {problem} argument {name!r}")
        for name in not_given:
            set_field(self, name, defaults[name] if name in defaults else factories[name]())
        if post_init:
            self.__post_init__()  # type: ignore[attr-defined]  # the class has one

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
