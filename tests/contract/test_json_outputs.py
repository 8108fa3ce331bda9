"""Every command that prints JSON, on several machines: its document fits its kind's schema.

The contract a script relies on (docs/schema/README.md): stdout (or the ``-o`` file) holds one
JSON document and nothing else; it starts with the envelope (``schema_version``, ``kind``,
``envdoctor_version``, ``status``, ``exit_code``); ``exit_code`` is the exit status of the
process that printed it; and the whole document fits docs/schema/<kind>.schema.json. Every kind
the code can emit has a schema, and a case here that prints it.
"""

from __future__ import annotations

import ast
import gzip
import io
import json
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
import pytest

from envdoctor import __version__
from envdoctor.cli import smoke as smoke_cli
from envdoctor.cli.common import AppContext
from envdoctor.compat.tables import TABLE_NAMES
from envdoctor.envelope import KINDS, STATUS_OF_EXIT
from envdoctor.model.facts import Facts
from envdoctor.model.probed import Absent, Found
from envdoctor.remedy.model import Action
from envdoctor.remedy.render import plan_to_json
from envdoctor.snapshot import dump_snapshot
from envdoctor.terminal import json_document
from tests import factories
from tests.conftest import PYTHON, scenario_facts
from tests.fakes.host import FakeHost
from tests.fleet.test_probe import HangingHost
from tests.kb.helpers import CORPUS
from tests.remedy.cases import mismatch_plan
from tests.remedy.sandbox import Sandbox
from tests.remedy.test_cli_fix import mismatch_host
from tests.runner import invoke, run_probe
from tests.schemas import SNAPSHOT, schemas, validate, validator
from tests.smoke.conftest import FAKE_TORCH, gpu_facts

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"envelope", "finding", "facts"}  # the parts the kinds' schemas $ref


class Output(NamedTuple):
    text: str  # what the command wrote where its document goes (stdout, or the -o file)
    exit_code: int  # the exit status of the process


Produce = Callable[[Path, pytest.MonkeyPatch], Output]


class Case(NamedTuple):
    kind: str
    exit_code: int  # what this case is there for: each kind is seen with its exit statuses
    produce: Produce


def _cli(*args: str, host: Callable[[], FakeHost] | None = None, file: str = "") -> Produce:
    """The command, as from a shell (tests/runner.py), on ``host()`` (healthy_h100 by default); ``{tmp}``
    in ``args`` is the test's directory, and with ``file`` the document is read from that file
    in it (``-o``)."""

    def produce(tmp: Path, _mp: pytest.MonkeyPatch) -> Output:
        argv = [a.replace("{tmp}", str(tmp)) for a in args]
        machine = host() if host else FakeHost.scenario("healthy_h100")
        result = invoke(argv, obj=AppContext(host=machine, python=PYTHON))
        text = (tmp / file).read_text("utf-8") if file else result.stdout
        return Output(text, result.exit_code)

    return produce


def _on(scenario: str, *args: str, file: str = "") -> Produce:
    return _cli(*args, host=lambda: FakeHost.scenario(scenario), file=file)


def _with_file(name: str, content: bytes, then: Produce) -> Produce:
    def produce(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
        (tmp / name).write_bytes(content)
        return then(tmp, mp)

    return produce


def _diff(a: str, b: str, *args: str, file: str = "") -> Produce:
    def produce(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
        for name, scenario in (("a.json", a), ("b.json", b)):
            (tmp / name).write_text(dump_snapshot(scenario_facts(scenario)), encoding="utf-8")
        return _cli("diff", *args, "{tmp}/a.json", "{tmp}/b.json", file=file)(tmp, mp)

    return produce


def _explain(log: bytes, *args: str, name: str = "train.log") -> Produce:
    return _with_file(name, log, _cli("explain", *args, f"{{tmp}}/{name}"))


def _run(code: str) -> Produce:
    """``run --format json`` of a Python one-liner that prints "the command's stdout"."""

    def produce(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
        argv = ["run", "--format", "json", "--", sys.executable, "-c", code]
        result = invoke(argv)
        assert "the command's stdout" in result.stderr  # passed through, but not on stdout
        return Output(result.stdout, result.exit_code)

    return produce


def _run_to_file(code: str) -> Produce:
    """``run --format json -o FILE``: the document in the file, the command's stdout where it
    was."""

    def produce(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
        out = tmp / "run.json"
        argv = ["run", "--format", "json", "-o", str(out), "--", sys.executable, "-c", code]
        result = invoke(argv)
        assert result.stdout == "the command's stdout\n"
        return Output(out.read_text("utf-8"), result.exit_code)

    return produce


def _smoke(*args: str, facts: Facts | None = None, rules: str = "", **fake: str) -> Produce:
    """``smoke --json`` with the fake torch in its children (tests/fake_torch), on ``facts``
    (one H100 by default), as tests/smoke/test_cli.py runs it."""

    def produce(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
        mp.setenv("PYTHONPATH", FAKE_TORCH)
        mp.setenv("ENVDOCTOR_FAKE_STATE", str(tmp))
        mp.setenv("ENVDOCTOR_FAKE_TORCH", rules)
        for key, value in fake.items():
            mp.setenv(f"ENVDOCTOR_FAKE_{key.upper()}", value)
        mp.setattr(smoke_cli, "facts_for", lambda inv, **kw: facts or gpu_facts(1))
        argv = [a.replace("{tmp}", str(tmp)) for a in args]
        result = invoke(["smoke", "--python", sys.executable, *argv, "--json"])
        out = tmp / "smoke.json"
        return Output(out.read_text("utf-8") if out.exists() else result.stdout, result.exit_code)

    return produce


def _probe_watchdog(tmp: Path, mp: pytest.MonkeyPatch) -> Output:
    """NVML never answers: the watchdog prints the document and ends the process with 2."""
    host = HangingHost("nvml")
    exits: list[int] = []

    def hard_exit(code: int) -> None:  # stands in for os._exit, so that pytest lives on
        exits.append(code)
        host.release.set()

    out = io.StringIO()
    run_probe(
        ["--timeout", "0.3", "--json"], host=host, python=PYTHON, stdout=out, hard_exit=hard_exit
    )
    (code,) = exits
    return Output(out.getvalue(), code)


_NO_GPU = factories.facts(
    nvml=Absent("NVML library not found"),
    torch=factories.torch(
        Found(
            factories.torch_build(version="2.13.0+cpu", cuda="", cudnn_version=Absent("CPU build"))
        )
    ),
)
_BUSY = gpu_facts(1, processes=((4242, "python train.py", 30000),))
_FAILING = (
    "import sys\n"
    'print("the command\'s stdout", flush=True)\n'
    "sys.stderr.write('RuntimeError: CUDA error: device-side assert triggered\\n')\n"
    "sys.exit(3)\n"
)
_KILLED = (
    'import os, signal; print("the command\'s stdout", flush=True); '
    "os.kill(os.getpid(), signal.SIGTERM)"
)
_OOM = (CORPUS / "cuda.out-of-memory" / "dcrnn-6.txt").read_bytes()
_ASSERT = (CORPUS / "cuda.assert-target-out-of-range" / "seed-000.txt").read_bytes()
_CUT_GZIP = gzip.compress(b"epoch 1 loss 0.3\n" * 50_000)[:2_000]
_GATES = ("--require", "gpus>=16", "--require", "memory_free>=1GiB", "--require", "model~=H100")
_SPEC = b"schema_version: 1\ngpus:\n  count: 16\n"

CASES: dict[str, Case] = {
    # check: the report
    "check-healthy": Case("check", 0, _on("healthy_h100", "check", "--json")),
    "check-mismatch": Case("check", 1, _on("driver_mismatch", "check", "--format", "json")),
    "check-torch-hangs": Case("check", 2, _on("torch_probe_hangs", "check", "--json")),
    "check-cpu-only": Case("check", 0, _on("cpu_only", "check", "--json", "--strict")),
    "check-to-file": Case(
        "check", 1, _on("gpu_lost", "check", "--json", "-o", "{tmp}/r.json", file="r.json")
    ),
    "check-spec": Case(
        "check",
        1,
        _with_file(
            "node.yaml", _SPEC, _on("healthy_h100", "check", "--json", "--spec", "{tmp}/node.yaml")
        ),
    ),
    # probe: the fast tier
    "probe-healthy": Case("probe", 0, _on("healthy_h100", "probe", "--json")),
    "probe-memory-held": Case("probe", 1, _on("memory_held", "probe", "--format", "json")),
    "probe-cpu-only": Case("probe", 0, _on("cpu_only", "probe", "--json")),
    "probe-gates": Case("probe", 1, _on("healthy_h100", "probe", "--json", *_GATES)),
    "probe-to-file": Case(
        "probe", 1, _on("gpu_lost", "probe", "--json", "-o", "{tmp}/p.json", file="p.json")
    ),
    "probe-watchdog": Case("probe", 2, _probe_watchdog),
    # recommend
    "recommend-fits": Case("recommend", 0, _on("healthy_h100", "recommend", "--json")),
    "recommend-cpu-only": Case("recommend", 0, _on("cpu_only", "recommend", "--json")),
    "recommend-mismatch": Case("recommend", 1, _on("driver_mismatch", "recommend", "--json")),
    "recommend-pinned-none": Case(
        "recommend", 1, _on("healthy_h100", "recommend", "--json", "--torch", "1.13")
    ),
    "recommend-to-file": Case(
        "recommend",
        0,
        _on("healthy_h100", "recommend", "-f", "json", "-o", "{tmp}/r.json", file="r.json"),
    ),
    # fix: the plan
    "fix-healthy": Case("fix-plan", 0, _on("healthy_h100", "fix", "--format", "json")),
    "fix-holders": Case("fix-plan", 0, _cli("fix", "--format", "json", host=mismatch_host)),
    "fix-unknown": Case("fix-plan", 0, _on("torch_probe_hangs", "fix", "--format", "json")),
    "fix-to-file": Case(
        "fix-plan",
        0,
        _on("uvm_missing", "fix", "--format", "json", "-o", "{tmp}/f.json", file="f.json"),
    ),
    # smoke and its reproductions, with the fake torch
    "smoke-passes": Case("smoke", 0, _smoke("--timeout", "10")),
    "smoke-fails": Case("smoke", 1, _smoke(rules="conv=raise:cudnn-not-initialized")),
    "smoke-nothing-to-test": Case("smoke", 2, _smoke(facts=_NO_GPU)),
    "smoke-to-file": Case("smoke", 0, _smoke("--timeout", "10", "-o", "{tmp}/smoke.json")),
    "reproduce-ruled-out": Case(
        "reproduce",
        0,
        _smoke(
            "--reproduce",
            "cublas-alloc",
            "--leave",
            "1000",
            "--timeout",
            "10",
            TOTAL_MIB="81920",
            CONTEXT_MIB="500",
            CUBLAS_MIB="300",
        ),
    ),
    "reproduce-reproduces": Case(
        "reproduce",
        1,
        _smoke("--reproduce", "cudnn-init", "--gpu", "0", CONTEXT_MIB="500", CUDNN_MIB="300"),
    ),
    "reproduce-refused": Case("reproduce", 2, _smoke("--reproduce", "cublas-alloc", facts=_BUSY)),
    # explain and run
    "explain-oom": Case("explain", 1, _explain(_OOM, "--json")),
    "explain-assert": Case("explain", 1, _explain(_ASSERT, "--format", "json")),
    "explain-nothing": Case("explain", 0, _explain(b"epoch 1 loss 0.3\ndone\n", "--json")),
    "explain-cut-gzip": Case("explain", 2, _explain(_CUT_GZIP, "--json", name="t.log.gz")),
    "explain-to-file": Case(
        "explain",
        1,
        _with_file(
            "t.log",
            _OOM,
            _cli("explain", "-f", "json", "-o", "{tmp}/e.json", "{tmp}/t.log", file="e.json"),
        ),
    ),
    "run-succeeds": Case("run", 0, _run('print("the command\'s stdout")')),
    "run-fails": Case("run", 3, _run(_FAILING)),
    "run-killed": Case("run", 128 + 15, _run(_KILLED)),
    "run-to-file": Case("run", 3, _run_to_file(_FAILING)),
    # diff and tables
    "diff-same": Case("diff", 0, _diff("healthy_h100", "healthy_h100", "--json")),
    "diff-differs": Case("diff", 1, _diff("healthy_h100", "driver_mismatch", "--json")),
    "diff-to-file": Case(
        "diff",
        1,
        _diff("healthy_h100", "gpu_lost", "--format", "json", "-o", "{tmp}/d.json", file="d.json"),
    ),
    "tables-to-file": Case(
        "tables",
        0,
        _cli("tables", "show", "cudnn", "-f", "json", "-o", "{tmp}/t.json", file="t.json"),
    ),
    **{
        f"tables-{name}": Case("tables", 0, _cli("tables", "show", name, "--json"))
        for name in TABLE_NAMES
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_json_output_fits_its_kinds_schema(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    text, exit_code = case.produce(tmp_path, monkeypatch)
    assert exit_code == case.exit_code, text
    document = json.loads(text)  # one document, nothing before or after it
    assert text == json_document(document)  # written by terminal.json_document, like every one
    assert list(document)[:5] == [
        "schema_version",
        "kind",
        "envdoctor_version",
        "status",
        "exit_code",
    ]
    assert document["kind"] == case.kind
    assert document["envdoctor_version"] == __version__
    assert document["exit_code"] == exit_code
    validate(document)


def test_the_cases_print_every_kind() -> None:
    assert {case.kind for case in CASES.values()} == set(KINDS)


@pytest.mark.parametrize("args", [(), ("--no-redact",), ("-o", "{tmp}/snap.json")])
def test_a_snapshot_is_a_data_file_with_its_own_schema(
    args: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = "snap.json" if "-o" in args else ""
    text, exit_code = _on("driver_mismatch", "collect", *args, file=file)(tmp_path, monkeypatch)
    assert exit_code == 0
    validate(json.loads(text), SNAPSHOT)


def test_a_plan_with_a_container_holder_fits_its_schema(tmp_path: Path) -> None:
    document = plan_to_json(mismatch_plan(Sandbox(tmp_path / "sandbox")))
    assert any(h["container"] for h in document["holders"])
    validate(document)


# --- the schemas themselves ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(schemas()))
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    schema = schemas()[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://envdoctor.invalid/schema/{name}.schema.json"
    validator(name).check_schema(schema)


def test_every_kind_has_a_schema_that_pins_its_kind_and_version() -> None:
    assert set(schemas()) == {*KINDS, *SHARED, SNAPSHOT}
    assert schemas()["envelope"]["properties"]["kind"]["enum"] == list(KINDS)
    for kind, version in KINDS.items():
        properties = schemas()[kind]["properties"]
        assert properties["kind"] == {"const": kind}
        assert properties["schema_version"] == {"const": version}
        assert {"$ref": "envelope.schema.json"} in schemas()[kind]["allOf"]


def _envelope_calls() -> list[ast.Call]:
    trees = [ast.parse(p.read_text("utf-8")) for p in sorted((ROOT / "envdoctor").rglob("*.py"))]
    return [
        node
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "envelope"
    ]


def test_the_code_emits_exactly_the_kinds_that_have_schemas() -> None:
    """Every ``envelope(...)`` call names its kind literally, so this list is the whole truth."""
    kinds: set[str] = set()
    for call in _envelope_calls():
        first = call.args[0]
        assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(call)
        kinds.add(first.value)
    assert sorted(kinds) == sorted(KINDS)


def test_every_fix_step_kind_is_in_the_plan_schema() -> None:
    actions = [action.kind for action in typing.get_args(Action)]
    step = schemas()["fix-plan"]["properties"]["steps"]["items"]
    assert sorted(step["properties"]["kind"]["enum"]) == sorted(actions)


def _report() -> dict[str, Any]:
    host = FakeHost.scenario("driver_mismatch")
    result = invoke(["check", "--json"], obj=AppContext(host=host, python=PYTHON))
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d.update(tool={"name": "envdoctor"}), id="a field not listed"),
        pytest.param(lambda d: d.update(exit_code=0), id="unhealthy with exit code 0"),
        pytest.param(lambda d: d.update(schema_version=1), id="version 1 of the report"),
        pytest.param(lambda d: d.pop("envdoctor_version"), id="no envdoctor_version"),
        pytest.param(lambda d: d["findings"][0].update(fixed=True), id="a finding's own field"),
        pytest.param(lambda d: d["findings"][0].update(severity="fatal"), id="no such severity"),
        pytest.param(
            lambda d: d["facts"].update(nvml={"found": {}, "absent": "?"}), id="found and absent"
        ),
    ],
)
def test_the_schemas_refuse_what_the_contract_forbids(
    change: Callable[[dict[str, Any]], object],
) -> None:
    document = _report()
    validate(document)
    change(document)
    with pytest.raises(jsonschema.ValidationError):
        validate(document)


def test_status_and_exit_code_say_the_same_in_every_kind_but_fix_plan_and_run() -> None:
    verdict = schemas()["envelope"]["$defs"]["verdict"]["oneOf"]
    pairs = {
        (v["properties"]["exit_code"]["const"], v["properties"]["status"]["const"]) for v in verdict
    }
    assert pairs == set(STATUS_OF_EXIT.items())
    paired = {
        kind
        for kind in KINDS
        if {"$ref": "envelope.schema.json#/$defs/verdict"} in schemas()[kind]["allOf"]
    }
    assert set(KINDS) - paired == {"fix-plan", "run"}
