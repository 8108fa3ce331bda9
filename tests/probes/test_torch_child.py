"""The torch child's own JSON writer (the child goes without ``json``: ~10 ms of a ~20 ms probe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envdoctor.probes.torch_build import child_source
from envdoctor.probes.torch_child import MARK, read_literals, to_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # any code point: controls, quotes, backslashes, lone surrogates, astral planes
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(values)
def test_what_it_writes_reads_back_as_the_json_module_would_give_it(value: Any) -> None:
    text = to_json(value)
    assert text.isascii()
    assert json.loads(text) == json.loads(json.dumps(value))


def test_tuples_are_lists_and_non_finite_floats_are_null() -> None:
    assert json.loads(to_json({"libs": (("libcuda", "/l"),), "x": float("nan")})) == {
        "libs": [["libcuda", "/l"]],
        "x": None,
    }


def child_report(site: Path, *flags: str) -> dict[str, Any]:
    """The child's report, run as envdoctor runs it, with ``site`` first on its path."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", child_source(), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(site)},
        check=False,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith(MARK))
    report: dict[str, Any] = json.loads(line[len(MARK) :])
    return report


def test_the_child_reports_a_hostile_path_intact(tmp_path: Path) -> None:
    """sys.path entries and dist-info names reach the report through this writer."""
    site = tmp_path / 'we"ird\\dir\x1b]0;title\x07é'
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    (site / "nvidia_cudnn_cu12-9.1.0.70.dist-info").mkdir()
    data = child_report(site)
    assert data["location"] == str(site / "torch")
    assert data["version"] == "2.13.0+cpu" and data["imported"] is False
    assert ["nvidia-cudnn-cu12", "9.1.0.70"] in data["nvidia_wheels"]


def test_torch_is_imported_without_the_collector(tmp_path: Path) -> None:
    """torch's import makes ~370 collector passes that free almost nothing (~10 % of the import
    here): the child, which ends once it has written its line, imports it with the collector
    off."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import gc, types\n"
        "__version__ = 'collector-%s' % gc.isenabled()\n"
        "version = types.SimpleNamespace(cuda=None, hip=None)\n"
    )
    data = child_report(tmp_path, "--import")
    assert data["imported"] is True, data
    assert data["version"] == "collector-False"


# torch/version.py as torch 2.13.0's CPU wheel ships it (from this environment's torch).
VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.13.0+cpu'
debug = False
cuda: Optional[str] = None
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


def executed(text: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(text, "version.py", "exec"), namespace)  # noqa: S102 (our own fixture)
    return {k: v for k, v in namespace.items() if not k.startswith("__") or k == "__version__"}


@pytest.mark.parametrize(
    "text",
    [
        VERSION_PY,
        VERSION_PY.replace("cuda: Optional[str] = None", "cuda: Optional[str] = '12.8'"),
        VERSION_PY.replace("'2.13.0+cpu'", '"2.13.0+cu128"'),
    ],
    ids=["cpu", "cuda", "double quotes"],
)
def test_the_plain_version_file_reads_as_running_it_would(text: str) -> None:
    literals = read_literals(text)
    assert literals is not None
    assert {k: v for k, v in literals.items() if k != "Optional"} == {
        k: v for k, v in executed(text).items() if k != "Optional"
    }


@pytest.mark.parametrize(
    "text",
    [
        VERSION_PY + "cuda = os.environ.get('X')\n",  # code, not a literal
        VERSION_PY + "hip = 'a' + 'b'\n",
        VERSION_PY + "git_version = 'a\\x41'\n",  # an escape: Python decides what it means
        VERSION_PY + "__version__ = '2.13.0'  # a comment\n",
        VERSION_PY.replace("'xpu']", "\n    'xpu',\n]").replace("__all__ = [", "__all__ = [\n"),
        "if True:\n    cuda = '12.8'\n",
    ],
    ids=["call", "expression", "escape", "comment", "multi-line __all__", "block"],
)
def test_anything_else_is_left_to_python(text: str) -> None:
    assert read_literals(text) is None
