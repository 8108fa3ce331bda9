"""``envdoctor recommend``'s text, Markdown and JSON (docs/schema/recommend.schema.json): what
``compat.recommend`` decided, shown."""

from __future__ import annotations

from typing import Any

from envdoctor import __version__
from envdoctor.compat.recommend import (
    Candidate,
    MachineGpu,
    Recommendation,
    describe_machine,
)
from envdoctor.compat.tables import CompatTables, TorchVariant
from envdoctor.compat.versions import cuda_text
from envdoctor.envelope import envelope
from envdoctor.model.units import whole
from envdoctor.terminal import safe_text

# A report is a list of sections: a heading ("" for none) and its items, each (kind, text).
# The kinds: "fact" (a plain line), "command" (to run), "reason" (a bullet), "problem" (what
# fails), "statement" (a sentence of its own, under no heading).
Item = tuple[str, str]
Section = tuple[str, tuple[Item, ...]]


def sections(tables: CompatTables, rec: Recommendation) -> list[Section]:
    """What the recommendation says, in the order it says it (text and Markdown show it)."""
    out: list[Section] = [
        ("Machine", tuple(("fact", line) for line in describe_machine(tables, rec.machine)))
    ]
    if rec.blockers:
        out.append(
            (
                "Fix first (no torch wheel can work around these)",
                tuple(("problem", b) for b in rec.blockers),
            )
        )
    notes = tuple(("reason", n) for n in rec.notes)
    if rec.choice is not None:
        choice = rec.choice
        out.append(("Install", (("command", choice.command),)))
        why = [f"torch {choice.version} {choice.variant.name}: {_why_release(rec)}"]
        why.extend(choice.reasons)
        bundled = _bundled(choice.variant)
        if bundled:
            why.append(f"{bundled}; Python {_python_range(choice.release.python)}")
        out.append(("Why", tuple(("reason", r) for r in why)))
        if choice.notes or rec.notes:
            out.append(("Notes", (*(("reason", n) for n in choice.notes), *notes)))
    elif rec.cpu_command:
        out.append(("Install (CPU only)", (("command", rec.cpu_command), *notes)))
    elif rec.blockers:
        out.append(("", (("statement", "No wheel recommended until the driver is fixed."), *notes)))
    else:
        none = "No official torch wheel in envdoctor's tables works on this machine."
        out.append(("", (("statement", none), *notes)))
    if rec.rejected:
        out.append(
            (
                "Would not work",
                tuple(("problem", f"{c.label}: {'; '.join(c.problems)}") for c in rec.rejected),
            )
        )
    return out


_TEXT = {"fact": "  {}", "command": "  {}", "reason": "  - {}", "problem": "  ✗ {}"}


def render_text(tables: CompatTables, rec: Recommendation) -> str:
    out: list[str] = []
    for heading, items in sections(tables, rec):
        if out:
            out.append("")
        if heading:
            out.append(f"{heading}:")
        out.extend(
            text if kind == "statement" else _TEXT[kind].format(text) for kind, text in items
        )
    return safe_text("\n".join(out) + "\n")


def render_markdown(tables: CompatTables, rec: Recommendation) -> str:
    """For a ticket or a chat: the same sections, the command in a shell block."""
    out = [f"### envdoctor {__version__}: torch for this machine ({rec.status})"]
    for heading, items in sections(tables, rec):
        out.append("")
        if heading:
            out.extend([f"#### {heading}", ""])
        for kind, text in items:
            if kind == "command":
                out.extend(["```sh", text, "```", ""])
            elif kind == "statement":
                out.append(f"**{_markdown_text(text)}**")
            else:
                mark = "❌ " if kind == "problem" else ""
                out.append(f"- {mark}{_markdown_text(text)}")
    while out[-1] == "":
        out.pop()
    return safe_text("\n".join(out) + "\n")


def _markdown_text(text: str) -> str:
    """Text that Markdown shows as written: no emphasis, link, table cell or HTML is made of it
    (a GPU name is the machine's to choose). Backtick pairs stay code spans: envdoctor's own
    wording marks commands that way, and nothing inside a code span is interpreted."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span at all
        return "".join(_escaped(c) for c in text)
    return "`".join(
        part if i % 2 else "".join(_escaped(c) for c in part) for i, part in enumerate(parts)
    )


def _escaped(char: str) -> str:
    return f"\\{char}" if char in "\\`*_[]<>|#" else char


COLOURS = (
    (
        r"(Machine:|Install:|Install \(CPU only\):|Why:|Notes:|Would not work:|Fix first .*:)$",
        ("bold",),
    ),
    (r"  (✗) ", ("error",)),
    (r"  ((?:\S+ -m )?(?:uv )?pip3? install .*|conda remove .*)$", ("ok",)),  # the command
    (r"(No (?:wheel recommended|official torch wheel) .*)$", ("warning",)),
)
"""Where the recommendation's text takes colour."""


def colour_text(text: str) -> str:
    """The text ``render_text`` made (and made safe), coloured for a terminal."""
    from envdoctor.colour import paint

    return paint(text, COLOURS)


def _why_release(rec: Recommendation) -> str:
    assert rec.choice is not None
    if rec.pinned:
        return f"the best variant of the pinned release {rec.choice.release.torch}"
    if rec.considered and rec.considered[0] == rec.choice.release.torch:
        return "the newest release in envdoctor's tables, best variant for this machine"
    return "the newest release in envdoctor's tables with a variant that works here"


def _bundled(variant: TorchVariant) -> str:
    parts = []
    if variant.cudnn:
        parts.append(f"cuDNN {variant.cudnn}")
    if variant.nccl:
        parts.append(f"NCCL {variant.nccl}")
    return "bundles " + " and ".join(parts) if parts else ""


def _python_range(spec: str) -> str:
    """The tables' ``>=A,<B`` as people say it: ``>=3.10,<3.15`` is "3.10 to 3.14",
    ``>=3.14,<3.15`` "3.14". A bound that is not a plain X.Y, or whose last minor before it is
    not above A, is said as it is: "3.10, below 4.0", "3.14.5, below 3.15". ``==3.12`` is
    "3.12"."""
    low = high = ""
    for part in spec.split(","):
        part = part.strip()
        if part.startswith("=="):
            return part[2:].strip()
        if part.startswith(">="):
            low = part[2:].strip()
        elif part.startswith("<") and not part.startswith("<="):
            high = part[1:].strip()
    if not (low and high):
        return spec
    major, _, minor = high.partition(".")
    number = whole(minor, 9)
    if whole(major, 9) is None or number is None or number == 0:
        return f"{low}, below {high}"
    top = f"{major}.{number - 1}"
    if low == top:
        return low
    if low.startswith(top + "."):
        return f"{low}, below {high}"
    return f"{low} to {top}"


def to_json(tables: CompatTables, rec: Recommendation) -> dict[str, Any]:
    """``recommend --json`` (docs/schema/recommend.schema.json): ``outcome`` is ``rec.status``
    (ok, blocked, cpu-only, none); the envelope's ``status`` is the exit code's word."""
    m = rec.machine

    def cand(c: Candidate) -> dict[str, Any]:
        return {
            "torch": c.version,
            "variant": c.variant.name,
            "cuda": c.variant.cuda,
            "index_url": c.variant.index_url,
            "command": c.command,
            "driver_fit": c.driver.fit.value if c.driver else None,
            "needs_driver": c.driver.needed if c.driver else None,
            "full_feature_driver": c.driver.full if c.driver else None,
            "arch_list": list(c.variant.arch_list),
            "cudnn": c.variant.cudnn,
            "nccl": c.variant.nccl,
            "experimental": c.variant.experimental,
            "reasons": list(c.reasons),
            "problems": list(c.problems),
            "notes": list(c.notes),
        }

    payload = {
        "outcome": rec.status,
        "machine": {
            "driver": m.driver,
            "driver_cuda": cuda_text(m.driver_cuda) if m.driver_cuda else None,
            "kernel_modules": m.kernel_flavor,
            "gpus": [_gpu_json(g) for g in m.gpus],
        },
        "pinned": rec.pinned,
        "recommendation": cand(rec.choice) if rec.choice else None,
        "command": rec.choice.command if rec.choice else rec.cpu_command,
        "blockers": list(rec.blockers),
        "notes": list(rec.notes),
        "rejected": [cand(c) for c in rec.rejected],
    }
    return envelope("recommend", payload, exit_code=rec.exit_code)


def _gpu_json(gpu: MachineGpu) -> dict[str, Any]:
    """A GPU of ``machine.gpus``; ``compute_capability_unknown`` (the reason) only when null."""
    out: dict[str, Any] = {
        "index": gpu.index,
        "name": gpu.name,
        "compute_capability": f"{gpu.cc[0]}.{gpu.cc[1]}" if gpu.cc else None,
    }
    if gpu.cc is None:
        out["compute_capability_unknown"] = gpu.cc_problem or "unknown"
    return out
