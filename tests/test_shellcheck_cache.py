"""The suite's shellcheck cache (tests/shellcheck.py) never turns a finding into a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import shellcheck as sc

UNQUOTED = "#!/bin/bash\necho $1\n"  # SC2086, an info-level note


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "CACHE", tmp_path / "cache")
    monkeypatch.delenv("ENVDOCTOR_TEST_NO_CACHE", raising=False)


def test_a_finding_is_reported_every_time() -> None:
    assert "SC2086" in sc.shellcheck(UNQUOTED, "--severity=info")
    assert "SC2086" in sc.shellcheck(UNQUOTED, "--severity=info")


def test_a_clean_verdict_holds_only_for_the_options_it_was_given() -> None:
    assert sc.shellcheck(UNQUOTED, "--severity=warning") == ""
    assert "SC2086" in sc.shellcheck(UNQUOTED, "--severity=info")


def test_a_clean_verdict_is_remembered_and_an_edit_is_read_again(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text('#!/bin/bash\necho "$1"\n')
    assert sc.shellcheck(script, *sc.BASH_STRICT) == ""
    assert len(list((tmp_path / "cache").iterdir())) == 1
    script.write_text(UNQUOTED)
    assert "SC2086" in sc.shellcheck(script, *sc.BASH_STRICT)


def test_a_sandboxed_script_is_remembered_across_sandboxes_and_still_held(tmp_path: Path) -> None:
    """A script that names its run's temporary directory hits the cache on the next run (a new
    directory), and a finding in it is still reported."""
    clean = '#!/bin/bash\n"{base}/bin/envdoctor" check\n'
    for run in ("pytest-1/sandbox0", "pytest-2/sandbox0"):
        base = tmp_path / run
        assert sc.shellcheck_sandboxed(clean.format(base=base), base, *sc.BASH_STRICT) == ""
    assert len(list((tmp_path / "cache").iterdir())) == 1
    dirty = "#!/bin/bash\n{base}/bin/envdoctor check $1\n".format(base=tmp_path / "pytest-3")
    assert "SC2086" in sc.shellcheck_sandboxed(dirty, tmp_path / "pytest-3", *sc.BASH_STRICT)


def test_only_a_plain_sandbox_path_is_respelled() -> None:
    """A path with a space is not one literal word to shellcheck: the script is checked as it
    is written (shellcheck quotes the line it reports, with the path as it was)."""
    script = "#!/bin/bash\necho /tmp/a b/$1\n"
    found = sc.shellcheck_sandboxed(script, "/tmp/a b", *sc.BASH_STRICT)
    assert "SC2086" in found and "echo /tmp/a b/$1" in found
