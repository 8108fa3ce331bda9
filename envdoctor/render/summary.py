"""A few facts every renderer shows at the top: the machine at a glance."""

from __future__ import annotations

from dataclasses import dataclass

from envdoctor.model.facts import Facts, TorchBroken, TorchBuild
from envdoctor.model.probed import Found, Probed, why_missing
from envdoctor.model.views import driver_view, gpu_presence
from envdoctor.render.redact import REDACTED_HOST


def machine_lines(facts: Facts) -> list[tuple[str, str]]:
    """(label, value) pairs: OS, driver, GPUs, torch — each value or the reason it is missing."""
    host = facts.host
    where = ", ".join(host.containers) if host.containers else "bare metal or VM"
    if host.wsl:
        where += ", WSL"
    lines = [
        ("host", f"{_v(host.os_name)}, kernel {_v(host.kernel)}, {host.machine} ({where})"),
    ]
    driver = driver_view(facts)
    if isinstance(facts.nvml, Found):
        system = facts.nvml.value
        lines.append(
            ("driver", f"{_v(system.driver_version)} (CUDA {_v(system.cuda_driver_version)})")
        )
        names: dict[str, int] = {}
        for gpu in system.gpus:
            name = _v(gpu.name)
            names[name] = names.get(name, 0) + 1
        lines.append(("GPUs", ", ".join(f"{n}× {name}" for name, n in names.items()) or "none"))
    else:
        lines.append(("driver", f"{driver.describe()}; NVML: {why_missing(facts.nvml)}"))
        presence = gpu_presence(facts)
        if presence.pci:
            lines.append(("GPUs", f"{len(presence.pci)} on the PCI bus (NVML lists none)"))
    lines.append(("torch", _torch(facts)))
    lines.extend(_companions(facts))
    return lines


def _companions(facts: Facts) -> list[tuple[str, str]]:
    """torchvision/torchaudio beside torch and the environment's installer, when the torch
    probe reported them (snapshots from before it did say nothing here)."""
    from envdoctor.model.install import installer_for

    out = []
    companions = facts.torch.companions
    if isinstance(companions, Found):
        installed = [
            f"{c.name} {c.version.value}"
            for c in companions.value
            if c.name != "triton" and isinstance(c.version, Found)
        ]
        out.append(("with", ", ".join(installed) or "no torchvision, no torchaudio"))
    if isinstance(facts.torch.installer, Found):
        installer = installer_for(facts.torch)
        out.append(("install", f"{installer.kind}: {installer.why}"))
    return out


@dataclass(frozen=True, slots=True)
class SnapshotOrigin:
    """Where and when a snapshot's facts were read, for a report's header."""

    host: str
    """As recorded: ``<hostname>`` in a redacted snapshot."""
    taken: str
    path: str
    notes: str
    """``collected by envdoctor 0.1.0; hostname, user and GPU UUIDs redacted``, or ""."""


def snapshot_origin(facts: Facts, path: str) -> SnapshotOrigin:
    hostname = facts.host.hostname
    host = hostname.value if isinstance(hostname, Found) and hostname.value else "an unknown host"
    notes = [f"collected by envdoctor {facts.envdoctor_version}"] if facts.envdoctor_version else []
    if host == REDACTED_HOST:
        notes.append("hostname, user and GPU UUIDs redacted")
    return SnapshotOrigin(host, _when(facts.collected_at), path, "; ".join(notes))


def _when(collected_at: str) -> str:
    """``2026-11-20T14:03:12+00:00`` (what collect records) as ``2026-11-20 14:03:12 UTC``."""
    if not collected_at:
        return "at an unknown time (the snapshot does not say)"
    if len(collected_at) == 25 and collected_at.endswith("+00:00") and collected_at[10] == "T":
        return f"{collected_at[:10]} {collected_at[11:19]} UTC"
    return collected_at


def _torch(facts: Facts) -> str:
    probed = facts.torch.torch
    if isinstance(probed, Found):
        value = probed.value
        if isinstance(value, TorchBuild):
            variant = (
                f"CUDA {value.cuda}"
                if value.cuda
                else (f"ROCm {value.hip}" if value.hip else "CPU-only build")
            )
            cached = f"; imported at {value.from_cache} (cached)" if value.from_cache else ""
            chosen = f" ({facts.torch.chosen_by})" if facts.torch.chosen_by else ""
            return f"{value.version} ({variant}) for {facts.torch.python}{chosen}{cached}"
        if isinstance(value, TorchBroken):
            return f"import fails: {value.error}"
    return why_missing(probed)


def _v(probed: Probed[object]) -> str:
    if isinstance(probed, Found):
        return str(probed.value)
    return f"unknown ({why_missing(probed)})"
