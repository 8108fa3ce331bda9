"""The dynamic loader's cache (``/etc/ld.so.cache``), read the way ``ld.so`` reads it.

Reading the file gives what ``ldconfig -p`` prints without starting a process, which the fast
probe cannot afford. The layouts are glibc's (``sysdeps/generic/dl-cache.h``):

- new (the default since glibc 2.32): a 48-byte header ``glibc-ld.so.cache1.1``, then 24-byte
  entries; string offsets count from the header's first byte;
- compat (the default before 2.32, e.g. RHEL 8, Ubuntu 20.04): an old-format table, then a
  complete new-format cache at the next 8-byte boundary, which is the one read;
- old: a 16-byte header ``ld.so-1.7.0``, 12-byte entries, strings right after the table.

Only the pure parser lives here; the file is read through the Host seam.
"""

from __future__ import annotations

import struct
import sys

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_HEADER = struct.Struct("=11sxI")  # magic, nlibs
_OLD_ENTRY = struct.Struct("=iII")  # flags, key, value
_NEW_HEADER = struct.Struct("=20sIIB3xI12x")  # magic, nlibs, len_strings, flags, extension
# The header's flags byte, bits 0-1: byte order (2 little, 3 big). ld.so ignores a cache that
# records another order than its own (or the invalid value 1); 0 means not recorded.
_NATIVE_ORDER = 2 if sys.byteorder == "little" else 3
_NEW_ENTRY = struct.Struct("=iIIIQ")  # flags, key, value, osversion, hwcap

# Entry flags: the low byte is the ELF kind, the high byte the ABI of a 64-bit (or other
# non-default) library. ``ldconfig -p`` prints them as e.g. "libc6,x86-64" (0x0303).
ABI_MASK = 0xFF00

# A machine's library ABI: (its entry flags, the tag ``ldconfig -p`` prints for them). Plain
# tuples: this module is on the start-up probe's path, where a NamedTuple costs ~1 ms.
ABI_BY_MACHINE = {
    "x86_64": (0x0300, "x86-64"),
    "aarch64": (0x0A00, "AArch64"),
    "ppc64le": (0x0500, "64bit"),
}


class LdCacheError(ValueError):
    """The bytes are not a loader cache this parser understands (the reason is the message)."""


def parse_ld_cache(data: bytes) -> tuple[tuple[int, str], ...]:
    """``(flags, library path)`` for each entry, in the cache's (the loader's) order."""
    if data.startswith(NEW_MAGIC):
        return _new_format(data, 0)
    if not data.startswith(OLD_MAGIC):
        raise LdCacheError("not a glibc loader cache (unknown magic)")
    if len(data) < _OLD_HEADER.size:
        raise LdCacheError("truncated old-format header")
    nlibs = _OLD_HEADER.unpack_from(data)[1]
    table_end = _OLD_HEADER.size + nlibs * _OLD_ENTRY.size
    if table_end > len(data):
        raise LdCacheError(f"{nlibs} old-format entries do not fit in {len(data)} bytes")
    new_at = (table_end + 7) & ~7
    if data.startswith(NEW_MAGIC, new_at):
        return _new_format(data, new_at)
    return tuple(
        (flags, _string(data, table_end + value))
        for flags, _key, value in _OLD_ENTRY.iter_unpack(data[_OLD_HEADER.size : table_end])
    )


def _new_format(data: bytes, base: int) -> tuple[tuple[int, str], ...]:
    if len(data) < base + _NEW_HEADER.size:
        raise LdCacheError("truncated header")
    _magic, nlibs, _strings, header_flags, _ext = _NEW_HEADER.unpack_from(data, base)
    if header_flags != 0 and header_flags & 3 != _NATIVE_ORDER:
        raise LdCacheError("wrong byte order for this machine (the loader ignores it too)")
    start = base + _NEW_HEADER.size
    end = start + nlibs * _NEW_ENTRY.size
    if end > len(data):
        raise LdCacheError(f"{nlibs} entries do not fit in {len(data)} bytes")
    return tuple(
        (flags, _string(data, base + value))
        for flags, _key, value, _os, _hwcap in _NEW_ENTRY.iter_unpack(data[start:end])
    )


def _string(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        raise LdCacheError(f"string offset {offset} lies outside the cache")
    return data[offset:end].decode("utf-8", errors="surrogateescape")
