"""torch, as the target interpreter sees it: probed in a bounded child process, never here."""

from __future__ import annotations

import functools
import json
import signal
from typing import Any

from envdoctor.model.facts import (
    COMPANION_NAMES,
    NOT_REPORTED,
    Companion,
    InstallerFacts,
    TorchBroken,
    TorchBuild,
)
from envdoctor.model.probed import Absent, Found, Probed, ProbeFailed
from envdoctor.platform.host import CommandResult
from envdoctor.probes import torch_child
from envdoctor.probes.torch_child import MARK as MARK  # the child prints it: one definition
from envdoctor.terminal import cut

TORCH_TIMEOUT = 60.0


@functools.cache
def child_source() -> str:
    """The child script's source, passed with ``-c`` so the target needs no envdoctor. Read
    beside the module already imported (importlib.resources cost 10 ms of every check), once
    per process (the torch cache hashes it too)."""
    with open(torch_child.__file__, encoding="utf-8") as handle:
        return handle.read()


def decode_environment(data: dict[str, Any] | None) -> dict[str, Any]:
    """``companions`` and ``installer`` of ``TorchFacts`` from the child's ``environment``; a
    missing or malformed one keeps its reason (the torch facts stand without it)."""
    if data is None:
        why: Probed[Any] = ProbeFailed("the torch probe gave no result")
        return {"companions": why, "installer": why}
    env = data.get("environment")
    if not isinstance(env, dict):
        error = data.get("environment_error")
        why = (
            ProbeFailed(f"the torch probe could not read the environment: {cut(str(error))}")
            if error
            else NOT_REPORTED
        )
        return {"companions": why, "installer": why}
    try:
        companions: Probed[tuple[Companion, ...]] = Found(
            tuple(
                Companion(
                    name=str(c["name"]),
                    version=_probed_str(c["version"]),
                    installer=cut(str(c.get("installer", ""))),
                )
                for c in env["companions"]
                if c["name"] in COMPANION_NAMES
            )
        )
    except (KeyError, TypeError, ValueError) as exc:
        companions = ProbeFailed(f"the torch probe's companions are malformed: {exc}")
    try:
        raw = env["installer"]
        installer: Probed[InstallerFacts] = Found(
            InstallerFacts(
                prefix=str(raw["prefix"]),
                pip=raw["pip"] is True,
                uv_venv=raw["uv_venv"] is True,
                conda=raw["conda"] is True,
                torch_by_conda=raw.get("torch_by_conda") is True,
                torch_installer=cut(str(raw.get("torch_installer", ""))),
                uv_version=cut(str(raw.get("uv_version", ""))),
            )
        )
    except (KeyError, TypeError, ValueError) as exc:
        installer = ProbeFailed(f"the torch probe's installer facts are malformed: {exc}")
    return {"companions": companions, "installer": installer}


def parse_child(result: CommandResult, python: str) -> Probed[TorchBuild | TorchBroken]:
    """Turn the child's outcome (its JSON line, or how it died) into a probed value."""
    if result.status == "not-found":
        return ProbeFailed(f"the interpreter {python} does not exist")
    if result.status == "timeout":
        return ProbeFailed(
            f"the torch probe did not finish within {result.seconds:.0f} s "
            "(import torch or CUDA initialisation hung)",
            detail=_tail(result.stderr),
        )
    if result.status == "overflow":
        return ProbeFailed(
            f"the torch probe {result.error} of output and was stopped "
            "(something in the interpreter's start-up prints without end)",
            detail=_tail(result.stderr),
        )
    if result.status != "ok":
        return ProbeFailed(f"cannot run {python}: {result.error}")
    data = last_json(result.stdout)
    if data is None:
        if result.returncode < 0:
            name = _signal_name(-result.returncode)
            return ProbeFailed(f"the torch probe crashed with {name}", detail=_tail(result.stderr))
        return ProbeFailed(
            f"the torch probe printed no result (exit {result.returncode})",
            detail=_tail(result.stderr),
        )
    return decode_result(data, python)


def decode_result(data: dict[str, Any], python: str) -> Probed[TorchBuild | TorchBroken]:
    """The child's JSON result as a probed value (a malformed one is a probe failure)."""
    try:
        return _decode(data, python)
    except (KeyError, TypeError, ValueError) as exc:
        return ProbeFailed(f"the torch probe's result is malformed: {exc}")


def _decode(data: dict[str, Any], python: str) -> Probed[TorchBuild | TorchBroken]:
    if "child_error" in data:
        return ProbeFailed(
            f"the torch probe failed: {data['child_error']}", detail=data["traceback"]
        )
    if not data["installed"]:
        return Absent(f"torch is not installed for {python} ({data['error']})")
    if "import_error" in data:
        version = data.get("version")
        return Found(
            TorchBroken(
                version=Found(version) if version else Absent("no torch distribution metadata"),
                error=str(data["import_error"]),
                traceback=str(data["traceback"]),
            )
        )
    return Found(
        TorchBuild(
            version=str(data["version"]),
            location=str(data["location"]),
            cuda=str(data["cuda"]),
            hip=str(data["hip"]),
            cudnn_version=_probed_str(data["cudnn_version"]),
            nccl_version=_probed_str(data["nccl_version"]),
            arch_list=tuple(str(a) for a in data["arch_list"]),
            cuda_available=bool(data["cuda_available"]),
            unavailable_reason=str(data["unavailable_reason"]),
            device_count=_probed_count(data["device_count"]),
            loaded_libraries=tuple((str(f), str(p)) for f, p in data["loaded_libraries"]),
            nvidia_wheels=tuple((str(n), str(v)) for n, v in data["nvidia_wheels"]),
            imported=bool(data.get("imported", True)),
            alloc_conf=tuple((str(v), str(e)) for v, e in data.get("alloc_conf", ())),
        )
    )


def _probed_str(value: dict[str, Any]) -> Probed[str]:
    return Found(str(value["found"])) if "found" in value else Absent(str(value["absent"]))


MAX_DEVICES = 1 << 16  # far beyond any machine; what the child sends is checked, not trusted


def _probed_count(value: dict[str, Any]) -> Probed[int]:
    """A count the child sent: a JSON whole number in range (not "²", not Infinity)."""
    if "found" not in value:
        return Absent(str(value["absent"]))
    count = value["found"]
    if type(count) is not int or not 0 <= count <= MAX_DEVICES:
        raise ValueError(f"device_count is not a count of GPUs: {cut(repr(count))}")
    return Found(count)


def last_json(stdout: str) -> dict[str, Any] | None:
    """The child's result line (the last one with the mark), decoded; None when there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                data = json.loads(line[len(MARK) :])
            except (ValueError, RecursionError):  # not JSON, a 5000-digit number, deep nesting
                return None
            return data if isinstance(data, dict) else None
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(text: str, lines: int = 5) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
