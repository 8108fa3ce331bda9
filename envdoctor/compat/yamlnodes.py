"""Read YAML into plain values that remember their line, so table errors can say file:line.

Scalars keep their raw text (``12.10`` stays ``"12.10"``, never the float 12.1); the resolved
YAML type is kept beside it so the schema can insist on a boolean or an integer where needed.
"""

from __future__ import annotations

from typing import Union

import yaml

from envdoctor.errors import EnvdoctorError
from envdoctor.model.record import record
from envdoctor.yamlsource import compose

_TAGS = {
    "tag:yaml.org,2002:str": "str",
    "tag:yaml.org,2002:int": "int",
    "tag:yaml.org,2002:float": "float",
    "tag:yaml.org,2002:bool": "bool",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "str",
}


@record
class Scalar:
    text: str
    kind: str  # "str", "int", "float", "bool" or "null"
    line: int


@record
class Seq:
    items: tuple[Node, ...]
    line: int


@record
class Map:
    items: dict[str, Node]
    key_lines: dict[str, int]
    line: int


Node = Union[Scalar, Seq, Map]  # noqa: UP007 (a recursive alias needs Union on 3.10)


def load(text: str, where: str) -> Node:
    """Parse one YAML document; syntax errors become ``EnvdoctorError`` at ``where:line``."""
    return _convert(compose(text, where), where)


def _convert(node: yaml.Node, where: str) -> Node:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode):
        kind = _TAGS.get(node.tag)
        if kind is None:
            raise EnvdoctorError(f"unsupported YAML tag {node.tag}", where=f"{where}:{line}")
        return Scalar(text=str(node.value), kind=kind, line=line)
    if isinstance(node, yaml.SequenceNode):
        return Seq(items=tuple(_convert(item, where) for item in node.value), line=line)
    if isinstance(node, yaml.MappingNode):
        items: dict[str, Node] = {}
        key_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                raise EnvdoctorError(
                    "keys must be plain names (no merge keys or complex keys)",
                    where=f"{where}:{key_line}",
                )
            key = str(key_node.value)
            if key in items:
                raise EnvdoctorError(f"duplicate key {key!r}", where=f"{where}:{key_line}")
            items[key] = _convert(value_node, where)
            key_lines[key] = key_line
        return Map(items=items, key_lines=key_lines, line=line)
    raise EnvdoctorError("unsupported YAML node", where=f"{where}:{line}")  # pragma: no cover
