"""Load and validate the knowledge base: ``signatures/*.yaml`` and ``prefilter.yaml``.

Every problem in a file is an ``EnvdoctorError`` whose ``where`` is ``file:line`` (exit 2 at the
CLI), never a traceback: unknown or missing keys, a regex that does not compile, a pattern that
does not match its own examples, a summary placeholder no pattern captures (or one outside a
``[[…]]`` segment that an example leaves empty), an unknown host check or analyzer, a duplicate
id.
"""

from __future__ import annotations

import functools
import re
import sys
from importlib import resources
from pathlib import Path

from envdoctor.errors import EnvdoctorError
from envdoctor.kb.analyzers import ANALYZERS
from envdoctor.kb.anchor import derive_anchor, required_literals, select_triggers
from envdoctor.kb.ere import to_ere
from envdoctor.kb.model import (
    HOST_CHECK_NAMES,
    ContextRule,
    KnowledgeBase,
    Pattern,
    Role,
    Signature,
    compiled,
)
from envdoctor.kb.template import fields, written
from envdoctor.model.finding import is_valid_code
from envdoctor.yamlsource import Map, Node, Reader, Seq, load

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
    "needs_context": False,
    "cleared_by": False,
}
_PATTERN_KEYS = {"regex": True, "examples": True, "anchor": False, "confidence": False}
_CONTEXT_KEYS = {"regex": True, "weight": True, "note": True}


def default_root() -> Traversable:
    """The knowledge base shipped inside the package."""
    return resources.files("envdoctor.kb")


@functools.lru_cache(maxsize=1)
def load_default_kb() -> KnowledgeBase:
    """The shipped knowledge base, loaded once per process."""
    return load_kb(default_root())


def load_kb(root: Traversable | Path) -> KnowledgeBase:
    """Read ``root/signatures/*.yaml`` and ``root/prefilter.yaml``. (NVIDIA's Xid catalog, which
    the ``xid`` analyzer reads, is ``envdoctor/catalogs/xid.yaml``, read when an Xid is seen.)"""
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
    benign = {s.id for s in signatures if s.role is Role.BENIGN}
    for signature in signatures:
        for other in signature.explains:
            if other not in seen or other == signature.id:
                raise EnvdoctorError(
                    f"`explains` names {other!r}, which is not another signature",
                    where=signature.source,
                )
        for other in signature.cleared_by:
            if other not in benign:
                raise EnvdoctorError(
                    f"`cleared_by` names {other!r}, which is not a benign signature",
                    where=signature.source,
                )
    return KnowledgeBase(
        signatures=tuple(signatures),
        triggers=select_triggers(base_triggers, (p.anchor for s in signatures for p in s.patterns)),
    )


# --- files ----------------------------------------------------------------------------------


def _name(path: Traversable | Path) -> str:
    text = str(path)
    marker = "envdoctor/kb/"
    return text[text.index(marker) :] if marker in text else text


_READ = Reader()  # the shared YAML reader's typed values and its one error style


def _read(path: Traversable | Path) -> Node:
    where = _name(path)
    if not path.is_file():
        raise EnvdoctorError("file not found", where=where)
    return load(path, where=where)


def _header(doc: Node, list_key: str) -> tuple[Node, ...]:
    """A file's ``schema: 1`` and its one list (``signatures:`` or ``triggers:``)."""
    top = _READ.keys(
        _READ.mapping(doc, "the file"),
        "the file",
        required=("schema", list_key),
        optional=("source",),
    )
    if _READ.integer(top.items["schema"], "schema") != SCHEMA_VERSION:
        raise _READ.error(top.items["schema"], f"schema: `schema: {SCHEMA_VERSION}` is required")
    return _READ.sequence(top.items[list_key], list_key)


def _load_prefilter(path: Traversable | Path) -> tuple[str, ...]:
    triggers: list[str] = []
    for item in _header(_read(path), "triggers"):
        trigger = _READ.text(item, "triggers")
        if len(trigger) < 2:
            raise _READ.error(item, "triggers: a trigger is a literal of at least 2 characters")
        triggers.append(trigger)
    return tuple(triggers)


def _load_signature_file(path: Traversable | Path, prefer: tuple[str, ...]) -> list[Signature]:
    return [_signature(item, prefer) for item in _header(_read(path), "signatures")]


# --- one signature --------------------------------------------------------------------------


def _mapping(item: Node, what: str, keys: dict[str, bool]) -> Map:
    """A mapping with exactly the keys ``keys`` allows (``True``: required)."""
    return _READ.keys(
        _READ.mapping(item, what),
        what,
        required=[key for key, needed in keys.items() if needed],
        optional=[key for key, needed in keys.items() if not needed],
    )


def _text(item: Map, key: str) -> str:
    return _READ.text(_READ.required(item, key, key), key)


def _texts(item: Map, key: str, *, required: bool = False) -> tuple[str, ...]:
    value = item.items.get(key)
    if value is None and not required:
        return ()
    return _READ.text_list(_READ.required(item, key, key), key, non_empty=required)


def _number(item: Map, key: str, default: float, low: float, high: float) -> float:
    if key not in item.items:
        return default
    return _READ.number(item.items[key], key, low=low, high=high)


def _compile(item: Map, key: str = "regex") -> str:
    """The regex under ``key``, once Python compiles it and it has a POSIX ERE equivalent."""
    source = _text(item, key)
    try:
        compiled(source)  # kept: the pattern's examples are matched with it next
    except re.error as exc:
        raise _READ.error(item.items[key], f"{key}: regex does not compile: {exc}") from None
    try:
        # the subset with a POSIX ERE equivalent is the one RE2 runs in linear time (no
        # backreferences, lookarounds or inline flags): both engines must accept every pattern
        to_ere(source)
    except ValueError as exc:
        raise _READ.error(
            item.items[key],
            f"{key}: regex uses a construct explain cannot match in linear time: {exc}",
        ) from None
    return source


def _signature(item: Node, prefer: tuple[str, ...] = ()) -> Signature:
    sig = _mapping(item, "signature", _SIGNATURE_KEYS)
    sid = _text(sig, "id")
    if not is_valid_code(sid):
        raise EnvdoctorError(f"id: {sid!r} is not a dotted kebab-case code", where=sig.at("id"))
    role_text = _text(sig, "role")
    try:
        role = Role(role_text)
    except ValueError:
        known = ", ".join(r.value for r in Role)
        raise EnvdoctorError(
            f"role: unknown role {role_text!r} (known: {known})", where=sig.at("role")
        ) from None
    confidence = _number(sig, "confidence", 0.5, 0.05, 0.99)
    patterns_node = sig.items["patterns"]
    if not _READ.sequence(patterns_node, "patterns"):
        raise _READ.error(patterns_node, "patterns: expected a non-empty list")
    patterns = tuple(
        _pattern(p, confidence, prefer) for p in _READ.sequence(patterns_node, "patterns")
    )
    context_node = sig.items.get("context")
    context: tuple[ContextRule, ...] = ()
    if context_node is not None:
        context = tuple(_context(c) for c in _READ.sequence(context_node, "context"))
    needs_context = "needs_context" in sig.items and _READ.boolean(
        sig.items["needs_context"], "needs_context"
    )
    if needs_context and not any(rule.weight > 0 for rule in context):
        raise EnvdoctorError(
            "needs_context: true needs a context rule with a positive weight to stand on",
            where=sig.at("needs_context"),
        )
    facts = _texts(sig, "facts")
    for i, name in enumerate(facts):
        if name not in HOST_CHECK_NAMES:
            raise EnvdoctorError(
                f"facts: unknown host check {name!r} (known: {', '.join(sorted(HOST_CHECK_NAMES))})",
                where=_item_at(sig, "facts", i),
            )
    see_also = _texts(sig, "see_also")
    for i, code in enumerate(see_also):
        if not is_valid_code(code):
            raise EnvdoctorError(
                f"see_also: {code!r} is not a finding code", where=_item_at(sig, "see_also", i)
            )
    analyzer = _text(sig, "analyzer") if "analyzer" in sig.items else ""
    if analyzer and analyzer not in ANALYZERS:
        raise EnvdoctorError(
            f"analyzer: unknown analyzer {analyzer!r} (known: {', '.join(sorted(ANALYZERS))})",
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
        analyzer=analyzer,
        docs=_texts(sig, "docs"),
        explains=_texts(sig, "explains"),
        cleared_by=_texts(sig, "cleared_by"),
        needs_context=needs_context,
        source=sig.at(),
    )
    _check_placeholders(signature, sig)
    return signature


def _item_at(sig: Map, key: str, index: int) -> str:
    """``file:line`` of item ``index`` of the list under ``key``."""
    node = sig.items.get(key)
    return node.items[index].at() if isinstance(node, Seq) else sig.at(key)


def _pattern(item: Node, default_confidence: float, prefer: tuple[str, ...]) -> Pattern:
    pat = _mapping(item, "patterns", _PATTERN_KEYS)
    regex = compiled(_compile(pat))
    anchor: str | None
    if "anchor" in pat.items:
        anchor = _text(pat, "anchor")
        if len(anchor) < 3:
            raise EnvdoctorError("anchor: a literal of 3+ characters", where=pat.at("anchor"))
    else:
        anchor = derive_anchor(regex.pattern, prefer)
        if anchor is None:
            raise EnvdoctorError(
                "regex: no literal anchor can be derived from this regex (top-level `|`, or no "
                "literal of 3+ characters outside groups): add `anchor:` with a literal every "
                "match contains",
                where=pat.at("regex"),
            )
    examples = _texts(pat, "examples", required=True)
    always: set[str] = set(regex.groupindex)
    for i, example in enumerate(examples):
        at = _item_at(pat, "examples", i)
        if "\n" in example:
            raise EnvdoctorError("examples: an example is one log line", where=at)
        if anchor not in example:
            raise EnvdoctorError(
                f"examples: example does not contain the anchor {anchor!r}", where=at
            )
        match = regex.search(example)
        if match is None:
            raise EnvdoctorError("examples: example does not match the regex", where=at)
        captured = {name for name, value in match.groupdict().items() if value}
        always &= captured
    # longest first (the first is the most distinctive), ties in a fixed order: a set's order
    # changes with the hash seed, and with it which literal the scanner searches for
    literals = [anchor]
    if not regex.flags & re.IGNORECASE:
        literals.extend(r for r in required_literals(regex.pattern) if len(r) >= 3 and r != anchor)
    return Pattern(
        regex=regex.pattern,
        anchor=anchor,
        confidence=_number(pat, "confidence", default_confidence, 0.05, 0.99),
        examples=examples,
        line=pat.line,
        literals=tuple(sorted(set(literals), key=lambda lit: (-len(lit), lit))),
        groups=tuple(regex.groupindex),
        always=tuple(sorted(always)),
    )


def _context(item: Node) -> ContextRule:
    ctx = _mapping(item, "context", _CONTEXT_KEYS)
    regex = _compile(ctx)
    return ContextRule(
        regex=regex,
        weight=_number(ctx, "weight", 0.0, -0.9, 0.9),
        note=_text(ctx, "note"),
        groups=tuple(compiled(regex).groupindex),
    )


def _check_placeholders(signature: Signature, sig: Map) -> None:
    """Every placeholder is captured by some pattern; one outside a ``[[…]]`` segment by every
    example of every pattern, so no summary a user reads prints "?" for it. The title, the
    explanation and the fix are not filled, so a capture's placeholder there is refused."""
    required, optional = fields(signature.summary)
    available = signature.captures_used()
    for name in sorted(required | optional):
        if name not in available:
            raise EnvdoctorError(
                f"summary: uses {{{name}}} but no pattern captures (?P<{name}>…)",
                where=sig.at("summary"),
            )
    for index, pattern in enumerate(signature.patterns):
        lacking = sorted(required - set(pattern.always))
        if lacking:
            raise EnvdoctorError(
                f"summary: pattern {index} (line {pattern.line}) does not capture"
                f" {', '.join('{' + n + '}' for n in lacking)} on all its examples: put what"
                " uses it in an optional [[…]] segment",
                where=sig.at("summary"),
            )
    # the other texts are printed as written: a capture's placeholder there reaches the user
    # as "{name}" (a fix once told people to set "{variable}")
    for key, text in (
        ("title", signature.title),
        ("explanation", signature.explanation),
        ("fix", "\n".join(signature.fix)),
    ):
        literal = sorted(written(text) & available)
        if literal:
            raise EnvdoctorError(
                f"{key}: {{{literal[0]}}} is printed as written (only the summary is filled"
                f" from the captures): write <{literal[0]}> or name the value in words",
                where=sig.at(key),
            )
