"""A Report in the Prometheus text format, for node_exporter's textfile collector.

One gauge per finding code and severity, the verdict, the machine's facts as ``*_info`` metrics
(value 1, the facts in labels), and when the run happened and how long it took. Samples carry no
timestamps (the textfile collector refuses them); ``write_textfile`` replaces the file atomically
so that node_exporter never reads half a file.

Alert on ``envdoctor_status{status="unhealthy"} == 1`` or on a code:
``envdoctor_finding{code="gpu.lost"} > 0``; ``time() - envdoctor_last_run_timestamp_seconds``
catches a probe that stopped running.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from envdoctor import __version__
from envdoctor.engine import Report
from envdoctor.model.facts import Facts, TorchBuild
from envdoctor.model.finding import Severity
from envdoctor.model.probed import Found
from envdoctor.render.exposition import Writer, label_value
from envdoctor.render.files import write_atomic
from envdoctor.render.gpu_metrics import gpu_metrics
from envdoctor.render.link_metrics import link_metrics

STATUSES = ("healthy", "unhealthy", "unknown")
SEVERITIES = (Severity.ERROR, Severity.WARNING, Severity.INFO)


def render_prometheus(
    report: Report, duration_s: float, *, command: str = "check", now: float | None = None
) -> str:
    """The whole textfile for one run: verdict, findings, facts, timestamp and duration."""
    out = Writer()
    _verdict(out, report.status, report.exit_code)
    out.metric(
        "envdoctor_findings",
        "Findings of the last run, by severity.",
        [((("severity", s.label),), _count(report, s)) for s in SEVERITIES],
    )
    per_code = Counter((f.code, f.severity.label) for f in report.findings)
    out.metric(
        "envdoctor_finding",
        "Findings of the last run with this code and severity (absent when none).",
        [((("code", code), ("severity", sev)), n) for (code, sev), n in sorted(per_code.items())],
    )
    _facts(out, report.facts)
    gpu_metrics(out, report.facts)
    link_metrics(out, report.facts)  # the interconnect (issue 39)
    _run(out, command, duration_s, now)
    return out.text()


def render_prometheus_unknown(
    reason: str, duration_s: float, *, command: str = "probe", now: float | None = None
) -> str:
    """The textfile for a run that reached no verdict (e.g. the probe's watchdog fired)."""
    out = Writer()
    _verdict(out, "unknown", 2)
    out.metric(
        "envdoctor_unknown_reason_info",
        "Why the last run could not determine the machine's health.",
        [((("reason", reason),), 1)],
    )
    _run(out, command, duration_s, now)
    return out.text()


def write_textfile(path: Path, text: str) -> None:
    """Write the metrics file atomically and world-readable (node_exporter runs as another user)."""
    write_atomic(path, text, what="the metrics file", published=True)


# --- pieces -----------------------------------------------------------------------------------


def _verdict(out: Writer, status: str, exit_code: int) -> None:
    out.metric(
        "envdoctor_status",
        "Verdict of the last run: 1 for the current status (healthy, unhealthy, unknown).",
        [((("status", s),), int(s == status)) for s in STATUSES],
    )
    out.metric(
        "envdoctor_exit_code",
        "Exit code of the last run: 0 healthy, 1 unhealthy, 2 could not determine.",
        [((), exit_code)],
    )


def _run(out: Writer, command: str, duration_s: float, now: float | None) -> None:
    out.metric(
        "envdoctor_info",
        "The envdoctor that wrote this file and the command it ran.",
        [((("version", __version__), ("command", command)), 1)],
    )
    out.metric(
        "envdoctor_last_run_timestamp_seconds",
        "When the last run finished, in seconds since the epoch.",
        [((), round(time.time() if now is None else now, 3))],
    )
    out.metric(
        "envdoctor_last_run_duration_seconds",
        "How long the last run took, in seconds.",
        [((), round(duration_s, 6))],
    )


def _facts(out: Writer, facts: Facts) -> None:
    host = facts.host
    out.metric(
        "envdoctor_host_info",
        "The machine: operating system, kernel, containers.",
        [
            (
                (
                    ("os", label_value(host.os_name)),
                    ("kernel", label_value(host.kernel)),
                    ("machine", host.machine),
                    ("containers", ",".join(host.containers)),
                ),
                1,
            )
        ],
    )
    nvml = facts.nvml.value if isinstance(facts.nvml, Found) else None
    kernel = facts.kernel.driver.value if isinstance(facts.kernel.driver, Found) else None
    out.metric(
        "envdoctor_driver_info",
        "The NVIDIA driver: NVML's version, the CUDA version it supports, the kernel module.",
        [
            (
                (
                    ("version", label_value(nvml.driver_version) if nvml else ""),
                    ("cuda_version", label_value(nvml.cuda_driver_version) if nvml else ""),
                    ("kernel_module", kernel.version if kernel else ""),
                    ("flavor", kernel.flavor if kernel else ""),
                ),
                1,
            )
        ],
    )
    if nvml is not None:
        out.metric("envdoctor_gpus", "GPUs NVML reports.", [((), len(nvml.gpus))])
        out.metric(
            "envdoctor_gpu_info",
            "One per GPU: name, UUID, PCI bus id, compute capability.",
            [
                (
                    (
                        ("gpu", str(g.index)),
                        ("name", label_value(g.name)),
                        ("uuid", label_value(g.uuid)),
                        ("pci_bus_id", label_value(g.pci_bus_id)),
                        ("compute_capability", label_value(g.compute_capability)),
                    ),
                    1,
                )
                for g in nvml.gpus
            ],
        )
    torch = facts.torch.torch
    if isinstance(torch, Found) and isinstance(torch.value, TorchBuild):
        build = torch.value
        out.metric(
            "envdoctor_torch_info",
            "The torch of the checked interpreter: version, CUDA, cuDNN.",
            [
                (
                    (
                        ("version", build.version),
                        ("cuda", build.cuda),
                        ("cudnn", label_value(build.cudnn_version)),
                        ("python", facts.torch.python),
                    ),
                    1,
                )
            ],
        )


def _count(report: Report, severity: Severity) -> int:
    return sum(1 for f in report.findings if f.severity == severity)
