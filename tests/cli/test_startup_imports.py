"""What each command's start-up imports, read with ``python -X importtime``.

A heavy module that sneaks onto a path that does not need it fails here, with the module that
pulled it in: rich (Typer's fancy help, ~0.1 s) is never loaded, torch never runs in envdoctor's
own process, ``--help`` loads no command's module (each is imported only when its command runs)
and not the pydantic Typer coerces values with, and a ``check`` or ``explain`` whose tables or
signatures come from the cache goes without the YAML reader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FRAMEWORKS = ("rich", "torch")
HELP_ALSO_WITHOUT = ("pydantic", "yaml", "packaging", "json")  # pydantic: cli/app.click_command
CHECK_ALSO_WITHOUT = ("yaml",)
COMMAND_MODULES = (
    "check",
    "collect",
    "recommend",
    "tables",
    "fix",
    "probe",
    "spec",
    "diff",
    "slurm",
    "smoke",
    "explain",
    "run",
)


def imported(
    args: list[str], tmp_path: Path, stdin: str = "", env: dict[str, str] | None = None
) -> dict[str, str]:
    """Module -> the module that imported it first (from -X importtime's indentation)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "envdoctor", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "ENVDOCTOR_DEBUG": "", **(env or {})},
        check=False,
    )
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    for line in reversed(lines):  # importtime prints a module after the modules it imported
        name_field = line.split("|")[-1]
        depth = len(name_field) - len(name_field.lstrip(" "))
        name = name_field.strip()
        if name == "imported package":
            continue
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents.setdefault(name, stack[-1][1] if stack else "(top level)")
        stack.append((depth, name))
    assert parents, done.stderr[-2000:]
    return parents


def _heavy(modules: dict[str, str], names: tuple[str, ...]) -> dict[str, str]:
    return {m: by for m, by in modules.items() if m.split(".")[0] in names and "." not in m.strip()}


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--json"],
        ["explain", "-"],
        ["run", "--", sys.executable, "-c", "pass"],
        ["slurm-healthcheck", "--help"],
        ["probe"],
        ["check", "--help"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_commands_start_without_rich_or_torch(args: list[str], tmp_path: Path) -> None:
    modules = imported(args, tmp_path)
    assert "typer" in modules  # the command line is Typer's (the check below can fail)
    assert _heavy(modules, FRAMEWORKS) == {}


LOADED_COMMANDS = """
import atexit, os, sys
from envdoctor.cli.entry import main
NAMES = {names!r}
def report(*_):
    print([n for n in NAMES if "envdoctor.cli." + n in sys.modules], file=sys.stderr, flush=True)
real_exit = os._exit
os._exit = lambda code: (report(), real_exit(code))
atexit.register(report)
sys.argv[0] = "envdoctor"
main()
"""


def loaded_commands(args: list[str], tmp_path: Path) -> list[str]:
    """The command modules in ``sys.modules`` when ``envdoctor ARGS`` ends (importtime does not
    show them: ``importlib.import_module`` bypasses the import statement it times)."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED_COMMANDS.format(names=COMMAND_MODULES), *args],
        capture_output=True,
        text=True,
        input="",
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("["), done.stderr[-2000:]
    return [name.strip(" '") for name in last.strip("[]").split(",") if name.strip()]


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["explain", "-h"]])
def test_help_loads_no_command(args: list[str], tmp_path: Path) -> None:
    modules = imported(args, tmp_path)
    assert _heavy(modules, FRAMEWORKS + HELP_ALSO_WITHOUT) == {}
    assert loaded_commands(args, tmp_path) == []


@pytest.mark.parametrize(
    ("args", "own"),
    [(["probe"], "probe"), (["explain", "-"], "explain"), (["tables", "show", "cudnn"], "tables")],
)
def test_a_command_imports_its_own_module_and_no_other(
    args: list[str], own: str, tmp_path: Path
) -> None:
    assert loaded_commands(args, tmp_path) == [own]


def test_check_with_cached_tables_goes_without_the_yaml_reader(
    tmp_path: Path,
) -> None:
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = imported(["check", "--json"], tmp_path, env=cache)
    assert "yaml" in first  # an empty cache: the tables were read (so the next run can skip it)
    second = imported(["check", "--json"], tmp_path, env=cache)
    assert "envdoctor.compat.store" in second and "envdoctor.rules.compat" in second  # it judged
    assert _heavy(second, CHECK_ALSO_WITHOUT) == {}


EXPLAIN_ALSO_WITHOUT = ("yaml", "envdoctor.kb.loader")


def test_explain_with_a_cached_knowledge_base_goes_without_the_yaml_reader(tmp_path: Path) -> None:
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = imported(["explain", "-"], tmp_path, env=cache)
    assert "envdoctor.kb.loader" in first  # an empty cache: the signatures were read and checked
    second = imported(["explain", "-"], tmp_path, env=cache)
    assert "envdoctor.kb.store" in second and "envdoctor.kb.matcher" in second  # it scanned
    heavy = {m: by for m, by in second.items() if m in EXPLAIN_ALSO_WITHOUT}
    assert heavy == {}


COUNT_GC_PASSES = """
import atexit, gc, sys
from envdoctor.cli.entry import main
passes = []
gc.callbacks.append(lambda phase, info: passes.append(info["generation"]) if phase == "stop" else None)
atexit.register(lambda: print("gc passes:", len(passes), file=sys.stderr))
sys.argv[0] = "envdoctor"
main()
"""


@pytest.mark.parametrize("args", [["check"], ["explain", "-"], ["fix", "-f", "steps"]])
def test_a_short_command_makes_no_garbage_collector_pass(tmp_path: Path, args: list[str]) -> None:
    """Its imports make only objects that live to the exit; at Python's default the collector
    still scanned them 22-45 times (3-10 ms of each command)."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT_GC_PASSES, *args],
        capture_output=True,
        text=True,
        input="RuntimeError: CUDA error: out of memory\n",
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == "gc passes: 0"
