"""Smoke honours the caller's CUDA_VISIBLE_DEVICES: it never tests (or fills) a GPU the caller
did not leave to CUDA."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import MigMode
from envdoctor.model.probed import Found
from envdoctor.smoke.runner import SmokeOptions, plan
from tests.smoke.conftest import PYTHON, gpu_facts, uuid


def labels(visible: str, count: int = 3, **env: str) -> list[str]:
    facts = gpu_facts(count, env={"CUDA_VISIBLE_DEVICES": visible, **env})
    targets, not_run = plan(facts, SmokeOptions(python=PYTHON))
    return [t.label for t in targets] + [f"not run: {n.reason}" for n in not_run]


def test_unset_means_every_gpu() -> None:
    facts = gpu_facts(2)
    targets, _ = plan(facts, SmokeOptions(python=PYTHON))
    assert [t.visible for t in targets] == [uuid(0), uuid(1)]


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("1", ["GPU 1"]),
        ("2,0", ["GPU 2", "GPU 0"]),
        (uuid(2), ["GPU 2"]),
        ("GPU-00000000-0000-0000-0000-000000000001", ["GPU 1"]),
        ("0,7,1", ["GPU 0"]),  # CUDA stops at the first invalid entry
    ],
)
def test_the_gpus_cuda_may_use(visible: str, expected: list[str]) -> None:
    assert labels(visible) == expected


@pytest.mark.parametrize(
    ("visible", "why"),
    [
        ("-1", "CUDA_VISIBLE_DEVICES='-1' hides every GPU"),
        ("", "CUDA_VISIBLE_DEVICES='' hides every GPU"),
        (
            "7",
            "CUDA_VISIBLE_DEVICES='7' leaves CUDA no GPU (CUDA stops at 7 (there are only 3 GPUs",
        ),
        ("MIG-4f2b", "leaves CUDA no GPU (CUDA stops at MIG-4f2b (no GPU is in MIG mode))"),
        ("GPU-00000000", "GPU-00000000 does not name exactly one GPU"),
    ],
)
def test_what_leaves_nothing_to_test_says_why(visible: str, why: str) -> None:
    (only,) = labels(visible)
    assert only.startswith("not run: ") and why in only


def test_mig_instances_are_not_tested() -> None:
    facts = gpu_facts(1, env={"CUDA_VISIBLE_DEVICES": "MIG-4f2b"})
    assert isinstance(facts.nvml, Found)
    gpu = facts.nvml.value.gpus[0]
    mig = replace(gpu, mig_mode=Found(MigMode(current=True, pending=True)))
    facts = replace(facts, nvml=Found(replace(facts.nvml.value, gpus=(mig,))))
    targets, not_run = plan(facts, SmokeOptions(python=PYTHON))
    assert not targets and "names MIG instances: smoke does not test them" in not_run[0].reason


def test_numbers_with_mixed_gpu_models_need_pci_order() -> None:
    facts = gpu_facts(2, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert isinstance(facts.nvml, Found)
    gpus = list(facts.nvml.value.gpus)
    gpus[1] = replace(gpus[1], name=Found("NVIDIA L4"))
    mixed = replace(facts, nvml=Found(replace(facts.nvml.value, gpus=tuple(gpus))))
    targets, not_run = plan(mixed, SmokeOptions(python=PYTHON))
    assert not targets and "set CUDA_DEVICE_ORDER=PCI_BUS_ID" in not_run[0].reason
    ordered = replace(
        mixed,
        env=replace(
            mixed.env,
            variables=(("CUDA_VISIBLE_DEVICES", "1"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")),
        ),
    )
    targets, _ = plan(ordered, SmokeOptions(python=PYTHON))
    assert [t.label for t in targets] == ["GPU 1"]


def test_a_named_gpu_outside_cuda_visible_devices_is_a_usage_error() -> None:
    facts = gpu_facts(2, env={"CUDA_VISIBLE_DEVICES": "1"})
    with pytest.raises(EnvdoctorError, match="GPU 0 is hidden by CUDA_VISIBLE_DEVICES='1'"):
        plan(facts, SmokeOptions(python=PYTHON, gpus=(0,)))
