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

# Each value check returns why torch rejects the value, or "".
Check = Callable[[str], str]

_INT = r"^[+-]?\d+"  # compiled on first use: most machines set no allocator options
_FLOAT = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_SEPARATORS = ",:[]"


def _leading_int(text: str) -> int | None:
    match = re.match(_INT, text)
    if match is None:
        return None
    value = int(match.group(0))
    return value % (1 << 64)  # stoull wraps a negative number, as C++ does


def _boolean(value: str) -> str:
    return "" if value in ("True", "False") else f"expected True or False, got {value!r}"


def _size_mb(value: str) -> str:
    number = _leading_int(value)
    if number is None:
        return f"{value!r} is not a number"
    return "" if number >= 20 else f"{number} is too small: it must be >= 20 (MB)"


def _fraction(value: str) -> str:
    match = re.match(_FLOAT, value)
    if match is None:
        return f"{value!r} is not a number"
    number = float(match.group(0))
    return "" if 0 < number < 1 else f"{number:g} is not in (0.0, 1.0)"


def _power_of_two(number: int) -> bool:
    return number > 0 and number & (number - 1) == 0


def _divisions(value: str) -> str:
    number = _leading_int(value)
    if number is None:
        return f"{value!r} is not a number"
    return "" if _power_of_two(number) else f"{number} divisions: must be a power of 2"


def _threads(value: str) -> str:
    number = _leading_int(value)
    if number is None:
        return f"{value!r} is not a number"
    if not _power_of_two(number):
        return f"{number} register threads: must be a power of 2"
    return "" if number <= 128 else f"{number} register threads: at most 128"


def _positive(value: str) -> str:
    number = _leading_int(value)
    if number is None:
        return f"{value!r} is not a number"
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
            return [f"an empty entry or a stray {key!r} (torch fails on it)"]
        if i + 1 >= len(toks) or toks[i + 1] != ":":
            return [f"{key!r} is not key:value"]
        if i + 2 >= len(toks) or toks[i + 2] in ",:]":
            return [f"{key!r} has no value"]
        check = KEYS.get(key)
        if check is None:
            return [f"unknown key {key!r} (a CUDA build of torch raises 'Unrecognized key')"]
        if key == "roundup_power2_divisions" and toks[i + 2] == "[":
            problem, i = _division_list(toks, i + 3)
        else:
            problem, i = check(toks[i + 2]), i + 2
        if problem:
            return [f"{key}: {problem}"]
        if i + 1 < len(toks):
            if toks[i + 1] != ",":
                return [f"expected ',' after {key}'s value, got {toks[i + 1]!r}"]
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
        if divisions is None or (divisions != 0 and not _power_of_two(divisions)):
            return f"divisions {toks[i + 2]!r}: must be a power of 2, or 0", i
        if interval != ">":
            number = _leading_int(interval)
            if number is None or not _power_of_two(number):
                return f"interval {interval!r}: must be a power of 2", i
        i += 3
        if i < len(toks) and toks[i] == ",":
            i += 1
    if i >= len(toks):
        return "the list has no closing ']'", i
    return "", i
