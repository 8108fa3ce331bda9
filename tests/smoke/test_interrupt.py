"""Ctrl-C and SIGTERM while children run: envdoctor stops and no child survives it."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.smoke.conftest import PYTHON, fake_pids, wait_dead

ROOT = Path(__file__).resolve().parents[2]
EnvMaker = Callable[..., dict[str, str | None]]

DRIVER = """
import json, sys
sys.path.insert(0, {root!r})
from tests.smoke.conftest import PYTHON, gpu_facts
env = json.loads(sys.argv[1])
if sys.argv[2] == "reproduce":
    from envdoctor.smoke.reproduce import ReproduceOptions, reproduce
    reproduce(gpu_facts(1), ReproduceOptions(python=PYTHON, kind="cublas-alloc", env=env, timeout=60))
else:
    from envdoctor.smoke import SmokeOptions, run_smoke
    run_smoke(gpu_facts(2), SmokeOptions(python=PYTHON, env=env, timeout=60, step_timeout=60))
"""


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


@pytest.mark.parametrize(
    ("mode", "sig", "children"),
    [
        ("reproduce", signal.SIGINT, 1),  # the baseline probe, hanging in its GEMM
        ("reproduce", signal.SIGTERM, 1),
        ("smoke", signal.SIGINT, 2),  # two GPUs, both hanging
    ],
)
def test_interrupt_kills_every_child(
    fake_env: EnvMaker, tmp_path: Path, mode: str, sig: signal.Signals, children: int
) -> None:
    env = fake_env("matmul=hang")
    driver = subprocess.Popen(
        [PYTHON, "-c", DRIVER.format(root=str(ROOT)), json.dumps(env), mode],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: len(fake_pids(tmp_path)) >= children)
        time.sleep(0.3)  # let them reach the hanging GEMM
        pids = fake_pids(tmp_path)
        driver.send_signal(sig)
        driver.wait(timeout=10)
        _, err = driver.communicate()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode != 0
    assert b"KeyboardInterrupt" in err or b"Terminated" in err
    for pid in pids:
        assert wait_dead(pid), f"child {pid} survived"
