"""Units and plurals as people write them: "1 line", binary sizes in KiB/MiB/GiB, and Markdown
whose code spans never nest backticks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.model.units import binary_size, plural
from tests.conftest import PYTHON, SCENARIO_NAMES
from tests.fakes.host import FakeHost
from tests.runner import invoke


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (1024, "1.0 KiB"),
        (1_000_000, "976.6 KiB"),
        (3 << 20, "3.0 MiB"),
        (5 << 30, "5.0 GiB"),
    ],
)
def test_binary_sizes(n: int, shown: str) -> None:
    assert binary_size(n) == shown


def test_plural() -> None:
    assert plural(1, "line") == "1 line"
    assert plural(0, "line") == "0 lines"
    assert plural(12_345, "line") == "12,345 lines"
    assert plural(2, "copy", "copies") == "2 copies"


def test_explain_headline_counts_one_line_in_kib(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_bytes(b"x" * 999_999 + b"\n")
    result = invoke(["explain", str(log)])
    first = result.stdout.splitlines()[0]
    assert f"{log} (1 line, 976.6 KiB) — no known signature" in first


def test_fix_steps_count_one_step() -> None:
    host = FakeHost.scenario("uvm_missing")
    result = invoke(["fix", "--format", "steps"], obj=AppContext(host=host, python=PYTHON))
    head = result.stdout.splitlines()[0]
    assert re.match(r"envdoctor fix: 1 step \(|envdoctor fix: [02-9]\d* steps \(", head), head


def test_tables_validate_counts_rows() -> None:
    result = invoke(["tables", "validate"])
    assert result.exit_code == 0
    for line in result.stdout.splitlines()[1:]:
        assert re.fullmatch(r"  [a-z-]+: (1 row|\d+ rows)", line), line


def test_a_machine_with_one_gpu_says_so_in_the_singular() -> None:
    host = FakeHost.scenario("healthy_h100")
    result = invoke(["check", "-v"], obj=AppContext(host=host, python=PYTHON))
    text = " ".join(result.stdout.split())  # as one line, whatever the wrapping
    assert "NVML lists 1 GPU, 1 on the PCI bus, 1 /dev/nvidiaN node" in text
    assert "and 1 GPU node exist" in text


_NESTED = re.compile(r"`[^`]+`[^`]+`[^`]+`")  # a span that opens inside another


@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_markdown_fix_steps_never_nest_backticks(scenario: str) -> None:
    host = FakeHost.scenario(scenario)
    result = invoke(["check", "-f", "markdown"], obj=AppContext(host=host, python=PYTHON))
    for line in result.stdout.splitlines():
        step = re.match(r"\s+\d+\. (.*)", line)
        if step is None:
            continue
        text = step.group(1)
        if text.startswith("`") and text.endswith("`"):
            assert "`" not in text[1:-1], line  # a whole command as code: no backtick inside
        else:
            assert text.count("`") % 2 == 0, line  # a sentence with its own code spans
