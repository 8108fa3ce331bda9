"""The NVLink boards envdoctor knows (``gpu_links.yaml``): how many links each has, and what a
link and a PCIe lane carry. Read once, on first use, by the NVLink rule and the smoke judge."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

FILE = "gpu_links.yaml"


@dataclass(frozen=True, slots=True)
class Board:
    """An NVLink board: its links, their generation and one link's one-way GB/s."""

    model: str
    names: tuple[str, ...]
    links: int
    nvlink: int
    link_gbps: float
    source: str

    def matches(self, name: str) -> bool:
        return any(re.fullmatch(pattern, name) for pattern in self.names)


@dataclass(frozen=True, slots=True)
class LinkData:
    boards: tuple[Board, ...]
    pcie_lane_gbps: dict[int, float]
    pcie_source: str

    def board(self, name: str) -> Board | None:
        """The board NVML's product name is, or None (a PCIe board, or one not listed)."""
        return next((b for b in self.boards if b.matches(name)), None)

    def pcie_gbps(self, gen: int, width: int) -> float | None:
        """What a PCIe link of that generation and width carries one way, in GB/s."""
        lane = self.pcie_lane_gbps.get(gen)
        return None if lane is None or width <= 0 else lane * width


@functools.cache
def link_data() -> LinkData:
    """The shipped file, checked: a malformed entry is an ``EnvdoctorError`` at its line."""
    from importlib import resources

    from envdoctor.yamlsource import Reader, load

    path = resources.files("envdoctor.rules") / FILE
    where = f"envdoctor/rules/{FILE}"
    reader = Reader(where)
    top = reader.mapping(load(path, where=where), "the file")
    reader.keys(top, "the file", required=("schema", "boards", "pcie_lane_gbps", "pcie_source"))
    boards = []
    for node in reader.sequence(top.items["boards"], "boards"):
        entry = reader.keys(
            reader.mapping(node, "boards[]"),
            "boards[]",
            required=("names", "model", "links", "nvlink", "link_gbps", "source"),
        )
        names = reader.text_list(entry.items["names"], "boards[].names", non_empty=True)
        bad = _bad_pattern(names)
        if bad:
            raise reader.error(entry.items["names"], f"names: {bad}")
        boards.append(
            Board(
                model=reader.text(entry.items["model"], "boards[].model"),
                names=names,
                links=reader.integer(entry.items["links"], "boards[].links", low=1, high=64),
                nvlink=reader.integer(entry.items["nvlink"], "boards[].nvlink", low=1, high=9),
                link_gbps=reader.number(
                    entry.items["link_gbps"], "boards[].link_gbps", low=1, high=1000
                ),
                source=reader.text(entry.items["source"], "boards[].source"),
            )
        )
    lanes = reader.mapping(top.items["pcie_lane_gbps"], "pcie_lane_gbps")
    table = {
        int(key): reader.number(value, f"pcie_lane_gbps.{key}", low=0.1, high=100)
        for key, value in lanes.items.items()
    }
    return LinkData(tuple(boards), table, reader.text(top.items["pcie_source"], "pcie_source"))


def _bad_pattern(patterns: tuple[str, ...]) -> str:
    """The first pattern that is not a regular expression, with why ("" when all are)."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:  # noqa: PERF203 (a handful of patterns, read once)
            return f"{pattern!r}: {exc}"
    return ""
