"""Find, parse, validate and merge the YAML compatibility tables.

The shipped tables live in ``compat_tables/`` (inside the wheel as ``envdoctor/compat_tables``).
Directories named by ``ENVDOCTOR_TABLES`` (``os.pathsep``-separated) and then ``--tables DIR``
extend or override them: a row whose key matches a shipped row replaces it, other rows are
added, and ``replace: true`` in a file replaces the shipped sections it contains. A malformed
or inconsistent table is an ``EnvdoctorError`` naming file and line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import Version

from envdoctor import yamlsource as y
from envdoctor.compat.index import index_url_problem
from envdoctor.compat.locations import extra_dirs, shipped_dir, table_files
from envdoctor.compat.tables import (
    DEFAULT_INDEX_URL,
    TABLE_NAMES,
    Architecture,
    CompatTables,
    CudaRelease,
    CudnnPackage,
    CudnnRelease,
    DriverBranch,
    ForwardCompatGpuClass,
    ForwardCompatPackage,
    GpuProduct,
    MinorVersionFloor,
    MinorVersionLimitation,
    TorchCompanions,
    TorchRelease,
    TorchVariant,
)
from envdoctor.compat.versions import (
    expand_torch_arch_list,
    is_version,
    parse_cc,
    parse_cuda,
    parse_driver,
)
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import quoted
from envdoctor.yamlsource import Reader

SCHEMA_VERSION = 1
_HEADER_KEYS = {"schema", "table", "description", "sources", "replace"}
T = TypeVar("T")


# --- where the tables are --------------------------------------------------------------------


def load_tables(extra_dir: str | None = None, env: Mapping[str, str] | None = None) -> CompatTables:
    """The shipped tables, extended by ``ENVDOCTOR_TABLES`` (from ``env``) and ``extra_dir``,
    read and checked now (``store.cached_tables`` reuses an earlier run's)."""
    return load_dirs(shipped_dir(), extra_dirs(extra_dir, env))


@functools.lru_cache(maxsize=8)
def load_dirs(base: Path, extras: tuple[Path, ...]) -> CompatTables:
    """The tables of ``base`` (all of them) merged with those of ``extras``, in order."""
    sections = _read_dir(base, require_all=True)
    for extra in extras:
        sections = _merge(sections, _read_dir(extra, require_all=False))
    tables = _build(sections, origins=(str(base), *(str(e) for e in extras)))
    check_consistency(tables)
    return tables


def validate_dir(path: str) -> CompatTables:
    """Validate a directory of tables on its own terms, merged over the shipped tables."""
    return load_dirs(shipped_dir(), extra_dirs(path, None))


# --- reading one directory -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sections:
    """Parsed rows per section name, plus which sections a file asked to replace wholesale."""

    rows: dict[str, tuple[Any, ...]]
    replaced: frozenset[str] = frozenset()


_SECTION_KEYS: dict[str, Callable[[Any], object]] = {
    "cuda_releases": lambda r: r.cuda,
    "minor_version_floors": lambda r: r.major,
    "minor_version_limitations": lambda r: r.feature,
    "forward_compat_gpus": lambda r: r.gpus,
    "forward_compat_packages": lambda r: r.package,
    "driver_branches": lambda r: r.branch,
    "architectures": lambda r: parse_cc(r.cc),
    "gpu_products": lambda r: r.product,
    "cudnn": lambda r: str(SpecifierSet(r.cudnn)),
    "torch_releases": lambda r: r.torch,
}


def _read_dir(path: Path, *, require_all: bool) -> _Sections:
    files = table_files(path)
    if not files and not require_all:
        raise EnvdoctorError("no *.yaml tables in this directory", where=str(path))
    merged = _Sections(rows={})
    seen: set[str] = set()
    for file in files:
        table, sections = _read_file(file)
        seen.add(table)
        merged = _merge(merged, sections)
    if require_all:
        missing = [t for t in TABLE_NAMES if t not in seen]
        if missing:
            raise EnvdoctorError(f"tables missing: {', '.join(missing)}", where=str(path))
    return merged


def _merge(base: _Sections, over: _Sections) -> _Sections:
    rows = dict(base.rows)
    for section, new_rows in over.rows.items():
        if section in over.replaced or section not in rows:
            rows[section] = new_rows
            continue
        key = _SECTION_KEYS[section]
        by_key = {key(r): r for r in rows[section]}
        for row in new_rows:
            by_key[key(row)] = row
        rows[section] = tuple(by_key.values())
    return _Sections(rows=rows, replaced=base.replaced | over.replaced)


def _read_file(file: Path) -> tuple[str, _Sections]:
    where = str(file)
    root = y.load(file)
    ctx = _Ctx(where)
    top = ctx.mapping(root, "the file")
    schema = ctx.integer(ctx.required(top, "schema", "the file"), "schema")
    if schema != SCHEMA_VERSION:
        raise ctx.error(
            top.items["schema"],
            f"schema {schema} is not supported (this envdoctor reads {SCHEMA_VERSION})",
        )
    table = ctx.text(ctx.required(top, "table", "the file"), "table")
    if table not in _PARSERS:
        raise ctx.error(
            top.items["table"], f"unknown table {table!r} (known: {', '.join(TABLE_NAMES)})"
        )
    if "description" in top.items:
        ctx.text(top.items["description"], "description")
    if "sources" in top.items:
        ctx.sources = _parse_sources(ctx, top.items["sources"])
    replace_all = ctx.boolean(top.items["replace"], "replace") if "replace" in top.items else False
    body = {k: v for k, v in top.items.items() if k not in _HEADER_KEYS}
    sections = _PARSERS[table](ctx, top, body)
    replaced = frozenset(sections) if replace_all else frozenset()
    return table, _Sections(rows=sections, replaced=replaced)


# --- the schema helpers ----------------------------------------------------------------------


class _Ctx(Reader):
    """The shared reader plus the tables' own vocabulary: driver, CUDA and other versions,
    version ranges, and the ``source:`` of every row (a name from the file's ``sources:``)."""

    def __init__(self, file: str) -> None:
        super().__init__(file)
        self.sources: dict[str, str] = {}

    def missing(self, node: y.Map, key: str, what: str) -> EnvdoctorError:
        if key == "source":
            return self.error(node, f"{what}: every row needs a source (title and URL)")
        return super().missing(node, key, what)

    def confirmation(self, node: y.Map, what: str) -> dict[str, Any]:
        """``confirmed`` and ``missing``: a row no readable source confirmed says what is missing."""
        confirmed = self.flag(node, "confirmed", what, True)
        missing = self.optional_text(node, "missing", what) or ""
        if not confirmed and not missing:
            raise self.error(
                node,
                f"{what}: a row marked confirmed: false needs missing: (what no readable source "
                "confirmed)",
            )
        if confirmed and missing:
            raise self.error(
                node.items["missing"], f"{what}: missing: is only for rows marked confirmed: false"
            )
        return {"confirmed": confirmed, "missing": missing}

    def driver(self, node: y.Node, what: str) -> str:
        value = self.text(node, what)
        parsed = parse_driver(value)
        if parsed is None or len(parsed) < 2:
            raise self.error(
                node, f"{what}: {quoted(value)} is not a driver version like 580.65.06"
            )
        return value

    def optional_driver(self, node: y.Map, key: str, what: str) -> str | None:
        if key not in node.items or self.scalar(node.items[key], what).kind == "null":
            return None
        return self.driver(node.items[key], f"{what}.{key}")

    def cuda(self, node: y.Node, what: str, *, full: bool = False) -> str:
        value = self.text(node, what)
        ok = is_version(value) and value.count(".") >= 1 and (not full or value.count(".") <= 2)
        if not ok or parse_cuda(value) is None:
            raise self.error(
                node, f"{what}: {quoted(value)} is not a CUDA version like 12.8 or 12.8.1"
            )
        return value

    def cc(self, node: y.Node, what: str) -> str:
        value = self.text(node, what)
        if parse_cc(value) is None:
            raise self.error(node, f"{what}: {quoted(value)} is not a compute capability like 9.0")
        return value

    def version(self, node: y.Node, what: str) -> str:
        value = self.text(node, what)
        if not is_version(value):
            raise self.error(node, f"{what}: {quoted(value)} is not a version like 2.11.0")
        return value

    def interval(self, node: y.Node, what: str) -> str:
        """A specifier written as a half-open range: ``>=A,<B`` or ``==A`` (checked for overlap)."""
        value = self.text(node, what)
        try:
            spec = SpecifierSet(value)
        except InvalidSpecifier:
            raise self.error(node, f"{what}: {quoted(value)} is not a version specifier") from None
        if _interval(spec) is None:
            raise self.error(
                node,
                f"{what}: {quoted(value)} must be a range '>=A,<B' (or '==A') of plain versions",
            )
        return value

    def source(self, node: y.Map, what: str) -> tuple[str, ...]:
        if "source" not in node.items:
            raise self.error(node, f"{what}: every row needs a source")
        raw = node.items["source"]
        names = (
            self.text_list(raw, f"{what}.source")
            if isinstance(raw, y.Seq)
            else (self.text(raw, f"{what}.source"),)
        )
        if not names:
            raise self.error(raw, f"{what}: every row needs a source")
        out = []
        for name in names:
            if name in self.sources:
                out.append(self.sources[name])
            elif "://" in name or "/" in name:
                out.append(name)  # a literal URL or repo/path
            else:
                raise self.error(
                    raw,
                    f"{what}: source {quoted(name)} is neither in this file's sources: nor a URL",
                )
        return tuple(out)


def _parse_sources(ctx: _Ctx, node: y.Node) -> dict[str, str]:
    sources: dict[str, str] = {}
    for name, entry in ctx.mapping(node, "sources").items.items():
        what = f"sources.{name}"
        m = ctx.mapping(entry, what)
        ctx.keys(m, what, required=("title",), optional=("url", "repo", "path"))
        title = ctx.text(m.items["title"], f"{what}.title")
        url = ctx.optional_text(m, "url", what)
        repo = ctx.optional_text(m, "repo", what)
        path = ctx.optional_text(m, "path", what)
        if url:
            if not url.startswith(("https://", "http://")):
                raise ctx.error(m.items["url"], f"{what}.url: {url!r} is not an http(s) URL")
            sources[name] = f"{title}: {url}"
        elif repo and path:
            sources[name] = f"{title}: {repo}/{path}"
        else:
            raise ctx.error(m, f"{what}: a source needs a url, or a repo and a path")
    return sources


def _interval(spec: SpecifierSet) -> tuple[Version, Version | None] | None:
    """``>=A,<B`` → ``(A, B)``; ``==A`` → ``(A, None)`` meaning exactly A. None otherwise."""
    items: list[Specifier] = [s for s in spec if isinstance(s, Specifier)]
    ops = sorted(s.operator for s in items)
    if any(not is_version(s.version) for s in items):
        return None
    if ops == ["=="] and len(items) == 1:
        return Version(items[0].version), None
    if ops == ["<", ">="]:
        low = Version(next(s.version for s in items if s.operator == ">="))
        high = Version(next(s.version for s in items if s.operator == "<"))
        return (low, high) if low < high else None
    return None


def intervals_overlap(a: str, b: str) -> bool:
    """Whether two ``>=A,<B`` / ``==A`` specifiers share a version."""
    ia, ib = _interval(SpecifierSet(a)), _interval(SpecifierSet(b))
    if ia is None or ib is None:
        raise ValueError("not an interval specifier")

    def bounds(i: tuple[Version, Version | None]) -> tuple[Version, Version, bool]:
        low, high = i
        return (low, low, True) if high is None else (low, high, False)

    a_lo, a_hi, a_closed = bounds(ia)
    b_lo, b_hi, b_closed = bounds(ib)
    a_below_b = a_hi < b_lo or (a_hi == b_lo and not (a_closed and b_lo == a_hi))
    b_below_a = b_hi < a_lo or (b_hi == a_lo and not (b_closed and a_lo == b_hi))
    return not (a_below_b or b_below_a)


# --- the five tables -------------------------------------------------------------------------


def _rows(ctx: _Ctx, body: dict[str, y.Node], key: str, what: str) -> tuple[y.Map, ...]:
    if key not in body:
        return ()
    return tuple(ctx.mapping(item, f"{what} row") for item in ctx.sequence(body[key], key))


def _only(ctx: _Ctx, top: y.Map, body: dict[str, y.Node], allowed: tuple[str, ...]) -> None:
    known = (*sorted(_HEADER_KEYS), *allowed)
    for key in body:
        if key not in allowed:
            raise ctx.error(top, y.unknown_key("the file", key, known), line=top.key_lines[key])


def _parse_cuda_toolkits(
    ctx: _Ctx, top: y.Map, body: dict[str, y.Node]
) -> dict[str, tuple[Any, ...]]:
    _only(
        ctx,
        top,
        body,
        (
            "releases",
            "minor_version_compatibility",
            "minor_version_limitations",
            "forward_compatibility",
        ),
    )
    out: dict[str, tuple[Any, ...]] = {}
    if "releases" in body:
        releases = []
        for row in _rows(ctx, body, "releases", "releases"):
            what = "releases"
            ctx.keys(
                row,
                what,
                required=("cuda", "label", "source"),
                optional=("linux", "windows", "confirmed", "missing", "note"),
            )
            cuda = ctx.cuda(row.items["cuda"], f"{what}.cuda", full=True)
            releases.append(
                CudaRelease(
                    cuda=cuda,
                    label=ctx.text(row.items["label"], f"{what}.label"),
                    linux_driver=ctx.optional_driver(row, "linux", what),
                    windows_driver=ctx.optional_driver(row, "windows", what),
                    source=ctx.source(row, f"{what} {cuda}"),
                    **ctx.confirmation(row, what),
                    note=ctx.optional_text(row, "note", what) or "",
                    where=ctx.where(row),
                )
            )
        out["cuda_releases"] = _unique(
            ctx, releases, _SECTION_KEYS["cuda_releases"], "CUDA release"
        )
    if "minor_version_compatibility" in body:
        floors = []
        for row in _rows(ctx, body, "minor_version_compatibility", "minor_version_compatibility"):
            what = "minor_version_compatibility"
            ctx.keys(row, what, required=("major", "linux", "source"), optional=("windows",))
            major = ctx.integer(row.items["major"], f"{what}.major")
            if major < 11:
                raise ctx.error(row, f"{what}: minor-version compatibility starts with CUDA 11")
            floors.append(
                MinorVersionFloor(
                    major=major,
                    linux_driver=ctx.driver(row.items["linux"], f"{what}.linux"),
                    windows_driver=ctx.optional_driver(row, "windows", what),
                    source=ctx.source(row, what),
                    where=ctx.where(row),
                )
            )
        out["minor_version_floors"] = _unique(
            ctx, floors, _SECTION_KEYS["minor_version_floors"], "major"
        )
    if "minor_version_limitations" in body:
        limits = []
        for row in _rows(ctx, body, "minor_version_limitations", "minor_version_limitations"):
            what = "minor_version_limitations"
            ctx.keys(row, what, required=("feature", "symptom", "source"), optional=())
            limits.append(
                MinorVersionLimitation(
                    feature=ctx.text(row.items["feature"], f"{what}.feature"),
                    symptom=ctx.text(row.items["symptom"], f"{what}.symptom"),
                    source=ctx.source(row, what),
                    where=ctx.where(row),
                )
            )
        out["minor_version_limitations"] = tuple(limits)
    if "forward_compatibility" in body:
        fc = ctx.mapping(body["forward_compatibility"], "forward_compatibility")
        ctx.keys(fc, "forward_compatibility", required=(), optional=("gpu_classes", "packages"))
        classes = []
        for row in _rows(ctx, fc.items, "gpu_classes", "gpu_classes"):
            what = "forward_compatibility.gpu_classes"
            ctx.keys(row, what, required=("gpus", "supported", "source"), optional=("note",))
            classes.append(
                ForwardCompatGpuClass(
                    gpus=ctx.text(row.items["gpus"], f"{what}.gpus"),
                    supported=ctx.boolean(row.items["supported"], f"{what}.supported"),
                    source=ctx.source(row, what),
                    note=ctx.optional_text(row, "note", what) or "",
                    where=ctx.where(row),
                )
            )
        packages = []
        for row in _rows(ctx, fc.items, "packages", "packages"):
            what = "forward_compatibility.packages"
            ctx.keys(
                row, what, required=("package", "cuda", "base_branches", "source"), optional=()
            )
            packages.append(
                ForwardCompatPackage(
                    package=ctx.text(row.items["package"], f"{what}.package"),
                    cuda=ctx.cuda(row.items["cuda"], f"{what}.cuda"),
                    base_branches=tuple(
                        ctx.integer(b, f"{what}.base_branches")
                        for b in ctx.sequence(row.items["base_branches"], f"{what}.base_branches")
                    ),
                    source=ctx.source(row, what),
                    where=ctx.where(row),
                )
            )
        if "gpu_classes" in fc.items:
            out["forward_compat_gpus"] = _unique(
                ctx, classes, _SECTION_KEYS["forward_compat_gpus"], "GPU class"
            )
        if "packages" in fc.items:
            out["forward_compat_packages"] = _unique(
                ctx, packages, _SECTION_KEYS["forward_compat_packages"], "package"
            )
    return out


def _parse_driver_branches(
    ctx: _Ctx, top: y.Map, body: dict[str, y.Node]
) -> dict[str, tuple[Any, ...]]:
    _only(ctx, top, body, ("branches",))
    rows = []
    for row in _rows(ctx, body, "branches", "branches"):
        what = "branches"
        ctx.keys(
            row,
            what,
            required=("branch", "cuda", "example", "source"),
            optional=("kind", "confirmed", "missing", "note"),
        )
        branch = ctx.integer(row.items["branch"], f"{what}.branch")
        example = (
            ctx.driver(row.items["example"], f"{what}.example")
            if _looks_like_driver(row.items["example"])
            else ctx.text(row.items["example"], f"{what}.example")
        )
        if (
            _looks_like_driver(row.items["example"])
            and (parse_driver(example) or (0,))[0] != branch
        ):
            raise ctx.error(
                row.items["example"], f"{what}: example {example} is not on branch {branch}"
            )
        rows.append(
            DriverBranch(
                branch=branch,
                cuda=ctx.cuda(row.items["cuda"], f"{what}.cuda"),
                example=example,
                kind=ctx.optional_text(row, "kind", what) or "",
                source=ctx.source(row, f"{what} {branch}"),
                **ctx.confirmation(row, what),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
            )
        )
    return {"driver_branches": _unique(ctx, rows, _SECTION_KEYS["driver_branches"], "branch")}


def _looks_like_driver(node: y.Node) -> bool:
    return isinstance(node, y.Scalar) and parse_driver(node.text) is not None


_MODULES = ("open", "proprietary", "any")
_PLATFORMS = ("discrete", "jetson")


def _parse_architectures(
    ctx: _Ctx, top: y.Map, body: dict[str, y.Node]
) -> dict[str, tuple[Any, ...]]:
    _only(ctx, top, body, ("architectures", "products"))
    rows = []
    for row in _rows(ctx, body, "architectures", "architectures"):
        what = "architectures"
        ctx.keys(
            row,
            what,
            required=("cc", "arch", "gpus", "source"),
            optional=(
                "platform",
                "first_cuda",
                "last_cuda",
                "first_driver",
                "last_driver_branch",
                "kernel_modules",
                "confirmed",
                "missing",
                "note",
            ),
        )
        cc = ctx.cc(row.items["cc"], f"{what}.cc")
        platform = ctx.optional_text(row, "platform", what) or "discrete"
        if platform not in _PLATFORMS:
            raise ctx.error(
                row.items["platform"], f"{what}.platform: one of {', '.join(_PLATFORMS)}"
            )
        modules = _kernel_modules(ctx, row, what)
        first = ctx.optional(row, "first_cuda", what, ctx.cuda)
        last = ctx.optional(row, "last_cuda", what, ctx.cuda)
        if first and last and (parse_cuda(first) or (0, 0)) > (parse_cuda(last) or (0, 0)):
            raise ctx.error(row, f"{what} {cc}: first_cuda {first} is after last_cuda {last}")
        rows.append(
            Architecture(
                cc=cc,
                arch=ctx.text(row.items["arch"], f"{what}.arch"),
                gpus=ctx.text_list(row.items["gpus"], f"{what}.gpus"),
                platform=platform,
                first_cuda=first,
                last_cuda=last,
                first_driver=ctx.optional_driver(row, "first_driver", what),
                last_driver_branch=ctx.optional(row, "last_driver_branch", what, ctx.integer),
                kernel_modules=modules,
                source=ctx.source(row, f"{what} {cc}"),
                **ctx.confirmation(row, what),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
            )
        )
    out: dict[str, tuple[Any, ...]] = {}
    if "architectures" in body:
        out["architectures"] = _unique(
            ctx, rows, _SECTION_KEYS["architectures"], "compute capability"
        )
    if "products" in body:
        out["gpu_products"] = _parse_products(ctx, body)
    return out


def _kernel_modules(ctx: _Ctx, row: y.Map, what: str) -> str:
    modules = ctx.optional_text(row, "kernel_modules", what) or ""
    if modules and modules not in _MODULES:
        raise ctx.error(
            row.items["kernel_modules"], f"{what}.kernel_modules: one of {', '.join(_MODULES)}"
        )
    return modules


def _parse_products(ctx: _Ctx, body: dict[str, y.Node]) -> tuple[Any, ...]:
    """Per-product overrides of an architecture row, matched on the GPU name NVML reports."""
    rows = []
    for row in _rows(ctx, body, "products", "products"):
        what = "products"
        ctx.keys(
            row,
            what,
            required=("product", "cc", "names", "source"),
            optional=("kernel_modules", "first_driver", "note"),
        )
        product = ctx.text(row.items["product"], f"{what}.product")
        names = ctx.text_list(row.items["names"], f"{what}.names")
        if not names:
            raise ctx.error(row.items["names"], f"{what} {product}: at least one name")
        modules = _kernel_modules(ctx, row, what)
        rows.append(
            GpuProduct(
                product=product,
                cc=ctx.cc(row.items["cc"], f"{what}.cc"),
                names=names,
                kernel_modules=modules,
                first_driver=ctx.optional_driver(row, "first_driver", what),
                source=ctx.source(row, f"{what} {product}"),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
            )
        )
    return _unique(ctx, rows, _SECTION_KEYS["gpu_products"], "product")


def _parse_cudnn(ctx: _Ctx, top: y.Map, body: dict[str, y.Node]) -> dict[str, tuple[Any, ...]]:
    _only(ctx, top, body, ("releases",))
    rows = []
    for row in _rows(ctx, body, "releases", "releases"):
        what = "cudnn releases"
        ctx.keys(
            row,
            what,
            required=("cudnn", "packages", "source"),
            optional=("min_cc", "max_cc", "confirmed", "missing", "note"),
        )
        cudnn = ctx.interval(row.items["cudnn"], f"{what}.cudnn")
        packages = []
        for item in ctx.sequence(row.items["packages"], f"{what}.packages"):
            pkg = ctx.mapping(item, f"{what}.packages")
            ctx.keys(pkg, f"{what}.packages", required=("cuda",), optional=("linux", "windows"))
            packages.append(
                (
                    pkg,
                    CudnnPackage(
                        cuda=ctx.interval(pkg.items["cuda"], f"{what}.packages.cuda"),
                        linux_driver=ctx.optional_driver(pkg, "linux", f"{what}.packages"),
                        windows_driver=ctx.optional_driver(pkg, "windows", f"{what}.packages"),
                    ),
                )
            )
        if not packages:
            raise ctx.error(row.items["packages"], f"{what} {cudnn}: at least one package")
        for i, (node_a, a) in enumerate(packages):
            for _node_b, b in packages[i + 1 :]:
                if intervals_overlap(a.cuda, b.cuda):
                    raise ctx.error(
                        node_a, f"{what} {cudnn}: packages {a.cuda} and {b.cuda} overlap"
                    )
        min_cc = ctx.optional(row, "min_cc", what, ctx.cc)
        max_cc = ctx.optional(row, "max_cc", what, ctx.cc)
        rows.append(
            CudnnRelease(
                cudnn=cudnn,
                packages=tuple(p for _, p in packages),
                min_cc=min_cc,
                max_cc=max_cc,
                source=ctx.source(row, f"{what} {cudnn}"),
                **ctx.confirmation(row, what),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
            )
        )
    return {"cudnn": _unique(ctx, rows, _SECTION_KEYS["cudnn"], "cuDNN range")}


def _parse_pytorch(ctx: _Ctx, top: y.Map, body: dict[str, y.Node]) -> dict[str, tuple[Any, ...]]:
    _only(ctx, top, body, ("releases", "index_url"))
    template = (
        ctx.text(body["index_url"], "index_url") if "index_url" in body else DEFAULT_INDEX_URL
    )
    if "{variant}" not in template or index_url_problem(template.replace("{variant}", "cu130")):
        why = index_url_problem(template.replace("{variant}", "cu130"))
        raise ctx.error(
            body["index_url"],
            "index_url: a plain https URL containing {variant}" + (f" ({why})" if why else ""),
        )
    rows = []
    for row in _rows(ctx, body, "releases", "releases"):
        what = "pytorch releases"
        ctx.keys(
            row,
            what,
            required=("torch", "latest", "python", "variants", "source"),
            optional=("default", "note", "companions"),
        )
        torch = ctx.version(row.items["torch"], f"{what}.torch")
        if torch.count(".") != 1:
            raise ctx.error(
                row.items["torch"], f"{what}.torch: a feature release like 2.11, got {torch!r}"
            )
        latest = ctx.version(row.items["latest"], f"{what}.latest")
        if not latest.startswith(torch + "."):
            raise ctx.error(
                row.items["latest"], f"{what}.latest: {latest} is not a {torch}.x release"
            )
        python = ctx.interval(row.items["python"], f"{what}.python")
        variants = [
            _parse_variant(ctx, ctx.mapping(item, f"{what} {torch} variant"), torch, template)
            for item in ctx.sequence(row.items["variants"], f"{what}.variants")
        ]
        if not variants:
            raise ctx.error(row.items["variants"], f"{what} {torch}: at least one variant")
        _unique(ctx, variants, lambda v: v.name, f"torch {torch} variant")
        default = ctx.optional_text(row, "default", what)
        if default and default not in {v.name for v in variants}:
            raise ctx.error(
                row.items["default"],
                f"{what} {torch}: default {default!r} is not one of its variants",
            )
        companions = (
            _parse_companions(ctx, row.items["companions"], torch, latest)
            if "companions" in row.items
            else ()
        )
        rows.append(
            TorchRelease(
                torch=torch,
                latest=latest,
                python=python,
                variants=tuple(variants),
                default=default,
                source=ctx.source(row, f"{what} {torch}"),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
                companions=companions,
            )
        )
    return {"torch_releases": _unique(ctx, rows, _SECTION_KEYS["torch_releases"], "torch release")}


def _parse_companions(
    ctx: _Ctx, node: y.Node, torch: str, latest: str
) -> tuple[TorchCompanions, ...]:
    """``companions:`` of a torch release: per patch release (``2.13.0``) the torchvision and
    torchaudio released with it, each row with its source; the latest patch must have one."""
    what = f"torch {torch} companions"
    rows = []
    for item in ctx.sequence(node, f"{what}"):
        row = ctx.mapping(item, what)
        ctx.keys(
            row, what, required=("torch", "torchvision", "torchaudio", "source"), optional=("note",)
        )
        patch = ctx.version(row.items["torch"], f"{what}.torch")
        if patch.count(".") != 2 or not patch.startswith(torch + "."):
            raise ctx.error(
                row.items["torch"], f"{what}.torch: {patch!r} is not a {torch}.x patch release"
            )
        if Version(patch) > Version(latest):
            raise ctx.error(
                row.items["torch"], f"{what}.torch: {patch} is newer than latest: {latest}"
            )
        versions = {}
        for name in ("torchvision", "torchaudio"):
            value = ctx.version(row.items[name], f"{what}.{name}")
            if "+" in value or value.count(".") != 2:
                raise ctx.error(
                    row.items[name],
                    f"{what}.{name}: {value!r} is not a release like 0.28.0 (no +cuXYZ tag: "
                    "the variant is the index's)",
                )
            versions[name] = value
        rows.append(
            TorchCompanions(
                torch=patch,
                torchvision=versions["torchvision"],
                torchaudio=versions["torchaudio"],
                source=ctx.source(row, f"{what} {patch}"),
                note=ctx.optional_text(row, "note", what) or "",
                where=ctx.where(row),
            )
        )
    out = _unique(ctx, rows, lambda c: c.torch, f"{what} row for torch")
    if out and latest not in {c.torch for c in out}:
        raise ctx.error(node, f"{what}: no row for the latest patch release {latest}")
    return out


def _parse_variant(ctx: _Ctx, row: y.Map, torch: str, template: str) -> TorchVariant:
    what = f"torch {torch} variant"
    ctx.keys(
        row,
        what,
        required=("name", "cuda", "arch", "source"),
        optional=("cudnn", "nccl", "index_url", "experimental", "confirmed", "missing", "note"),
    )
    name = ctx.text(row.items["name"], f"{what}.name")
    cuda = ctx.cuda(row.items["cuda"], f"{what}.cuda")
    parsed = parse_cuda(cuda)
    if (
        name.startswith("cu")
        and name[2:].isdigit()
        and parsed
        and name != f"cu{parsed[0]}{parsed[1]}"
    ):
        raise ctx.error(row.items["name"], f"{what}: {name} does not match CUDA {cuda}")
    spec = ctx.text(row.items["arch"], f"{what}.arch")
    arch_list = expand_torch_arch_list(spec)
    if arch_list is None:
        raise ctx.error(
            row.items["arch"],
            f"{what}.arch: {spec!r} is not a TORCH_CUDA_ARCH_LIST like 8.0;9.0+PTX",
        )
    index_url = ctx.optional_text(row, "index_url", what) or template.format(variant=name)
    why = index_url_problem(index_url)
    if why:
        raise ctx.error(row.items.get("index_url"), f"{what}.index_url: a plain https URL ({why})")
    return TorchVariant(
        name=name,
        cuda=cuda,
        index_url=index_url,
        arch_spec=spec,
        arch_list=arch_list,
        cudnn=ctx.optional(row, "cudnn", what, ctx.version),
        nccl=ctx.optional(row, "nccl", what, ctx.version),
        experimental=ctx.flag(row, "experimental", what, False),
        **ctx.confirmation(row, what),
        source=ctx.source(row, f"{what} {name}"),
        note=ctx.optional_text(row, "note", what) or "",
        where=ctx.where(row),
    )


_PARSERS: dict[str, Callable[[_Ctx, y.Map, dict[str, y.Node]], dict[str, tuple[Any, ...]]]] = {
    "cuda-toolkits": _parse_cuda_toolkits,
    "driver-branches": _parse_driver_branches,
    "architectures": _parse_architectures,
    "cudnn": _parse_cudnn,
    "pytorch": _parse_pytorch,
}


def _unique(ctx: _Ctx, rows: list[T], key: Callable[[T], object], what: str) -> tuple[T, ...]:
    seen: dict[object, T] = {}
    for row in rows:
        k = key(row)
        if k in seen:
            first = getattr(seen[k], "where", "")
            raise EnvdoctorError(
                f"duplicate {what} {k!r} (first at {first})", where=getattr(row, "where", ctx.file)
            )
        seen[k] = row
    return tuple(rows)


# --- building and cross-checking -------------------------------------------------------------


def _build(sections: _Sections, origins: tuple[str, ...]) -> CompatTables:
    rows = sections.rows
    return CompatTables(
        cuda_releases=tuple(sorted(rows.get("cuda_releases", ()), key=lambda r: Version(r.cuda))),
        minor_version_floors=tuple(
            sorted(rows.get("minor_version_floors", ()), key=lambda r: r.major)
        ),
        minor_version_limitations=tuple(rows.get("minor_version_limitations", ())),
        forward_compat_gpus=tuple(rows.get("forward_compat_gpus", ())),
        forward_compat_packages=tuple(rows.get("forward_compat_packages", ())),
        driver_branches=tuple(sorted(rows.get("driver_branches", ()), key=lambda r: r.branch)),
        architectures=tuple(sorted(rows.get("architectures", ()), key=lambda r: r.cc_version)),
        gpu_products=tuple(rows.get("gpu_products", ())),
        cudnn=tuple(rows.get("cudnn", ())),
        torch_releases=tuple(
            sorted(rows.get("torch_releases", ()), key=lambda r: r.release_version)
        ),
        origins=origins,
    )


def check_consistency(tables: CompatTables) -> None:
    """Cross-row and cross-table checks on the merged tables; raises at the offending row."""
    _check_monotonic_drivers(tables)
    _check_branches(tables)
    _check_cudnn_overlap(tables)
    _check_torch_cuda_rows(tables)
    _check_products(tables)


def _check_monotonic_drivers(tables: CompatTables) -> None:
    for windows in (False, True):
        previous: CudaRelease | None = None
        for row in tables.cuda_releases:
            driver = row.windows_driver if windows else row.linux_driver
            if not driver:
                continue
            if previous is not None:
                before = (previous.windows_driver if windows else previous.linux_driver) or ""
                if (parse_driver(driver) or ()) < (parse_driver(before) or ()):
                    os_name = "Windows" if windows else "Linux"
                    raise EnvdoctorError(
                        f"CUDA {row.cuda} needs {os_name} driver {driver}, older than the {before} "
                        f"that the earlier CUDA {previous.cuda} needs (at {previous.where})",
                        where=row.where,
                    )
            previous = row


def _check_branches(tables: CompatTables) -> None:
    previous: DriverBranch | None = None
    for row in tables.driver_branches:
        if previous is not None and (parse_cuda(row.cuda) or (0, 0)) < (
            parse_cuda(previous.cuda) or (0, 0)
        ):
            raise EnvdoctorError(
                f"branch {row.branch} supports CUDA {row.cuda}, less than branch "
                f"{previous.branch}'s "
                f"{previous.cuda} (at {previous.where})",
                where=row.where,
            )
        previous = row


def _check_cudnn_overlap(tables: CompatTables) -> None:
    rows = tables.cudnn
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if intervals_overlap(a.cudnn, b.cudnn):
                later, earlier = (
                    (b, a) if _rank(tables, b.where) >= _rank(tables, a.where) else (a, b)
                )
                raise EnvdoctorError(
                    f"cuDNN ranges {later.cudnn} and {earlier.cudnn} overlap (other at "
                    f"{earlier.where})",
                    where=later.where,
                )


def _rank(tables: CompatTables, where: str) -> int:
    """Which table directory a row came from: later directories override earlier ones."""
    ranks = [
        i for i, origin in enumerate(tables.origins) if where.startswith(origin.rstrip("/") + "/")
    ]
    return max(ranks, default=0)


def _check_torch_cuda_rows(tables: CompatTables) -> None:
    for release in tables.torch_releases:
        for variant in release.variants:
            cuda = variant.cuda_version
            if tables.full_feature_driver(cuda) is None:
                raise EnvdoctorError(
                    f"torch {release.torch} {variant.name}: no cuda-toolkits release row gives a "
                    f"Linux driver for CUDA {variant.cuda}",
                    where=variant.where,
                    hint="add the CUDA release to cuda_toolkits.yaml",
                )


def _check_products(tables: CompatTables) -> None:
    for product in tables.gpu_products:
        if tables.architecture(product.cc) is None:
            raise EnvdoctorError(
                f"product {product.product}: no architectures row for compute capability "
                f"{product.cc}",
                where=product.where,
            )
