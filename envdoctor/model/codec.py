"""Turn facts into plain JSON data and back, driven by the records' own type hints.

Snapshots (``envdoctor collect``) and the JSON report use this, so that a snapshot read back
gives the very same ``Facts`` and therefore the very same findings.

Encoding: ``Found`` → ``{"found": v}``, ``Absent`` → ``{"absent": reason}``, ``ProbeFailed`` →
``{"failed": error, "detail": detail}``; a union of records is decoded as the first
member whose fields fit.
"""

from __future__ import annotations

import enum
import functools
import math
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar, Union, cast

from envdoctor.model.probed import Absent, Found, ProbeFailed

T = TypeVar("T")


class DecodeError(ValueError):
    """The data does not have the shape the records describe; the message names where."""


def encode(obj: object) -> Any:
    """Plain JSON-able data for a facts object."""
    if isinstance(obj, Found):
        return {"found": encode(obj.value)}
    if isinstance(obj, Absent):
        return {"absent": obj.reason}
    if isinstance(obj, ProbeFailed):
        return {"failed": obj.error, "detail": obj.detail}
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: encode(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [encode(item) for item in obj]
    return obj


def decode(cls: type[T], data: Any) -> T:
    """Rebuild ``cls`` from ``encode``'s output; raises ``DecodeError`` naming the bad path."""
    try:
        return cast("T", _decoder(cast("Any", cls))(data))
    except _MismatchError as exc:
        raise DecodeError(f"${''.join(reversed(exc.path))}: {exc.message}") from None


# Decoding is planned once per type: a type's decoder is made on first use and kept, so that
# the type hints are resolved and the unions sorted out once, not at every value (the tables
# hold ~3,500 values: 33 ms decoded value by value, ~5 ms with plans).

Decoder = Callable[[Any], Any]


class _MismatchError(Exception):
    """Raised inside the decoders; the path is filled in on the way out (innermost first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


def _at(part: str, decoder: Decoder, data: Any) -> Any:
    try:
        return decoder(data)
    except _MismatchError as exc:
        exc.path.append(part)
        raise


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


@functools.cache
def _decoder(tp: Any) -> Decoder:
    """The decoder of ``tp`` (made once; field decoders are looked up when first needed, so a
    type may refer to itself)."""
    if tp is Any:
        return lambda data: data
    if _is_union(tp):
        return _union_decoder(typing.get_args(tp))
    origin = typing.get_origin(tp)
    if origin is tuple:
        return _tuple_decoder(typing.get_args(tp))
    if origin is Found:
        (inner,) = typing.get_args(tp)

        def found(data: Any) -> Any:
            if not isinstance(data, dict) or "found" not in data:
                raise _MismatchError("expected {'found': …}")
            return Found(_decoder(inner)(data["found"]))

        return found
    if isinstance(tp, type) and is_dataclass(tp):
        return _record_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_decoder(tp)
    return _plain_decoder(tp)


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item = args[0]

        def homogeneous(data: Any) -> Any:
            if not isinstance(data, list):
                raise _MismatchError("expected a list")
            decode_item = _decoder(item)
            return tuple([_at(f"[{i}]", decode_item, value) for i, value in enumerate(data)])

        return homogeneous

    def fixed(data: Any) -> Any:
        if not isinstance(data, list):
            raise _MismatchError("expected a list")
        if len(args) != len(data):
            raise _MismatchError(f"expected {len(args)} items")
        return tuple(
            [
                _at(f"[{i}]", _decoder(a), value)
                for i, (a, value) in enumerate(zip(args, data, strict=True))
            ]
        )

    return fixed


def _enum_decoder(tp: type[enum.Enum]) -> Decoder:
    def member(data: Any) -> Any:
        try:
            return tp(data)
        except ValueError as exc:
            raise _MismatchError(str(exc)) from None

    return member


_LARGEST = 1 << 64  # NVML's counters are unsigned 64-bit (2**64 - 1 is its "not available")


def _finite(number: float) -> bool:
    return -_LARGEST <= number <= _LARGEST if isinstance(number, int) else math.isfinite(number)


def _short(number: float) -> str:
    """A number as an error names it: 10**400 by its size, not by 401 digits."""
    if isinstance(number, int):
        return f"a number of {len(str(abs(number)))} digits"  # below 4300 digits: json read it
    return repr(number)


def _plain_decoder(tp: Any) -> Decoder:
    name = getattr(tp, "__name__", tp)

    def plain(data: Any) -> Any:
        if tp is float and isinstance(data, int | float) and not isinstance(data, bool):
            if not _finite(data):  # JSON's Infinity and NaN, or 10**400: no fact is either
                raise _MismatchError(f"expected a finite number, got {_short(data)}")
            return float(data)
        if tp is int and type(data) is int and not -_LARGEST <= data <= _LARGEST:
            raise _MismatchError(f"expected an integer within ±2**64, got {_short(data)}")
        if tp is str and type(data) is str and "\0" in data:
            # no fact a machine gives holds NUL (a path, a module name), and a fix script could
            # not quote it as a shell word
            raise _MismatchError("expected text, got a NUL character")
        if tp in (str, int, bool) and type(data) is tp:
            return data
        if tp is type(None) and data is None:
            return None
        raise _MismatchError(f"expected {name}, got {type(data).__name__}")

    return plain


def _record_decoder(tp: type) -> Decoder:
    if tp is Absent:

        def absent(data: Any) -> Any:
            if isinstance(data, dict) and isinstance(data.get("absent"), str):
                return Absent(data["absent"])
            raise _MismatchError("expected {'absent': reason}")

        return absent
    if tp is ProbeFailed:

        def failed(data: Any) -> Any:
            if isinstance(data, dict) and isinstance(data.get("failed"), str):
                return ProbeFailed(data["failed"], str(data.get("detail", "")))
            raise _MismatchError("expected {'failed': error}")

        return failed
    plan: list[tuple[str, Decoder, bool]] = []

    def instance(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _MismatchError(f"expected an object for {tp.__name__}")
        if not plan:
            hints = _hints(tp)
            plan.extend(
                (
                    f.name,
                    _decoder(hints[f.name]),
                    f.default is MISSING and f.default_factory is MISSING,
                )
                for f in fields(tp)
            )
        kwargs: dict[str, Any] = {}
        for name, decode_field, required in plan:
            if name in data:
                kwargs[name] = _at(f".{name}", decode_field, data[name])
            elif required:
                raise _MismatchError(f"missing key {name!r}")
        return tp(**kwargs)

    return instance


def _union_decoder(args: tuple[Any, ...]) -> Decoder:
    found = [a for a in args if typing.get_origin(a) is Found]
    classes = [a for a in args if isinstance(a, type) and is_dataclass(a)]
    optional = type(None) in args

    def union(data: Any) -> Any:
        if isinstance(data, dict):
            if "found" in data and found:
                return _decoder(found[0])(data)
            if "absent" in data and Absent in args:
                return _decoder(Absent)(data)
            if "failed" in data and ProbeFailed in args:
                return _decoder(ProbeFailed)(data)
            if "type" in data:
                for cls in classes:
                    if cls.__name__ == data["type"]:
                        return _decoder(cls)({k: v for k, v in data.items() if k != "type"})
                raise _MismatchError(f"unknown type {data['type']!r}")
        if data is None and optional:
            return None
        errors = []
        for arg in args:
            try:
                return _decoder(arg)(data)
            except _MismatchError as exc:  # noqa: PERF203 (trying each union member is the strategy)
                errors.append(exc)
        raise errors[0] if errors else _MismatchError("no type matches")

    return union
