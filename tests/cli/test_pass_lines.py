"""``check -v`` lists every check as "what was checked: what was found", and each reads as a
plain statement: no "nvidia loaded: yes", no "nvcc: nvcc is not on PATH", no "NVML reaches all
2 GPUs", no sentence-case title in the middle of a line."""

from __future__ import annotations

import re

import pytest

from envdoctor.cli.common import AppContext
from envdoctor.rules import all_rules
from tests.conftest import PYTHON, SCENARIO_NAMES
from tests.fakes.host import FakeHost
from tests.runner import invoke

ENVIRONMENTS = {
    "plain": {},
    "variables-set": {
        "CUDA_LAUNCH_BLOCKING": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "CUDA_VISIBLE_DEVICES": "0",
    },
}


SUMMARIES = sorted((r.summary for r in all_rules()), key=len, reverse=True)


def _reason(line: str) -> str:
    """What a check line says was found: the part after "<mark> <what was checked>: "."""
    checked = next(s for s in SUMMARIES if line[2:].startswith(f"{s}: "))
    return line[2 + len(checked) + 2 :]


def _verbose_lines(scenario: str, env: dict[str, str]) -> list[str]:
    """Each check of ``check -v`` as one line (its wrapped continuation lines joined)."""
    host = FakeHost.scenario(scenario)
    if env:
        host = FakeHost.scenario(scenario, env={**host.env(), **env})
    text = invoke(["check", "-v"], obj=AppContext(host=host, python=PYTHON)).stdout
    lines: list[str] = []
    open_check = False  # the last line began a check, which may wrap
    for line in text.splitlines():
        if re.match(r"  [✓–?] ", line):
            lines.append(line.strip())
            open_check = True
        elif open_check and re.match(r"    \S", line):
            lines[-1] += " " + line.strip()
        else:
            open_check = False  # a finding, its evidence and fix, or a title
    return lines


ODD = {
    "a yes/no label instead of a statement": re.compile(r"\bloaded: (yes|no)\b"),
    "the subject named twice": re.compile(r": nvcc: nvcc\b|initialised: driver"),
    "all of two": re.compile(r"\ball 2\b"),
    "a bare word for a verdict": re.compile(r": (off|noted|read)$"),
    "parentheses inside parentheses of a label": re.compile(r"\(PCI bus: none \("),
    "a sentence-case title": re.compile(r"^[A-Z][a-z]"),
}


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
@pytest.mark.parametrize("scenario", SCENARIO_NAMES)
def test_every_check_line_reads_as_a_statement(scenario: str, env: str) -> None:
    for line in _verbose_lines(scenario, ENVIRONMENTS[env]):
        reason = _reason(line)
        for why, pattern in ODD.items():
            assert not pattern.search(reason), f"{why}: {line}"


@pytest.mark.parametrize(
    ("scenario", "line"),
    [
        ("healthy_h100", "✓ The nvidia kernel module is loaded: nvidia is loaded (/proc/modules)"),
        (
            "healthy_h100",
            "✓ nouveau is not loaded or bound to an NVIDIA GPU: nouveau is not loaded "
            "(/proc/modules) and no GPU is bound to it",
        ),
        ("healthy_h100", "✓ NVML initialises: NVML initialised with driver 580.159.04"),
        (
            "healthy_h100",
            "✓ The kernel log can be read for Xid events: the kernel log was read from /dev/kmsg",
        ),
        (
            "healthy_h100",
            "– nvcc has a driver to run what it builds: nvcc is not on PATH, under $CUDA_HOME or "
            "in /usr/local/cuda",
        ),
        (
            "nvcc_mismatch",
            "✓ nvcc has a driver to run what it builds: nvcc (CUDA 12.4) and driver 580.159.04 "
            "are both installed",
        ),
        ("memory_held_some_gpus", "✓ No GPU has fallen off the bus: NVML reaches both GPUs"),
        ("cpu_only", "– An NVIDIA driver is installed: the PCI bus lists no NVIDIA GPU"),
        (
            "torch_probe_hangs",
            "? torch is installed and the probe completes: could not determine the torch of "
            f"{PYTHON}:",
        ),
        (
            "healthy_h100",
            "– On an NVSwitch system, every GPU has joined the NVLink fabric: no NVSwitch and no "
            "NVLink fabric state here",
        ),
    ],
)
def test_reworded_lines(scenario: str, line: str) -> None:
    lines = _verbose_lines(scenario, {})
    assert any(shown.startswith(line) for shown in lines), "\n".join(lines)


def test_launch_blocking_off_says_what_it_means() -> None:
    lines = _verbose_lines("healthy_h100", ENVIRONMENTS["variables-set"])
    assert (
        "✓ CUDA_LAUNCH_BLOCKING is off: CUDA_LAUNCH_BLOCKING='0': kernel launches stay asynchronous"
        in lines
    )
