"""Which copies of libcuda, libnvidia-ml, libcudart, libcublas and libcudnn the loader can find.

Search order follows the dynamic loader: ``LD_LIBRARY_PATH`` first, then its cache
(``/etc/ld.so.cache``, read directly, no process started; ``ldconfig -p`` only when the file
cannot be read or parsed, parsed here in Python, never through a shell pipeline).
"""

from __future__ import annotations

import re

from envdoctor.model.facts import LibraryCopy, LibraryFamily
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import Deadline, Host
from envdoctor.probes.ldcache import ABI_BY_MACHINE, ABI_MASK, LdCacheError, parse_ld_cache

FAMILIES = ("libcuda", "libnvidia-ml", "libcudart", "libcublas", "libcudnn")
_FILE = re.compile(r"^(?P<family>lib[a-z-]+)\.so(?P<suffix>(?:\.\d+)*)$")
_LDCONFIG_LINE = re.compile(r"^\s*(?P<name>\S+)\s+\((?P<tags>[^)]*)\)\s+=>\s+(?P<path>\S+)\s*$")
MAX_LD_DIRS = 32
LD_CACHE = "/etc/ld.so.cache"
MAX_LD_CACHE_BYTES = 16 << 20  # real caches are 20-300 KiB; a truncated one fails to parse
LDCONFIG_TIMEOUT = 3.0


def probe_libraries(host: Host, *, deadline: Deadline) -> Probed[tuple[LibraryFamily, ...]]:
    copies: dict[str, list[LibraryCopy]] = {f: [] for f in FAMILIES}
    ld_path = host.env().get("LD_LIBRARY_PATH", "")
    for directory in [d for d in ld_path.split(":") if d][:MAX_LD_DIRS]:
        listing = host.list_dir(directory)
        if not isinstance(listing, Found):
            continue
        for name in listing.value:
            _add(host, copies, f"{directory.rstrip('/')}/{name}", "LD_LIBRARY_PATH")
    cached = _loader_cache(host, deadline)
    if isinstance(cached, ProbeFailed) and not any(copies.values()):
        return cached
    if isinstance(cached, Found):
        for path in cached.value:
            _add(host, copies, path, "ldconfig")
    return Found(tuple(LibraryFamily(f, tuple(c)) for f, c in copies.items()))


def _add(host: Host, copies: dict[str, list[LibraryCopy]], path: str, origin: str) -> None:
    name = path.rsplit("/", 1)[-1]
    match = _FILE.match(name)
    if not match or match.group("family") not in copies:
        return
    family = copies[match.group("family")]
    if any(c.path == path for c in family):
        return
    real = host.realpath(path)
    real_match = _FILE.match(real.rsplit("/", 1)[-1])
    suffix = (real_match.group("suffix") if real_match else "") or match.group("suffix")
    family.append(LibraryCopy(path=path, realpath=real, version=suffix.lstrip("."), origin=origin))


def _loader_cache(host: Host, deadline: Deadline) -> Probed[tuple[str, ...]]:
    """Paths in the loader's cache for this machine's ABI: the file, else ``ldconfig -p``."""
    data = host.read_bytes(LD_CACHE, limit=MAX_LD_CACHE_BYTES)
    if isinstance(data, Found):
        try:
            entries = parse_ld_cache(data.value)
        except LdCacheError as exc:
            why = f"{LD_CACHE}: {exc}"
        else:
            abi = ABI_BY_MACHINE.get(host.identity().machine)
            return Found(
                tuple(p for flags, p in entries if abi is None or flags & ABI_MASK == abi[0])
            )
    elif isinstance(data, Absent):
        why = data.reason
    else:
        why = f"{data.error} ({data.detail})" if data.detail else data.error
    listed = _ldconfig(host, deadline)
    if isinstance(listed, ProbeFailed):
        return ProbeFailed(listed.error, detail=f"{why}; {listed.detail}")
    return listed


def _ldconfig(host: Host, deadline: Deadline) -> Probed[tuple[str, ...]]:
    program = host.which("ldconfig") or "/sbin/ldconfig"
    result = host.run([program, "-p"], timeout=deadline.cap(LDCONFIG_TIMEOUT))
    if not result.ok:
        return ProbeFailed("cannot read the loader cache", detail=result.describe())
    abi = ABI_BY_MACHINE.get(host.identity().machine)
    tag = abi[1] if abi else ""
    paths = []
    for line in result.stdout.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match and (not tag or tag in match.group("tags")):
            paths.append(match.group("path"))
    return Found(tuple(paths))
