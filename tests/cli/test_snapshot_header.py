"""``check --snapshot FILE`` says whose facts it judged, and when they were read: the host as the
snapshot recorded it (redacted when the snapshot was), the time it was taken, and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envdoctor import __version__
from envdoctor.cli.common import AppContext
from envdoctor.snapshot import dump_snapshot
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.runner import invoke


def _header(text: str) -> str:
    """The report's first line, however the terminal's width wrapped it."""
    return " ".join(text.split("\n\n", 1)[0].split())


def _snapshot(tmp_path: Path, *, redact: bool, collected_at: str | None = None) -> Path:
    data = json.loads(dump_snapshot(scenario_facts("driver_mismatch"), redact=redact))
    data["facts"]["collected_at"] = (
        "2026-11-20T14:03:12+00:00" if collected_at is None else collected_at
    )
    path = tmp_path / ("redacted.json" if redact else "full.json")
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_redacted_snapshot_is_named_with_its_redacted_host_and_its_time(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, redact=True)
    result = invoke(["check", "--snapshot", str(snap)])
    assert result.exit_code == 1
    assert _header(result.stdout) == (
        f"envdoctor {__version__} — UNHEALTHY — snapshot of <hostname> taken 2026-11-20 14:03:12 UTC"
    )
    text = " ".join(result.stdout.split())
    assert (
        f"file {snap} (collected by envdoctor {__version__}; hostname, user and GPU UUIDs redacted)"
        in text
    )
    assert "gpu-node-17" not in result.stdout


def test_an_unredacted_snapshot_names_its_host(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, redact=False)
    header = _header(invoke(["check", "--snapshot", str(snap)]).stdout)
    assert header.endswith("— snapshot of gpu-node-17 taken 2026-11-20 14:03:12 UTC")


def test_a_snapshot_that_does_not_say_when_it_was_taken(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, redact=True, collected_at="")
    text = " ".join(invoke(["check", "--snapshot", str(snap)]).stdout.split())
    assert "taken at an unknown time (the snapshot does not say)" in text


def test_the_live_header_names_no_snapshot() -> None:
    host = FakeHost.scenario("driver_mismatch")
    result = invoke(["check"], obj=AppContext(host=host, python=PYTHON))
    assert result.stdout.splitlines()[0] == f"envdoctor {__version__} — UNHEALTHY"
    assert "snapshot" not in result.stdout and "\nfile " not in result.stdout


def test_markdown_names_the_snapshot_in_code(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path, redact=False)
    result = invoke(["check", "--snapshot", str(snap), "--format", "markdown"])
    assert (
        f"Snapshot of `<hostname>` taken 2026-11-20 14:03:12 UTC: `{snap}` "
        f"(collected by envdoctor {__version__})" in result.stdout
    )  # Markdown is redacted whatever the snapshot was


@pytest.mark.parametrize("redact", [True, False])
def test_the_snapshot_header_takes_colour_too(tmp_path: Path, redact: bool) -> None:
    snap = _snapshot(tmp_path, redact=redact)
    result = invoke(["check", "--snapshot", str(snap), "--color", "always"], tty=("stdout",))
    assert result.stdout.splitlines()[0].startswith(
        f"envdoctor {__version__} — \x1b[1;31mUNHEALTHY\x1b[0m — snapshot of "
    )
