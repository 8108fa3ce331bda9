"""The one YAML reader: the compatibility tables, the explain signatures and the node specs.

A file becomes a tree of ``Scalar``, ``Seq`` and ``Map`` nodes; each node knows its file and
line, so every error says ``file:line``. ``Reader`` turns nodes into typed values (text, whole
numbers in a range, numbers, booleans, lists) with one style of error message:
``FILE:LINE: WHAT: PROBLEM``, e.g. ``node.yaml:3: gpus: unknown key 'cnt' (known keys: count,
model)``.

These files may come from anyone (``--tables``, ``ENVDOCTOR_TABLES``, ``--spec``), so reading
is bounded before any tree is built:

- size: at most ``MAX_BYTES``, read from a regular file only (``inputfile.read_input``: a FIFO
  or a device would block or never end);
- no anchors or aliases (``&a`` / ``*a``): a 403-byte "billion laughs" expands to gigabytes;
  none of our formats needs them, and refusing them keeps the tree as large as the text;
- nesting at most ``MAX_DEPTH`` deep, counted while parsing: the tree is built from the
  parser's events with an explicit stack, never by recursion (``[`` x 50 000 made the C
  composer overflow its stack, SIGSEGV, and the Python one raise ``RecursionError``);
- one document, plain keys, no merge keys (``<<``), no explicit tags but ``!!str``.

Scalars keep their text as written (``12.10`` stays ``"12.10"``, never the float 12.1), with
the type YAML resolves beside it, so a format can insist on a whole number or a boolean.

Each format keeps its field definitions where it reads them; adding an optional field is two
lines there, and nothing here:

- a table row (``compat/loader.py``): the key in that row's ``ctx.keys(..., optional=(...))``,
  then its value in the record's constructor call, e.g.
  ``eol=ctx.optional_text(row, "eol", what)`` (or ``ctx.flag`` / ``ctx.integer`` /
  ``ctx.driver`` / ``ctx.cuda`` …), and the field on the record in ``compat/tables.py``;
- a signature (``kb/loader.py``): ``"key": False`` in ``_SIGNATURE_KEYS`` (``True`` when
  required), then ``key=_text(sig, "key")`` / ``_texts`` / ``_number`` in ``Signature(...)``;
- a node spec (``fleet/spec.py``): the key in ``_GPU_KEYS`` / ``_DRIVER_KEYS`` /
  ``_TORCH_KEYS``, then ``read.optional(section, "key", "gpus", read.text)`` in ``_spec``.

An unknown key is refused by ``Reader.keys`` with the one message; a value of the wrong shape or
out of range by the accessor, at its line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

import yaml

from envdoctor.errors import EnvdoctorError
from envdoctor.inputfile import MAX_YAML_BYTES, read_input
from envdoctor.terminal import quoted

T = TypeVar("T")

if TYPE_CHECKING:
    import sys

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = MAX_YAML_BYTES
MAX_DEPTH = 32

_KINDS = {
    "tag:yaml.org,2002:str": "str",
    "tag:yaml.org,2002:int": "int",
    "tag:yaml.org,2002:float": "float",
    "tag:yaml.org,2002:bool": "bool",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "str",  # a date stays its text
}
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


# --- the tree ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scalar:
    """One value as written: ``text``, and ``kind`` "str", "int", "float", "bool" or "null"."""

    text: str
    kind: str
    line: int
    source: str = field(default="", repr=False, compare=False)

    def at(self) -> str:
        return _at(self.source, self.line)


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Node, ...]
    line: int
    source: str = field(default="", repr=False, compare=False)

    def at(self) -> str:
        return _at(self.source, self.line)


@dataclass(frozen=True, slots=True)
class Map:
    """A mapping with plain-text keys, in file order, and the line of each key."""

    items: dict[str, Node]
    key_lines: dict[str, int]
    line: int
    source: str = field(default="", repr=False, compare=False)

    def at(self, key: str | None = None) -> str:
        """``file:line`` of ``key`` (of the mapping itself when ``key`` is None or absent)."""
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        return _at(self.source, line)


Node = Union[Scalar, Seq, Map]  # noqa: UP007 (a recursive alias needs Union on 3.10)


def _at(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


def _line(event: yaml.Event) -> int:
    """The 1-based line where ``event`` starts (0: unknown)."""
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


# --- reading and parsing ----------------------------------------------------------------------


def load(
    path: Path | Traversable,
    *,
    where: str | None = None,
    empty: str = "the file is empty",
    empty_hint: str = "",
) -> Node:
    """Read and parse one YAML file (see ``read_text`` and ``parse``)."""
    return parse(
        read_input(path, limit=MAX_BYTES), where or str(path), empty=empty, empty_hint=empty_hint
    )


def parse(text: str, where: str, *, empty: str = "the file is empty", empty_hint: str = "") -> Node:
    """The document's root node; any problem is an ``EnvdoctorError`` at ``where:line``."""
    if len(text) > MAX_BYTES:  # characters: at least as many bytes
        raise EnvdoctorError(
            f"larger than {MAX_BYTES >> 10} KiB: not a file envdoctor reads", where=where
        )
    try:
        root = _Builder(where).build(yaml.parse(text, Loader=LOADER))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or str(exc)
        message = f"invalid YAML: {problem}"
        if "nesting depth" in problem:
            # libyaml's own depth limit (1000 levels since PyYAML 6.0.4) can speak before the
            # builder's, which sees events only after libyaml's scanner has read far ahead: the
            # user gets the same sentence whichever layer stopped the document
            message = f"nested more than {MAX_DEPTH} levels deep"
        raise EnvdoctorError(message, where=_at(where, mark.line + 1 if mark else 0)) from None
    except yaml.YAMLError as exc:
        raise EnvdoctorError(f"invalid YAML: {exc}", where=where) from None
    if root is None:
        raise EnvdoctorError(empty, where=where, hint=empty_hint)
    return root


@dataclass
class _Open:
    """A sequence or mapping whose end event has not come yet."""

    line: int
    items: list[Node] | None = None  # a sequence
    mapping: dict[str, Node] | None = None  # a mapping
    key_lines: dict[str, int] = field(default_factory=dict)
    key: str | None = None  # a mapping's key whose value comes next


class _Builder:
    """Builds the tree from parser events with an explicit stack: no recursion, bounded depth."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.stack: list[_Open] = []
        self.root: Node | None = None
        self.documents = 0

    def error(self, message: str, event: yaml.Event) -> EnvdoctorError:
        return EnvdoctorError(message, where=_at(self.source, _line(event)))

    def build(self, events: Iterable[yaml.Event]) -> Node | None:
        for event in events:
            if isinstance(event, yaml.AliasEvent):
                raise self.error(
                    f"aliases (*{event.anchor}) are not supported: write the value out", event
                )
            if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
                raise self.error(
                    f"anchors (&{event.anchor}) are not supported: write the value out", event
                )
            if isinstance(event, yaml.ScalarEvent):
                self.attach(self.scalar(event), event)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                self.open(event)
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                self.close(event)
            elif isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise self.error("more than one YAML document (---) in the file", event)
        return self.root

    def scalar(self, event: yaml.ScalarEvent) -> Scalar:
        line = _line(event)
        tag = event.tag
        if tag is None or tag == "!":
            tag = _RESOLVER.resolve(  # type: ignore[no-untyped-call]  # untyped in the stubs
                yaml.ScalarNode, event.value, event.implicit
            )
        elif tag != "tag:yaml.org,2002:str":
            raise self.error(f"explicit YAML tags ({event.tag}) are not supported", event)
        kind = _KINDS.get(str(tag))
        if kind is None:
            if tag == "tag:yaml.org,2002:merge":
                raise self.error("merge keys (<<) are not supported: write the keys out", event)
            raise self.error(f"unsupported YAML value type {tag}", event)
        return Scalar(text=str(event.value), kind=kind, line=line, source=self.source)

    def open(self, event: yaml.CollectionStartEvent) -> None:
        if event.tag is not None and event.tag not in ("!",) and not event.implicit:
            raise self.error(f"explicit YAML tags ({event.tag}) are not supported", event)
        top = self.stack[-1] if self.stack else None
        if top is not None and top.mapping is not None and top.key is None:
            raise self.error("keys must be plain names (no lists or mappings as keys)", event)
        if len(self.stack) >= MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep", event)
        line = _line(event)
        if isinstance(event, yaml.SequenceStartEvent):
            self.stack.append(_Open(line, items=[]))
        else:
            self.stack.append(_Open(line, mapping={}))

    def close(self, event: yaml.Event) -> None:
        done = self.stack.pop()
        node: Node
        if done.items is not None:
            node = Seq(items=tuple(done.items), line=done.line, source=self.source)
        else:
            node = Map(
                items=done.mapping or {},
                key_lines=done.key_lines,
                line=done.line,
                source=self.source,
            )
        self.attach(node, event)

    def attach(self, node: Node, event: yaml.Event) -> None:
        if not self.stack:
            self.root = node
            return
        top = self.stack[-1]
        if top.items is not None:
            top.items.append(node)
            return
        assert top.mapping is not None
        if top.key is None:  # ``node`` is a key: open() refused lists and mappings already
            assert isinstance(node, Scalar)
            if node.text == "<<" and node.kind == "str":
                raise self.error("merge keys (<<) are not supported", event)
            if node.text in top.mapping:
                raise self.error(f"duplicate key {quoted(node.text)}", event)
            top.key = node.text
            top.key_lines[node.text] = node.line
            return
        top.mapping[top.key] = node
        top.key = None


# --- typed values -----------------------------------------------------------------------------


class Reader:
    """Typed values from nodes. Every problem is ``EnvdoctorError(f"{what}: {problem}")`` at the
    node's ``file:line``; ``what`` names the value the way the format's documentation does
    (``gpus.count``, ``releases.cuda``).

    A format with its own vocabulary (driver versions, CUDA versions …) subclasses this and
    builds its checks on ``text`` and ``error``.
    """

    def __init__(self, file: str = "") -> None:
        self.file = file  # named by an error that has no node to point at

    def error(self, node: Node | None, message: str, line: int | None = None) -> EnvdoctorError:
        """An error at ``node`` (or at ``line`` of its file)."""
        if node is None:
            return EnvdoctorError(message, where=self.file)
        return EnvdoctorError(
            message, where=_at(node.source, line if line is not None else node.line)
        )

    def where(self, node: Node) -> str:
        return node.at()

    # --- shapes ---

    def mapping(self, node: Node, what: str) -> Map:
        if not isinstance(node, Map):
            raise self.error(node, f"{what}: expected a mapping of keys to values")
        return node

    def sequence(self, node: Node, what: str) -> tuple[Node, ...]:
        if not isinstance(node, Seq):
            raise self.error(node, f"{what}: expected a list")
        return node.items

    def scalar(self, node: Node, what: str) -> Scalar:
        if not isinstance(node, Scalar):
            raise self.error(node, f"{what}: expected a single value, not a list or mapping")
        return node

    def keys(
        self, node: Map, what: str, *, required: Iterable[str] = (), optional: Iterable[str] = ()
    ) -> Map:
        """Refuse a key that is neither required nor optional, and a required key missing."""
        required = tuple(required)
        allowed = (*required, *optional)
        for key in node.items:
            if key not in allowed:
                raise self.error(node, unknown_key(what, key, allowed), line=node.key_lines[key])
        for key in required:
            if key not in node.items:
                raise self.missing(node, key, what)
        return node

    def required(self, node: Map, key: str, what: str) -> Node:
        if key not in node.items:
            raise self.missing(node, key, what)
        return node.items[key]

    def missing(self, node: Map, key: str, what: str) -> EnvdoctorError:
        """The error for a required key that is not there (a format may say more)."""
        return self.error(node, f"{what}: missing key {quoted(key)}")

    # --- values ---

    def text(self, node: Node, what: str) -> str:
        """Non-empty text as written (a number or a date is its text; null and booleans are not)."""
        value = self.scalar(node, what)
        if value.kind in ("null", "bool") or not value.text.strip():
            raise self.error(
                node,
                f"{what}: expected text, got {quoted(value.text) if value.text else 'nothing'}",
            )
        return value.text.strip()

    def optional_text(self, node: Map, key: str, what: str) -> str | None:
        """``node[key]`` as text; None when the key is absent or null."""
        if key not in node.items:
            return None
        value = self.scalar(node.items[key], f"{what}.{key}")
        if value.kind == "null":
            return None
        return self.text(value, f"{what}.{key}")

    def text_list(self, node: Node, what: str, *, non_empty: bool = False) -> tuple[str, ...]:
        items = self.sequence(node, what)
        if non_empty and not items:
            raise self.error(node, f"{what}: expected a non-empty list")
        return tuple(self.text(item, what) for item in items)

    def integer(self, node: Node, what: str, *, low: int = 0, high: int = 2**31 - 1) -> int:
        """A whole number in ``[low, high]`` (YAML spellings: 12, 0x1f, 1_000)."""
        value = self.scalar(node, what)
        if value.kind != "int":
            raise self.error(node, f"{what}: expected a whole number, got {quoted(value.text)}")
        number = _construct(value)  # None: too many digits to be made at all
        if not isinstance(number, int) or not low <= number <= high:
            raise self.error(
                node, f"{what}: {quoted(value.text)} is out of range ({low} to {high})"
            )
        return number

    def number(self, node: Node, what: str, *, low: float, high: float) -> float:
        """A number (whole or not) in ``[low, high]``."""
        value = self.scalar(node, what)
        if value.kind not in ("int", "float"):
            raise self.error(node, f"{what}: expected a number, got {quoted(value.text)}")
        number = _construct(value)
        if not isinstance(number, int | float) or not low <= number <= high:  # refuses nan
            raise self.error(
                node, f"{what}: {quoted(value.text)} is out of range ({low} to {high})"
            )
        return float(number)

    def boolean(self, node: Node, what: str) -> bool:
        value = self.scalar(node, what)
        if value.kind != "bool":
            raise self.error(node, f"{what}: expected true or false, got {quoted(value.text)}")
        return value.text.lower() in ("true", "yes", "on", "y")

    def optional(self, node: Map, key: str, what: str, read: Callable[[Node, str], T]) -> T | None:
        """``read(node[key])``; None when the key is absent (a null is given to ``read``, which
        refuses it where a value is wanted)."""
        return read(node.items[key], f"{what}.{key}") if key in node.items else None

    def flag(self, node: Map, key: str, what: str, default: bool) -> bool:
        """``node[key]`` as a boolean, ``default`` when the key is absent."""
        return self.boolean(node.items[key], f"{what}.{key}") if key in node.items else default


def plain(root: Node) -> Any:
    """The tree as plain data (dicts, lists, scalars as their text; ``null`` as None), built
    without recursion: for formats read as data (CDI specs) rather than through a ``Reader``."""
    out: dict[int, Any] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if isinstance(node, Scalar):
            out[id(node)] = None if node.kind == "null" else node.text
        elif not done:
            stack.append((node, True))
            children = node.items.values() if isinstance(node, Map) else node.items
            stack.extend((child, False) for child in children)
        elif isinstance(node, Map):
            out[id(node)] = {key: out[id(child)] for key, child in node.items.items()}
        else:
            out[id(node)] = [out[id(child)] for child in node.items]
    return out[id(root)]


def unknown_key(what: str, key: str, known: Iterable[str]) -> str:
    """The one "unknown key" message of every format."""
    return f"{what}: unknown key {quoted(key)} (known keys: {', '.join(known)})"


def plain_kind(text: str) -> str | None:
    """The kind YAML gives ``text`` written unquoted ("str", "int", "bool" …), decided by YAML's
    own rules without parsing anything; None for a kind our formats do not read."""
    tag = _RESOLVER.resolve(  # type: ignore[no-untyped-call]  # untyped in the stubs
        yaml.ScalarNode, text, (True, False)
    )
    return _KINDS.get(str(tag))


def _construct(value: Scalar) -> Any:
    """A number's Python value as YAML defines it (``0x1f``, ``1_000``, ``1:30``, ``.5``); None
    when it cannot be one. Longer than 64 characters is none: ``int`` of thousands of digits is
    refused (Python 3.11+) or slow (3.10), and no value of ours needs it."""
    if len(value.text) > 64:
        return None
    node = yaml.ScalarNode(f"tag:yaml.org,2002:{value.kind}", value.text)
    make = (
        _CONSTRUCTOR.construct_yaml_int
        if value.kind == "int"
        else _CONSTRUCTOR.construct_yaml_float
    )
    try:
        return make(node)
    except (ValueError, OverflowError, yaml.YAMLError):
        return None
