"""Architecture rules for smoke: the child runs anywhere, processes go through the seam, and
torch never enters envdoctor's own process."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from envdoctor.smoke.runner import child_source
from tests.smoke.conftest import PYTHON

SMOKE = Path(__file__).resolve().parents[2] / "envdoctor" / "smoke"


def test_the_child_is_python_38_grammar_and_stdlib_only() -> None:
    tree = ast.parse(child_source(), feature_version=(3, 8))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert "envdoctor" not in imported
    assert "torch" not in imported  # imported at run time, by name, inside the `import` step
    assert imported <= {
        "__future__",
        "collections",
        "faulthandler",
        "gc",
        "importlib",
        "json",
        "os",
        "re",
        "sys",
        "threading",
        "time",
        "traceback",
        "typing",
        "warnings",
    }
    # ctypes (the driver API for --reproduce) is imported by name at run time, like torch
    assert 'importlib.import_module("ctypes")' in child_source()


def test_smoke_spawns_processes_only_through_the_platform_seam() -> None:
    for path in SMOKE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert "subprocess" not in names, path.name
            if path.name != "child.py":  # the child is a separate program
                assert "os" not in names and "signal" not in names, path.name


def test_envdoctor_never_imports_torch_to_run_smoke() -> None:
    code = (
        "import sys\n"
        "import envdoctor.cli.smoke, envdoctor.smoke, envdoctor.smoke.reproduce\n"
        "import envdoctor.render.smoke, envdoctor.smoke.child\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([PYTHON, "-c", code], check=True, timeout=60)
