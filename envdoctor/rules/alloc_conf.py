"""``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF`` read the way torch's parser reads them.

torch parses the variable at the first CUDA allocation and raises on what it rejects, long after
the job started. envdoctor asks the target torch itself when the torch child imports it (see
``TorchBuild.alloc_conf``); otherwise (a snapshot, the fast tier, a CPU build read from its
version file) it applies this model of torch's parser, which a test holds to the real torch on
every case it can run here.

The model follows torch's ``c10::CachingAllocator::ConfigTokenizer`` (c10/core/AllocatorConfig.h:
the text is split into tokens at ``, : [ ]`` with spaces dropped; ``key : value`` entries are
separated by commas, a trailing comma is accepted, an empty entry is not) and the value checks of
``AcceleratorAllocatorConfig`` (device-agnostic keys) and ``CUDAAllocatorConfig::parseArgs``
(c10/cuda/CUDAAllocatorConfig.cpp, torch 2.9+): a key neither knows is "Unrecognized key" there.
Numbers are read as C++'s ``stoull``/``stod`` read them: the leading number of the token.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from envdoctor.terminal import quoted

# Each value check returns why torch rejects the value, or "".
Check = Callable[[str], str]

# ASCII digits only, as C's strto* read them in the C locale ("٥١٢" is not a number to torch)
_INT = r"^[+-]?[0-9]+"  # compiled on first use: most machines set no allocator options
_FLOAT = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_DECIMAL = r"([0-9]*)\.?([0-9]*)(?:[eE]([+-]?[0-9]+))?"  # _FLOAT's parts, for _exact
_HEX_FLOAT = r"^[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
_INF_NAN = r"^[+-]?(?:inf(?:inity)?|nan)"
_SEPARATORS = ",:[]"
_C_SPACE = " \t\n\v\f\r"  # what C's isspace() skips before a number; torch drops only " "
_ULL = 1 << 64


class _UnreadError(Exception):
    """A value ``stoull``/``stod`` refuse: torch raises on it (invalid_argument, out_of_range)."""


def _leading_int(text: str) -> int:
    """The number C++'s ``stoull`` reads: its leading digits after C's white space; a negative
    one wraps (as strtoull negates), one beyond 64 bits is out of range."""
    match = re.match(_INT, text.lstrip(_C_SPACE))
    if match is None:
        raise _UnreadError(f"{quoted(text)} is not a number")
    digits = match.group(0).lstrip("+-").lstrip("0") or "0"
    if len(digits) > 20:  # more than 20 digits is beyond 64 bits (and int() of 5000 raises)
        raise _UnreadError(f"{quoted(text)} is out of range (more than 64 bits)")
    value = int(digits)
    if value >= _ULL:
        raise _UnreadError(f"{quoted(text)} is out of range (more than 64 bits)")
    return (_ULL - value) % _ULL if match.group(0).startswith("-") else value


def _leading_float(text: str) -> float:
    """The number C++'s ``stod`` reads after C's white space: decimal or hexadecimal, inf or
    nan. A value a double cannot hold is out of range (glibc's ERANGE): an overflow, or an
    underflow that loses precision (to zero, or to a subnormal that is not the exact value)."""
    import math
    import sys

    body = text.lstrip(_C_SPACE)
    special = re.match(_INF_NAN, body, re.IGNORECASE)
    if special is not None:
        return float(special.group(0))
    hexa = re.match(_HEX_FLOAT, body)
    match = hexa or re.match(_FLOAT, body)
    if match is None:
        raise _UnreadError(f"{quoted(text)} is not a number")
    shown = match.group(0)
    mantissa = re.split("[pP]" if hexa else "[eE]", shown.lstrip("+-"))[0]
    try:
        value = float.fromhex(shown) if hexa else float(shown)
    except OverflowError:  # fromhex refuses what a double cannot hold; float() gives inf
        value = math.inf
    nonzero = any(c not in "0." for c in mantissa.lower().removeprefix("0x"))
    underflow = nonzero and abs(value) < sys.float_info.min
    if math.isinf(value) or (underflow and (value == 0 or not _exact(shown, value, hexa))):
        raise _UnreadError(f"{quoted(text)} is out of range for a double")
    return value


def _exact(text: str, value: float, hexa: object) -> bool:
    """Whether the subnormal ``value`` is exactly the number ``text`` writes (glibc sets ERANGE
    only for an inexact one: ``0x1p-1074`` is read, ``1e-310`` is not).

    An exact subnormal is k * 2**-1074 with k < 2**52: at most 14 significant hexadecimal digits
    or 767 decimal ones, and a bounded exponent. Text beyond those bounds is inexact without
    arithmetic, so a million-digit mantissa costs a scan, not a quadratic conversion."""
    from fractions import Fraction

    form = r"0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)(?:[pP]([+-]?[0-9]+))?" if hexa else _DECIMAL
    parts = re.fullmatch(form, text.lstrip("+-"))
    if parts is None:
        return False
    whole_part, fraction, exponent = parts.groups()
    digits = (whole_part + fraction).lstrip("0")
    significant = digits.rstrip("0")
    shift = len(digits) - len(significant) - len(fraction)  # places the last digit is moved
    power = exponent.lstrip("+-").lstrip("0") if exponent else ""
    if not significant or len(significant) > (14 if hexa else 800) or len(power) > 9:
        return False
    scale = (-int(power) if exponent.startswith("-") else int(power or "0")) + (
        4 * shift if hexa else shift
    )
    if not -2400 <= scale <= 0:  # no exact subnormal is written with such a scale
        return False
    number = int(significant, 16 if hexa else 10)
    written = Fraction(number) * Fraction(2 if hexa else 10) ** scale
    return (-written if text.startswith("-") else written) == Fraction(value)


def _boolean(value: str) -> str:
    return "" if value in ("True", "False") else f"expected True or False, got {value!r}"


def _size_mb(value: str) -> str:
    number = _leading_int(value)
    return "" if number >= 20 else f"{number} is too small: it must be >= 20 (MB)"


def _fraction(value: str) -> str:
    number = _leading_float(value)
    return "" if 0 < number < 1 else f"{number:g} is not in (0.0, 1.0)"


def _power_of_two(number: int) -> bool:
    return number > 0 and number & (number - 1) == 0


def _divisions(value: str) -> str:
    number = _leading_int(value)
    return "" if _power_of_two(number) else f"{number} divisions: must be a power of 2"


def _threads(value: str) -> str:
    number = _leading_int(value)
    if not _power_of_two(number):
        return f"{number} register threads: must be a power of 2"
    return "" if number <= 128 else f"{number} register threads: at most 128"


def _positive(value: str) -> str:
    number = _leading_int(value)
    return "" if number > 0 else "must be greater than 0"


def _backend(value: str) -> str:
    if value in ("native", "cudaMallocAsync"):
        return ""
    return f"unknown allocator backend {value!r}: options are native and cudaMallocAsync"


def _anything(_value: str) -> str:
    return ""


KEYS: dict[str, Check] = {
    # device-agnostic (c10/core AllocatorConfig): parsed by every build
    "max_split_size_mb": _size_mb,
    "max_non_split_rounding_mb": _size_mb,
    "garbage_collection_threshold": _fraction,
    "roundup_power2_divisions": _divisions,  # or a [interval:divisions, …] list
    "expandable_segments": _boolean,
    "pinned_use_background_threads": _boolean,
    "per_process_memory_fraction": _anything,  # accepted here; its range is not checked
    # CUDA builds (c10/cuda/CUDAAllocatorConfig.cpp)
    "backend": _backend,
    "release_lock_on_cudamalloc": _boolean,
    "pinned_use_cuda_host_register": _boolean,
    "pinned_num_register_threads": _threads,
    "pinned_reserve_segment_size_mb": _positive,
    "graph_capture_record_stream_reuse": _boolean,
}


def tokens(text: str) -> list[str]:
    """torch's tokens: separators stand alone, spaces are dropped."""
    out: list[str] = []
    word = ""
    for char in text:
        if char in _SEPARATORS:
            if word:
                out.append(word)
                word = ""
            out.append(char)
        elif char != " ":
            word += char
    if word:
        out.append(word)
    return out


def judge(text: str) -> list[str]:
    """Why torch rejects ``text`` (one line per problem, the first one stops torch), or []."""
    toks = tokens(text)
    i = 0
    while i < len(toks):
        key = toks[i]
        if key in _SEPARATORS:
            return [f"an empty entry or a stray {quoted(key)} (torch fails on it)"]
        if i + 1 >= len(toks) or toks[i + 1] != ":":
            return [f"{quoted(key)} is not key:value"]
        if i + 2 >= len(toks) or toks[i + 2] in ",:]":
            return [f"{quoted(key)} has no value"]
        check = KEYS.get(key)
        if check is None:
            return [f"unknown key {quoted(key)} (a CUDA build of torch raises 'Unrecognized key')"]
        try:
            if key == "roundup_power2_divisions" and toks[i + 2] == "[":
                problem, i = _division_list(toks, i + 3)
            else:
                problem, i = check(toks[i + 2]), i + 2
        except _UnreadError as exc:
            return [f"{key}: {exc}"]
        if problem:
            return [f"{key}: {problem}"]
        if i + 1 < len(toks):
            if toks[i + 1] != ",":
                return [f"expected ',' after {key}'s value, got {quoted(toks[i + 1])}"]
            i += 1
        i += 1
    return []


def _division_list(toks: list[str], i: int) -> tuple[str, int]:
    """``[64:8, 512:4, >:1]``: power-of-2 intervals (or ``>``), power-of-2 (or 0) divisions."""
    while i < len(toks) and toks[i] != "]":
        interval = toks[i]
        if i + 2 >= len(toks) or toks[i + 1] != ":":
            return f"{interval!r} in the list is not interval:divisions", i
        divisions = _leading_int(toks[i + 2])
        if divisions != 0 and not _power_of_two(divisions):
            return f"divisions {quoted(toks[i + 2])}: must be a power of 2, or 0", i
        if interval != ">" and not _power_of_two(_leading_int(interval)):
            return f"interval {quoted(interval)}: must be a power of 2", i
        i += 3
        if i < len(toks) and toks[i] == ",":
            i += 1
    if i >= len(toks):
        return "the list has no closing ']'", i
    return "", i
