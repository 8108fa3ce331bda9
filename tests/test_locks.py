"""The test toolchain's locks (requirements/README.md) say what pyproject.toml says.

A floor that pyproject.toml allows but nothing tests is a promise no one keeps: `--floor` installs
``requirements/floor.lock``, so its pins must be the floors pyproject.toml declares, and every
lock must name every dependency it was made from (a lock left stale after pyproject.toml changed
would test something else than what users install).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (the locks are made on 3.11)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements"


def _project() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {"runtime": data["dependencies"], "dev": data["optional-dependencies"]["dev"]}


def _applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate()


def _pins(lock: str) -> dict[str, str]:
    """name → version of every ``name==version`` line of a pip-compile lock."""
    text = (REQUIREMENTS / lock).read_text(encoding="utf-8")
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, flags=re.MULTILINE)
    return {canonicalize_name(name): version for name, version in found}


def _hashed(lock: str) -> bool:
    """Every pin is followed by at least one --hash line (pip --require-hashes needs it)."""
    blocks = re.split(r"\n(?=[A-Za-z0-9])", (REQUIREMENTS / lock).read_text(encoding="utf-8"))
    pins = [block for block in blocks if re.match(r"[A-Za-z0-9][^\n]*==", block)]
    return bool(pins) and all("--hash=sha256:" in block for block in pins)


def _floor_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REQUIREMENTS / "floor.in").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_every_runtime_floor_is_what_the_floor_job_installs() -> None:
    floors = _floor_pins()
    declared = {}
    for text in _project()["runtime"]:
        requirement = Requirement(text)
        if not _applies(requirement):
            continue
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert lower, f"{text}: a runtime dependency without a floor cannot be tested at it"
        declared[canonicalize_name(requirement.name)] = lower[0]
    assert {n: Version(v) for n, v in floors.items()} == {
        n: Version(v) for n, v in declared.items()
    }, "requirements/floor.in must pin each floor of pyproject.toml"
    pinned = _pins("floor.lock")
    for name, version in floors.items():
        assert pinned.get(name) == version, f"floor.lock is stale: {name} {pinned.get(name)}"


@pytest.mark.parametrize("lock", ["test.lock", "floor.lock"])
def test_each_lock_names_everything_it_was_made_from_with_hashes(lock: str) -> None:
    pinned = _pins(lock)
    wanted = [Requirement(text) for group in _project().values() for text in group]
    missing = [str(r) for r in wanted if _applies(r) and canonicalize_name(r.name) not in pinned]
    assert not missing, f"{lock} is stale (run ./scripts/lock --no-upgrade): {missing}"
    for requirement in wanted:
        version = pinned.get(canonicalize_name(requirement.name))
        if _applies(requirement) and lock == "test.lock" and version is not None:
            assert requirement.specifier.contains(version, prereleases=True), (lock, requirement)
    assert "torch" in pinned and pinned["torch"].endswith("+cpu"), "the tests run a CPU torch"
    assert _hashed(lock), f"{lock}: a pin without --hash would make pip refuse the whole lock"


def test_the_default_job_runs_from_the_lock_it_names() -> None:
    """scripts/test installs with --require-hashes from the locks, and .ci/run runs both jobs."""
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "--require-hashes" in script
    assert "requirements/test.lock" in script and "requirements/floor.lock" in script
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "./scripts/test\n" in ci and "./scripts/test --floor" in ci


@pytest.mark.parametrize("lock", ["image.lock", "build.lock"])
def test_the_image_locks_are_hashed(lock: str) -> None:
    """The image installs them with --require-hashes (tests/test_image.py holds their versions)."""
    assert _hashed(lock), f"{lock}: a pin without --hash would make pip refuse the whole lock"
