"""Smoke tests: run the real thing on each GPU, in isolated, time-bounded child processes.

``torch.cuda.is_available()`` can be True while the first convolution dies with
``CUDNN_STATUS_NOT_INITIALIZED``. For each GPU a child of the *target* interpreter creates a
CUDA context, fills and copies a buffer, runs cuBLAS GEMMs (fp32, fp16, bf16) and a cuDNN
convolution forward and backward against CPU references, and with two or more GPUs an NCCL
all-reduce. Failures are classified (``classify.py``, patterns as data) and attributed to the
cause the machine's facts support (``attribute.py``). ``--reproduce`` (``reproduce.py``) tests,
on an idle GPU of the user's own machine, whether running out of memory produces the failure.

torch never runs in envdoctor's process: ``child.py`` is run as ``python -c`` in the target.
"""

from __future__ import annotations

from collections.abc import Callable

from envdoctor.model.facts import Facts
from envdoctor.model.finding import Finding
from envdoctor.smoke.attribute import not_applicable_finding, smoke_findings
from envdoctor.smoke.codes import CODES, SMOKE_CODES
from envdoctor.smoke.runner import SmokeOptions, run_smoke

DEFAULT_STEP_TIMEOUT = 30.0

__all__ = [
    "CODES",
    "SMOKE_CODES",
    "SmokeOptions",
    "deep_findings",
    "not_applicable_finding",
    "run_smoke",
    "smoke_findings",
]


def deep_findings(
    facts: Facts,
    *,
    python: str,
    timeout: float,
    on_step: Callable[[str, str], None] | None = None,
) -> tuple[Finding, ...]:
    """Run the smoke tests on every GPU in ``facts`` and return their findings.

    For ``envdoctor check --deep``: ``timeout`` bounds each GPU's child (GPUs run in parallel);
    each step gets at most 30 s of it. Includes one ``smoke.passed`` (severity OK) per healthy
    GPU, one finding per failure, ``smoke.not-run`` (inconclusive) when there is nothing to test.
    ``on_step``: see ``SmokeOptions``.
    """
    options = SmokeOptions(
        python=python,
        timeout=timeout,
        step_timeout=min(DEFAULT_STEP_TIMEOUT, timeout),
        on_step=on_step,
    )
    return smoke_findings(facts, run_smoke(facts, options))
