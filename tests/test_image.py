"""The container image the Kubernetes manifests run (deploy/docker/), held to what they need.

No container engine runs on the test machines (Docker's client is there, no daemon; no podman or
buildah), so the Dockerfile is checked as text here, and its recipe is run for real outside a
container: the build stage's backend from ``build.lock``, the wheel built without isolation, the
runtime set from ``image.lock`` with ``--require-hashes``, and the installed command run. Where
an engine answers (``docker info`` or ``podman info``), the image itself is built and run too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envdoctor import __version__

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "deploy" / "docker"
REQUIREMENTS = ROOT / "requirements"
IMAGE = "registry.example.com/tools/envdoctor"
NPD_IMAGE = "registry.example.com/tools/node-problem-detector-envdoctor"


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, f"{path}: a continuation line ends the file"
    out = []
    for text in logical:
        word, _, rest = text.strip().partition(" ")
        out.append((word.upper(), " ".join(rest.split())))
    return out


def _pins(lock: str) -> dict[str, str]:
    text = (REQUIREMENTS / lock).read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, flags=re.MULTILINE))


def _manifest_images() -> set[str]:
    images = set()
    for path in (ROOT / "deploy" / "kubernetes").glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            text = yaml.safe_dump(document)
            images.update(re.findall(r"image: (registry\.example\.com/tools/\S+)", text))
    return images


def test_the_manifests_run_the_images_these_dockerfiles_build_at_this_version() -> None:
    assert _manifest_images() == {f"{IMAGE}:{__version__}", f"{NPD_IMAGE}:{__version__}"}
    for dockerfile, image in (("Dockerfile", IMAGE), ("npd.Dockerfile", NPD_IMAGE)):
        text = (DOCKER / dockerfile).read_text(encoding="utf-8")
        assert f"-t {image}:{__version__} ." in text, f"{dockerfile}: the build line names {image}"


def test_the_image_installs_from_the_hashed_locks_and_runs_as_nobody() -> None:
    steps = _instructions(DOCKER / "Dockerfile")
    installs = [args for word, args in steps if word == "RUN" and "pip install" in args]
    assert installs, "the image installs nothing"
    for args in installs:
        if "--no-deps" in args:  # envdoctor's own wheel, its dependencies already in place
            assert "/tmp/wheels/*.whl" in args
            continue
        assert "--require-hashes" in args and "--only-binary=:all:" in args, args
        assert re.search(r"-r \S*(image|build)\.lock", args), args
    runtime = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    assert ("USER", "65534:65534") in runtime  # the textfile directory's owner, never root
    assert ("ENTRYPOINT", '["envdoctor"]') in runtime


def test_what_the_dockerfile_copies_exists_and_passes_the_ignore_file() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    admitted = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for word, args in _instructions(DOCKER / "Dockerfile"):
        if word != "COPY" or args.startswith("--from"):
            continue
        *sources, _ = args.split()
        for source in sources:
            path = source.rstrip("/")
            assert (ROOT / path).exists(), f"COPY {source}: not in the repository"
            assert path in admitted, f"COPY {source}: .dockerignore leaves it out of the context"


def test_the_image_locks_pin_what_the_default_suite_tests_and_no_torch() -> None:
    tested = _pins("test.lock")
    for lock in ("image.lock", "build.lock"):
        pins = _pins(lock)
        assert pins, f"{lock} is empty"
        assert {name: tested.get(name) for name in pins} == pins, f"{lock} drifted from test.lock"
    image = _pins("image.lock")
    assert "torch" not in image and not any(name.startswith("nvidia-cu") for name in image)
    assert {"typer", "nvidia-ml-py", "pyyaml", "packaging"} <= set(image)
    assert "hatchling" not in image  # the backend stays in the build stage


@pytest.mark.install
def test_the_image_recipe_installs_and_runs_outside_a_container(tmp_path: Path) -> None:
    """The Dockerfile's steps, in the same order, in venvs of this machine's Python."""

    def run(*argv: str | Path) -> str:
        done = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0 and "No matching distribution" in done.stderr:
            pytest.skip(f"the package index cannot serve the image's locks: {done.stderr[-300:]}")
        assert done.returncode == 0, f"{argv}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return done.stdout

    build, runtime, wheels = tmp_path / "build", tmp_path / "opt-envdoctor", tmp_path / "wheels"
    pip_install = (
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-cache-dir",
        "--disable-pip-version-check",
    )
    run(sys.executable, "-m", "venv", build)
    run(build / "bin" / "python", *pip_install, "--require-hashes", "--only-binary=:all:",
        "-r", REQUIREMENTS / "build.lock")  # fmt: skip
    run(build / "bin" / "python", "-m", "pip", "wheel", "--quiet", "--no-cache-dir", "--no-deps",
        "--no-build-isolation", "--wheel-dir", wheels, ROOT)  # fmt: skip
    run(sys.executable, "-m", "venv", runtime)
    python = runtime / "bin" / "python"
    run(python, *pip_install, "--require-hashes", "--only-binary=:all:",
        "-r", REQUIREMENTS / "image.lock")  # fmt: skip
    run(python, *pip_install, "--no-deps", *sorted(wheels.glob("*.whl")))
    assert run(runtime / "bin" / "envdoctor", "--version").strip() == (
        f"envdoctor {__version__} (gpu-envdoctor)"
    )
    installed = run(python, "-m", "pip", "list", "--format=freeze")
    assert "torch==" not in installed and "hatchling==" not in installed
    probe = subprocess.run(
        [runtime / "bin" / "envdoctor", "probe", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode in (0, 1, 2) and probe.stdout.startswith("{"), probe.stderr


def _engine() -> str | None:
    for tool in ("podman", "docker"):
        found = shutil.which(tool)
        if (
            found
            and subprocess.run(
                [found, "info"], capture_output=True, timeout=30, check=False
            ).returncode
            == 0
        ):
            return found
    return None


@pytest.mark.install
def test_the_image_builds_and_answers_where_a_container_engine_runs() -> None:
    engine = _engine()
    if engine is None:
        pytest.skip("no container engine answers here (docker info / podman info fail)")
    tag = f"envdoctor-test:{__version__}"
    build = subprocess.run(
        [engine, "build", "-f", str(DOCKER / "Dockerfile"), "-t", tag, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    version = subprocess.run(
        [engine, "run", "--rm", "--read-only", tag, "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert version.stdout.strip() == f"envdoctor {__version__} (gpu-envdoctor)", version.stderr
