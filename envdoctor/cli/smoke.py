"""`envdoctor smoke`: run the real cuBLAS/cuDNN/NCCL work on each GPU, safely, and say why it fails.

Exit codes: 0 every step passed, 1 a step failed, 2 could not determine (nothing to test) or
usage error. With ``--reproduce``: 1 the error reproduced, 0 it did not, 2 undetermined.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from envdoctor.cli.common import (
    Invocation,
    facts_for,
    output_format,
    target_python,
    text_width,
    unicode_out,
    write_report,
)
from envdoctor.cli.progress import Progress, SmokeSteps, elapsed
from envdoctor.errors import EnvdoctorError
from envdoctor.terminal import json_document

if TYPE_CHECKING:
    from envdoctor.model.facts import NvmlSystem
    from envdoctor.model.probed import Probed

RECHECK_S = 10.0
"""The bound of each NVML reading between two probes of a reproduction."""


def run(inv: Invocation) -> int:
    from envdoctor.render.text import ASCII, UNICODE, colour_report

    args = inv.args
    as_json = output_format(inv) == "json"
    python = target_python(inv)
    reproduce = args.text("reproduce")
    gpu = args.integers("gpu")
    timeout = args.number("timeout")
    if reproduce is None:
        for flag, dest in (
            ("--leave", "leave"),
            ("--force", "force"),
            ("--in-process", "in_process"),
        ):
            if args.given(dest):
                raise EnvdoctorError(f"{flag} only applies with --reproduce")
    if reproduce is not None and len(gpu) > 1:
        raise EnvdoctorError("--reproduce works on one GPU: give --gpu once")
    facts = facts_for(inv, include_torch=True)
    width = text_width()
    marks = UNICODE if unicode_out() else ASCII
    if reproduce is not None:
        from envdoctor.smoke.reproduce import (
            ReproduceOptions,
            reproduce_exit_code,
            reproduce_findings,
        )
        from envdoctor.smoke.reproduce import reproduce as run_reproduce

        options = ReproduceOptions(
            python=python,
            kind=reproduce,
            gpu=gpu[0] if gpu else None,
            leave_mib=args.integer("leave"),
            timeout=timeout,
            force=args.flag("force"),
            in_process=args.flag("in_process"),
            budget=args.number("budget"),
        )
        started = time.monotonic()
        from envdoctor.platform.host import Deadline
        from envdoctor.probes.nvml import probe_nvml

        host = inv.host

        def recheck() -> Probed[NvmlSystem]:  # is the GPU still idle? NVML again, bounded
            return probe_nvml(host, deadline=Deadline(RECHECK_S))

        with Progress(lambda: f"reproducing {reproduce} ({elapsed(started)})"):
            result = run_reproduce(facts, options, recheck)
        findings = reproduce_findings(facts, result)
        code = reproduce_exit_code(findings)
        if as_json:
            from envdoctor.render.smoke import reproduce_json

            write_report(inv, json_document(reproduce_json(result, findings, code)))
        else:
            from envdoctor.render.smoke import render_reproduce_text

            text = render_reproduce_text(facts, result, findings, width=width, marks=marks)
            write_report(inv, text, paint=colour_report)
        return code

    from envdoctor.engine import Report
    from envdoctor.render.smoke import render_smoke_text, smoke_json
    from envdoctor.smoke import SmokeOptions, run_smoke, smoke_findings

    steps = SmokeSteps()  # which GPU is at which step, on a terminal's stderr
    smoke_options = SmokeOptions(
        python=python,
        timeout=timeout,
        step_timeout=min(args.number("step_timeout"), timeout),
        gpus=gpu,
        on_step=steps,
    )
    with Progress(steps.describe):
        run_ = run_smoke(facts, smoke_options)
    findings = smoke_findings(facts, run_)
    if as_json:
        write_report(inv, json_document(smoke_json(facts, run_, findings)))
    else:
        text = render_smoke_text(facts, run_, findings, width=width, marks=marks)
        write_report(inv, text, paint=colour_report)
    return Report(facts, findings).exit_code
