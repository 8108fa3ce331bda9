"""Run `envdoctor probe` with NVML answered by simulated GPUs (for bench_nvml.py).

Usage: python benchmarks/nvml_sim_probe.py GPUS DELAY_MS [--one-by-one] [probe options...]

The pynvml module is replaced by tests/fakes/pynvml_sim.py (every call sleeps DELAY_MS,
releasing the GIL as a ctypes call into libnvidia-ml does) and loading libnvidia-ml.so.1 is
skipped; everything else is the real probe: envdoctor's NVML session and workers, the probes of
/proc, /sys and /dev on this machine, the rules and the output. ``--one-by-one`` reads the GPUs
on one thread and one NVML worker, as envdoctor did before it read them side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: envdoctor, tests


def main() -> None:
    gpus, delay_ms, *rest = sys.argv[1:]
    one_by_one = "--one-by-one" in rest
    args = [a for a in rest if a != "--one-by-one"]

    from tests.fakes.pynvml_sim import SimGpu, make_pynvml

    sys.modules["pynvml"] = make_pynvml(
        [SimGpu() for _ in range(int(gpus))], delay=float(delay_ms) / 1000
    )
    from envdoctor.platform import nvml as platform_nvml
    from envdoctor.probes import nvml as probe_nvml

    platform_nvml._load_native_library = lambda: None  # there is no driver to load here
    if one_by_one:
        platform_nvml.MAX_WORKERS = 1
        probe_nvml.MAX_WORKERS = 1  # type: ignore[attr-defined]  # its import of the same constant
    from envdoctor.cli import entry

    sys.argv = ["envdoctor", "probe", *args]
    entry.main()


if __name__ == "__main__":
    main()
