"""`envdoctor smoke`: run the real cuBLAS/cuDNN/NCCL work on each GPU, safely, and say why it fails.

Exit codes: 0 every step passed, 1 a step failed, 2 could not determine (nothing to test) or
usage error. With ``--reproduce``: 1 the error reproduced, 0 it did not, 2 undetermined.
"""

from __future__ import annotations

import enum
import shutil
import sys
from typing import TYPE_CHECKING, Optional

import typer

from envdoctor.cli.boundary import boundary
from envdoctor.cli.common import app_context, facts_for
from envdoctor.errors import EnvdoctorError

if TYPE_CHECKING:
    from envdoctor.render.text import Marks

# Typer reads these annotations at runtime: keep the Optional[...] / List[...] spellings.
# ruff: noqa: UP045


class Reproduce(str, enum.Enum):
    cublas_alloc = "cublas-alloc"
    cudnn_init = "cudnn-init"


def smoke(
    ctx: typer.Context,
    python: Optional[str] = typer.Option(
        None, "--python", help="Interpreter whose torch to test (default: this one)."
    ),
    timeout: float = typer.Option(
        60.0, "--timeout", help="Time budget per GPU in seconds (GPUs run in parallel)."
    ),
    step_timeout: float = typer.Option(
        30.0, "--step-timeout", help="Time budget per step in seconds (at most --timeout)."
    ),
    gpu: Optional[list[int]] = typer.Option(
        None, "--gpu", help="Test only this GPU (NVML index); repeat for several."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
    reproduce: Optional[Reproduce] = typer.Option(
        None,
        "--reproduce",
        help=(
            "Check whether this error reproduces under GPU memory pressure. WARNING: it fills "
            "the GPU's memory to the last MiB; other jobs on that GPU may fail with out of "
            "memory. A GPU NVML shows in use by other processes is refused unless named with "
            "--gpu N --force."
        ),
    ),
    leave: Optional[int] = typer.Option(
        None,
        "--leave",
        help=(
            "With --reproduce: leave only this many MiB free after the probe's own CUDA "
            "context (default: search for the threshold)."
        ),
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="With --reproduce --gpu N: fill GPU N even though other processes use it.",
    ),
    in_process: bool = typer.Option(
        False,
        "--in-process",
        help=(
            "With --reproduce: torch's own cache holds the memory and a new thread creates its "
            "cuBLAS/cuDNN handle (the usual case inside a training process)."
        ),
    ),
    budget: float = typer.Option(
        300.0,
        "--budget",
        help="With --reproduce: start no new probe after this many seconds.",
    ),
) -> None:
    """Run CUDA, cuBLAS, cuDNN and NCCL for real on each GPU, time-bounded, and attribute failures.

    --reproduce fills a GPU's memory: never run it on a GPU other jobs use.
    """
    with boundary():
        target_python = python or app_context(ctx).python
        if reproduce is None:
            for name, given in (
                ("--leave", leave is not None),
                ("--force", force),
                ("--in-process", in_process),
            ):
                if given:
                    raise EnvdoctorError(f"{name} only applies with --reproduce")
        if reproduce is not None and gpu and len(gpu) > 1:
            raise EnvdoctorError("--reproduce works on one GPU: give --gpu once")
        facts = facts_for(ctx, python=target_python, include_torch=True)
        width = min(shutil.get_terminal_size((100, 24)).columns, 120)
        marks = _marks()
        if reproduce is not None:
            from envdoctor.smoke.reproduce import (
                ReproduceOptions,
                reproduce_exit_code,
                reproduce_findings,
            )
            from envdoctor.smoke.reproduce import reproduce as run_reproduce

            options = ReproduceOptions(
                python=target_python,
                kind=reproduce.value,
                gpu=gpu[0] if gpu else None,
                leave_mib=leave,
                timeout=timeout,
                force=force,
                in_process=in_process,
                budget=budget,
            )
            result = run_reproduce(facts, options)
            findings = reproduce_findings(facts, result)
            code = reproduce_exit_code(findings)
            if as_json:
                from envdoctor.smoke.render import reproduce_json
                from envdoctor.terminal import json_document

                typer.echo(json_document(reproduce_json(result, findings, code)), nl=False)
            else:
                from envdoctor.smoke.render import render_reproduce_text

                text = render_reproduce_text(facts, result, findings, width=width, marks=marks)
                typer.echo(text, nl=False)
            raise typer.Exit(code)

        from envdoctor.engine import Report
        from envdoctor.smoke import SmokeOptions, run_smoke, smoke_findings
        from envdoctor.smoke.render import render_smoke_text, smoke_json

        options_ = SmokeOptions(
            python=target_python,
            timeout=timeout,
            step_timeout=min(step_timeout, timeout),
            gpus=tuple(gpu or ()),
        )
        run = run_smoke(facts, options_)
        findings = smoke_findings(facts, run)
        if as_json:
            from envdoctor.terminal import json_document

            typer.echo(json_document(smoke_json(facts, run, findings)), nl=False)
        else:
            typer.echo(render_smoke_text(facts, run, findings, width=width, marks=marks), nl=False)
        raise typer.Exit(Report(facts, findings).exit_code)


def _marks() -> Marks:
    from envdoctor.render.text import ASCII, UNICODE

    encoding = (getattr(sys.stdout, "encoding", None) or "").lower()
    return UNICODE if "utf" in encoding else ASCII


def register(app: typer.Typer) -> None:
    app.command("smoke")(smoke)
