"""torch's environment report (collect_env) read for the driver: blamed only when its numbers
show CUDA unavailable and a driver older than torch's CUDA needs."""

from __future__ import annotations

from pathlib import Path

from tests.kb.helpers import HEADER_END, ids, run

TRACEBACKS = Path(__file__).parents[1] / "data" / "tracebacks"

# verbatim from https://github.com/pytorch/pytorch/issues/51858 (a comment of 2023-06-25):
# torch 2.0.1+cu117 on driver 535.98 (CUDA 12.2), CUDA available
REPORT_AVAILABLE = """\
PyTorch version: 2.0.1+cu117
Is debug build: False
CUDA used to build PyTorch: 11.7
ROCM used to build PyTorch: N/A

OS: Microsoft Windows 11 Pro
Python platform: Windows-10-10.0.22621-SP0
Is CUDA available: True
CUDA runtime version: 11.7.64
CUDA_MODULE_LOADING set to: LAZY
GPU models and configuration: GPU 0: NVIDIA GeForce GTX 1050 Ti
Nvidia driver version: 535.98
"""


def _fixture(name: str) -> str:
    raw = (TRACEBACKS / "cuda.driver-too-old" / name).read_bytes()
    return raw.partition(HEADER_END)[2].decode("utf-8")


def test_report_with_cuda_unavailable_and_an_old_driver_names_the_driver() -> None:
    # torch 1.3.1 built with CUDA 10.1 on driver 410.48: CUDA 10.1 needs 418.39
    explanation = run(_fixture("pytorch-30071.txt"))
    assert explanation.status == "explained"
    top = explanation.top
    assert top is not None and top.id == "cuda.driver-too-old"
    assert "410.48" in top.summary and "10.1" in top.summary
    assert any("418.39" in note for note in top.notes)


def test_report_with_cuda_available_blames_nothing() -> None:
    explanation = run(REPORT_AVAILABLE)
    assert explanation.causes == ()
    assert explanation.exit_code == 0


def test_report_with_cuda_unavailable_but_a_driver_that_fits_does_not_blame_the_driver() -> None:
    # the same report with CUDA unavailable: the driver (CUDA 12.2) runs CUDA 11.7, so the
    # cause is elsewhere and the driver is not named
    report = REPORT_AVAILABLE.replace("Is CUDA available: True", "Is CUDA available: False")
    assert "cuda.driver-too-old" not in ids(run(report))


def test_report_without_a_driver_version_blames_nothing() -> None:
    report = REPORT_AVAILABLE.replace("Nvidia driver version: 535.98", "Nvidia driver version: ")
    assert run(report.replace("True", "False")).causes == ()


def test_an_error_message_stands_whatever_the_report_says() -> None:
    log = (
        REPORT_AVAILABLE
        + "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA "
        "runtime version at /opt/conda/conda-bld/pytorch_1524586445097/work/aten/src/THC/"
        "THCGeneral.cpp:70\n"
    )
    top = run(log).top
    assert top is not None and top.id == "cuda.driver-too-old"
    assert top.confidence >= 0.9
