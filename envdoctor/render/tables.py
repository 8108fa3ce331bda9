"""``envdoctor tables show NAME``: one compatibility table as envdoctor loaded it, as compact
text or as JSON (docs/schema/tables.schema.json)."""

from __future__ import annotations

from typing import Any

from envdoctor.compat.tables import SECTIONS, CompatTables
from envdoctor.envelope import envelope
from envdoctor.model.codec import encode
from envdoctor.terminal import safe_text

TEXT_COLOURS = (
    (r"((?:CUDA release|branch|CC) +.*)$", ("bold",)),  # a table's column header
    (r"(torch \d+\.\d+) ", ("bold",)),  # a PyTorch release
    (r"([a-z][a-z -]+(?:\([a-z-]+\))?:)$", ("bold",)),  # a heading of its own
    (r".*  (\(unconfirmed\))$", ("warning",)),  # no readable source confirmed the row
)
"""Where ``table_text`` takes colour on a terminal (``tables show``)."""


def colour_table(text: str) -> str:
    """The text ``table_text`` made, coloured for a terminal."""
    from envdoctor.colour import paint

    return paint(text, TEXT_COLOURS)


def table_text(key: str, tables: CompatTables) -> str:
    """A compact text view of one table, one line per row (terminal-safe: rows come from user
    table files too)."""
    lines: list[str] = []
    if key == "cuda-toolkits":
        lines.append("CUDA release  label                             Linux driver  Windows driver")
        for r in tables.cuda_releases:
            mark = "  (unconfirmed)" if not r.confirmed else ""
            lines.append(
                f"{r.cuda:<13} {r.label:<33} {r.linux_driver or 'n/a':<13} "
                f"{r.windows_driver or 'n/a'}{mark}"
            )
        lines.append("")
        lines.append("minor-version compatibility floors:")
        lines.extend(
            f"  CUDA {f.major}.x: Linux ≥ {f.linux_driver}, Windows ≥ {f.windows_driver or 'n/a'}"
            for f in tables.minor_version_floors
        )
        lines.append("not covered by minor-version compatibility:")
        lines.extend(
            f"  - {lim.feature} ({lim.symptom})" for lim in tables.minor_version_limitations
        )
        lines.append("forward compatibility (cuda-compat):")
        lines.extend(
            f"  {'yes' if c.supported else 'no ':<4}{c.gpus}" for c in tables.forward_compat_gpus
        )
        lines.extend(
            f"  {p.package}: on branches {', '.join(f'R{b}' for b in p.base_branches)}"
            for p in tables.forward_compat_packages
        )
    elif key == "driver-branches":
        lines.append("branch  CUDA   example")
        for b in tables.driver_branches:
            mark = "  (unconfirmed)" if not b.confirmed else ""
            kind = f"  [{b.kind}]" if b.kind else ""
            lines.append(f"R{b.branch:<6} {b.cuda:<6} {b.example}{kind}{mark}")
    elif key == "architectures":
        lines.append(
            "CC    arch             first CUDA  last CUDA  first driver  last branch  modules    "
            "  GPUs"
        )
        lines.extend(
            f"{a.cc:<5} {a.arch:<16} {a.first_cuda or '-':<11} {a.last_cuda or '-':<10} "
            f"{a.first_driver or '-':<13} "
            f"{('R' + str(a.last_driver_branch)) if a.last_driver_branch else '-':<12} "
            f"{a.kernel_modules or '-':<12} {', '.join(a.gpus[:4])}"
            + ("  (unconfirmed)" if not a.confirmed else "")
            for a in tables.architectures
        )
        lines.extend(
            f"  {p.product} (CC {p.cc}, GPU name contains {' or '.join(p.names)}): "
            + ", ".join(
                part
                for part in (
                    f"kernel modules {p.kernel_modules}" if p.kernel_modules else "",
                    f"first driver {p.first_driver}" if p.first_driver else "",
                )
                if part
            )
            for p in tables.gpu_products
        )
    elif key == "cudnn":
        for c in tables.cudnn:
            pkgs = "; ".join(f"CUDA {p.cuda} (Linux ≥ {p.linux_driver or '?'})" for p in c.packages)
            mark = "  (unconfirmed)" if not c.confirmed else ""
            lines.append(
                f"cuDNN {c.cudnn}: {pkgs}; CC {c.min_cc or '?'} to {c.max_cc or '?'}{mark}"
            )
    else:
        for rel in tables.releases_newest_first():
            default = f", PyPI default {rel.default}" if rel.default else ""
            lines.append(f"torch {rel.torch} (latest {rel.latest}, Python {rel.python}{default})")
            lines.extend(
                f"  with {c.torch}: torchvision {c.torchvision}, torchaudio {c.torchaudio}"
                for c in rel.companions
            )
            for v in rel.variants:
                flags = " experimental" if v.experimental else ""
                flags += " (unconfirmed)" if not v.confirmed else ""
                lines.append(
                    f"  {v.name:<6} CUDA {v.cuda:<5} cuDNN {v.cudnn or '?':<10} NCCL "
                    f"{v.nccl or '?':<7} "
                    f"arch {v.arch_spec}{flags}"
                )
                lines.append(f"         {v.index_url}")
    return safe_text("\n".join(lines))


def table_json(name: str, tables: CompatTables) -> dict[str, Any]:
    """``tables show NAME --json``: the rows of the CompatTables fields table ``name`` fills, each
    a plain object with the row's own field names; ``origins`` are the directories read."""
    rows = {f: encode(getattr(tables, f)) for f in SECTIONS[name]}
    payload = {"table": name, "origins": list(tables.origins), **rows}
    return envelope("tables", payload, exit_code=0)  # showing a table that loaded is no verdict
