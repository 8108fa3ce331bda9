"""The message catalogs (``envdoctor/catalogs/*.yaml``): every entry covered or excused, and
every covered entry matched by ``explain`` in the line forms real logs give it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envdoctor.catalogs import Catalog, Entry, read_catalog, shipped_catalogs
from envdoctor.catalogs.xid import PRODUCTS, read_xid_catalog, xid_catalog
from envdoctor.errors import EnvdoctorError
from envdoctor.kb import load_default_kb
from tests.kb.helpers import ids, run

# What a pasted line carries before the emitter's text: nothing, a dmesg timestamp, a journald
# prefix, a launcher's rank, an ISO timestamp and level, a compose service's gutter, Docker's
# `logs --timestamps`, `kubectl logs --prefix`, Slurm's `srun --label`, a table or quote gutter.
PREFIXES = (
    "",
    "[ 8123.456789] ",
    "Dec 02 00:41:07 gpu-node-17 kernel: ",
    "[rank3]: ",
    "2026-12-02T00:41:07.123Z ERROR ",
    "trainer-1  | ",
    "2026-12-02T00:41:07.123456789Z ",
    "[pod/trainer-0/trainer] ",
    "3: ",
    "| ",
)
CATALOGS = shipped_catalogs()
NOT_YET = "not yet covered"  # an excuse that is a gap to close, not a decision


def _covered(catalog: Catalog) -> list[Entry]:
    return [e for e in catalog.entries if e.covered_by]


def _variants(catalog: Catalog, message: str) -> list[str]:
    """The message as the emitter prints it, and in the cases other releases print it in."""
    if not catalog.case_varies:
        return [message]
    return list(dict.fromkeys([message, message[:1].upper() + message[1:], message.lower()]))


def _lines(catalog: Catalog, entry: Entry) -> list[str]:
    out: list[str] = []
    for template in catalog.lines:
        texts = [entry.message or entry.name, *entry.wordings]
        for message in (v for text in texts for v in _variants(catalog, text)):
            text = template.format(code=entry.code, name=entry.name, message=message)
            out.extend(prefix + text for prefix in PREFIXES)
    return out


def _cut_lines(catalog: Catalog, entry: Entry) -> list[str]:
    """Each line form with the message cut where its entry says a paste or a terminal may end
    it (a log cut short, a line wrapped before its end): the text up to the cut, nothing more."""
    out: list[str] = []
    for template in catalog.lines:
        marker = "\x00"
        text = template.format(code=entry.code, name=entry.name, message=marker)
        head = text[: text.index(marker)] + entry.cut
        out.extend(prefix + head for prefix in PREFIXES)
    return out


def test_coverage_per_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    known = set(load_default_kb().ids)
    rows = []
    for catalog in CATALOGS:
        covered = _covered(catalog)
        excused = [e for e in catalog.entries if e.not_matched]
        # the reader refuses an entry with neither (or both); this holds it to real signatures
        assert len(covered) + len(excused) == len(catalog.entries)
        unknown = sorted({e.covered_by for e in covered} - known)
        assert not unknown, f"{catalog.name}: covered_by names no signature: {unknown}"
        assert all(e.source.startswith(("https://", "http://")) for e in catalog.entries)
        gaps = [e for e in excused if e.not_matched.startswith(NOT_YET)]
        rows.append(
            f"  {catalog.name:<14} {len(catalog.entries):>4} entries, {len(covered):>4} covered,"
            f" {len(excused):>4} excused ({len(gaps)} of them not yet covered)  ({catalog.emitter})"
        )
    with capsys.disabled():
        print("\nmessage catalog coverage:\n" + "\n".join(rows))  # noqa: T201


@pytest.mark.parametrize("catalog", CATALOGS, ids=lambda c: c.name)
def test_every_covered_entry_is_matched_by_its_signature(catalog: Catalog) -> None:
    misses = [
        f"{entry.code} {entry.covered_by}: {line}"
        for entry in _covered(catalog)
        for line in _lines(catalog, entry)
        if entry.covered_by not in ids(run(line + "\n"))
    ]
    assert not misses, f"{len(misses)} lines not matched, first: " + "\n".join(misses[:10])


@pytest.mark.parametrize("catalog", CATALOGS, ids=lambda c: c.name)
def test_a_message_cut_short_is_still_named(catalog: Catalog) -> None:
    """A signature keys on the message's distinctive beginning and reads the rest when present:
    the message cut where the entry says it may be cut still names its cause."""
    cut = [e for e in _covered(catalog) if e.cut]
    misses = [
        f"{entry.code} {entry.covered_by}: {line}"
        for entry in cut
        for line in _cut_lines(catalog, entry)
        if entry.covered_by not in ids(run(line + "\n"))
    ]
    assert not misses, f"{len(misses)} cut lines not matched, first: " + "\n".join(misses[:10])


def test_the_catalogs_give_cut_forms() -> None:
    """The cut test above has cases in the catalogs whose messages are long."""
    assert sum(1 for c in CATALOGS for e in _covered(c) if e.cut) >= 20


def test_a_line_the_emitter_survives_is_never_a_cause() -> None:
    """A catalog's non-fatal log lines (NCCL skipping a device) leave explain silent."""
    quiet = [(c, e) for c in CATALOGS for e in c.entries if e.fatal is False]
    assert quiet, "some catalog lists lines its program survives"
    for catalog, entry in quiet:
        assert entry.not_matched, f"{entry.code}: a non-fatal line cannot name a cause"
        for line in _lines(catalog, entry):
            assert not run(line + "\n").causes, line


def test_every_catalog_file_is_shipped() -> None:
    """A catalog file left out of the shipped list would never be checked: two were, for a
    while (cmake-cuda and ctranslate2, before this test)."""
    folder = Path(__file__).parents[2] / "envdoctor" / "catalogs"
    files = {p.stem for p in folder.glob("*.yaml")}
    assert files == {c.name for c in CATALOGS}


def test_the_coverage_docs_states_is_the_measured_one() -> None:
    """docs/explain.md's coverage table is what the catalogs say now (a row per catalog)."""
    docs = (Path(__file__).parents[2] / "docs" / "explain.md").read_text(encoding="utf-8")
    for catalog in CATALOGS:
        covered = len(_covered(catalog))
        excused = [e for e in catalog.entries if e.not_matched]
        gaps = sum(e.not_matched.startswith(NOT_YET) for e in excused)
        row = f"| {catalog.name} | {len(catalog.entries)} | {covered} | {len(excused)} | {gaps} |"
        assert row in docs, f"docs/explain.md should have the row {row}"


def test_the_xid_catalog_is_nvidias_whole_catalog() -> None:
    catalog = xid_catalog()
    # NVIDIA's catalog for Ampere and newer lists every code from 1 to 172, none skipped
    assert sorted(catalog) == list(range(1, 173))
    assert catalog[79].mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert (catalog[79].immediate, catalog[79].investigatory) == ("RESTART_BM", "CONTACT_SUPPORT")
    assert catalog[48].immediate == "WORKFLOW_XID_48"
    assert catalog[74].applies_to == ("A100", "H100")
    assert catalog[5].unused and catalog[5].applies_to == ()
    # the earlier listing (Volta and older) for codes 1-92: what an "Unused" code means there
    assert catalog[1].legacy_description == "Invalid or corrupted push buffer stream"
    assert catalog[1].name == catalog[1].legacy_description
    assert set(catalog[1].legacy_causes) == {"driver", "system-memory", "bus", "framebuffer"}
    assert catalog[48].legacy_causes == ("hardware",)
    assert all(not e.legacy_description for code, e in catalog.items() if code > 92)
    for entry in catalog.values():
        assert set(entry.applies_to) <= set(PRODUCTS)
        assert entry.name and entry.meaning and entry.action


def test_explain_gives_each_xid_its_catalog_meaning_and_action() -> None:
    for code, entry in xid_catalog().items():
        line = (
            f"[  170.053881] NVRM: Xid (PCI:0000:01:00): {code}, pid=4124, name=python, Ch 00000028"
        )
        (cause,) = [c for c in run(line).causes if c.id == "kernel.xid"]
        assert f"Xid {code} ({entry.name}): {entry.meaning}" in cause.notes
        assert f"Action: {entry.action}" in cause.notes


def _catalog_file(tmp_path: Path, entries: str) -> Path:
    path = tmp_path / "test.yaml"
    path.write_text(
        textwrap.dedent("""\
        schema: 1
        emitter: a test emitter
        source: https://example.org/errors
        lines: ['error: {message}']
        entries:
        """)
        + textwrap.indent(textwrap.dedent(entries), "  "),
        encoding="utf-8",
    )
    return path


def test_an_entry_neither_covered_nor_excused_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _catalog_file(
        tmp_path,
        """\
        - code: 1
          message: fine
          not_matched: a success code
        - code: 2
          message: forgotten
        """,
    )
    with pytest.raises(EnvdoctorError, match="exactly one of covered_by") as info:
        read_catalog(path)
    assert info.value.where.endswith("test.yaml:9")


def test_an_entry_both_covered_and_excused_is_refused(tmp_path: Path) -> None:
    path = _catalog_file(
        tmp_path, "- {code: 1, message: m, covered_by: cuda.oom, not_matched: why}\n"
    )
    with pytest.raises(EnvdoctorError, match="exactly one of covered_by"):
        read_catalog(path)


def test_the_xid_reader_refuses_an_unknown_bucket_or_severity(tmp_path: Path) -> None:
    shipped = Path(__file__).parents[2] / "envdoctor" / "catalogs" / "xid.yaml"
    text = shipped.read_text(encoding="utf-8")
    bad = tmp_path / "xid.yaml"
    bad.write_text(text.replace("severity: hardware", "severity: catastrophic", 1), "utf-8")
    with pytest.raises(EnvdoctorError, match="severity: one of"):
        read_xid_catalog(bad)
    bad.write_text(text.replace('immediate: "RESTART_BM"', 'immediate: "REBOOT_IT"', 1), "utf-8")
    with pytest.raises(EnvdoctorError, match="not a bucket") as info:
        read_xid_catalog(bad)
    assert ":" in info.value.where and info.value.where.startswith(str(tmp_path))
