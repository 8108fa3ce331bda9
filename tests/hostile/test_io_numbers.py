"""Issue 13 item 11: numbers are range-checked where they come in; output encodes with
replacement.

A 5000-digit number reached ``int()`` (Python 3.11+ refuses more than 4300 digits: ValueError)
or ``float()`` (infinity, then OverflowError) and ended in "internal error". Each is now a
usage error naming the value, exit 2. ``PYTHONIOENCODING=latin-1`` made every report with an
em dash raise UnicodeEncodeError; now what the encoding cannot show becomes ``?``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envdoctor.cli.common import AppContext
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.hostile.child import envdoctor
from tests.runner import invoke as cli_invoke

ROOT = Path(__file__).resolve().parents[2]
HUGE = "9" * 5000
LOG = ROOT / "tests" / "data" / "tracebacks" / "cuda.out-of-memory"


def invoke(*args: str) -> tuple[int, str]:
    host = FakeHost.scenario("healthy_h100")
    result = cli_invoke(list(args), obj=AppContext(host=host, python=PYTHON))
    return result.exit_code, result.output


def assert_usage_error(code: int, output: str, *phrases: str) -> None:
    assert code == 2, output
    assert output.startswith("envdoctor: error: ") and output.count("\n") == 1, output[:300]
    assert "internal error" not in output and "Traceback" not in output
    assert len(output) < 400  # the value is named, not repeated 5000 times
    for phrase in phrases:
        assert phrase in output, output


@pytest.mark.parametrize(
    ("gate", "phrase"),
    [
        (f"gpus>={HUGE}", "too long"),
        ("gpus>=99999999", "out of range (0 to 65536)"),
        ("gpus>=\u00b2", "needs a whole number"),  # a superscript two: isdigit(), but not int()
        (f"driver>=580.{'9' * 150}", "is not a version"),
        (f"memory_free>={'9' * 40}GiB", "out of range"),
        (f"memory_total<={'9' * 30}.5PiB", "out of range"),
    ],
)
def test_probe_require_numbers_out_of_range(gate: str, phrase: str) -> None:
    assert_usage_error(*invoke("probe", "--require", gate), phrase)


@pytest.mark.parametrize("pin", [HUGE, f"2.{HUGE}", f"2.11.{HUGE}", "2.11;id", "\u0662.11"])
def test_recommend_torch_pin_out_of_range(pin: str) -> None:
    assert_usage_error(*invoke("recommend", "--torch", pin), "is not a torch release")


@pytest.mark.parametrize(
    ("body", "phrase"),
    [
        (f"gpus:\n  count: {HUGE}\n", "gpus.count: '9999"),
        ("gpus:\n  count: 100000\n", "out of range (0 to 4096)"),
        ("gpus:\n  mig: [7, 1000000000000]\n", "gpus.mig[1]: '1000000000000' is out of range"),
        (f"driver:\n  cuda: 12.{HUGE}\n", "driver.cuda: expected a version"),
        (f"torch:\n  version: 2.{HUGE}\n", "torch.version: expected a version"),
    ],
)
def test_spec_numbers_out_of_range(tmp_path: Path, body: str, phrase: str) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("schema_version: 1\n" + body, encoding="utf-8")
    code, output = invoke("spec", "validate", str(spec))
    assert code == 2 and phrase in output, output[:300]
    assert "internal error" not in output and len(output) < 400


def test_a_snapshot_with_huge_numbers_is_judged_not_crashed(tmp_path: Path) -> None:
    from envdoctor.snapshot import dump_snapshot
    from tests.conftest import scenario_facts

    data = json.loads(dump_snapshot(scenario_facts("healthy_h100")))
    nvml = data["facts"]["nvml"]["found"]
    nvml["driver_version"] = {"found": HUGE}
    nvml["cuda_driver_version"] = {"found": f"12.{HUGE}"}
    nvml["gpus"][0]["compute_capability"] = {"found": f"9.{HUGE}"}
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(data), encoding="utf-8")
    for args in (["check"], ["recommend"], ["spec", "init"], ["fix", "--format", "steps"]):
        code, output = invoke(*args, "--snapshot", str(snap))
        assert code in (0, 1, 2) and "internal error" not in output, (args, output[-500:])


# --- encodings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--format", "markdown"],
        ["check", "--json"],
        ["explain", str(next(iter(sorted(LOG.iterdir()))))],
    ],
    ids=" ".join,
)
def test_a_latin1_terminal_gets_replacements_not_an_error(args: list[str]) -> None:
    result = envdoctor(*args, env={"PYTHONIOENCODING": "latin-1"})
    assert "UnicodeEncodeError" not in result.stderr and "internal error" not in result.stderr
    assert result.returncode in (0, 1), result.stderr
    text = result.stdout
    assert text.strip()
    if "--json" in args:
        json.loads(text)  # replacements keep the document valid


# --- digits as a broken or hostile source writes them -------------------------------------------

# Each variant rewrites every run of ASCII digits in a log or a snapshot: 5000 digits (int()
# refuses more than 4300), a number no double holds (float() gives infinity, int() of it raises)
# and digits that str.isdigit() accepts and int() refuses. Each once crashed a command or a rule.
# (Another script's digits, which int() takes and C does not, cannot crash: tests/rules/test_env.py
# holds what CUDA_VISIBLE_DEVICES=٣ means.)
DIGITS: dict[str, Callable[[str], str]] = {
    "5000 digits": lambda run: HUGE,
    "1e400": lambda run: "1" + "0" * 400,
    "superscripts": lambda run: "\u00b2" * len(run),
}
TRACEBACKS = sorted((ROOT / "tests" / "data" / "tracebacks").rglob("*.txt"))
FIRST_OF_EACH_SIGNATURE = sorted({p.parent: p for p in reversed(TRACEBACKS)}.values())


def rewrite_digits(text: str, variant: str) -> str:
    return re.sub("[0-9]+", lambda m: DIGITS[variant](m.group(0)), text)


def no_crash(args: list[str], host: FakeHost) -> str:
    result = cli_invoke(args, obj=AppContext(host=host, python=PYTHON))
    assert result.exception is None, (args, repr(result.exception))
    assert result.exit_code in (0, 1, 2), (args, result.output[-500:])
    assert "internal error" not in result.stderr, (args, result.stderr[-500:])
    assert "envdoctor.rule-crashed" not in result.output, (args, result.output[-1500:])
    assert "check crashed" not in result.output, (args, result.output[-1500:])  # explain's
    return result.output


@pytest.mark.parametrize("variant", sorted(DIGITS))
def test_every_known_error_with_odd_digits_is_explained(variant: str, tmp_path: Path) -> None:
    """OOM sizes, Xid codes, driver versions, GPU and device indices: read or left unread by the
    analyzers. (The host checks of --with-host, which double the cost, are held by the next
    test, on lines short enough to match whole.)"""
    host = FakeHost.scenario("memory_held")
    log = tmp_path / "train.log"
    # every fixture for int()'s case; one per signature for the others (a tenth of the cost)
    fixtures = TRACEBACKS if variant == "5000 digits" else FIRST_OF_EACH_SIGNATURE
    for path in fixtures:
        log.write_text(rewrite_digits(path.read_text(encoding="utf-8"), variant), "utf-8")
        no_crash(["explain", str(log), "--json"], host)


BIG = "9" * 4400  # past int()'s 4300 digits, yet short enough that the whole line is matched


@pytest.mark.parametrize(
    "line",
    [
        f"RuntimeError: Attempting to deserialize object on CUDA device {BIG} but "
        "torch.cuda.device_count() is 1. Please use torch.load with map_location",
        f"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU {BIG}; 79.19 GiB "
        "total capacity; 77.91 GiB already allocated; 12.00 MiB free; 78.10 GiB reserved in "
        "total by PyTorch)",
        f"NVRM: Xid (PCI:0000:3b:00): {BIG}, pid=1234, name=python, Ch 00000010",
        f"RuntimeError: The NVIDIA driver on your system is too old (found version {BIG}).",
    ],
    ids=["checkpoint-device", "oom-gpu", "xid", "driver-version"],
)
def test_a_huge_number_in_a_known_error_is_read_as_no_number(line: str, tmp_path: Path) -> None:
    """The cause is still named, and its analysis and host checks run (a 5000-digit number in
    every fixture also makes some lines too long to match: these are the captures it missed)."""
    log = tmp_path / "train.log"
    log.write_text(line + "\n", encoding="utf-8")
    output = no_crash(
        ["explain", str(log), "--with-host", "--json"], FakeHost.scenario("memory_held")
    )
    report = json.loads(output)
    assert report["exit_code"] == 1 and report["causes"], output[-800:]
    assert all(check["note"] for cause in report["causes"] for check in cause["host_checks"])


def _rewrite_facts(node: object, variant: str) -> object:
    if isinstance(node, dict):
        return {k: _rewrite_facts(v, variant) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_facts(v, variant) for v in node]
    return rewrite_digits(node, variant) if isinstance(node, str) else node


def _leaves(
    node: object, kind: type, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[str | int, ...]]:
    """Paths to the leaves of ``kind`` (text with a digit; a number that is not a bool)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, kind, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, kind, (*path, index))
    elif kind is str:
        if isinstance(node, str) and re.search("[0-9]", node):
            yield path
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path


def _with(data: dict[str, object], path: tuple[str | int, ...], value: object) -> dict[str, object]:
    one = copy.deepcopy(data)
    parent: object = one["facts"]
    for key in path[:-1]:
        parent = parent[key]  # type: ignore[index]  # a path _leaves found
    parent[path[-1]] = value  # type: ignore[index]
    return one


# the scenarios whose rules read numbers from text: device-node modes, NVIDIA_REQUIRE_CUDA, nvcc's
# version, Xid recovery actions, /dev/shm's size, the driver a fix installs
SNAPSHOT_BASES = (
    "healthy_h100",
    "memory_held",
    "driver_mismatch",
    "container_no_gpu",
    "nodes_root_only",
    "container_require_cuda",
    "nvcc_mismatch",
    "xid_reboot_required",
    "container_shm_small",
    "driver_module_not_loaded",
)
COMMANDS = (
    ["check", "-v"],
    ["check", "--json"],
    ["recommend"],
    ["fix", "--format", "steps"],
    ["spec", "init"],
)


@pytest.fixture(scope="module")
def snapshots() -> dict[str, dict[str, object]]:
    from envdoctor.snapshot import dump_snapshot
    from tests.conftest import scenario_facts

    return {
        name: json.loads(dump_snapshot(scenario_facts(name), redact=False))
        for name in SNAPSHOT_BASES
    }


@pytest.mark.parametrize("variant", ["5000 digits", "superscripts"])
def test_a_snapshot_with_odd_digits_is_judged_not_crashed(
    variant: str, tmp_path: Path, snapshots: dict[str, dict[str, object]]
) -> None:
    """Every text fact with digits rewritten at once (every command), then, with 5000 digits,
    one at a time (each path and value once: most repeat across scenarios): a rule that an
    earlier fact's oddity kept from running is reached too. `fix
    --format json` judges every rule (a crashed one is listed as envdoctor.rule-crashed) and
    plans, at half the cost of check --json. The two variants int() raises on; a 401-digit number
    in a text fact is a 5000-digit one to int(), and "²" passes only isdigit(), which 5000
    digits pass too."""
    host = FakeHost.scenario("healthy_h100")
    snap, clean = tmp_path / "snap.json", tmp_path / "clean.json"
    clean.write_text(json.dumps(snapshots["healthy_h100"]), encoding="utf-8")
    tried: set[tuple[object, ...]] = set()  # a fact's value in the first scenario that has it
    for data in snapshots.values():
        snap.write_text(json.dumps({**data, "facts": _rewrite_facts(data["facts"], variant)}))
        for args in COMMANDS:
            no_crash([*args, "--snapshot", str(snap)], host)
        no_crash(["diff", str(snap), str(clean), "--all"], host)
        if variant != "5000 digits":
            continue
        for path in _leaves(data["facts"], str):
            parent: object = data["facts"]
            for key in path:
                parent = parent[key]  # type: ignore[index]  # a path _leaves found
            if (*path, parent) in tried:
                continue
            tried.add((*path, parent))
            snap.write_text(json.dumps(_with(data, path, rewrite_digits(str(parent), variant))))
            no_crash(["fix", "--format", "json", "--snapshot", str(snap)], host)
    assert variant != "5000 digits" or len(tried) > 60


# numbers no fact holds, as JSON writes them: 10**400 (int), Infinity, NaN, and below -2**64
ODD_NUMBERS = (10**400, float("inf"), float("nan"), -(10**400), -(2**64) - 1)


def test_a_snapshot_with_odd_numbers_is_refused_not_crashed(
    tmp_path: Path, snapshots: dict[str, dict[str, object]]
) -> None:
    """Each numeric fact in turn (memory sizes, /dev/shm, Xid times, counts) set to a number no
    machine reports: a rule did int(inf) or divided 10**400 into a float before; the snapshot
    is now refused, naming the fact (exit 2). Any NVML counter (up to 2**64) is still read."""
    host = FakeHost.scenario("healthy_h100")
    snap = tmp_path / "snap.json"
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(snapshots["healthy_h100"]), encoding="utf-8")
    refused = 0
    tried: set[tuple[str | int, ...]] = set()  # each fact once, in the first scenario with it
    for data in snapshots.values():
        for n, path in enumerate(_leaves(data["facts"], int)):
            if path in tried:
                continue
            tried.add(path)
            snap.write_text(json.dumps(_with(data, path, ODD_NUMBERS[n % len(ODD_NUMBERS)])))
            output = no_crash(["fix", "--format", "json", "--snapshot", str(snap)], host)
            refused += "malformed snapshot" in output
            no_crash(["diff", str(snap), str(clean)], host)
        for path in list(_leaves(data["facts"], int))[:3]:
            snap.write_text(json.dumps(_with(data, path, 2**64 - 1)))
            assert "malformed snapshot" not in no_crash(["check", "--snapshot", str(snap)], host)
    assert refused > 50  # the decoder refused them, rather than every rule coping by luck
