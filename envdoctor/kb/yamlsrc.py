"""YAML read into plain values that remember their line, so a bad signature says file:line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from envdoctor.errors import EnvdoctorError
from envdoctor.yamlsource import compose

_SCALARS = yaml.constructor.SafeConstructor()


@dataclass
class LMap:
    """A mapping with the line of each key."""

    items: dict[str, Any]
    key_lines: dict[str, int]
    line: int
    where: str = ""

    def at(self, key: str | None = None) -> str:
        """``file:line`` of a key (or of the mapping itself)."""
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        return f"{self.where}:{line}"


@dataclass
class LList:
    """A sequence with the line of each item."""

    items: list[Any]
    item_lines: list[int] = field(default_factory=list)
    line: int = 0
    where: str = ""

    def at(self, index: int | None = None) -> str:
        line = self.item_lines[index] if index is not None else self.line
        return f"{self.where}:{line}"


def load_yaml(text: str, where: str) -> Any:
    """Parse one document into LMap / LList / scalars; syntax errors name ``where:line``."""
    return _convert(compose(text, where), where)


def _convert(node: yaml.Node, where: str) -> Any:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode):
        try:
            return _SCALARS.construct_object(node)
        except yaml.YAMLError as exc:
            raise EnvdoctorError(f"bad value: {exc}", where=f"{where}:{line}") from None
    if isinstance(node, yaml.SequenceNode):
        seq = LList(items=[], line=line, where=where)
        for item in node.value:
            seq.items.append(_convert(item, where))
            seq.item_lines.append(item.start_mark.line + 1)
        return seq
    if isinstance(node, yaml.MappingNode):
        mapping = LMap(items={}, key_lines={}, line=line, where=where)
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise EnvdoctorError(
                    "mapping keys must be plain words", where=f"{where}:{key_line}"
                )
            key = str(key_node.value)
            if key in mapping.items:
                raise EnvdoctorError(f"duplicate key {key!r}", where=f"{where}:{key_line}")
            mapping.items[key] = _convert(value_node, where)
            mapping.key_lines[key] = key_line
        return mapping
    raise EnvdoctorError("unsupported YAML node", where=f"{where}:{line}")  # pragma: no cover
