"""A property-based fuzz of everything envdoctor reads from files: snapshots, specs, tables, logs.

Random and mutated inputs go through the real CLI (in this process, for speed). Whatever the
input, each command ends with exit 0, 1 or 2, never a traceback or an "internal error", and
an ``-o`` file is either the whole output or not there, never half of it, with no temporary
file left behind. Budgets are small so that the suite stays fast; raise ``FUZZ_EXAMPLES`` to
search longer locally (``FUZZ_EXAMPLES=2000 pytest tests/hostile/test_io_fuzz.py``).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from envdoctor.cli.common import AppContext
from envdoctor.compat.locations import shipped_dir
from envdoctor.snapshot import dump_snapshot
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.runner import invoke as cli_invoke

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Pieces that have broken parsers before: YAML and JSON syntax, aliases, tags, deep nesting,
# huge numbers, terminal controls, NUL, a lone surrogate's bytes, bidi overrides.
TOKENS = [
    "&a ",
    "*a",
    "<<: ",
    "!!python/object:os.system ",
    "[" * 60,
    "{" * 60,
    "- " * 40,
    "9" * 5000,
    "1.0e+999",
    ".nan",
    "\x1b]52;c;cHduZWQ=\x07",
    "\x1b[2J",
    "\u009b31m",
    "\u202e",
    "\x00",
    "\t",
    "\r",
    "\n---\n",
    ": ",
    "#",
    "'",
    '"',
    "\\",
    "~",
    "null",
    "true",
    "-1",
    "0x7fffffffffffffff",
    "{",
    "}",
    "]",
    ",",
]


@st.composite
def mutated_text(draw: st.DrawFn, base: str) -> str:
    """``base`` with a few random edits: insert a token or random text, delete, cut short."""
    text = base
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["token", "text", "delete", "cut", "duplicate"]))
        if edit == "token":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif edit == "text":
            text = text[:at] + draw(st.text(max_size=20)) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 200)) :]
        elif edit == "cut":
            text = text[:at]
        else:
            end = min(len(text), at + draw(st.integers(1, 400)))
            text = text[:end] + text[at:end] + text[end:]
    return text


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(TOKENS),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*path, index)))
    return out


BASES = {
    name: json.loads(dump_snapshot(scenario_facts(name), redact=False))
    for name in ("healthy_h100", "memory_held", "driver_mismatch")
}
PATHS = {name: [p for p in _paths(data) if p] for name, data in BASES.items()}


def _same_kind(draw: st.DrawFn, value: Any) -> Any:
    """Another value of ``value``'s JSON type: the decoder takes it, the rules must cope."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.integers(min_value=-(2**64), max_value=2**64) | st.sampled_from([0, -1]))
    if isinstance(value, float):
        return draw(st.floats())
    if isinstance(value, str):
        return draw(st.text(max_size=40) | st.sampled_from(TOKENS) | mutated_text(value))
    if isinstance(value, list) and value:
        items = list(value)
        if draw(st.booleans()):
            items.pop(draw(st.integers(0, len(items) - 1)))
        else:
            items.extend(items[: draw(st.integers(1, 3))])
        return items
    return value


@st.composite
def mutated_snapshot(draw: st.DrawFn) -> str:
    """A real snapshot with values changed (mostly keeping their type, so that the rules see
    them), sometimes subtrees replaced or deleted, sometimes then edited as text."""
    name = draw(st.sampled_from(sorted(BASES)))
    data = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 6))):
        path = draw(st.sampled_from(PATHS[name]))
        parent: Any = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            how = draw(st.integers(0, 9))
            if how < 7:
                parent[path[-1]] = _same_kind(draw, parent[path[-1]])
            elif how < 8 and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed the way there
    text = json.dumps(data, indent=1)
    return draw(mutated_text(text)) if draw(st.integers(0, 5)) == 0 else text


def run(*args: str) -> tuple[int, str]:
    host = FakeHost.scenario("healthy_h100")
    result = cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))
    output = result.output
    assert result.exit_code in (0, 1, 2), (args, result.exception, output[-800:])
    # A crash is an exception that escaped the boundary, or the boundary's one line on stderr;
    # stdout may well say "Traceback": explain quotes the log.
    assert result.exception is None, (args, repr(result.exception))
    assert "envdoctor: internal error" not in result.stderr, (args, result.stderr[-800:])
    return result.exit_code, output


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    return path


def no_leftovers(directory: Path) -> None:
    assert [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clean") / "clean.json"
    path.write_text(dump_snapshot(scenario_facts("healthy_h100")), encoding="utf-8")
    return path


# --- snapshots ----------------------------------------------------------------------------------

COMMANDS: list[Callable[[Path, Path, Path], list[str]]] = [
    lambda snap, clean, out: ["check", "--snapshot", str(snap), "-v"],
    lambda snap, clean, out: ["check", "--snapshot", str(snap), "--json", "-o", str(out)],
    lambda snap, clean, out: ["check", "--snapshot", str(snap), "--format", "markdown"],
    lambda snap, clean, out: ["recommend", "--snapshot", str(snap)],
    lambda snap, clean, out: ["fix", "--snapshot", str(snap), "--format", "steps"],
    lambda snap, clean, out: ["spec", "init", "--snapshot", str(snap), "-o", str(out)],
    lambda snap, clean, out: ["diff", str(snap), str(clean), "--all"],
]


@FUZZ
@given(text=mutated_snapshot(), command=st.sampled_from(COMMANDS))
@example(text="[" * 100_000, command=COMMANDS[0])
@example(
    text='{"kind": "envdoctor-snapshot", "schema_version": ' + "9" * 5000 + "}", command=COMMANDS[0]
)
def test_any_snapshot_is_judged_or_refused(
    text: str,
    command: Callable[[Path, Path, Path], list[str]],
    clean: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    work = tmp_path_factory.mktemp("snap")
    snap = write(work / "snap.json", text)
    out = work / "out"
    code, _ = run(*command(snap, clean, out))
    no_leftovers(work)
    if out.exists():  # written whole or not at all
        assert code in (0, 1), "an output file after an error"
        written = out.read_text(encoding="utf-8")
        if out.suffix == "" and written.startswith("{"):
            json.loads(written)
        assert written.endswith("\n")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_nul_in_a_snapshot_value_is_refused_in_one_line(
    command: Callable[[Path, Path, Path], list[str]], clean: Path, tmp_path: Path
) -> None:
    """Found by the fuzz above: a kernel module named NUL reached `fix`, whose shell quoting
    cannot hold it, and ended in an internal error. No fact of a machine holds NUL."""
    data = json.loads(clean.read_text(encoding="utf-8"))
    data["facts"]["kernel"]["modules"]["found"][0]["used_by"] = ["\0"]
    snap = write(tmp_path / "snap.json", json.dumps(data))
    code, output = run(*command(snap, clean, tmp_path / "out"))
    assert code == 2 and "NUL" in output


# --- specs --------------------------------------------------------------------------------------

SPEC = """\
schema_version: 1
kind: envdoctor-spec
gpus:
  count: 8
  model: NVIDIA H100 80GB HBM3
  persistence_mode: true
  ecc: true
  mig: [off, 7, off, off, off, off, off, off]
driver:
  branch: "580"
  cuda: "13.0"
torch:
  version: 2.11.0+cu130
  cudnn: 9.15.0
"""


@FUZZ
@given(text=mutated_text(SPEC))
def test_any_spec_is_validated_or_refused(
    text: str, clean: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spec = write(tmp_path_factory.mktemp("spec") / "node.yaml", text)
    code, output = run("spec", "validate", str(spec))
    if code == 2:
        assert output.startswith(f"envdoctor: error: {spec}"), output
    run("check", "--snapshot", str(clean), "--spec", str(spec))


# --- tables -------------------------------------------------------------------------------------

TABLES = {p.name: p.read_text(encoding="utf-8") for p in sorted(shipped_dir().glob("*.yaml"))}


@st.composite
def mutated_table(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(sorted(TABLES)))
    return name, draw(mutated_text(TABLES[name]))


@FUZZ
@given(table=mutated_table())
def test_any_table_is_validated_or_refused(
    table: tuple[str, str], clean: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("tables")  # a fresh path: loaded tables are cached
    write(directory / table[0], table[1])
    code, output = run("tables", "validate", str(directory))
    if code == 2:  # recommend would refuse the same table the same way
        assert output.startswith(f"envdoctor: error: {directory}"), output
    else:
        run("recommend", "--snapshot", str(clean), "--tables", str(directory))


# --- logs ---------------------------------------------------------------------------------------

LOGS = [
    p.read_text(encoding="utf-8", errors="replace")
    for p in sorted((ROOT / "tests" / "data" / "tracebacks").rglob("*.txt"))[::6]
]


@FUZZ
@given(
    log=st.sampled_from(LOGS).flatmap(mutated_text)
    | st.binary(max_size=2000).map(lambda b: b.decode("latin-1")),
    fmt=st.sampled_from(["text", "json", "markdown"]),
)
def test_any_log_is_explained(log: str, fmt: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = write(tmp_path_factory.mktemp("log") / "train.log", log)
    code, output = run("explain", str(path), "--format", fmt)
    if fmt == "json" and code != 2:
        json.loads(output[: output.rindex("}") + 1])
