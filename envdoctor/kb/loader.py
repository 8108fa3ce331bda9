"""Load and validate the knowledge base: ``signatures/*.yaml``, ``prefilter.yaml``, ``xid.yaml``.

Every problem in a file is an ``EnvdoctorError`` whose ``where`` is ``file:line`` (exit 2 at the
CLI), never a traceback: unknown or missing keys, a regex that does not compile, a pattern that
does not match its own examples, a summary placeholder no pattern captures, an unknown host
check or analyzer, a duplicate id.
"""

from __future__ import annotations

import functools
import re
import string
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from envdoctor.errors import EnvdoctorError
from envdoctor.kb.analyzers import ANALYZERS
from envdoctor.kb.anchor import derive_anchor, required_literals
from envdoctor.kb.ere import to_ere
from envdoctor.kb.hostcheck import HOST_CHECKS
from envdoctor.kb.model import ContextRule, KnowledgeBase, Pattern, Role, Signature, XidEntry
from envdoctor.kb.yamlsrc import LList, LMap, load_yaml
from envdoctor.model.finding import is_valid_code

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover (Python 3.10)
    from importlib.abc import Traversable

SCHEMA_VERSION = 1
_SIGNATURE_KEYS = {
    "id": True,
    "title": True,
    "role": True,
    "confidence": True,
    "patterns": True,
    "summary": True,
    "explanation": True,
    "fix": True,
    "facts": False,
    "see_also": False,
    "context": False,
    "analyzer": False,
    "docs": False,
    "explains": False,
}
_PATTERN_KEYS = {"regex": True, "examples": True, "anchor": False, "confidence": False}
_CONTEXT_KEYS = {"regex": True, "weight": True, "note": True}
_XID_KEYS = {
    "code": True,
    "name": True,
    "meaning": True,
    "action": True,
    "severity": True,
    "source": False,
}
_XID_SEVERITIES = frozenset({"app", "hardware", "driver", "info"})


def default_root() -> Traversable:
    """The knowledge base shipped inside the package."""
    return resources.files("envdoctor.kb")


@functools.lru_cache(maxsize=1)
def load_default_kb() -> KnowledgeBase:
    """The shipped knowledge base, loaded once per process."""
    return load_kb(default_root())


def load_kb(root: Traversable | Path) -> KnowledgeBase:
    """Read ``root/signatures/*.yaml``, ``root/prefilter.yaml`` and ``root/xid.yaml``."""
    base_triggers = _load_prefilter(root / "prefilter.yaml")
    signatures: list[Signature] = []
    seen: dict[str, str] = {}
    sig_dir = root / "signatures"
    files = sorted((f for f in sig_dir.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    if not files:
        raise EnvdoctorError("no signature files (*.yaml)", where=_name(sig_dir))
    for file in files:
        for signature in _load_signature_file(file, base_triggers):
            if signature.id in seen:
                raise EnvdoctorError(
                    f"duplicate signature id {signature.id!r} (first defined at {seen[signature.id]})",
                    where=signature.source,
                )
            seen[signature.id] = signature.source
            signatures.append(signature)
    for signature in signatures:
        for other in signature.explains:
            if other not in seen or other == signature.id:
                raise EnvdoctorError(
                    f"`explains` names {other!r}, which is not another signature",
                    where=signature.source,
                )
    xid_file = root / "xid.yaml"
    xid = _load_xid(xid_file) if xid_file.is_file() else {}
    return KnowledgeBase(
        signatures=tuple(signatures),
        triggers=select_triggers(base_triggers, (p.anchor for s in signatures for p in s.patterns)),
        xid=xid,
    )


def select_triggers(base: Iterable[str], anchors: Iterable[str]) -> tuple[str, ...]:
    """The literals the scanner searches: for each anchor the first base trigger inside it,
    or the anchor itself when none is (correct either way; fewer literals scan faster)."""
    base = tuple(base)
    chosen: list[str] = []
    for anchor in anchors:
        trigger = next((t for t in base if t in anchor), anchor)
        if trigger not in chosen:
            chosen.append(trigger)
    return tuple(chosen)


def trigger_for(anchor: str, triggers: Iterable[str]) -> str:
    """The trigger that finds lines containing ``anchor`` (see ``select_triggers``)."""
    return next(t for t in triggers if t in anchor)


# --- files ----------------------------------------------------------------------------------


def _name(path: Traversable | Path) -> str:
    text = str(path)
    marker = "envdoctor/kb/"
    return text[text.index(marker) :] if marker in text else text


def _read(path: Traversable | Path) -> Any:
    where = _name(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EnvdoctorError("file not found", where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvdoctorError(f"cannot read: {exc}", where=where) from None
    return load_yaml(text, where)


def _header(doc: Any, where: str, list_key: str) -> LList:
    if not isinstance(doc, LMap):
        raise EnvdoctorError("expected a mapping with `schema:` and a list", where=f"{where}:1")
    unknown = set(doc.items) - {"schema", list_key, "source"}
    if unknown:
        key = sorted(unknown)[0]
        raise EnvdoctorError(f"unknown key {key!r}", where=doc.at(key))
    if doc.items.get("schema") != SCHEMA_VERSION:
        raise EnvdoctorError(f"`schema: {SCHEMA_VERSION}` is required", where=doc.at("schema"))
    items = doc.items.get(list_key)
    if not isinstance(items, LList):
        raise EnvdoctorError(f"`{list_key}:` must be a list", where=doc.at(list_key))
    return items


def _load_prefilter(path: Traversable | Path) -> tuple[str, ...]:
    doc = _read(path)
    items = _header(doc, _name(path), "triggers")
    triggers: list[str] = []
    for i, item in enumerate(items.items):
        if not isinstance(item, str) or len(item) < 2:
            raise EnvdoctorError(
                "a trigger is a literal of at least 2 characters", where=items.at(i)
            )
        triggers.append(item)
    return tuple(triggers)


def _load_signature_file(path: Traversable | Path, prefer: tuple[str, ...]) -> list[Signature]:
    doc = _read(path)
    items = _header(doc, _name(path), "signatures")
    return [_signature(item, items.at(i), prefer) for i, item in enumerate(items.items)]


def _load_xid(path: Traversable | Path) -> dict[int, XidEntry]:
    doc = _read(path)
    items = _header(doc, _name(path), "codes")
    default_source = doc.items.get("source", "") if isinstance(doc, LMap) else ""
    catalog: dict[int, XidEntry] = {}
    for i, item in enumerate(items.items):
        entry = _mapping(item, items.at(i), _XID_KEYS)
        code = entry.items["code"]
        if not isinstance(code, int) or isinstance(code, bool) or code <= 0:
            raise EnvdoctorError("`code` must be a positive integer", where=entry.at("code"))
        if code in catalog:
            raise EnvdoctorError(f"duplicate Xid {code}", where=entry.at("code"))
        severity = _text(entry, "severity")
        if severity not in _XID_SEVERITIES:
            raise EnvdoctorError(
                f"`severity` must be one of {sorted(_XID_SEVERITIES)}", where=entry.at("severity")
            )
        catalog[code] = XidEntry(
            code=code,
            name=_text(entry, "name"),
            meaning=_text(entry, "meaning"),
            action=_text(entry, "action"),
            severity=severity,
            source=str(entry.items.get("source", default_source)),
        )
    return catalog


# --- one signature --------------------------------------------------------------------------


def _mapping(item: Any, where: str, keys: dict[str, bool]) -> LMap:
    if not isinstance(item, LMap):
        raise EnvdoctorError("expected a mapping", where=where)
    for key in item.items:
        if key not in keys:
            raise EnvdoctorError(
                f"unknown key {key!r} (known: {', '.join(keys)})", where=item.at(key)
            )
    for key, required in keys.items():
        if required and key not in item.items:
            raise EnvdoctorError(f"missing key {key!r}", where=item.at())
    return item


def _text(item: LMap, key: str) -> str:
    value = item.items.get(key)
    if not isinstance(value, str) or not value.strip():
        raise EnvdoctorError(f"`{key}` must be non-empty text", where=item.at(key))
    return value.strip()


def _texts(item: LMap, key: str, *, required: bool = False) -> tuple[str, ...]:
    value = item.items.get(key)
    if value is None and not required:
        return ()
    if not isinstance(value, LList) or (required and not value.items):
        raise EnvdoctorError(f"`{key}` must be a list of text", where=item.at(key))
    out: list[str] = []
    for i, entry in enumerate(value.items):
        if not isinstance(entry, str) or not entry.strip():
            raise EnvdoctorError(f"`{key}` entries must be non-empty text", where=value.at(i))
        out.append(entry.strip())
    return tuple(out)


def _number(item: LMap, key: str, default: float, low: float, high: float) -> float:
    value = item.items.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise EnvdoctorError(f"`{key}` must be a number in [{low}, {high}]", where=item.at(key))
    return float(value)


def _compile(item: LMap, key: str = "regex") -> re.Pattern[str]:
    source = _text(item, key)
    try:
        regex = re.compile(source)
    except re.error as exc:
        raise EnvdoctorError(f"regex does not compile: {exc}", where=item.at(key)) from None
    try:
        # the subset with a POSIX ERE equivalent is the one RE2 runs in linear time (no
        # backreferences, lookarounds or inline flags): both engines must accept every pattern
        to_ere(source)
    except ValueError as exc:
        raise EnvdoctorError(
            f"regex uses a construct explain cannot match in linear time: {exc}",
            where=item.at(key),
        ) from None
    return regex


def _signature(item: Any, where: str, prefer: tuple[str, ...] = ()) -> Signature:
    sig = _mapping(item, where, _SIGNATURE_KEYS)
    sid = _text(sig, "id")
    if not is_valid_code(sid):
        raise EnvdoctorError(f"id {sid!r} is not a dotted kebab-case code", where=sig.at("id"))
    role_text = _text(sig, "role")
    try:
        role = Role(role_text)
    except ValueError:
        known = ", ".join(r.value for r in Role)
        raise EnvdoctorError(
            f"unknown role {role_text!r} (known: {known})", where=sig.at("role")
        ) from None
    confidence = _number(sig, "confidence", 0.5, 0.05, 0.99)
    patterns_node = sig.items["patterns"]
    if not isinstance(patterns_node, LList) or not patterns_node.items:
        raise EnvdoctorError("`patterns` must be a non-empty list", where=sig.at("patterns"))
    patterns = tuple(
        _pattern(p, patterns_node.at(i), confidence, prefer)
        for i, p in enumerate(patterns_node.items)
    )
    context_node = sig.items.get("context")
    context: tuple[ContextRule, ...] = ()
    if context_node is not None:
        if not isinstance(context_node, LList):
            raise EnvdoctorError("`context` must be a list", where=sig.at("context"))
        context = tuple(_context(c, context_node.at(i)) for i, c in enumerate(context_node.items))
    facts = _texts(sig, "facts")
    for i, name in enumerate(facts):
        if name not in HOST_CHECKS:
            raise EnvdoctorError(
                f"unknown host check {name!r} (known: {', '.join(sorted(HOST_CHECKS))})",
                where=_item_at(sig, "facts", i),
            )
    see_also = _texts(sig, "see_also")
    for i, code in enumerate(see_also):
        if not is_valid_code(code):
            raise EnvdoctorError(
                f"{code!r} is not a finding code", where=_item_at(sig, "see_also", i)
            )
    analyzer = sig.items.get("analyzer", "")
    if analyzer and analyzer not in ANALYZERS:
        raise EnvdoctorError(
            f"unknown analyzer {analyzer!r} (known: {', '.join(sorted(ANALYZERS))})",
            where=sig.at("analyzer"),
        )
    signature = Signature(
        id=sid,
        title=_text(sig, "title"),
        role=role,
        confidence=confidence,
        patterns=patterns,
        summary=_text(sig, "summary"),
        explanation=_text(sig, "explanation"),
        fix=_texts(sig, "fix", required=True),
        facts=facts,
        see_also=see_also,
        context=context,
        analyzer=str(analyzer),
        docs=_texts(sig, "docs"),
        explains=_texts(sig, "explains"),
        source=sig.at(),
    )
    _check_placeholders(signature, sig)
    return signature


def _item_at(sig: LMap, key: str, index: int) -> str:
    node = sig.items.get(key)
    return node.at(index) if isinstance(node, LList) else sig.at(key)


def _pattern(item: Any, where: str, default_confidence: float, prefer: tuple[str, ...]) -> Pattern:
    pat = _mapping(item, where, _PATTERN_KEYS)
    regex = _compile(pat)
    anchor = pat.items.get("anchor")
    if anchor is None:
        anchor = derive_anchor(regex.pattern, prefer)
        if anchor is None:
            raise EnvdoctorError(
                "no literal anchor can be derived from this regex (top-level `|`, or no literal "
                "of 3+ characters outside groups): add `anchor:` with a literal every match contains",
                where=pat.at("regex"),
            )
    elif not isinstance(anchor, str) or len(anchor) < 3:
        raise EnvdoctorError("`anchor` must be a literal of 3+ characters", where=pat.at("anchor"))
    examples = _texts(pat, "examples", required=True)
    for i, example in enumerate(examples):
        at = _item_at(pat, "examples", i)
        if "\n" in example:
            raise EnvdoctorError("an example is one log line", where=at)
        if anchor not in example:
            raise EnvdoctorError(f"example does not contain the anchor {anchor!r}", where=at)
        if regex.search(example) is None:
            raise EnvdoctorError("example does not match the regex", where=at)
    literals = [anchor]
    if not regex.flags & re.IGNORECASE:
        literals.extend(r for r in required_literals(regex.pattern) if len(r) >= 3 and r != anchor)
    return Pattern(
        regex=regex,
        anchor=anchor,
        confidence=_number(pat, "confidence", default_confidence, 0.05, 0.99),
        examples=examples,
        line=pat.line,
        literals=tuple(sorted(set(literals), key=len, reverse=True)),
    )


def _context(item: Any, where: str) -> ContextRule:
    ctx = _mapping(item, where, _CONTEXT_KEYS)
    return ContextRule(
        regex=_compile(ctx),
        weight=_number(ctx, "weight", 0.0, -0.9, 0.9),
        note=_text(ctx, "note"),
    )


def _check_placeholders(signature: Signature, sig: LMap) -> None:
    available = signature.captures_used()
    for _, field_name, _, _ in string.Formatter().parse(signature.summary):
        if field_name is None:
            continue
        if field_name not in available:
            raise EnvdoctorError(
                f"summary uses {{{field_name}}} but no pattern captures (?P<{field_name}>…)",
                where=sig.at("summary"),
            )
