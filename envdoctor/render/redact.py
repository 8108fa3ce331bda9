"""Redaction of what identifies a machine or a person: hostname, user name, GPU UUIDs.

The same value always maps to the same placeholder within one output, so redacted reports and
snapshots stay internally consistent (GPU 0's UUID is the same placeholder everywhere).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from envdoctor.model.facts import Facts
from envdoctor.model.probed import Found

_UUID = (
    r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"  # compiled on first use
)
KEEP_USERS = frozenset({"root"})
REDACTED_HOST = "<hostname>"
"""The hostname's stand-in: what a redacted snapshot records, so a report can say so."""


class Redactor:
    """Replaces identifying strings in text and in JSON-like trees."""

    def __init__(self, facts: Facts) -> None:
        self._words: list[tuple[re.Pattern[str], str]] = []
        hostname = facts.host.hostname
        if isinstance(hostname, Found) and hostname.value:
            self._add(hostname.value, REDACTED_HOST)
        if facts.host.user and facts.host.user not in KEEP_USERS:
            self._add(facts.host.user, "<user>")

    def _add(self, word: str, placeholder: str) -> None:
        self._words.append((re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w-])"), placeholder))

    def text(self, value: str) -> str:
        value = re.sub(_UUID, _fake_uuid, value)
        for pattern, placeholder in self._words:
            value = pattern.sub(placeholder, value)
        return value

    def tree(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, list):
            return [self.tree(item) for item in data]
        if isinstance(data, dict):
            return {key: self.tree(value) for key, value in data.items()}
        return data


def _fake_uuid(match: re.Match[str]) -> str:
    """A stable stand-in UUID: same input, same output; the original cannot be recovered."""
    digest = hashlib.sha256(match.group(0).encode()).hexdigest()
    return f"{match.group(1)}-redacted-{digest[:4]}-{digest[4:8]}-{digest[8:12]}-{digest[12:24]}"
