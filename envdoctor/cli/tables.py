"""`envdoctor tables validate [DIR]` and `envdoctor tables show NAME`."""

from __future__ import annotations

from envdoctor import exitcodes
from envdoctor.cli.boundary import emit
from envdoctor.cli.common import Invocation
from envdoctor.compat.loader import TABLE_NAMES, load_tables, shipped_dir, validate_dir
from envdoctor.compat.tables import CompatTables
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import json_document, safe_line, safe_text

# table name -> the CompatTables fields it fills
SECTIONS: dict[str, tuple[str, ...]] = {
    "cuda-toolkits": (
        "cuda_releases",
        "minor_version_floors",
        "minor_version_limitations",
        "forward_compat_gpus",
        "forward_compat_packages",
    ),
    "driver-branches": ("driver_branches",),
    "architectures": ("architectures", "gpu_products"),
    "cudnn": ("cudnn",),
    "pytorch": ("torch_releases",),
}


def count_rows(tables: CompatTables) -> dict[str, int]:
    return {name: sum(len(getattr(tables, f)) for f in fields) for name, fields in SECTIONS.items()}


def run(inv: Invocation) -> int:
    return show(inv) if inv.args.where == "tables show" else validate(inv)


def validate(inv: Invocation) -> int:
    """Validate the shipped tables, or DIR's tables merged over them; exit 2 on the first error."""
    directory = inv.args.path("directory")
    tables = validate_dir(str(directory)) if directory is not None else load_tables()
    where = str(directory) if directory is not None else str(shipped_dir())
    counts = count_rows(tables)
    lines = [safe_line(f"ok: {where}"), *(f"  {name}: {counts[name]} rows" for name in TABLE_NAMES)]
    emit("\n".join(lines) + "\n")
    return exitcodes.HEALTHY


def show(inv: Invocation) -> int:
    """Print one table as envdoctor loaded it (after ENVDOCTOR_TABLES and --tables)."""
    args = inv.args
    name = args.text("name") or ""
    key = name.replace("_", "-").removesuffix(".yaml")
    if key not in SECTIONS:
        raise EnvdoctorError(f"no table {name!r}", hint="tables: " + ", ".join(TABLE_NAMES))
    tables_dir = args.path("tables")
    tables = load_tables(str(tables_dir) if tables_dir else None, inv.host.env())
    if args.flag("json"):
        from envdoctor.compat.tables_json import table_json

        emit(json_document(table_json(key, tables, SECTIONS[key])))
    else:
        emit(safe_text(render(key, tables)) + "\n")
    return exitcodes.HEALTHY


def render(key: str, tables: CompatTables) -> str:
    """A compact text view of one table, one line per row."""
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
            for v in rel.variants:
                flags = " experimental" if v.experimental else ""
                flags += " (unconfirmed)" if not v.confirmed else ""
                lines.append(
                    f"  {v.name:<6} CUDA {v.cuda:<5} cuDNN {v.cudnn or '?':<10} NCCL "
                    f"{v.nccl or '?':<7} "
                    f"arch {v.arch_spec}{flags}"
                )
                lines.append(f"         {v.index_url}")
    return "\n".join(lines)
