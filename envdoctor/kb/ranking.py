"""From what a scan found to ranked causes.

The rules, in order:

1. CUDA reports kernel failures asynchronously, at some later API call. So among the
   asynchronous errors (role ``async``) the *first* one in the log is the root cause; later ones
   are its consequences.
2. A kernel's own assertion message (role ``kernel-assert``: ``Assertion `t >= 0 && t <
   n_classes` failed``) says what the generic ``device-side assert triggered`` cannot: when the
   first asynchronous error is that generic assert and an assertion message is present, the
   assertion message is the root.
3. Errors that are often mere fallout of an earlier asynchronous failure (role ``follow-on``:
   cuBLAS/cuDNN handle creation, ``CUDNN_STATUS_NOT_INITIALIZED``…) are explained by a root
   that comes before them; with no such root they stand as causes of their own.
4. Consequences keep a fraction of their confidence and sort after every root.
5. A signature may say it ``explains`` less specific ones (the NCCL shared-memory warning
   explains the generic "unhandled system error"); those become its consequences. A
   ``fallback`` signature (a generic reading of a class of message) becomes the consequence of
   any other signature that matched one of its lines.
6. Causes matched on the same line are alternatives of each other; the context before the
   line (an ``embedding`` frame in the traceback…) decides between them.
7. An analyzer may weigh a hit by its numbers (torch's environment report: CUDA unavailable
   with a driver too old for torch's CUDA); numbers that show nothing wrong drop the hit
   before any of the above.
8. A warning whose signature is ``cleared_by`` a benign one is harmless when that benign line
   (the program's own check reporting success) comes after the warning's last line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from envdoctor.kb.analyzers import ANALYZERS, Analysis
from envdoctor.kb.model import (
    Cause,
    Explanation,
    Hit,
    HostCheck,
    KnowledgeBase,
    Role,
    ScanResult,
    Verdict,
)
from envdoctor.kb.template import fill

CONSEQUENCE_FACTOR = 0.4
CONFIRM_BONUS = 0.15
RULE_OUT_FACTOR = 0.5
_GENERIC_ASSERT = "cuda.device-assert"


def _stands(hit: Hit, analysis: Analysis) -> bool:
    """Whether a hit is still a cause once its analyzer and its context have spoken."""
    if analysis.confidence is not None:
        return analysis.confidence != 0.0
    return hit.confidence > 0.0


def explain(scan: ScanResult, kb: KnowledgeBase, *, source: str = "-") -> Explanation:
    """Rank the hits of ``scan`` into causes (no live facts)."""
    benign = {s.id for s in kb.signatures if s.role is Role.BENIGN}
    cleared = _cleared(scan.hits, kb, benign)
    quiet = benign | cleared.keys()
    harmless = tuple(
        Cause(
            signature=kb.get(hit.signature_id),
            hit=hit,
            confidence=hit.confidence,
            summary=fill(kb.get(hit.signature_id).summary, _captures(hit)),
            notes=(cleared[hit.signature_id],) if hit.signature_id in cleared else (),
        )
        for hit in scan.hits
        if hit.signature_id in quiet
    )
    causes = rank([hit for hit in scan.hits if hit.signature_id not in quiet], kb)
    return Explanation(causes=causes, scan=scan, source=source, harmless=harmless)


def _cleared(hits: Sequence[Hit], kb: KnowledgeBase, benign: set[str]) -> dict[str, str]:
    """Warnings the same program later reported as harmless, each with the line that says so:
    a benign line the signature is ``cleared_by`` (its own check passing) after the warning's
    last line."""
    last_success = {h.signature_id: h.last_line for h in hits if h.signature_id in benign}
    cleared: dict[str, str] = {}
    for hit in hits:
        after = [
            last_success[other]
            for other in kb.get(hit.signature_id).cleared_by
            if last_success.get(other, -1) > hit.last_line
        ]
        if after:
            cleared[hit.signature_id] = (
                f"Harmless here: the program reported its own check passed after it (line {max(after)})."
            )
    return cleared


def rank(hits: Sequence[Hit], kb: KnowledgeBase) -> tuple[Cause, ...]:
    analyses = {hit.signature_id: _analyze(hit, kb) for hit in hits}
    # an analyzer whose numbers show nothing wrong drops its hit before any ranking, and so does
    # a context that rules it out (its weight took the hit's confidence to nothing)
    hits = [h for h in hits if _stands(h, analyses[h.signature_id])]
    roles = {hit.signature_id: kb.get(hit.signature_id).role for hit in hits}
    root = _async_root(hits, roles)
    explained_by = _explained_by(hits, kb)
    read_better = _read_better(hits, roles)
    causes: list[Cause] = []
    for hit in hits:
        signature = kb.get(hit.signature_id)
        consequence_of: str | None = explained_by.get(hit.signature_id) or read_better.get(
            hit.signature_id
        )
        if consequence_of is None and root is not None and hit is not root:
            role = roles[hit.signature_id]
            if role is Role.ASYNC and (
                roles[root.signature_id] is Role.KERNEL_ASSERT or hit.first_line >= root.first_line
            ):
                consequence_of = root.signature_id
            elif role is Role.KERNEL_ASSERT and roles[root.signature_id] is Role.KERNEL_ASSERT:
                consequence_of = None  # two different kernel asserts: both stand
            elif role is Role.FOLLOW_ON and hit.first_line > root.first_line:
                consequence_of = root.signature_id
        analysis = analyses[hit.signature_id]
        confidence = hit.confidence if analysis.confidence is None else analysis.confidence
        confidence *= CONSEQUENCE_FACTOR if consequence_of else 1.0
        causes.append(
            Cause(
                signature=signature,
                hit=hit,
                confidence=round(confidence, 3),
                summary=analysis.summary or fill(signature.summary, _captures(hit)),
                consequence_of=consequence_of,
                notes=(*hit.context_notes, *analysis.notes),
            )
        )
    causes = _mark_alternatives(causes)
    return tuple(sorted(causes, key=_order))


def _analyze(hit: Hit, kb: KnowledgeBase) -> Analysis:
    signature = kb.get(hit.signature_id)
    if not signature.analyzer:
        return Analysis()
    return ANALYZERS[signature.analyzer](_captures(hit), kb)


def _async_root(hits: Sequence[Hit], roles: Mapping[str, Role]) -> Hit | None:
    asynchronous = [h for h in hits if roles[h.signature_id] in (Role.ASYNC, Role.KERNEL_ASSERT)]
    if not asynchronous:
        return None
    first = min(
        asynchronous, key=lambda h: (h.first_line, roles[h.signature_id] is not Role.KERNEL_ASSERT)
    )
    if roles[first.signature_id] is Role.KERNEL_ASSERT:
        return first
    asserts = [h for h in asynchronous if roles[h.signature_id] is Role.KERNEL_ASSERT]
    if first.signature_id == _GENERIC_ASSERT and asserts:
        return min(asserts, key=lambda h: h.first_line)
    return first


def _explained_by(hits: Sequence[Hit], kb: KnowledgeBase) -> dict[str, str]:
    """Signatures present that another present signature declares it ``explains``."""
    present = {hit.signature_id for hit in hits}
    explainers: dict[str, dict[str, None]] = {}
    for hit in hits:
        for other in kb.get(hit.signature_id).explains:
            if other in present:
                explainers.setdefault(other, {})[hit.signature_id] = None
    # a signature that is itself explained does not explain others (no chains, no cycles); one
    # explained by two takes the one that is not itself explained (a permission error explains
    # both the shared-memory failure and the system error that both account for)
    chosen: dict[str, str] = {}
    for other, by in explainers.items():
        roots = [signature for signature in by if signature not in explainers]
        if roots:
            chosen[other] = roots[0]
    return chosen


def _read_better(hits: Sequence[Hit], roles: Mapping[str, Role]) -> dict[str, str]:
    """Fallback signatures whose line another signature also matched, and that signature."""
    by_line: dict[int, str] = {}
    for hit in hits:
        if roles[hit.signature_id] is not Role.FALLBACK:
            for occurrence in hit.occurrences:
                by_line.setdefault(occurrence.line, hit.signature_id)
    read: dict[str, str] = {}
    for hit in hits:
        if roles[hit.signature_id] is Role.FALLBACK:
            better = [by_line[o.line] for o in hit.occurrences if o.line in by_line]
            if better:
                read[hit.signature_id] = better[0]
    return read


def _mark_alternatives(causes: list[Cause]) -> list[Cause]:
    by_line: dict[int, list[str]] = {}
    for cause in causes:
        by_line.setdefault(cause.hit.first_line, []).append(cause.id)
    out: list[Cause] = []
    for cause in causes:
        others = tuple(i for i in by_line[cause.hit.first_line] if i != cause.id)
        out.append(replace(cause, alternatives=others) if others else cause)
    return out


def _order(cause: Cause) -> tuple[bool, float, int, str]:
    return (not cause.is_root, -cause.confidence, cause.hit.first_line, cause.id)


def _captures(hit: Hit) -> dict[str, str]:
    captures: dict[str, str] = {}
    for occurrence in hit.occurrences:
        for key, value in occurrence.captures:
            captures.setdefault(key, value)
    return captures


def with_host(explanation: Explanation, checks: Mapping[str, Sequence[HostCheck]]) -> Explanation:
    """Attach live checks to their causes and let their verdicts move the confidence."""
    causes: list[Cause] = []
    for cause in explanation.causes:
        found = tuple(checks.get(cause.id, ()))
        confidence = cause.confidence
        for check in found:
            if check.verdict is Verdict.CONFIRMS:
                confidence = min(0.99, confidence + CONFIRM_BONUS)
            elif check.verdict is Verdict.RULES_OUT:
                confidence *= RULE_OUT_FACTOR
        causes.append(replace(cause, host_checks=found, confidence=round(confidence, 3)))
    return replace(explanation, causes=tuple(sorted(causes, key=_order)))
