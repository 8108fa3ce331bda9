"""Issue 13 item 10 / issue 17: one YAML reader, bounded before it builds anything.

Tables (``--tables``, ``ENVDOCTOR_TABLES``), node specs (``--spec``, ``spec validate``) and the
explain signatures come from files anyone may have written. An alias bomb, a document nested
50 000 deep, a huge file, a FIFO or a device named like a table: each is one clear error with
``file:line`` and exit 2 — never minutes of CPU, gigabytes of memory, ``RecursionError`` or a
SIGSEGV. The real CLI runs in a child here, so a crash of the C parser would show as a signal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.kb.loader import default_root, load_kb
from envdoctor.yamlsource import MAX_BYTES, MAX_DEPTH, Map, Reader, parse
from tests.hostile.child import envdoctor
from tests.runner import invoke as cli_invoke

ROOT = Path(__file__).resolve().parents[2]


def billion_laughs(head: str = "") -> str:
    """The classic alias bomb: 9 ** 9 "lol"s once expanded, from under 400 bytes."""
    lines = [head + 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(8):
        this, prev = chr(ord("b") + n), chr(ord("a") + n)
        lines.append(f"{this}: &{this} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias bomb": (billion_laughs(), "anchors (&a) are not supported"),
    "only an alias": ("a: *nothing\n", "aliases (*nothing) are not supported"),
    "deep flow": ("[" * 50_000, f"nested more than {MAX_DEPTH} levels deep"),
    "deep block": (
        "".join(" " * i + "-\n" for i in range(200)),
        f"nested more than {MAX_DEPTH} levels deep",
    ),
    "deep mapping": ("{a: " * 10_000, f"nested more than {MAX_DEPTH} levels deep"),
    "python tag": ("a: !!python/object/apply:os.system [id]\n", "explicit YAML tags"),
    "merge key": ("a: {x: 1}\nb:\n  <<: {y: 2}\n", "merge keys (<<) are not supported"),
    "two documents": ("a: 1\n---\nb: 2\n", "more than one YAML document"),
    "complex key": ("? [a, b]\n: c\n", "keys must be plain names"),
}


def run_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (fast); the child runs above prove the same without a crash."""
    result = cli_invoke(list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def assert_clear_error(result: subprocess.CompletedProcess[str], where: str, message: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"envdoctor: error: {where}"), result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(("text", "message"), HOSTILE.values(), ids=HOSTILE)
def test_the_reader_refuses_hostile_yaml_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(EnvdoctorError) as info:
        parse(text, "x.yaml")
    assert message in info.value.message
    assert info.value.where.startswith("x.yaml:")


@pytest.mark.parametrize(("text", "message"), HOSTILE.values(), ids=HOSTILE)
def test_tables_validate_refuses_hostile_tables(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "cudnn.yaml").write_text(text, encoding="utf-8")
    result = run_in_process("tables", "validate", str(tmp_path))
    assert_clear_error(result, str(tmp_path), message)


@pytest.mark.parametrize(("text", "message"), HOSTILE.values(), ids=HOSTILE)
def test_spec_validate_refuses_hostile_specs(tmp_path: Path, text: str, message: str) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text(text, encoding="utf-8")
    assert_clear_error(run_in_process("spec", "validate", str(spec)), str(spec), message)


@pytest.mark.parametrize("loader", ["libyaml", "pure Python"])
@pytest.mark.parametrize("text", ["[" * 50_000, "[" * 1_200 + "]" * 1_200, "{a: " * 2_000])
def test_deep_nesting_reads_the_same_whichever_layer_stops_it(
    monkeypatch: pytest.MonkeyPatch, loader: str, text: str
) -> None:
    """libyaml (PyYAML 6.0.4+) has a depth limit of its own that speaks before the builder's:
    the user still gets envdoctor's one sentence, at the line, from either parser."""
    import yaml

    from envdoctor import yamlsource

    if loader == "pure Python":
        monkeypatch.setattr(yamlsource, "LOADER", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML was built without libyaml")
    with pytest.raises(EnvdoctorError) as info:
        parse(text, "deep.yaml")
    assert info.value.message == f"nested more than {MAX_DEPTH} levels deep"
    assert info.value.where == "deep.yaml:1"


def test_libyaml_never_allows_less_depth_than_envdoctor_says() -> None:
    """The translated libyaml error claims "more than MAX_DEPTH": true only while its limit is
    at least ours (1000 by default)."""
    yaml_ext = pytest.importorskip("yaml._yaml")
    get_limit = getattr(yaml_ext, "_get_max_nest_level", None)
    if get_limit is None:
        pytest.skip("this libyaml binding has no nesting limit (PyYAML before 6.0.4)")
    assert get_limit() >= MAX_DEPTH


@pytest.mark.parametrize("command", ["tables", "spec"])
def test_fifty_thousand_brackets_crash_no_child(tmp_path: Path, command: str) -> None:
    """The C parser under the real CLI: ``[`` x 50 000 ended in SIGSEGV before."""
    path = tmp_path / "pytorch.yaml"
    path.write_text("[" * 50_000, encoding="utf-8")
    target = tmp_path if command == "tables" else path
    result = envdoctor(command, "validate", str(target))
    assert_clear_error(result, str(path), "nested more than")


def test_check_refuses_a_bomb_in_envdoctor_tables(tmp_path: Path) -> None:
    (tmp_path / "pytorch.yaml").write_text(
        billion_laughs("schema: 1\ntable: pytorch\n"), encoding="utf-8"
    )
    result = envdoctor("check", env={"ENVDOCTOR_TABLES": str(tmp_path)})
    assert_clear_error(result, f"{tmp_path / 'pytorch.yaml'}:3", "anchors (&a)")


def test_a_bomb_in_a_signature_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "signatures").mkdir(parents=True)
    shutil.copy(Path(str(default_root() / "prefilter.yaml")), root / "prefilter.yaml")
    (root / "signatures" / "evil.yaml").write_text(billion_laughs("schema: 1\n"), encoding="utf-8")
    with pytest.raises(EnvdoctorError, match=r"anchors \(&a\)") as info:
        load_kb(root)
    assert info.value.where == f"{root / 'signatures' / 'evil.yaml'}:2"


# --- what is read at all ------------------------------------------------------------------------


def test_a_file_larger_than_the_bound_is_refused_unparsed(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("schema_version: 1\n" + "# padding\n" * (MAX_BYTES // 10 + 1), encoding="utf-8")
    assert_clear_error(run_in_process("spec", "validate", str(spec)), str(spec), "larger than")


def test_a_fifo_named_like_a_table_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pytorch.yaml")  # nobody ever writes to it: reading would block forever
    assert_clear_error(
        run_in_process("tables", "validate", str(tmp_path)), str(tmp_path), "not a regular file"
    )


def test_a_device_as_a_spec_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "node.yaml"
    link.symlink_to("/dev/zero")  # endless: reading it would never finish
    assert_clear_error(
        run_in_process("spec", "validate", str(link)), str(link), "not a regular file"
    )


def test_bytes_that_are_not_utf8_are_one_error(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_bytes(b"schema_version: 1\ngpus:\n  model: \xff\xfe\n")
    assert_clear_error(run_in_process("spec", "validate", str(spec)), str(spec), "not UTF-8")


# --- one style --------------------------------------------------------------------------------


def test_every_format_says_unknown_key_the_same_way(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("schema_version: 1\ngpus:\n  colour: red\n", encoding="utf-8")
    table = tmp_path / "tables" / "driver-branches.yaml"
    table.parent.mkdir()
    table.write_text(
        "schema: 1\ntable: driver-branches\nbranches:\n"
        "  - {branch: 580, cuda: '13.0', example: 580.65.06, source: a/b, colour: red}\n",
        encoding="utf-8",
    )
    kb = tmp_path / "kb"
    (kb / "signatures").mkdir(parents=True)
    shutil.copy(Path(str(default_root() / "prefilter.yaml")), kb / "prefilter.yaml")
    (kb / "signatures" / "s.yaml").write_text(
        "schema: 1\nsignatures:\n  - id: a.b\n    colour: red\n", encoding="utf-8"
    )
    messages = [
        run_in_process("spec", "validate", str(spec)).stderr,
        run_in_process("tables", "validate", str(table.parent)).stderr,
    ]
    with pytest.raises(EnvdoctorError) as info:
        load_kb(kb)
    messages.append(info.value.one_line())
    for message in messages:
        assert ": unknown key 'colour' (known keys: " in message, message


def test_numbers_are_range_checked_not_converted_blindly() -> None:
    doc = parse(f"a: {'9' * 5000}\nb: 1.0e+999\nc: .nan\nd: 0x10\n", "n.yaml")
    assert isinstance(doc, Map)
    read = Reader()
    with pytest.raises(EnvdoctorError, match=r"a: '9{40}…' is out of range") as info:
        read.integer(doc.items["a"], "a")
    assert info.value.where == "n.yaml:1"
    for key in ("b", "c"):  # infinity and not-a-number
        with pytest.raises(EnvdoctorError, match="out of range"):
            read.number(doc.items[key], key, low=0, high=1)
    assert read.integer(doc.items["d"], "d") == 16
