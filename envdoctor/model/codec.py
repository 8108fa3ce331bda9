"""Turn facts into plain JSON data and back, driven by the dataclasses' own type hints.

Snapshots (``envdoctor collect``) and the JSON report use this, so that a snapshot read back
gives the very same ``Facts`` and therefore the very same findings.

Encoding: ``Found`` → ``{"found": v}``, ``Absent`` → ``{"absent": reason}``, ``ProbeFailed`` →
``{"failed": error, "detail": detail}``; a union of dataclasses is decoded as the first
member whose fields fit.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar, Union, cast

from envdoctor.model.probed import Absent, Found, ProbeFailed

T = TypeVar("T")


class DecodeError(ValueError):
    """The data does not have the shape the dataclasses describe; the message names where."""


def encode(obj: object) -> Any:
    """Plain JSON-able data for a facts object."""
    if isinstance(obj, Found):
        return {"found": encode(obj.value)}
    if isinstance(obj, Absent):
        return {"absent": obj.reason}
    if isinstance(obj, ProbeFailed):
        return {"failed": obj.error, "detail": obj.detail}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [encode(item) for item in obj]
    return obj


def decode(cls: type[T], data: Any) -> T:
    """Rebuild ``cls`` from ``encode``'s output; raises ``DecodeError`` naming the bad path."""
    return cast("T", _decode(cls, data, "$"))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A class's resolved type hints, computed once per process (resolving the annotation
    strings cost more than the decoding itself)."""
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _decode(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if _is_union(tp):
        return _decode_union(typing.get_args(tp), data, where)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(data, list):
            raise DecodeError(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{where}[{i}]") for i, item in enumerate(data))
        if len(args) != len(data):
            raise DecodeError(f"{where}: expected {len(args)} items")
        return tuple(
            _decode(a, item, f"{where}[{i}]")
            for i, (a, item) in enumerate(zip(args, data, strict=True))
        )
    if origin is Found:
        (inner,) = typing.get_args(tp)
        if not isinstance(data, dict) or "found" not in data:
            raise DecodeError(f"{where}: expected {{'found': …}}")
        return Found(_decode(inner, data["found"], where))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise DecodeError(f"{where}: {exc}") from None
    if tp is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if tp in (str, int, bool) and type(data) is tp:
        return data
    if tp is type(None) and data is None:
        return None
    raise DecodeError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {type(data).__name__}")


def _decode_dataclass(tp: type, data: Any, where: str) -> Any:
    if tp is Absent:
        if isinstance(data, dict) and isinstance(data.get("absent"), str):
            return Absent(data["absent"])
        raise DecodeError(f"{where}: expected {{'absent': reason}}")
    if tp is ProbeFailed:
        if isinstance(data, dict) and isinstance(data.get("failed"), str):
            return ProbeFailed(data["failed"], str(data.get("detail", "")))
        raise DecodeError(f"{where}: expected {{'failed': error}}")
    if not isinstance(data, dict):
        raise DecodeError(f"{where}: expected an object for {tp.__name__}")
    hints = _hints(tp)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(tp):
        if f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise DecodeError(f"{where}: missing key {f.name!r}")
    return tp(**kwargs)


def _decode_union(args: tuple[Any, ...], data: Any, where: str) -> Any:
    if isinstance(data, dict):
        if "found" in data:
            found = [a for a in args if typing.get_origin(a) is Found]
            if found:
                return _decode(found[0], data, where)
        if "absent" in data and Absent in args:
            return _decode(Absent, data, where)
        if "failed" in data and ProbeFailed in args:
            return _decode(ProbeFailed, data, where)
        classes = [a for a in args if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if "type" in data:
            for cls in classes:
                if cls.__name__ == data["type"]:
                    rest = {k: v for k, v in data.items() if k != "type"}
                    return _decode(cls, rest, where)
            raise DecodeError(f"{where}: unknown type {data['type']!r}")
    if data is None and type(None) in args:
        return None
    errors = []
    for arg in args:
        try:
            return _decode(arg, data, where)
        except DecodeError as exc:  # noqa: PERF203 (trying each union member is the strategy)
            errors.append(str(exc))
    raise DecodeError(errors[0] if errors else f"{where}: no type matches")
