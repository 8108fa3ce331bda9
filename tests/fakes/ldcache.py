"""Writes a new-format loader cache from an ``ldconfig -p`` listing, for scenario machines.

Scenarios keep the listing (readable, and what people paste); the fake host serves the binary
``/etc/ld.so.cache`` that glibc's ldconfig would have written for it, and the listing itself for
``ldconfig -p``. tests/probes/test_ldcache.py checks the bytes with the real ``ldconfig -p -C``.
"""

from __future__ import annotations

import re
import struct

_LINE = re.compile(r"^\s*(?P<key>\S+)\s+\((?P<tags>[^)]*)\)\s+=>\s+(?P<path>.+?)\s*$")
_KIND = {"libc4": 0x0000, "ELF": 0x0001, "libc5": 0x0002, "libc6": 0x0003}
_ABI = {"x86-64": 0x0300, "AArch64": 0x0A00, "64bit": 0x0500, "x32": 0x0800}


def listing_entries(listing: str) -> list[tuple[int, str, str]]:
    """``(flags, soname, path)`` for each library line of an ``ldconfig -p`` listing."""
    entries = []
    for line in listing.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        tags = [t.strip() for t in match.group("tags").split(",")]
        flags = _KIND.get(tags[0], 0x0003) | sum(_ABI.get(t, 0) for t in tags[1:])
        entries.append((flags, match.group("key"), match.group("path")))
    return entries


def build_ld_cache(listing: str) -> bytes:
    """The ``glibc-ld.so.cache1.1`` bytes holding the listing's entries, in its order."""
    entries = listing_entries(listing)
    strings = bytearray()
    offsets: dict[str, int] = {}
    table = 48 + 24 * len(entries)
    for _flags, key, path in entries:
        for text in (key, path):
            if text not in offsets:
                offsets[text] = table + len(strings)
                strings += text.encode() + b"\0"
    header = b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    body = b"".join(
        struct.pack("<iIIIQ", flags, offsets[key], offsets[path], 0, 0)
        for flags, key, path in entries
    )
    return header + body + bytes(strings)
