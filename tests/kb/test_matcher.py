"""The streaming scanner: chunking, line numbers, odd input, bounded memory."""

from __future__ import annotations

import codecs
import functools
import io
import tracemalloc

import pytest

from envdoctor.kb import (
    Scanner,
    candidates,
    decor,
    load_default_kb,
    matcher,
    scan_bytes,
    scan_stream,
)
from envdoctor.kb.candidates import CandidateFinder
from envdoctor.kb.engines import available_engines
from envdoctor.kb.matcher import MAX_LINE
from envdoctor.kb.model import KnowledgeBase, Pattern, Role, ScanResult, compiled
from tests.kb.test_decor import WATCHDOG

OOM = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total "
    "capacity; 4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)"
)
ASSERT = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: "
    "[0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed."
)

# Paddle 2.x's start-up when TensorRT is not installed (paddle/fluid/platform/dynload/
# tensorrt.cc prints it to stderr and goes on), as in PaddlePaddle/Paddle#28218
PADDLE_TENSORRT = (
    "TensorRT dynamic library (libnvinfer.so) that Paddle depends on is not configured "
    "correctly. (error code is libnvinfer.so: cannot open shared object file: No such file or "
    "directory)"
)


def _log(n_lines: int, errors: dict[int, str]) -> bytes:
    lines = [errors.get(i, f"step {i} loss {i % 7}.123 lr 0.001") for i in range(1, n_lines + 1)]
    return ("\n".join(lines) + "\n").encode()


def test_line_numbers_are_exact() -> None:
    data = _log(5000, {17: ASSERT, 4242: OOM})
    result = scan_bytes(data, load_default_kb())
    by_id = {h.signature_id: h for h in result.hits}
    assert by_id["cuda.assert-target-out-of-range"].first_line == 17
    assert by_id["cuda.out-of-memory"].first_line == 4242
    assert result.lines == 5000


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 1 << 20])
def test_chunking_does_not_change_the_result(chunk: int) -> None:
    data = _log(3000, {5: ASSERT, 1500: OOM, 2999: ASSERT})
    data = data[:3000] + b"\0" + data[3000:]  # binary: a NUL in the first 8 KiB, however fed
    kb = load_default_kb()
    whole = scan_bytes(data, kb)
    assert whole.binary
    scanner = Scanner(kb)
    for i in range(0, len(data), chunk):
        scanner.feed(data[i : i + chunk])
    assert scanner.finish() == whole


CONTEXT = (
    '  File "model.py", line 10, in forward\n'
    "    x = self.embedding(input_ids)\n"
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
)

# torch's capability warning as torch prints it (torch/cuda/__init__.py), for a GPU whose
# major version is the build's last: harmless (torch.gpu-newer-minor-than-build)
TORCH_NEWER_MINOR = (
    "    Found GPU0 NVIDIA GeForce RTX 4090 which is of cuda capability 8.9.\n"
    "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
    "    (3.7) - (8.6)"
)

# the command of NVIDIA/nvidia-docker#1160's reporter: a CUDA runtime image, which has no nvcc
RUNTIME_IMAGE = "docker run -it --gpus all nvidia/cuda:10.0-cudnn7-runtime-ubuntu18.04 /bin/bash"


def _in_pieces(data: bytes, kb: KnowledgeBase, engine: str, chunk: int) -> ScanResult:
    """What the scanner finds when the log is fed ``chunk`` bytes at a time."""
    scanner = Scanner(kb, engine=engine)
    for i in range(0, len(data), chunk):
        scanner.feed(data[i : i + chunk])
    return scanner.finish()


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("chunk", [1, 13, 4096, 1 << 16])
def test_chunking_keeps_context_rules_and_captures(chunk: int, engine: str) -> None:
    """A match on a line completed across pieces still sees the lines before it (context
    rules, and a line read only beside its context) and keeps its captures, whatever the piece
    size and engine."""
    nvcc = "bash: nvcc: command not found"
    data = _log(6000, {1000: RUNTIME_IMAGE, 1040: nvcc, 3000: CONTEXT, 5990: ASSERT})
    kb = load_default_kb()
    whole = scan_bytes(data, kb, engine=engine)
    assert any(h.context_notes for h in whole.hits)
    assert "container.runtime-image-no-toolkit" in {h.signature_id for h in whole.hits}
    assert _in_pieces(data, kb, engine, chunk) == whole


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_a_benign_message_wrapped_over_lines_is_read_whole_in_any_pieces(
    chunk: int, engine: str
) -> None:
    """The lines a benign reading joined are its message: none of them is read as a cause (the
    H100's is a refusal, read as before), the same in any pieces and as the obvious matcher."""
    refused = TORCH_NEWER_MINOR.replace("GeForce RTX 4090", "H100").replace("8.9.", "9.0.")
    data = _log(300, {100: TORCH_NEWER_MINOR, 200: refused})
    kb = load_default_kb()
    whole = scan_bytes(data, kb, engine=engine)
    got = sorted((h.signature_id, h.count, h.first_line) for h in whole.hits)
    assert got == _reference(data)
    assert ("torch.gpu-newer-minor-than-build", 1, 100) in got
    # the H100's second line only (the message at 100 took two more lines)
    assert ("fallback.gpu-arch-unsupported", 1, 203) in got
    assert _in_pieces(data, kb, engine, chunk) == whole


@pytest.mark.parametrize("engine", available_engines())
def test_a_log_without_its_last_newline_reads_as_the_same_log_with_it(engine: str) -> None:
    """A paste often ends without a newline: its last line still continues a cut line."""
    from tests.kb.helpers import corpus

    kb = load_default_kb()
    # a sample of the corpus (most of its logs end in lines long enough to be cut), and torch's
    # three-line warning, whose last line completes a benign reading
    logs = [*[case.log for case in corpus()][::24], TORCH_NEWER_MINOR.encode()]
    for log in logs:
        bare = log.rstrip(b"\n")
        ended = scan_bytes(bare + b"\n", kb, engine=engine)
        got = scan_bytes(bare, kb, engine=engine)
        assert (got.hits, got.lines) == (ended.hits, ended.lines), bare[-120:]


def test_no_trailing_newline_and_counts() -> None:
    result = scan_bytes(("x\n" * 9 + OOM).encode(), load_default_kb())
    assert result.lines == 10
    assert result.hits[0].first_line == 10


def test_occurrences_are_bounded_but_counted() -> None:
    data = _log(2000, dict.fromkeys(range(1, 2001, 2), ASSERT))
    hit = scan_bytes(data, load_default_kb()).hits[0]
    assert hit.count == 1000
    assert len(hit.occurrences) <= 8
    assert (hit.first_line, hit.last_line) == (1, 1999)


def test_binary_and_undecodable_input_is_scanned_not_crashed() -> None:
    data = b"\x00\x01\xff\xfe garbage \x80\x81\n" + OOM.encode() + b"\n\xc3\x28 bad utf8\n"
    result = scan_bytes(data, load_default_kb())
    assert result.binary
    assert [h.signature_id for h in result.hits] == ["cuda.out-of-memory"]


def test_latin1_and_truncated_utf8_lines_still_match() -> None:
    line = b"caf\xe9 " + ASSERT.encode() + b" \xe2\x82"
    result = scan_bytes(line, load_default_kb())
    assert result.undecodable
    assert result.hits[0].signature_id == "cuda.assert-target-out-of-range"


def test_utf16_log_is_transcoded() -> None:
    text = "hello\r\n" + OOM + "\r\n"
    data = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    result = scan_stream(io.BytesIO(data), load_default_kb(), chunk_size=33)
    assert [h.signature_id for h in result.hits] == ["cuda.out-of-memory"]
    assert result.hits[0].first_line == 2


def test_carriage_return_progress_bars_are_split() -> None:
    bar = "".join(f"\r{i}%|####| {i}/100 [00:01<00:10]" for i in range(100)) * 40
    line = bar + "\r" + OOM + "\r" + bar + "\n"
    result = scan_bytes(line.encode(), load_default_kb())
    assert [h.signature_id for h in result.hits] == ["cuda.out-of-memory"]


def test_endless_line_is_cut_not_buffered() -> None:
    kb = load_default_kb()
    scanner = Scanner(kb)
    for _ in range(40):
        scanner.feed(b"x" * (MAX_LINE // 4))
    scanner.feed(OOM.encode() + b"\n")
    result = scanner.finish()
    assert result.truncated_lines >= 1
    assert [h.signature_id for h in result.hits] == ["cuda.out-of-memory"]


class _Generated(io.RawIOBase):
    """A large log produced on the fly (never held in memory as a whole)."""

    def __init__(self, size: int) -> None:
        self._left = size
        self._block = _log(20_000, {10_000: OOM})

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        take = min(n if n > 0 else len(self._block), self._left, len(self._block))
        self._left -= take
        return self._block[:take]


def _peak_during_scan(size: int) -> int:
    kb = load_default_kb()
    tracemalloc.start()
    try:
        result = scan_stream(_Generated(size), kb, chunk_size=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.bytes == size
    return peak


def test_memory_is_flat_in_the_log_size() -> None:
    small = _peak_during_scan(8 << 20)
    large = _peak_during_scan(64 << 20)
    assert large < 16 << 20
    assert large < small * 1.5 + (1 << 20)


def test_context_rules_raise_the_specific_cause() -> None:
    log = (
        '  File "model.py", line 10, in forward\n'
        "    x = self.embedding(input_ids)\n"
        '  File "torch/nn/modules/linear.py", line 114, in forward\n'
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
    )
    hits = {h.signature_id: h for h in scan_bytes(log.encode(), load_default_kb()).hits}
    assert hits["cublas.embedding-too-small"].confidence > hits["cublas.alloc-failed"].confidence
    assert hits["cublas.embedding-too-small"].context_notes


def _reference(data: bytes) -> list[tuple[str, int, int]]:
    """The obvious, slow matcher: every line against every pattern (anchor, then regex), and a
    line that holds a pattern's key literal but is cut short, joined with the lines after it."""
    kb = load_default_kb()
    found: dict[str, list[int]] = {}
    tries: dict[str, int] = {}
    reserved_through = 0
    lines = [line.decode("utf-8", errors="replace") for line in data.split(b"\n")]
    for number, raw in enumerate(lines, start=1):
        for text in raw.split("\r"):
            joined = decor.continued(text, lines[number:]) if decor.looks_cut(text) else ()
            here = [
                signature
                for signature in kb.signatures
                if number not in found.get(signature.id, [])
                # a pattern's anchor is in every line it matches (the loader checks it): the
                # cheap test first, or this takes seconds
                and any(
                    p.anchor in text and _reference_match(p, text, joined)
                    for p in signature.patterns
                )
            ]
            if any(signature.role is Role.BENIGN for signature in here):
                # a message its program survives: no other reading of the line is a cause
                here = [signature for signature in here if signature.role is Role.BENIGN]
            # ...nor of the lines a benign reading joined to its own (a message wrapped)
            span = max(
                (
                    decor.continuation_count(lines[number:])
                    for signature in here
                    if signature.role is Role.BENIGN
                    and not any(
                        p.anchor in text and compiled(p.regex).search(text)
                        for p in signature.patterns
                    )
                ),
                default=0,
            )
            if not span and number <= reserved_through:
                here = [signature for signature in here if signature.role is Role.BENIGN]
            reserved_through = max(reserved_through, number + span)
            # a signature read only beside its context: the lines before it (the scanner's
            # window) must hold a rule with a positive weight, tried a few times until one does
            before = "\n".join(lines[max(0, number - matcher.CONTEXT_LINES) : number - 1])
            for signature in [s for s in here if s.needs_context and s.id not in found]:
                tries[signature.id] = tries.get(signature.id, 0) + 1
                backed = any(
                    rule.weight > 0 and compiled(rule.regex).search(before)
                    for rule in signature.context
                )
                if not backed or tries[signature.id] > matcher.CONTEXT_SAMPLES:
                    here.remove(signature)
            for signature in here:
                found.setdefault(signature.id, []).append(number)
    return sorted((sid, len(lines), lines[0]) for sid, lines in found.items())


def _reference_match(pattern: Pattern, text: str, joined: tuple[str, ...]) -> bool:
    regex = compiled(pattern.regex)
    if pattern.anchor in text and regex.search(text):
        return True
    if pattern.anchor not in text or pattern.literals[0] not in text:
        return False
    return any((m := regex.search(v)) is not None and m.start() < len(text) for v in joined)


def _mixed_log(seed: int) -> bytes:
    import random

    from tests.kb.helpers import corpus

    rng = random.Random(seed)  # noqa: S311 (test data, not cryptography)
    errors = [line for case in corpus() for line in case.log.decode("utf-8").splitlines()]
    errors.append(PADDLE_TENSORRT)  # a line a benign signature silences
    # a line read differently beside the line before it (container.runtime-image-no-toolkit)
    errors += [RUNTIME_IMAGE, "bash: nvcc: command not found"]
    # a benign message wrapped over three lines, whose second line alone reads as a refusal
    errors.append(TORCH_NEWER_MINOR)
    benign = [
        "INFO eval: accuracy 0.{n} val_error_rate 0.0{n}",
        "wandb: train/MeanSquaredError 0.{n} CUDA mem {n}.1 GiB",
        "node1:12:34 [0] NCCL INFO Channel {n}/32 : 0 1 2 3 via P2P/CUMEM/read",
        "step {n} loss 1.{n}",
        "RuntimeError: something unrelated {n}",
    ]
    lines = []
    for _ in range(4000):
        if rng.random() < 0.05:
            lines.append(rng.choice(errors))
        else:
            lines.append(rng.choice(benign).format(n=rng.randint(0, 999)))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_optimised_scanner_agrees_with_the_obvious_matcher(seed: int, engine: str) -> None:
    """The prefilter, second stage and template cache (Python's re) and the literal sweep
    (RE2) never lose a match."""
    data = _mixed_log(seed)
    result = scan_bytes(data, load_default_kb(), engine=engine)
    got = sorted((h.signature_id, h.count, h.first_line) for h in result.hits)
    assert got == _reference_for(seed)


@functools.cache
def _reference_for(seed: int) -> list[tuple[str, int, int]]:
    """The obvious matcher's answer for a seed's log, worked out once for both engines."""
    return _reference(_mixed_log(seed))


def test_a_line_benign_for_one_trigger_still_matches_through_another() -> None:
    line = b"RuntimeError: CUDNN_STATUS_MAPPING_ERROR\n"
    result = scan_bytes(line * 3, load_default_kb())
    assert [(h.signature_id, h.count) for h in result.hits] == [("cudnn.mapping-error", 3)]


@pytest.fixture(params=["templates", "direct"])
def candidate_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Candidate lines come from each window's distinct line templates (digits removed) or
    from the engine's own search of the bytes (RE2's sweep, Python's search per trigger);
    each test runs with the scanner forced onto one of them."""
    path: str = request.param
    if path == "templates":
        monkeypatch.setattr(candidates, "_TEMPLATE_MIN", 1)  # even a single pending line
        monkeypatch.setattr(candidates, "_TEMPLATE_BACKOFF", 0)  # never give up on templates
        monkeypatch.setattr(candidates, "_DENSE", -1)  # RE2: every window is "dense"
        monkeypatch.setattr(CandidateFinder, "_dense", True)  # from the first one on
    else:
        monkeypatch.setattr(candidates, "_TEMPLATE_MIN", candidates._TEMPLATE_WINDOW + 1)
    return path


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_candidate_paths_agree_with_the_obvious_matcher(
    seed: int, engine: str, candidate_path: str
) -> None:
    data = _mixed_log(seed)
    result = scan_bytes(data, load_default_kb(), engine=engine)
    got = sorted((h.signature_id, h.count, h.first_line) for h in result.hits)
    assert got == _reference_for(seed)


# Lines that become error lines only once their digits are removed (a template holds them),
# and real errors whose key literal has digits ("[802] Call to cuInit", "init failure: 802")
NO_INF_CHECKS = "AssertionError: No inf checks were recorded for this optimizer."
NEAR_MISSES = (
    "AssertionError: N7o inf checks were recorded for this optimizer.",  # NO_INF_CHECKS' shape
    "RuntimeError: CUDA out of me1mory. Tried to allocate 2 MiB",
    "CUDA error: device-side assert trig9gered",
    "RuntimeError: No CUDA G2PUs are available",
    "N3CCL WARN Bootstrap : no socket interface fo4und",
)
DIGIT_LITERALS = (
    "E0521 12:00:00.000 [802] Call to cuInit results in CUDA_ERROR_SYSTEM_NOT_READY",
    "Unable to load cudart library /usr/lib/libcuda.so.570.169: cuda driver library init failure: 802",
)


FILL = "abcdefghijklmnopqrstuvwxyz" * 400
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
# Lines over 8 KiB are searched around their triggers' hits: the same hits whichever way the
# line became a candidate ("Error" and a digit-joined near miss before the real error)
LONG_LINES = (
    f"{FILL[:3000]}Error{FILL[:2014]}{ILLEGAL} {FILL[:6000]}",
    f"{FILL[:3000]}CUDA out of me7mory {FILL[:20]}{ILLEGAL} {FILL[:6000]}",
)


def _windowed_log(seed: int) -> bytes:
    """~2.5 MiB: a stretch of distinct lines (hex ids: templates do not pay there), then
    templated ones, errors, near misses and long lines throughout, so the adaptive scanner
    changes path."""
    import random

    rng = random.Random(seed)  # noqa: S311 (test data)
    errors = (OOM, ASSERT, CONTEXT.splitlines()[-1], NO_INF_CHECKS, *DIGIT_LITERALS)
    lines = []
    for i in range(40_000):
        roll = rng.random()
        if i % 5000 == 1234:
            lines.append(LONG_LINES[i // 5000 % 2])
        elif roll < 0.002:
            lines.append(rng.choice(errors))
        elif roll < 0.004:
            lines.append(rng.choice(NEAR_MISSES))
        elif i < 15_000:
            lines.append(f"req {rng.getrandbits(64):x} CUDA ok {rng.getrandbits(32):x} error none")
        elif 25_000 <= i < 30_000:  # an error logged in a loop: RE2 leaves its sweep here
            lines.append(f"RuntimeError: CUDA out of memory. Tried to allocate {i % 97}.00 MiB")
        else:
            lines.append(f"[rank{i % 8}] step {i} NCCL INFO loss {rng.random():.4f} val_error 0")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_line_templates_never_change_the_result(chunk: int, engine: str) -> None:
    """Templates (digits removed) only choose which lines the regexes see: a line that looks
    like an error without its digits is not reported, an error whose key literal has digits
    is, and whichever path each window took, the result (counts, lines, captures, context)
    is the one the direct search gives."""
    data = _windowed_log(7)
    kb = load_default_kb()

    def scan(minimum: int, backoff: int, dense: int = candidates._DENSE) -> ScanResult:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(candidates, "_TEMPLATE_MIN", minimum)
            mp.setattr(candidates, "_TEMPLATE_BACKOFF", backoff)
            mp.setattr(candidates, "_DENSE", dense)
            mp.setattr(CandidateFinder, "_dense", dense < 0)
            scanner = Scanner(kb, engine=engine)
            for i in range(0, len(data), chunk):
                scanner.feed(data[i : i + chunk])
            return scanner.finish()

    direct = scan(candidates._TEMPLATE_WINDOW + 1, 0)
    counts = {h.signature_id: h.count for h in direct.hits}
    oom = sum(line.startswith(b"RuntimeError: CUDA out of memory.") for line in data.split(b"\n"))
    assert counts["cuda.out-of-memory"] == oom  # not its near miss
    assert counts["cuda.system-not-ready"] == sum(data.count(d.encode()) for d in DIGIT_LITERALS)
    assert counts["amp.no-inf-checks"] == data.count(NO_INF_CHECKS.encode())
    assert counts["cuda.illegal-memory-access"] >= 4  # of the 8 long lines, with either engine
    assert not counts.keys() & {"cuda.device-assert", "cuda.no-device", "nccl.network-interface"}
    assert scan(1, 0, dense=-1) == direct  # templates always
    assert scan(candidates._TEMPLATE_MIN, candidates._TEMPLATE_BACKOFF) == direct  # as shipped


# NCCL's watchdog line cut by a terminal: its first piece matches only joined with the rest
# (tests/kb/test_decor.py)
WATCHDOG_PIECES = [WATCHDOG[i : i + 137] for i in range(0, len(WATCHDOG), 137)]


@pytest.mark.parametrize("engine", available_engines())
def test_a_repeated_line_is_matched_as_where_it_stands(engine: str) -> None:
    """A repeated line's matches are remembered, with the lines after it where they were
    read: the same cut line completed twice and left cut once is two matches, not three; a
    line logged in a loop keeps every occurrence's line number and the first ones' captures."""
    log = "\n".join(
        # a blank line ends a continuation: the first piece is joined at lines 1 and 8 (the
        # same lines after it: the second is remembered), not at line 5, where it matches
        # alone (the watchdog's cut form) without the numbers that follow it
        [*WATCHDOG_PIECES, "", "", WATCHDOG_PIECES[0], "", "", *WATCHDOG_PIECES, "", ""]
        + [OOM] * 3000
        + [ASSERT]
    ).encode()
    kb = load_default_kb()
    result = scan_bytes(log + b"\n", kb, engine=engine)
    hits = {h.signature_id: h for h in result.hits}
    watchdog = hits["nccl.timeout"]
    assert [o.line for o in watchdog.occurrences] == [1, 5, 8]
    first, alone, again = (dict(o.captures) for o in watchdog.occurrences)
    assert first == again and "ms" in first
    assert "ms" not in alone  # not line 1's joined match, remembered for the same piece
    oom = hits["cuda.out-of-memory"]
    assert (oom.count, oom.first_line, oom.last_line) == (3000, 12, 3011)
    assert [o.line for o in oom.occurrences] == list(range(12, 20))
    assert all(dict(o.captures) == dict(oom.occurrences[0].captures) for o in oom.occurrences)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matcher, "_CACHED_LINE", -1)  # nothing remembered
        assert scan_bytes(log + b"\n", kb, engine=engine) == result


@pytest.mark.parametrize("engine", available_engines())
def test_a_run_of_nul_bytes_is_scanned_as_one_cut_line(engine: str) -> None:
    """A crash leaves NUL bytes in a log (megabytes without a newline): they count as one
    line cut in pieces; only the pieces of nothing but NUL bytes are passed over, so an error
    inside the run and one after it are both found."""
    nul = b"\0" * (3 * MAX_LINE)
    data = b"step 1 ok\n" + nul[: MAX_LINE // 2] + OOM.encode() + nul + b"\n" + OOM.encode()
    scanner = Scanner(load_default_kb(), engine=engine)
    for i in range(0, len(data), 1 << 20):  # as scan_stream reads a file
        scanner.feed(data[i : i + (1 << 20)])
    result = scanner.finish()
    hit = next(h for h in result.hits if h.signature_id == "cuda.out-of-memory")
    assert (hit.count, hit.first_line, hit.last_line) == (2, 2, 3)
    assert (result.truncated_lines, result.lines, result.binary) == (1, 3, True)


def _tricky_log(seed: int) -> bytes:
    """~120 KiB from the corpus' error lines, made hard for the shortcuts: numbers changed and
    moved into words, lines cut with and without their continuation, repeated in loops, with
    carriage returns, over 2 and 8 KiB, NUL runs, blank lines."""
    import random

    from tests.kb.helpers import corpus

    rng = random.Random(seed)  # noqa: S311 (test data)
    errors = [line for case in corpus() for line in case.log.splitlines() if line.strip()]
    long_ones = [line for line in errors if len(line) >= 45]

    def renumber(line: bytes) -> bytes:
        return bytes(rng.choice(b"0123456789") if b in b"0123456789" else b for b in line)

    def digit_in(line: bytes) -> bytes:
        at = rng.randrange(len(line) + 1)
        return line[:at] + str(rng.randrange(10)).encode() + line[at:]

    out: list[bytes] = []
    while sum(map(len, out)) < 120_000:
        roll = rng.random()
        line = rng.choice(errors)
        if roll < 0.3:
            out.append(f"step {rng.randrange(9999)} loss 0.{rng.randrange(999)} NCCL INFO".encode())
        elif roll < 0.5:
            out.append(rng.choice((renumber, digit_in, lambda x: x + b"\r"))(line))
        elif roll < 0.75:
            whole = rng.choice(long_ones)
            cut = rng.randint(40, len(whole))
            rest = whole[cut:]
            follow = rng.choice(
                (rest, b"    " + rest.lstrip(), b"", b"Traceback (most recent call last):")
            )
            out.extend([whole[:cut], follow] * rng.choice((1, 1, 5)))
        elif roll < 0.9:
            out.extend([rng.choice((line, renumber(line)))] * rng.choice((3, 40)))
        else:
            filler = rng.choice((b"x", b"\0")) * rng.choice((2000, 2100, 8300))
            out.append(rng.choice(long_ones)[:45] + filler + rng.choice((b"", line)))
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("engine", available_engines())
@pytest.mark.parametrize("seed", range(1, 9))
def test_every_shortcut_gives_the_plain_scanners_result(seed: int, engine: str) -> None:
    """Line templates, RE2's dense windows, remembered lines and shortlists only save work:
    forced on or off (or forgetting every 7 lines), the result is the plain scanner's."""
    data = _tricky_log(seed)
    kb = load_default_kb()

    def scan(chunk: int, **knobs: int) -> ScanResult:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in knobs.items():
                mp.setattr(matcher if hasattr(matcher, name) else candidates, name, value)
            mp.setattr(CandidateFinder, "_dense", knobs.get("_DENSE", 0) < 0)
            scanner = Scanner(kb, engine=engine)
            for i in range(0, len(data), chunk):
                scanner.feed(data[i : i + chunk])
            return scanner.finish()

    plain = scan(1 << 30, _TEMPLATE_MIN=candidates._TEMPLATE_WINDOW + 1, _CACHED_LINE=-1)
    assert plain.hits
    for chunk in (1 << 20, 4096, 777, 13):  # a cut line is joined across pieces too
        assert scan(chunk, _TEMPLATE_MIN=1, _TEMPLATE_BACKOFF=0, _DENSE=-1) == plain
        assert scan(chunk, _TEMPLATE_MIN=1, _DENSE=-1, _MEMO_SIZE=7) == plain
        assert scan(chunk) == plain


@pytest.mark.parametrize("engine", available_engines())
def test_a_message_its_program_survives_names_no_cause(engine: str) -> None:
    """Paddle's TensorRT probe names a library that cannot be opened, but Paddle goes on: the
    line is no cause, though the missing-library signatures read its words; a real failure
    later in the same log still is one."""
    kb = load_default_kb()
    alone = scan_bytes((PADDLE_TENSORRT + "\nstep 1 loss 0.5\n").encode(), kb, engine=engine)
    assert [h.signature_id for h in alone.hits] == ["paddle.tensorrt-optional"]
    later = f"{PADDLE_TENSORRT}\n{OOM}\n".encode()
    hits = {h.signature_id: h for h in scan_bytes(later, kb, engine=engine).hits}
    assert set(hits) == {"paddle.tensorrt-optional", "cuda.out-of-memory"}
    assert hits["cuda.out-of-memory"].first_line == 2
    # the library's name in another program's words is still read
    other = b"OSError: libnvinfer.so: cannot open shared object file: No such file or directory\n"
    assert "libs.missing-library" in {h.signature_id for h in scan_bytes(other, kb).hits}
