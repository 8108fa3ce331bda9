"""envdoctor.guard with a real (CPU) torch."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from envdoctor.guard import (
    CheckpointRemapWarning,
    NonFiniteError,
    TargetError,
    check_targets,
    existing_location,
    load_checkpoint,
    nonfinite_guard,
)
from tests.kb.helpers import run

# torch is imported by the first test of this module, not when pytest collects it: every
# pytest-xdist worker collects every module, and the import cost each worker ~2 s of CPU.
torch: Any = None
nn: Any = None


@pytest.fixture(autouse=True, scope="module")
def _real_torch() -> None:
    global torch, nn  # the module's tests read torch as a global, as before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torch without numpy warns on import
        torch = pytest.importorskip("torch")
    nn = torch.nn


# --- check_targets ----------------------------------------------------------------------------


def test_valid_targets_pass_through() -> None:
    y = torch.tensor([0, 3, 9, -100])
    assert check_targets(y, 10) is y
    assert check_targets(torch.tensor([[0, 255], [1, 2]]), 3, ignore_index=255) is not None


def test_one_based_labels_are_named() -> None:
    with pytest.raises(TargetError) as info:
        check_targets(torch.tensor([1, 2, 3, 4, 4]), 4)
    message = str(info.value)
    assert "4 (×2)" in message
    assert "1-based" in message
    assert "first at index 3" in message


def test_minus_one_and_255_labels_are_named() -> None:
    with pytest.raises(TargetError) as info:
        check_targets(torch.tensor([[0, -1], [255, 2]]), 21)
    message = str(info.value)
    assert "ignore_index=-1" in message
    assert "ignore_index=255" in message
    assert "(0, 1)" in message


def test_labels_beyond_the_outputs() -> None:
    with pytest.raises(TargetError, match="at least 50001 outputs"):
        check_targets(torch.tensor([5, 50000]), 32000)


def test_logits_with_the_wrong_number_of_classes() -> None:
    with pytest.raises(TargetError, match="outputs 3 classes"):
        check_targets(torch.tensor([0, 1]), 4, logits=torch.zeros(2, 3))
    with pytest.raises(TargetError, match="does not fit logits shape"):
        check_targets(torch.tensor([0, 1, 2]), 3, logits=torch.zeros(2, 3))
    segmentation = torch.zeros(2, 5, 8, 8)
    assert check_targets(torch.zeros(2, 8, 8, dtype=torch.long), 5, logits=segmentation) is not None


def test_float_targets_and_bad_arguments() -> None:
    with pytest.raises(TypeError, match="integer tensor"):
        check_targets(torch.tensor([0.0, 1.0]), 2)
    with pytest.raises(ValueError, match="positive int"):
        check_targets(torch.tensor([0]), 0)
    with pytest.raises(TypeError, match="must be a tensor"):
        check_targets([0, 1], 2)  # type: ignore[arg-type]


def test_the_message_matches_what_cross_entropy_would_do() -> None:
    """On the CPU the same targets make cross_entropy raise; check_targets names them first."""
    logits = torch.zeros(3, 4)
    y = torch.tensor([1, 2, 4])
    with pytest.raises((IndexError, RuntimeError)):
        torch.nn.functional.cross_entropy(logits, y)
    with pytest.raises(TargetError, match="4 \\(×1\\)"):
        check_targets(y, 4, logits=logits)


# --- nonfinite_guard --------------------------------------------------------------------------


def _model() -> Any:
    class Normalize(nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return x / x.sum(dim=-1, keepdim=True)

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), Normalize(), nn.Linear(4, 2))
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.zero_()
    return model


def test_names_the_first_module_that_produces_nan() -> None:
    model = _model()
    with pytest.raises(NonFiniteError) as info, nonfinite_guard(model):
        model(torch.ones(3, 4))
    message = str(info.value)
    assert "module '2' (Normalize)" in message
    assert "NaN ×12" in message
    assert "inputs were finite" in message


def test_nan_in_the_data_is_blamed_on_the_data() -> None:
    model = nn.Sequential(nn.Linear(4, 2))
    x = torch.ones(1, 4)
    x[0, 0] = float("nan")
    with nonfinite_guard(model, raise_error=False) as watch:
        model(x)
    assert watch.first is not None
    assert watch.first.module == "0"
    assert watch.first.inputs_finite is False


def test_hooks_are_removed_and_clean_runs_pass() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    with nonfinite_guard(model) as watch:
        model(torch.randn(2, 4))
    assert watch.first is None
    assert watch.calls == 3  # two layers and the Sequential itself
    assert all(len(m._forward_hooks) == 0 for m in model.modules())


def test_inf_inside_a_tuple_output() -> None:
    class Pair(nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return x, {"scores": x * float("inf")}

    with nonfinite_guard(Pair(), raise_error=False) as watch:
        Pair()(torch.ones(2))  # a different instance: not watched
    assert watch.first is None
    pair = Pair()
    with nonfinite_guard(pair, raise_error=False) as watch:
        pair(torch.ones(2))
    assert watch.first is not None
    assert watch.first.output == "output[1]['scores']"
    assert watch.first.inf == 2


# --- load_checkpoint --------------------------------------------------------------------------


def _save_as_if_on(path: Path, location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.save a CPU tensor but record it as saved on ``location`` (no GPU needed)."""
    import torch.serialization as serialization  # noqa: TID251 (the test drives real torch)

    with monkeypatch.context() as patch:
        patch.setattr(serialization, "location_tag", lambda storage: location)
        torch.save({"weight": torch.arange(4.0)}, path)


def test_a_gpu_checkpoint_fails_plainly_and_loads_with_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt.pt"
    _save_as_if_on(path, "cuda:2", monkeypatch)
    with pytest.raises(RuntimeError) as info:
        torch.load(path)
    explanation = run(f"RuntimeError: {info.value}")  # the real message is a known signature
    assert explanation.top is not None and explanation.top.id == "checkpoint.map-location"
    with pytest.warns(CheckpointRemapWarning, match="cuda:2 → cpu"):
        state = load_checkpoint(path)
    assert state["weight"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert state["weight"].device.type == "cpu"


def test_forced_device_and_cpu_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cpu.pt"
    torch.save({"w": torch.ones(2)}, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(path)["w"].tolist() == [1.0, 1.0]
    gpu_path = tmp_path / "gpu.pt"
    _save_as_if_on(gpu_path, "cuda:0", monkeypatch)
    assert load_checkpoint(gpu_path, device="cpu")["weight"].device.type == "cpu"
    with pytest.raises(TypeError, match="map_location"):
        load_checkpoint(path, map_location="cpu")


def test_existing_location_without_cuda() -> None:
    if torch.cuda.is_available():  # pragma: no cover (CPU CI)
        pytest.skip("needs a machine without CUDA")
    assert existing_location("cuda:3") == "cpu"
    assert existing_location("cpu") == "cpu"


@pytest.mark.parametrize("index", ["1", "\u00b2", "9" * 5000, ""])
def test_a_location_that_names_no_existing_gpu_maps_to_the_current_one(
    index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The location comes from the checkpoint file: "cuda:²" or 5000 digits raised ValueError
    inside the user's training process (int() of them) instead of mapping to a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert existing_location(f"cuda:{index}") == "cuda:0"
    assert existing_location("cuda:0") == "cuda:0"


def test_importing_envdoctor_guard_does_not_import_torch() -> None:
    code = "import sys, envdoctor.guard, envdoctor.kb; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
