"""Logs as the scanner reads them: plain, or gzip (recognised by its magic bytes, whatever the
file is called), decompressed as it is read.

A compressed log is often incomplete: copied while the job was still writing it, cut short by a
full disk or an upload limit. Its error, if any, is near the end of what was written, so damage
must not cost what came before it. ``gzip.GzipFile`` raises instead, and a buffered read loses
the text it had already decompressed in that call. Here decompression stops where the data
stops making sense, the stream ends there (everything before it is scanned) and ``damage`` says
what happened.

A small gzip can also hold far more than any log: deflate reaches about 1000:1 on repeated
bytes, so 9 MB hold 2 GB of zeros, and 1 GB would hold a terabyte. Decompression stops, with the
same kind of note, once the output passes ``RATIO_FLOOR`` and is more than ``MAX_RATIO`` times
the compressed bytes read (real logs compress 5-50:1), or passes ``MAX_DECOMPRESSED``.
"""

from __future__ import annotations

import re
import zlib

from envdoctor.errors import EnvdoctorError
from envdoctor.kb.matcher import CHUNK, ByteSource

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip member: header, deflate data, CRC-32 and length
_READ = 1 << 20  # compressed bytes read at a time
_SNIFF = 10  # enough bytes to recognise every magic below
_SALVAGE_STEP = 4096
MAX_RATIO = 200
RATIO_FLOOR = 64 << 20
MAX_DECOMPRESSED = 64 << 30
# Formats worth a precise error: their bytes scanned as text would "explain" nothing and say so.
_OTHER_COMPRESSION = (
    (re.compile(rb"\xfd7zXZ\x00"), "xz", "xz -dc"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", "zstd -dc"),
    (re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)"), "bzip2", "bzip2 -dc"),
)
_ZLIB_REASONS = {
    "incorrect data check": "its CRC does not match, some of the text may be wrong",
    "incorrect length check": "its length check does not match",
    "incorrect header check": "not a gzip header",
}


class LogStream:
    """A log to scan: ``read(n)`` gives its bytes (decompressed when it is gzip) and ends early,
    without raising, where the input is damaged or cannot be read; ``damage`` then says why."""

    def __init__(
        self,
        raw: ByteSource,
        name: str,
        *,
        max_ratio: int = MAX_RATIO,
        ratio_floor: int = RATIO_FLOOR,
        max_decompressed: int = MAX_DECOMPRESSED,
    ) -> None:
        self._raw = raw
        self._head = b""
        self._raw_ended = False
        self.damage = ""
        self._max_ratio = max_ratio
        self._ratio_floor = ratio_floor
        self._max_out = max_decompressed
        self._raw_total = 0  # compressed bytes read
        self._out_total = 0  # decompressed bytes given out
        # one ordinary first read: the scanner's own sniffing (NUL bytes, a UTF-16 byte-order
        # mark) looks at the start of its first block, so that block must not be tiny
        head = self._read_raw(CHUNK)
        while head and len(head) < _SNIFF and not self._raw_ended:
            head += self._read_raw(CHUNK)
        self._head = head
        self.gzip = self._head.startswith(GZIP_MAGIC)
        if not self.gzip:
            for magic, kind, command in _OTHER_COMPRESSION:
                if magic.match(self._head):
                    piped = f"… | {command}" if name == "<stdin>" else f"{command} {name}"
                    raise EnvdoctorError(
                        f"is {kind}-compressed; explain reads plain text and gzip",
                        where=name,
                        hint=f"{piped} | envdoctor explain",
                    )
        self._input = b""
        self._inflate: zlib._Decompress | None = None
        self._members = 0
        self._ended = False

    def read(self, size: int = CHUNK, /) -> bytes:
        """Up to ``size`` bytes of the log (never unbounded: a small .gz can hold gigabytes)."""
        if size <= 0:
            size = CHUNK
        if not self.gzip:
            return self._read_raw(size)
        while not self._ended:
            out = self._inflate_some(size)
            if out:
                self._out_total += len(out)
                self._check_bounds()
                return out
        return b""

    def _check_bounds(self) -> None:
        """Stop after this piece when the log expands beyond what a log does (see above)."""
        out = self._out_total
        if out > self._max_out:
            self._stop(f"decompresses to more than {_mib(self._max_out)}; stopped reading there")
        elif out > self._ratio_floor and out > self._max_ratio * self._raw_total:
            self._stop(
                f"decompresses to more than {self._max_ratio} times its compressed size (a gzip "
                f"bomb, or one line repeated); stopped reading after {_mib(out)}"
            )

    def close(self) -> None:
        """The caller owns the underlying file and closes it."""

    def _inflate_some(self, size: int) -> bytes:
        """One step of decompression; may return nothing while it reads headers or input."""
        if not self._input:
            if self._raw_ended and not self._head:
                return self._end_of_input()
            self._input = self._read_raw(_READ)
            return b""
        if self._inflate is None:
            # between members: gzip allows zero padding, and `cat a.gz b.gz` is a valid gzip
            self._input = self._input.lstrip(b"\0")
            if not self._input:
                return b""
            if self._members and not GZIP_MAGIC.startswith(self._input[:2]):
                self._stop("ignored data after the end of the compressed log (not gzip)")
                return b""
            self._inflate = zlib.decompressobj(_GZIP_WBITS)
            self._members += 1
        inflate = self._inflate
        saved = inflate.copy()  # ~40 KiB, once per call of up to `size` bytes of output
        try:
            out = inflate.decompress(self._input, size)
        except zlib.error as exc:
            # zlib drops the whole call's output when it raises: redo it in small pieces so
            # every line before the damaged byte is still scanned (often the ones that matter)
            out = _salvage(saved, self._input, _SALVAGE_STEP)
            self._stop(f"compressed data is damaged ({_zlib_reason(exc)})")
            return out
        if self._inflate.eof:
            self._input = self._inflate.unused_data
            self._inflate = None
        else:
            self._input = self._inflate.unconsumed_tail
        return out

    def _end_of_input(self) -> bytes:
        """The compressed input is exhausted: drain what zlib still holds, then say whether the
        last member was complete."""
        inflate, self._inflate = self._inflate, None
        self._ended = True
        if inflate is None:
            return b""
        try:
            rest = inflate.flush()
        except zlib.error as exc:
            self._stop(f"compressed data is damaged ({_zlib_reason(exc)})")
            return b""
        if not inflate.eof and not self.damage:
            self.damage = "compressed data ends early (cut off, or still being written)"
        return rest

    def _read_raw(self, size: int) -> bytes:
        if self._head:
            data, self._head = self._head[:size], self._head[size:]
            return data
        if self._raw_ended:
            return b""
        try:
            data = self._raw.read(size)
        except OSError as exc:
            self._raw_ended = True
            self.damage = f"read error ({exc.strerror or exc})"
            return b""
        if not data:
            self._raw_ended = True
        self._raw_total += len(data)
        return data

    def _stop(self, damage: str) -> None:
        self._ended = True
        self._inflate = None
        if not self.damage:
            self.damage = damage


def _mib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def _salvage(inflate: zlib._Decompress, data: bytes, step: int) -> bytes:
    """What ``inflate`` gives for ``data`` up to the byte where it fails: pieces of ``step``
    bytes, and the failing piece again in smaller ones. Bounded: the call that failed had
    produced less than its limit before the damage (it would have stopped there otherwise)."""
    out = []
    for pos in range(0, len(data), step):
        piece = data[pos : pos + step]
        saved = inflate.copy()
        try:
            out.append(inflate.decompress(piece))
        except zlib.error:
            if step > 1:
                out.append(_salvage(saved, piece, max(1, step // 16)))
            break
    return b"".join(out)


def _zlib_reason(exc: zlib.error) -> str:
    """``Error -3 while decompressing data: invalid stored block lengths`` → the part after the
    colon, in words where zlib's are cryptic."""
    reason = str(exc).rpartition(": ")[2] or str(exc)
    return _ZLIB_REASONS.get(reason, reason)
