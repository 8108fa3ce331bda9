"""The Prometheus text exposition format (version 0.0.4): metric families with HELP and TYPE."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from envdoctor.model.probed import Found, Probed

MAX_LABEL = 256

Labels = Sequence[tuple[str, str]]
Sample = tuple[Labels, float | int]


class Writer:
    """Accumulates metric families; a family without samples is left out."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def metric(
        self, name: str, help_text: str, samples: Iterable[Sample], *, kind: str = "gauge"
    ) -> None:
        rows = list(samples)
        if not rows:
            return  # a family without samples says nothing; leave it out
        self._lines.append(f"# HELP {name} {escape_help(help_text)}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in rows:
            rendered = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels)
            self._lines.append(f"{name}{{{rendered}}} {value}" if labels else f"{name} {value}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def label_value(probed: Probed[Any]) -> str:
    """A probed fact as a label value: the value, or "" (the reason is in the finding metrics)."""
    return str(probed.value) if isinstance(probed, Found) else ""


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label(text: str) -> str:
    text = text[:MAX_LABEL]
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
