"""Message catalogs: what each program of the GPU stack can print, one YAML file per emitter.

A catalog lists an emitter's messages from its own source, headers or documentation (the Xid
codes of NVIDIA's catalog, the ``cudaError_t`` values and their strings …), each with the
source it was taken from, and says for each one how ``explain`` treats it: ``covered_by`` names
the signature that matches a line holding the message, ``not_matched`` says why no signature
does (a success code, a message no user pastes, one that names no cause). Every entry has one
of the two; ``tests/kb/test_catalogs.py`` prints the coverage of each catalog and runs every
covered entry through ``explain`` in the line forms the catalog's ``lines`` give.

File layout (``schema: 1``)::

    emitter: CUDA runtime API (cudaError_t)      # who prints these messages
    source: https://…                            # where an entry's facts come from, by default
    case_varies: true                            # the emitter's case differs across releases
    lines: ['RuntimeError: CUDA error: {message}']   # real forms the message appears in
    entries:
      - code: 2                                  # the emitter's number (or name) for it
        name: cudaErrorMemoryAllocation          # the symbol, where there is one
        message: out of memory                   # the text the emitter prints
        wordings: ['…']                          # optional: its text in other releases
        source: https://…                        # optional: this entry's own source
        covered_by: cuda.out-of-memory           # or: not_matched: <the reason>
        fatal: true                              # optional, for log lines: does it end the run?
        cut: 'out of'                            # optional: the message cut where a paste may
                                                 # end; still matched by covered_by

A catalog may have keys of its own (the Xid catalog's resolution buckets): its typed reader
(``envdoctor.catalogs.xid``) reads them, and this reader is told to accept them.

This package sits below ``rules`` and ``kb`` so that both read the same files; it imports only
the YAML reader, and PyYAML only when a catalog is read.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envdoctor.errors import EnvdoctorError

if TYPE_CHECKING:  # check's probe tier goes without pathlib and importlib.resources
    from pathlib import Path

    from envdoctor.yamlsource import Map, Node, Reader

    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:  # pragma: no cover (Python 3.10)
        from importlib.abc import Traversable

SCHEMA_VERSION = 1

# The shipped catalogs, by name (the file is NAME.yaml in this package).
CATALOGS = (
    "xid",
    "cuda-runtime",
    "cuda-driver",
    "nvml",
    "nvidia-smi",
    "cublas",
    "cudnn",
    "nccl",
    "nccl-warn",
    "torch",
    "nvrm",
    "fabric-manager",
    "container",
    "nvidia-ctk",
    "apptainer",
    "wsl",
    "jetson",
    "bitsandbytes",
    "flash-attn",
    "xformers",
    "transformers",
    "triton",
    "vllm",
    "ggml",
    "ollama",
    "torchvision",
    "extension-builds",
    "pip",
    "uv",
    "conda",
    "nvidia-installer",
    "linux-packages",
    "cuda-toolchain",
    "cmake-cuda",
    "windows-dlls",
    "tensorflow",
    "jax",
    "onnxruntime",
    "cupy",
    "numba",
    "ray",
    "paddle",
    "lightning",
    "ffmpeg",
    "slurm",
    "tensorrt",
    "k8s-device-plugin",
    "gpu-operator",
    "deepspeed",
    "ultralytics",
    "accelerate",
    "ctranslate2",
    "sglang",
    "dcgm",
)

_TOP_REQUIRED = ("schema", "emitter", "source", "lines", "entries")
_TOP_OPTIONAL = ("case_varies",)
_ENTRY_REQUIRED = ("code",)
_ENTRY_OPTIONAL = (
    "name",
    "message",
    "wordings",
    "source",
    "covered_by",
    "not_matched",
    "releases",
    "fatal",
    "cut",
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of an emitter and how ``explain`` treats it."""

    code: str  # the emitter's number or name for it, as text ("79", "cudaErrorInvalidValue")
    name: str  # the symbol ("" where the emitter has none)
    message: str  # the text it prints ("" where it prints only the code)
    wordings: tuple[str, ...]  # the same code's text in other releases or bindings
    source: str
    covered_by: str  # a signature id, or ""
    not_matched: str  # why no signature matches it, or ""
    releases: str  # the releases that print it, where not all of them do ("" otherwise)
    fatal: bool | None  # a log line's catalog: whether the program fails after it (None: n/a)
    cut: str  # the message cut short where a terminal or a paste may cut it ("" when not given)
    at: str  # file:line of the entry


@dataclass(frozen=True, slots=True)
class Catalog:
    """One emitter's catalog."""

    name: str
    emitter: str
    source: str
    case_varies: bool
    lines: tuple[str, ...]  # templates: {code}, {name} and {message} are filled in
    entries: tuple[Entry, ...]


def catalog_path(name: str) -> Traversable:
    """The shipped file of catalog ``name``."""
    from importlib import resources  # loads shutil: only when a catalog is read

    return resources.files("envdoctor.catalogs") / f"{name}.yaml"


def where(path: Traversable | Path) -> str:
    """The file's name as errors give it: from ``envdoctor/`` on."""
    text = str(path)
    marker = "envdoctor/catalogs/"
    return text[text.index(marker) :] if marker in text else text


def read_root(path: Traversable | Path, reader: Reader, extra: tuple[str, ...] = ()) -> Map:
    """The file's top mapping, its keys checked (``extra``: the catalog's own top keys)."""
    from envdoctor.yamlsource import load

    name = where(path)
    if not path.is_file():
        raise EnvdoctorError("file not found", where=name)
    top = reader.mapping(load(path, where=name), "the file")
    reader.keys(top, "the file", required=_TOP_REQUIRED, optional=(*_TOP_OPTIONAL, *extra))
    if reader.integer(top.items["schema"], "schema") != SCHEMA_VERSION:
        raise reader.error(top.items["schema"], f"schema: `schema: {SCHEMA_VERSION}` is required")
    return top


def read_catalog(path: Traversable | Path, *, extra_keys: tuple[str, ...] = ()) -> Catalog:
    """Read and check one catalog file; ``extra_keys``: the entry keys its typed reader owns."""
    from envdoctor.yamlsource import Reader

    reader = Reader(where(path))
    top = read_root(path, reader, extra=("buckets",) if extra_keys else ())
    default_source = reader.text(top.items["source"], "source")
    lines = reader.text_list(top.items["lines"], "lines", non_empty=True)
    for node, template in zip(reader.sequence(top.items["lines"], "lines"), lines, strict=True):
        if "{message}" not in template and "{name}" not in template:
            raise reader.error(node, "lines: a line form holds {message} or {name}")
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for node in reader.sequence(top.items["entries"], "entries"):
        entry = _entry(node, reader, default_source, extra_keys)
        if entry.code in seen:
            raise EnvdoctorError(
                f"code: duplicate entry {entry.code!r} (first at {seen[entry.code]})",
                where=entry.at,
            )
        seen[entry.code] = entry.at
        entries.append(entry)
    if not entries:
        raise reader.error(top.items["entries"], "entries: expected a non-empty list")
    name = os.path.basename(str(path)).removesuffix(".yaml")
    return Catalog(
        name=name,
        emitter=reader.text(top.items["emitter"], "emitter"),
        source=default_source,
        case_varies=reader.flag(top, "case_varies", "the file", False),
        lines=lines,
        entries=tuple(entries),
    )


def _entry(node: Node, reader: Reader, default_source: str, extra: tuple[str, ...]) -> Entry:
    item = reader.mapping(node, "entries")
    reader.keys(item, "entries", required=_ENTRY_REQUIRED, optional=(*_ENTRY_OPTIONAL, *extra))

    def text(key: str) -> str:
        return reader.optional_text(item, key, "entries") or ""

    covered_by, not_matched = text("covered_by"), text("not_matched")
    if bool(covered_by) == bool(not_matched):
        raise reader.error(
            item, "entries: each entry has exactly one of covered_by (a signature) or not_matched"
        )
    message = text("message") or text("description")  # the Xid catalog calls it description
    if not message and not text("name"):
        raise reader.error(item, "entries: an entry has a message or a name")
    if text("cut") and not message.startswith(text("cut")):
        raise reader.error(item, "entries: cut is the message's beginning, cut short")
    return Entry(
        code=reader.text(item.items["code"], "entries.code"),
        name=text("name") or text("mnemonic"),  # the Xid catalog: NVIDIA's mnemonic
        message=message,
        wordings=reader.text_list(item.items["wordings"], "entries.wordings")
        if "wordings" in item.items
        else (),
        source=text("source") or default_source,
        covered_by=covered_by,
        not_matched=not_matched,
        releases=text("releases"),
        fatal=reader.optional(item, "fatal", "entries", reader.boolean),
        cut=text("cut"),
        at=item.at(),
    )


def shipped_catalogs() -> tuple[Catalog, ...]:
    """Every shipped catalog, read and checked."""
    from envdoctor.catalogs.xid import XID_ENTRY_KEYS

    own = {"xid": XID_ENTRY_KEYS}
    return tuple(read_catalog(catalog_path(n), extra_keys=own.get(n, ())) for n in CATALOGS)
