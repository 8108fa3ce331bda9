"""The one-line verdict that probes and schedulers read: what a Report comes to, in 80 bytes.

``healthy: 8x NVIDIA H100 80GB HBM3, driver 580.159.04``
``unhealthy: gpu.lost (+1 more): GPU 3 (NVIDIA H100 80GB HBM3) at 00000000:1B:00.0 has…``

node-problem-detector keeps the first 80 bytes of a plugin's output as the node condition's
message, so the line never exceeds that.
"""

from __future__ import annotations

from envdoctor.engine import Report
from envdoctor.model.finding import Finding, Severity
from envdoctor.model.probed import Found, why_missing
from envdoctor.model.units import plural
from envdoctor.model.views import MachineKind, machine_view
from envdoctor.terminal import safe_line

MAX_VERDICT_BYTES = 80


def verdict_line(report: Report, limit: int = MAX_VERDICT_BYTES) -> str:
    """``STATUS: …`` on one line of at most ``limit`` bytes of UTF-8."""
    if report.status == "healthy":
        warnings = len(_notable(report))
        noted = f" ({plural(warnings, 'warning')})" if warnings else ""
        return fit_line(f"healthy{noted}: {machine_summary(report)}", limit)
    return fit_line(f"{report.status}: {problem_summary(report)}", limit)


def problem_summary(report: Report) -> str:
    """``code (+N more): title`` of the finding that decided a verdict other than healthy."""
    notable = _notable(report)
    top = _deciding(report)
    if top is None:
        return "no finding"
    more = len(notable) - 1
    extra = f" (+{more} more)" if more > 0 else ""
    return f"{top.code}{extra}: {one_line(top.title)}"


def machine_summary(report: Report) -> str:
    """``8x NVIDIA H100 80GB HBM3, driver 580.159.04``, ``no NVIDIA GPU (a CPU machine)`` …"""
    nvml = report.facts.nvml
    if not isinstance(nvml, Found):
        view = machine_view(report.facts, report.intent)
        if view.kind is MachineKind.CPU:
            return "no NVIDIA GPU (a CPU machine)"
        if view.kind is MachineKind.CONTAINER_WITHOUT_GPU:
            return "no NVIDIA GPU in this container"
        count = view.presence.count
        return f"{plural(count, 'NVIDIA GPU')}, NVML: {why_missing(nvml)}"
    system = nvml.value
    names: dict[str, int] = {}
    for gpu in system.gpus:
        name = gpu.name.value if isinstance(gpu.name, Found) else "GPU"
        names[name] = names.get(name, 0) + 1
    gpus = ", ".join(f"{n}x {name}" for name, n in names.items()) or "no GPUs"
    driver = system.driver_version
    return f"{gpus}, driver {driver.value}" if isinstance(driver, Found) else gpus


def fit_line(text: str, limit: int) -> str:
    """One line of at most ``limit`` UTF-8 bytes, cut with "..." when longer."""
    line = one_line(text)
    data = line.encode("utf-8")
    if len(data) <= limit:
        return line
    return data[: limit - 3].decode("utf-8", errors="ignore").rstrip() + "..."


def one_line(text: str) -> str:
    """Whitespace collapsed, and anything else that could steer a terminal shown as an escape."""
    return safe_line(" ".join(text.split()))


def _notable(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.severity >= Severity.WARNING or f.inconclusive]


def _deciding(report: Report) -> Finding | None:
    if report.status == "unhealthy":
        floor = Severity.WARNING if report.strict else Severity.ERROR
        return next((f for f in report.findings if f.severity >= floor), None)
    return next((f for f in report.findings if f.inconclusive), None)
