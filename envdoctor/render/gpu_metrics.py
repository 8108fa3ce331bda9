"""Per-GPU health as Prometheus metrics: the values admins alert on (dcgm-exporter's ground).

Every per-GPU family is labelled ``gpu`` (NVML's index), ``uuid`` and ``pci_bus_id`` (empty when
NVML could not read them, e.g. for a lost GPU). A value NVML could not read is left out, never
written as 0: ``envdoctor_gpu_field_up{field=...}`` says for each GPU and NVML fact whether it was
read, and ``envdoctor_gpu_field_error_info{field, reason}`` why not (``NotSupported`` on
consumer GPUs, ``GPUIsLost``, a timeout). Units are in the names (``_celsius``, ``_watts``,
``_bytes``, ``_ratio``); counters end in ``_total``. UUIDs are the facts' own: a redacted
snapshot (``envdoctor collect``) gives redacted UUIDs here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from envdoctor.model.facts import (
    CLOCK_EVENT_REASONS,
    RECOVERY_ACTION_NAMES,
    Facts,
    GpuFacts,
    NvmlErrorKind,
    NvmlSystem,
)
from envdoctor.model.probed import Found, Probed, why_missing
from envdoctor.render.exposition import Labels, Sample, Writer, label_value


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family drawn from one GPU fact (``field``), as (extra labels, value) samples."""

    name: str
    help: str
    field: str
    samples: Callable[[Any], list[Sample]]
    kind: str = "gauge"


def _one(scale: float = 1.0) -> Callable[[Any], list[Sample]]:
    return lambda value: [((), _number(value * scale if scale != 1.0 else value))]


def _flag(value: Any) -> list[Sample]:
    return [((), int(bool(value)))]


def _attr(name: str, scale: float = 1.0) -> Callable[[Any], list[Sample]]:
    return lambda value: [((), _number(getattr(value, name) * scale))]


def _by(label: str, pairs: tuple[tuple[str, str], ...]) -> Callable[[Any], list[Sample]]:
    """Samples of several attributes, told apart by one label: ((label value, attribute), …)."""
    return lambda value: [(((label, key),), _number(getattr(value, attr))) for key, attr in pairs]


def _reasons(active: Any) -> list[Sample]:
    names = [*CLOCK_EVENT_REASONS, *(r for r in active if r not in CLOCK_EVENT_REASONS)]
    return [((("reason", name),), int(name in active)) for name in names]


def _tagged(label: str, value: str) -> Callable[[Any], list[Sample]]:
    """One sample of a plain value, told apart from its family's others by one label."""
    return lambda number: [(((label, value),), _number(number))]


def _recovery(number: Any) -> list[Sample]:
    name = RECOVERY_ACTION_NAMES.get(number, f"action-{number}")
    return [((("action", name),), _number(number))]


def _fabric(info: Any) -> list[Sample]:
    return [((("state", info.state), ("status", info.status)), 1)]


FAMILIES = (
    Family(
        "envdoctor_gpu_temperature_celsius",
        "GPU temperature (die sensor), in degrees Celsius.",
        "temperature",
        _one(),
    ),
    Family(
        "envdoctor_gpu_power_draw_watts",
        "Power the GPU draws, in watts.",
        "power_draw",
        _one(0.001),
    ),
    Family(
        "envdoctor_gpu_power_limit_watts",
        "The power limit the driver enforces, in watts.",
        "power_limit",
        _one(0.001),
    ),
    Family(
        "envdoctor_gpu_utilization_ratio",
        "Share of NVML's last sample period in which a kernel ran on the GPU (0 to 1).",
        "utilization",
        _attr("gpu", 0.01),
    ),
    Family(
        "envdoctor_gpu_memory_activity_ratio",
        "Share of NVML's last sample period in which GPU memory was read or written (0 to 1).",
        "utilization",
        _attr("memory", 0.01),
    ),
    Family(
        "envdoctor_gpu_memory_used_bytes",
        "GPU memory allocated by processes, in bytes (NVML's v2 query: the driver's reserve apart).",
        "memory",
        _attr("used"),
    ),
    Family(
        "envdoctor_gpu_memory_reserved_bytes",
        "GPU memory the driver keeps for itself, in bytes (0 where only the original query answers).",
        "memory",
        _attr("reserved"),
    ),
    Family(
        "envdoctor_gpu_memory_free_bytes", "GPU memory free, in bytes.", "memory", _attr("free")
    ),
    Family(
        "envdoctor_gpu_memory_total_bytes", "GPU memory in all, in bytes.", "memory", _attr("total")
    ),
    Family(
        "envdoctor_gpu_processes",
        "Processes with a context on the GPU, as NVML lists them (any PID namespace).",
        "processes",
        lambda procs: [((), len(procs))],
    ),
    Family(
        "envdoctor_gpu_ecc_volatile_errors_total",
        "ECC memory errors since the driver was loaded, by error_type.",
        "ecc",
        _by("error_type", (("uncorrected", "volatile_uncorrectable"),)),
        "counter",
    ),
    Family(
        "envdoctor_gpu_ecc_volatile_errors_total",
        "ECC memory errors since the driver was loaded, by error_type.",
        "ecc_corrected",
        _by("error_type", (("corrected", "volatile"),)),
        "counter",
    ),
    Family(
        "envdoctor_gpu_ecc_aggregate_errors_total",
        "ECC memory errors over the GPU's life (kept in its InfoROM), by error_type.",
        "ecc",
        _by("error_type", (("uncorrected", "aggregate_uncorrectable"),)),
        "counter",
    ),
    Family(
        "envdoctor_gpu_ecc_aggregate_errors_total",
        "ECC memory errors over the GPU's life (kept in its InfoROM), by error_type.",
        "ecc_corrected",
        _by("error_type", (("corrected", "aggregate"),)),
        "counter",
    ),
    Family(
        "envdoctor_gpu_retired_pages",
        "Memory pages retired (pre-Ampere dynamic page retirement), by cause.",
        "retired_pages",
        _by("cause", (("single_bit_ecc", "single_bit"), ("double_bit_ecc", "double_bit"))),
    ),
    Family(
        "envdoctor_gpu_retired_pages_pending",
        "1 when a page retirement waits for a GPU reset.",
        "retired_pages_pending",
        _flag,
    ),
    Family(
        "envdoctor_gpu_remapped_rows",
        "Memory rows remapped (Ampere and later), by cause.",
        "row_remap",
        _by("cause", (("correctable", "correctable"), ("uncorrectable", "uncorrectable"))),
    ),
    Family(
        "envdoctor_gpu_row_remap_pending",
        "1 when a row remapping waits for a GPU reset.",
        "row_remap",
        _attr("pending"),
    ),
    Family(
        "envdoctor_gpu_row_remap_failure",
        "1 when a row remapping failed (no spare rows left): the GPU should be replaced.",
        "row_remap",
        _attr("failure"),
    ),
    Family(
        "envdoctor_gpu_clock_event_reason",
        "1 for each clock event (throttle) reason active now, 0 for the others.",
        "throttle_reasons",
        _reasons,
    ),
    Family("envdoctor_gpu_pcie_link_generation", "PCIe link generation now.", "pcie", _attr("gen")),
    Family(
        "envdoctor_gpu_pcie_link_max_generation",
        "Highest PCIe link generation of the GPU and slot.",
        "pcie",
        _attr("max_gen"),
    ),
    Family("envdoctor_gpu_pcie_link_width", "PCIe link width (lanes) now.", "pcie", _attr("width")),
    Family(
        "envdoctor_gpu_pcie_link_max_width",
        "Widest PCIe link of the GPU and slot (lanes).",
        "pcie",
        _attr("max_width"),
    ),
    Family(
        "envdoctor_gpu_persistence_mode",
        "1 when persistence mode is on.",
        "persistence_mode",
        _flag,
    ),
    Family(
        "envdoctor_gpu_fabric_info",
        "The GPU's NVLink fabric registration: state and NVML status (NVSwitch systems).",
        "fabric",
        _fabric,
    ),
    # per-GPU health (issue 39): the driver's verdict, the thermal limits, the SM clock
    Family(
        "envdoctor_gpu_recovery_action",
        "The recovery the driver asks for now (NVML_GPU_RECOVERY_ACTION_*: 0 none, 1 GPU reset, "
        "2 node reboot, 3 drain P2P, 4 drain and reset …), its name in the action label.",
        "recovery_action",
        _recovery,
    ),
    Family(
        "envdoctor_gpu_temperature_threshold_celsius",
        "The GPU's own temperature thresholds (NVML): shutdown, slowdown, max_operating.",
        "shutdown_temperature",
        _tagged("threshold", "shutdown"),
    ),
    Family(
        "envdoctor_gpu_temperature_threshold_celsius",
        "The GPU's own temperature thresholds (NVML): shutdown, slowdown, max_operating.",
        "slowdown_temperature",
        _tagged("threshold", "slowdown"),
    ),
    Family(
        "envdoctor_gpu_temperature_threshold_celsius",
        "The GPU's own temperature thresholds (NVML): shutdown, slowdown, max_operating.",
        "max_operating_temperature",
        _tagged("threshold", "max_operating"),
    ),
    Family(
        "envdoctor_gpu_sm_clock_hertz",
        "The SM clock now, in hertz.",
        "sm_clock",
        _attr("current", 1e6),
    ),
    Family(
        "envdoctor_gpu_sm_clock_max_hertz",
        "The highest SM clock of the GPU, in hertz.",
        "sm_clock",
        _attr("highest", 1e6),
    ),
)
MARGINS = (("shutdown", "shutdown_temperature"), ("slowdown", "slowdown_temperature"))
"""Thresholds whose distance from the temperature is a metric of its own (issue 39)."""
FIELDS = tuple(dict.fromkeys(f.field for f in FAMILIES))


def gpu_metrics(out: Writer, facts: Facts) -> None:
    """Every per-GPU family, the Xid counts and the kernel log's and fabric's state."""
    nvml = facts.nvml.value if isinstance(facts.nvml, Found) else None
    gpus = nvml.gpus if nvml is not None else ()
    if gpus:
        out.metric(
            "envdoctor_gpu_up",
            "1 when NVML answers for the GPU, 0 when it is lost (fell off the bus).",
            [(_labels(g), int(NvmlErrorKind.GPU_IS_LOST not in g.failure_kinds())) for g in gpus],
        )
    for name in dict.fromkeys(f.name for f in FAMILIES):
        family = [f for f in FAMILIES if f.name == name]
        out.metric(
            name,
            family[0].help,
            [s for f in family for g in gpus for s in _samples(f, g)],
            kind=family[0].kind,
        )
    out.metric(
        "envdoctor_gpu_field_up",
        "1 when NVML read this fact of the GPU, 0 when it could not (its metrics are left out).",
        [
            ((*_labels(g), ("field", field)), int(isinstance(_fact(g, field), Found)))
            for g in gpus
            for field in FIELDS
        ],
    )
    out.metric(
        "envdoctor_gpu_field_error_info",
        "Why NVML could not read a fact of the GPU (NotSupported, GPUIsLost, a timeout …).",
        [
            ((*_labels(g), ("field", field), ("reason", why_missing(_fact(g, field)))), 1)
            for g in gpus
            for field in FIELDS
            if not isinstance(_fact(g, field), Found)
        ],
    )
    out.metric(
        "envdoctor_gpu_temperature_margin_celsius",
        "Degrees Celsius from the temperature to a threshold (negative: past it).",
        [sample for g in gpus for sample in _margins(g)],
    )
    _kernel_log(out, facts, nvml)
    _fabric_facts(out, facts)


def _margins(gpu: GpuFacts) -> Iterator[Sample]:
    now = gpu.temperature
    for name, field in MARGINS:
        limit = _fact(gpu, field)
        if isinstance(now, Found) and isinstance(limit, Found):
            yield (*_labels(gpu), ("threshold", name)), _number(limit.value - now.value)


def _samples(family: Family, gpu: GpuFacts) -> Iterator[Sample]:
    value = _fact(gpu, family.field)
    if isinstance(value, Found):
        for extra, number in family.samples(value.value):
            yield (*_labels(gpu), *extra), number


def _kernel_log(out: Writer, facts: Facts, nvml: NvmlSystem | None) -> None:
    log = facts.kernel_log
    out.metric(
        "envdoctor_kernel_log_up",
        "1 when the kernel log was read for Xid events, 0 when it could not be.",
        [((), int(isinstance(log, Found)))],
    )
    if not isinstance(log, Found):
        reason = getattr(log, "detail", "") or why_missing(log)
        out.metric(
            "envdoctor_kernel_log_error_info",
            "Why the kernel log could not be read (each source tried).",
            [((("reason", reason),), 1)],
        )
        return
    out.metric(
        "envdoctor_kernel_log_info",
        "Where the Xid events were read, and whether that log still reaches back to boot.",
        [((("source", log.value.source), ("complete", str(log.value.complete).lower())), 1)],
    )
    samples: list[Sample] = []
    for events in log.value.xids:
        gpu = nvml.gpu_at_pci(events.device) if nvml is not None else None
        labels = (
            _labels(gpu)
            if gpu is not None
            else (("gpu", ""), ("uuid", ""), ("pci_bus_id", events.device))
        )
        samples.append(((*labels, ("xid", str(events.xid))), events.count))
    out.metric(
        "envdoctor_gpu_xid_events_total",
        "Xid events in the kernel log since boot, by GPU and Xid code.",
        samples,
        kind="counter",
    )


def _fabric_facts(out: Writer, facts: Facts) -> None:
    switches = facts.fabric.nvswitches
    if isinstance(switches, Found):
        out.metric(
            "envdoctor_nvswitches", "NVSwitches the driver lists.", [((), len(switches.value))]
        )
    manager = facts.fabric.manager
    if isinstance(manager, Found):
        out.metric(
            "envdoctor_fabric_manager_info",
            "The nvidia-fabricmanager service's state and version (empty when unknown).",
            [
                (
                    (
                        ("service", label_value(manager.value.service)),
                        ("version", label_value(manager.value.version)),
                    ),
                    1,
                )
            ],
        )


def _fact(gpu: GpuFacts, field: str) -> Probed[Any]:
    value: Probed[Any] = getattr(gpu, field)
    return value


def gpu_labels(gpu: GpuFacts) -> Labels:
    """The labels of every per-GPU family (``link_metrics`` uses them too)."""
    return _labels(gpu)


def _labels(gpu: GpuFacts) -> Labels:
    return (
        ("gpu", str(gpu.index)),
        ("uuid", label_value(gpu.uuid)),
        ("pci_bus_id", label_value(gpu.pci_bus_id)),
    )


def _number(value: float) -> float | int:
    """Integers stay integers ("85520809984", not "8.5520809984e+10"); fractions keep 6 places."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) or float(value).is_integer():
        return int(value)
    return round(float(value), 6)
