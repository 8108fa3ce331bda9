"""Benchmark `envdoctor explain` against `grep -E` with the same patterns, on a generated log.

    python benchmarks/bench_explain.py                 # 256 MiB log, quick
    python benchmarks/bench_explain.py --size 1G       # the issue's 1 GB log

The log is a realistic training log (progress bars, step lines, NCCL INFO lines, warnings, a few
harmless words such as "error_rate") with real error outputs from tests/data/tracebacks injected
at random places. Both tools read the same file from the page cache (it is read once before
timing). grep gets every signature regex translated to POSIX ERE (envdoctor.kb.ere) in one
`grep -E -n -f` run. The script prints wall time (best of --repeat), the ratio, and peak RSS of
each process (from wait4), and runs explain a second time on a log 1/8 the size to show that
memory does not grow with the log.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envdoctor.kb import load_default_kb  # noqa: E402 (after the path set-up)
from envdoctor.kb.ere import kb_to_ere  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "tracebacks"
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class Run:
    seconds: float
    max_rss_kib: int
    returncode: int


def parse_size(text: str) -> int:
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def healthy_lines(rng: random.Random, n: int) -> list[str]:
    """Lines of a healthy multi-GPU training log. About 3% of them contain a word the
    prefilter looks for (an eval line with "error_rate", NCCL INFO lines, CUDA mentions),
    which is more than real logs have and costs envdoctor the most."""
    out: list[str] = []
    for i in range(n):
        kind = rng.random()
        loss = rng.random() * 3
        if kind < 0.62:
            out.append(
                f"[rank{i % 8}]: step {i} loss {loss:.4f} lr {3e-4 * rng.random():.2e} "
                f"grad_norm {rng.random() * 2:.3f} tokens/s {rng.randint(40000, 60000)}"
            )
        elif kind < 0.87:
            pct = i % 100
            out.append(
                f"Epoch {i // 1000}: {pct:3d}%|{'#' * (pct // 10):<10}| {i}/100000 "
                f"[01:{i % 60:02d}<09:12, 13.4it/s, loss={loss:.3f}]"
            )
        elif kind < 0.95:
            out.append(
                f"INFO 2024-05-03 12:{i % 60:02d}:{i % 59:02d},123 trainer.py:{i % 400}: "
                f"saved checkpoint step_{i}.pt, eval accuracy {rng.random():.4f}"
            )
        elif kind < 0.97:
            out.append(
                f"/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:{i % 700}: "
                "UserWarning: This DataLoader will create 16 worker processes in total."
            )
        elif kind < 0.98:
            out.append(
                f"node{i % 4}:{1000 + i % 7}:{2000 + i % 13} [{i % 8}] NCCL INFO Channel "
                f"{i % 32:02d}/32 : 0 1 2 3 4 5 6 7 via P2P/IPC/read"
            )
        elif kind < 0.99:
            out.append(
                f"INFO eval: accuracy {rng.random():.4f} val_error_rate {rng.random() / 10:.4f}"
            )
        else:
            out.append(
                f"wandb: train/loss {loss:.4f} train/MeanSquaredError {rng.random():.4f} "
                f"CUDA mem {rng.random() * 80:.1f} GiB"
            )
    return out


def error_blocks() -> list[str]:
    blocks = []
    for path in sorted(CORPUS.glob("*/*.txt")):
        _, _, body = path.read_text(encoding="utf-8").partition("# ---\n")
        blocks.append(body.rstrip("\n"))
    return blocks


def generate(path: Path, size: int, seed: int = 7) -> int:
    """Write a log of about ``size`` bytes; return how many error blocks were injected."""
    rng = random.Random(seed)  # noqa: S311 (benchmark data)
    pool = healthy_lines(rng, 20_000)
    errors = error_blocks()
    injected = 0
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size:
            lines = rng.sample(pool, 2000)
            if rng.random() < 0.01:
                lines.insert(rng.randrange(len(lines)), rng.choice(errors))
                injected += 1
            chunk = "\n".join(lines) + "\n"
            out.write(chunk)
            written += len(chunk.encode("utf-8"))
    return injected


def timed(argv: list[str], out: Path) -> Run:
    """Wall time and peak RSS of one run. Output goes to a real file: GNU grep stops at the
    first match when its output is /dev/null, which would not be a fair comparison."""
    with out.open("wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(seconds, int(usage.ru_maxrss), proc.returncode)


def best(argv: list[str], repeat: int, out: Path) -> Run:
    runs = [timed(argv, out) for _ in range(repeat)]
    return min(runs, key=lambda r: r.seconds)


def warm(path: Path) -> None:
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256M", help="log size, e.g. 256M or 1G (default 256M)")
    parser.add_argument("--repeat", type=int, default=3, help="timings per tool (best counts)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the logs")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = parser.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        print("grep is not installed", file=sys.stderr)
        return 2
    size = parse_size(args.size)
    workdir = Path(tempfile.mkdtemp(prefix="envdoctor-bench-", dir=args.dir))
    try:
        kb = load_default_kb()
        patterns = workdir / "patterns.ere"
        patterns.write_text("\n".join(kb_to_ere(kb)) + "\n", encoding="utf-8")
        big = workdir / "train.log"
        small = workdir / "train-small.log"
        t0 = time.perf_counter()
        injected = generate(big, size)
        generate(small, max(size // 8, 1 << 20), seed=8)
        print(
            f"generated {big.stat().st_size / (1 << 20):.0f} MiB log with {injected} error "
            f"blocks in {time.perf_counter() - t0:.1f} s"
        )
        print(
            f"{len(kb.signatures)} signatures, {sum(len(s.patterns) for s in kb.signatures)} "
            f"patterns, {len(kb.triggers)} prefilter literals"
        )
        explain = [sys.executable, "-m", "envdoctor", "explain", "--format", "json"]
        warm(big)
        out = workdir / "out.txt"
        grep_run = best([grep, "-E", "-n", "-f", str(patterns), str(big)], args.repeat, out)
        matched = sum(1 for _ in out.open("rb"))
        explain_run = best([*explain, str(big)], args.repeat, out)
        causes = len(json.loads(out.read_text(encoding="utf-8"))["causes"])
        warm(small)
        small_run = best([*explain, str(small)], 1, out)
        ratio = explain_run.seconds / grep_run.seconds
        mib = big.stat().st_size / (1 << 20)
        print()
        print(f"{'tool':<28}{'wall s':>9}{'MiB/s':>9}{'peak RSS MiB':>14}")
        print(
            f"{'grep -E -n -f (same regexes)':<28}{grep_run.seconds:>9.2f}"
            f"{mib / grep_run.seconds:>9.0f}{grep_run.max_rss_kib / 1024:>14.1f}"
        )
        print(
            f"{'envdoctor explain':<28}{explain_run.seconds:>9.2f}"
            f"{mib / explain_run.seconds:>9.0f}{explain_run.max_rss_kib / 1024:>14.1f}"
        )
        print(
            f"{'envdoctor explain (1/8 log)':<28}{small_run.seconds:>9.2f}"
            f"{small.stat().st_size / (1 << 20) / small_run.seconds:>9.0f}"
            f"{small_run.max_rss_kib / 1024:>14.1f}"
        )
        print()
        print(f"grep printed {matched} matching lines; explain reported {causes} causes")
        print(f"ratio explain/grep: {ratio:.2f}x (goal: within 3x)")
        print(
            f"peak RSS {small_run.max_rss_kib / 1024:.1f} MiB at 1/8 size vs "
            f"{explain_run.max_rss_kib / 1024:.1f} MiB at full size (goal: flat)"
        )
        if explain_run.returncode != 1:
            print(f"unexpected explain exit code {explain_run.returncode}", file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
