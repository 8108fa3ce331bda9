"""The architecture, enforced: native access only behind the seam, pure rules, pure model."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "envdoctor"
SEAM_ONLY = {"subprocess", "ctypes", "pynvml"}
# Files that run in the *target* interpreter or inside the user's training process.
TORCH_ALLOWED = {"probes/torch_child.py", "smoke/child.py", "guard.py"}
# The torch child runs in the *target* interpreter, never in envdoctor's process: it may load
# libcuda with ctypes there (the CUDA driver API, when a cached import is reused).
CTYPES_IN_CHILD = {"probes/torch_child.py"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@functools.cache
def _modules() -> list[tuple[str, set[str]]]:
    """Every module's imports, parsed once for the four tests here."""
    return [(str(p.relative_to(PACKAGE)), _imports(p)) for p in sorted(PACKAGE.rglob("*.py"))]


def test_native_access_only_behind_the_platform_seam() -> None:
    offenders = [
        (rel, sorted(n for n in names if n.split(".")[0] in SEAM_ONLY - {"ctypes"}))
        if rel in CTYPES_IN_CHILD
        else (rel, sorted(n for n in names if n.split(".")[0] in SEAM_ONLY))
        for rel, names in _modules()
        if not rel.startswith("platform/")
    ]
    assert [o for o in offenders if o[1]] == []


def test_torch_is_never_imported_by_the_doctor_itself() -> None:
    offenders = [rel for rel, names in _modules() if any(n.split(".")[0] == "torch" for n in names)]
    assert set(offenders) <= TORCH_ALLOWED


def test_rules_see_facts_not_the_machine() -> None:
    for rel, names in _modules():
        if rel.startswith("rules/"):
            assert not any(
                n.startswith(("envdoctor.platform", "envdoctor.probes")) for n in names
            ), rel


def test_model_imports_nothing_else_from_envdoctor() -> None:
    for rel, names in _modules():
        if rel.startswith("model/"):
            assert all(
                n.startswith("envdoctor.model") for n in names if n.startswith("envdoctor")
            ), rel
