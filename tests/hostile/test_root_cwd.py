"""Issue 13, item 1: nothing in the current directory runs, with the real interpreters.

Another user can drop ``json.py`` or ``pip.py`` into a directory root later works in (``/tmp``,
a shared project directory). ``python -c`` and ``python -m`` put the current directory first on
``sys.path``, so before the fix those files ran as root in the torch probe child (``check
--python``), in pip and in the verify step of ``fix --apply``. Each test plants modules that
leave a marker file when imported, runs the real thing from that directory, and checks that
the marker never appears.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envdoctor.cli.common import resolve_python
from envdoctor.cli.fix import verify_command
from envdoctor.errors import EnvdoctorError
from envdoctor.model.facts import TorchBuild
from envdoctor.model.probed import Absent, Found
from envdoctor.platform.host import Deadline
from envdoctor.platform.system import SystemHost
from envdoctor.probes.interpreter import run_python
from envdoctor.probes.torch_probe import probe_torch
from envdoctor.remedy import Plan, Step, plan_to_json, render_script, render_steps
from envdoctor.remedy.model import ReinstallTorch, Verify
from tests.conftest import PYTHON
from tests.fakes.host import FakeHost
from tests.remedy import cases
from tests.remedy.sandbox import Sandbox

# Modules the children import (json: the torch child and envdoctor; pip: `-m pip`; envdoctor:
# `-m envdoctor`), each planted in the current directory.
PLANTED = ("json.py", "pip.py", "envdoctor.py", "importlib_metadata.py")


@functools.cache
def _older_python() -> str | None:
    """A CPython older than 3.11 (no -P), where this machine has one: looked for by the first
    test that needs it, not when pytest collects the module (in every xdist worker)."""
    roots = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"]
    # pyenv's own builds before PATH: a pyenv shim for a version that is not selected runs
    # bash scripts for ~0.1 s of CPU only to say "command not found"
    candidates: list[str | None] = [
        str(p) for r in roots for p in sorted(r.glob("3.1[0]*/bin/python3"))
    ]
    candidates += [str(p) for r in roots for p in sorted(r.glob("3.[89].*/bin/python3"))]
    candidates += [shutil.which(f"python3.{minor}") for minor in (10, 9, 8)]
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] < (3, 11))"],
                capture_output=True,
                text=True,
                timeout=20,
                cwd="/",
                check=False,
            )
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == "True":
            return candidate
    return None


def _old_python() -> str:
    """The older CPython, or a skip where this machine has none."""
    found = _older_python()
    if found is None:
        pytest.skip("no Python older than 3.11 here")
    return found


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A hostile current directory; yields the marker file any planted module would create."""
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    marker = tmp_path / "ran-from-the-current-directory"
    for name in PLANTED:
        (hostile / name).write_text(
            f"import pathlib\npathlib.Path({str(marker)!r}).write_text({name!r})\n"
        )
    monkeypatch.chdir(hostile)
    yield marker
    assert not marker.exists(), f"{marker.read_text()} from the current directory was run"


def test_the_torch_child_imports_nothing_from_the_current_directory(planted: Path) -> None:
    facts = probe_torch(SystemHost(), python=sys.executable, deadline=Deadline(60))
    assert isinstance(facts.torch, Found) and isinstance(facts.torch.value, TorchBuild)


def test_an_interpreter_without_safe_path_still_imports_nothing_from_it(planted: Path) -> None:
    """No -P before 3.11: starting the child in / is what keeps it safe."""
    facts = probe_torch(SystemHost(), python=_old_python(), deadline=Deadline(60))
    assert isinstance(facts.torch, Absent) and "not installed" in facts.torch.reason


# What CPython 3.10 prints for `python3.10 -P ...` (Python/getopt.c "Unknown option: -%c", then
# the usage line of Python/initconfig.c), exit status 2, before it runs or imports anything.
REFUSES_P = r"""#!/bin/sh
echo "$@" >>"{log}"
if [ "$1" = "-P" ]; then
    echo "Unknown option: -P" >&2
    echo "usage: python3.10 [option] ... [-c cmd | -m mod | file | -] [arg] ..." >&2
    echo "Try \`python -h' for more information." >&2
    exit 2
fi
exec "{python}" "$@"
"""


def test_the_child_starts_with_safe_path_in_one_run_where_the_interpreter_has_it() -> None:
    host = SystemHost()
    result = run_python(
        host, sys.executable, ["-c", "import sys; print(sys.flags.safe_path)"], timeout=10
    )
    assert result.ok and result.stdout.strip() == "True"
    assert result.argv[1] == "-P"


def test_an_interpreter_that_refuses_safe_path_is_started_again_without_it(tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    old = tmp_path / "python3.10"
    old.write_text(REFUSES_P.format(log=log, python=sys.executable))
    old.chmod(0o755)
    result = run_python(SystemHost(), str(old), ["-c", "print(6 * 7)"], timeout=10)
    assert result.ok and result.stdout.strip() == "42"
    assert log.read_text().splitlines() == ["-P -c print(6 * 7)", "-c print(6 * 7)"]
    if (older := _older_python()) is not None:  # and the real one, where this machine has it
        real = run_python(SystemHost(), older, ["-c", "print(6 * 7)"], timeout=20)
        assert real.ok and real.stdout.strip() == "42" and "-P" not in real.argv


def test_other_failures_are_not_mistaken_for_a_refused_flag(tmp_path: Path) -> None:
    log = tmp_path / "argv.log"
    usage_error = tmp_path / "python"
    usage_error.write_text(f'#!/bin/sh\necho "$@" >>"{log}"\necho "bad usage" >&2\nexit 2\n')
    usage_error.chmod(0o755)
    result = run_python(SystemHost(), str(usage_error), ["-c", "pass"], timeout=10)
    assert result.returncode == 2 and len(log.read_text().splitlines()) == 1
    missing = run_python(SystemHost(), "/nonexistent/python", ["-c", "pass"], timeout=10)
    assert missing.status == "not-found"


def test_a_bare_python_name_is_looked_up_on_path_never_in_the_current_directory(
    planted: Path,
) -> None:
    fake = Path.cwd() / "python3"
    fake.write_text(f"#!/bin/sh\necho fake >{planted}\n")
    fake.chmod(0o755)
    bindir = str(Path(sys.executable).parent)
    on_path = shutil.which("python3", path=bindir)
    assert on_path and on_path != str(fake)
    # "." and "" in PATH both mean the current directory: skipped.
    for path in (bindir, f".:{bindir}", f":{bindir}"):
        assert resolve_python(SystemHost(environ={"PATH": path}), "python3") == on_path
    with pytest.raises(EnvdoctorError, match="no such interpreter on PATH"):
        resolve_python(SystemHost(environ={"PATH": ".:"}), "python3")


def test_a_relative_python_path_becomes_absolute(planted: Path) -> None:
    """Children, the plan and the script run from /: a relative path would name another file."""
    (Path.cwd() / "venv" / "bin").mkdir(parents=True)
    (Path.cwd() / "venv" / "bin" / "python").symlink_to(sys.executable)
    resolved = resolve_python(SystemHost(), "venv/bin/python")
    assert resolved == str(Path.cwd() / "venv" / "bin" / "python")  # absolute, link kept


def _run_script(plan: Plan, directory: Path) -> subprocess.CompletedProcess[str]:
    script = directory / "fix.sh"
    script.write_text(render_script(plan))
    script.chmod(0o755)
    return subprocess.run(
        ["bash", "./fix.sh", "--apply", "--yes"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_fix_script_runs_pip_and_verify_away_from_the_current_directory(planted: Path) -> None:
    """`fix --apply` started in the hostile directory: pip and `envdoctor check` import nothing.

    The torch here already is the +cpu build the step asks for, so pip only answers `pip show`.
    """
    plan = Plan(
        steps=(
            Step(
                "Reinstall torch",
                ReinstallTorch(
                    sys.executable, "torch", "https://download.pytorch.org/whl/cpu", "cpu"
                ),
            ),
            Step("Verify", Verify(verify_command(live=True, python=None))),
        )
    )
    run = _run_script(plan, Path.cwd())
    assert "torch 2.13.0+cpu is already the cpu build" in run.stdout, run.stdout + run.stderr
    assert f"+ {sys.executable} -P -m envdoctor check" in run.stdout
    assert "envdoctor check" in run.stdout and run.returncode in (0, 1)  # check's own verdict


def test_fix_script_protects_an_interpreter_without_safe_path(planted: Path) -> None:
    """Python < 3.11 has no -P: the script's `cd /` alone keeps json.py out."""
    plan = Plan(steps=(Step("Verify", Verify((_old_python(), "-c", "import json"))),))
    run = _run_script(plan, Path.cwd())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "envdoctor check: healthy" in run.stdout  # the command ran, and exited 0


def test_help_still_reads_the_script_started_by_a_relative_path(tmp_path: Path) -> None:
    """The script moves to / first; --help must still find itself."""
    (tmp_path / "fix.sh").write_text(render_script(Plan(steps=(), source="here")))
    run = subprocess.run(
        ["bash", "./fix.sh", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("# envdoctor fix: a remediation script for here.")


def test_the_plan_tells_the_reader_where_pip_runs(tmp_path: Path) -> None:
    """`fix --format steps` / json: the reviewer learns that pip runs from / with -P."""
    plan = cases.cpu_wheel_plan(Sandbox(tmp_path / "sandbox"))
    assert "from /, with -P after" in render_steps(plan)
    steps = plan_to_json(plan)["steps"]
    assert any("no module is taken from the current directory" in s["detail"] for s in steps)


def test_a_relative_fake_root_is_refused(tmp_path: Path) -> None:
    """The script works from /: a relative --test-root would name another directory."""
    (tmp_path / "fix.sh").write_text(render_script(Plan(steps=(), source="here")))
    run = subprocess.run(
        ["bash", "./fix.sh", "--test-root", "sandbox/root"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert "--test-root must be an absolute path" in run.stderr


@pytest.mark.parametrize(("version", "flags"), [("3.12.3", ("-P",)), ("3.10.13", ())])
def test_the_torch_child_gets_safe_path_exactly_when_the_target_has_it(
    version: str, flags: tuple[str, ...]
) -> None:
    host = FakeHost.scenario("healthy_h100", torch={"python_version": version})
    facts = probe_torch(host, python=PYTHON, deadline=Deadline(5))
    assert isinstance(facts.torch, Found)  # the child ran, with or without -P
    *refused, child = [argv for argv in host.ran if "-c" in argv]
    assert child[: 2 + len(flags)] == (PYTHON, *flags, "-c")
    assert [argv[:3] for argv in refused] == ([] if flags else [(PYTHON, "-P", "-c")])
