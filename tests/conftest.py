"""Shared fixtures: scenario hosts, a report builder, and the gpu marker's skip."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from envdoctor.compat.loader import load_tables
from envdoctor.engine import Report, evaluate
from envdoctor.model.facts import Facts
from envdoctor.model.views import NO_INTENT, Intent
from envdoctor.platform.host import Deadline
from envdoctor.probes import collect_facts
from envdoctor.rules import all_rules
from tests.fakes.host import SCENARIOS, FakeHost

pytest_plugins = ["tests.scheduling"]  # the order modules are run in, longest first

# No per-example deadline: Hypothesis' 200 ms default measures the machine, not envdoctor (an
# interval test took 252 ms once on a loaded 2-core machine, a flaky failure); speed is the
# benchmarks' business (benchmarks/), never a timed test's.
settings.register_profile("envdoctor", deadline=None)
settings.load_profile("envdoctor")

PYTHON = "/opt/venv/bin/python"
SCENARIO_NAMES = sorted(p.stem for p in Path(SCENARIOS).glob("*.yaml"))


def scenario_facts(name: str, **overrides: object) -> Facts:
    host = FakeHost.scenario(name, **overrides)
    return collect_facts(host, python=PYTHON, deadline=Deadline(5))


def report_of(facts: Facts, *, strict: bool = False, intent: Intent = NO_INTENT) -> Report:
    return evaluate(facts, all_rules(), load_tables(), strict=strict, intent=intent)


@pytest.fixture
def scenario_report() -> Callable[..., Report]:
    def build(name: str, intent: Intent = NO_INTENT, **overrides: object) -> Report:
        return report_of(scenario_facts(name, **overrides), intent=intent)

    return build


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """envdoctor's cache (``$XDG_CACHE_HOME/envdoctor``) in a directory of this test session:
    tests never read or fill the user's own, and each pytest-xdist worker has its own."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


def _nvml_works() -> bool:
    try:
        from envdoctor.platform.nvml import NvmlError, open_pynvml

        open_pynvml(2.0).close()
    except NvmlError:
        return False
    return True


def pytest_configure(config: pytest.Config) -> None:
    """The programs the tests start get SIGINT and SIGQUIT as a foreground job has them. A
    shell without job control (a script, ``( ./scripts/test & )``) starts a background job with
    both ignored, every program inherits that through exec, and the tests that send them
    (``envdoctor run`` passing a signal on) waited 30 s for a signal the command was told to
    ignore, then failed. The cost: such a run now stops on a Ctrl-C typed for the foreground
    job, as a foreground run does."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_DFL in what it starts
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


# What collection builds (modules, items, fixtures' definitions) lives to the end of the run, and
# the garbage collector scanned it again and again: 0.2-1.2 s of CPU per worker, ~3 s per run.
# A pass comes every 50,000 new objects instead of 700 (as in the envdoctor command), and what
# is alive when a module starts, collection's objects first, is frozen out of the passes (below);
# the tests' own cycles are still collected.
gc.set_threshold(50_000, 10, 10)


@pytest.fixture(autouse=True, scope="module")
def _collect_cycles_per_module() -> Iterator[None]:
    """A file or socket kept open by a reference cycle warns (ResourceWarning, an error here)
    when the collector frees it: collected after each module, that warning still fails the
    module that leaked it, as it did with a pass every 700 objects; one its last test's fixtures
    held (pytest drops them after this teardown) fails the next module's first test, as before.
    What is alive when a module starts is frozen out of the later passes, as collection's
    objects are: a worker's heap grows over the run (torch, once a test imports it, is 160,000
    objects), and each module's pass went over all of it again (~80 ms a module after torch).
    A cycle frozen while alive and dropped later is then never collected: its file would not
    warn (the system closes it when the worker ends)."""
    gc.collect()
    gc.freeze()
    yield
    gc.collect()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items) or _nvml_works():
        return
    skip = pytest.mark.skip(
        reason="needs an NVIDIA GPU with a working driver (NVML did not initialise)"
    )
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_hard_exit_in_the_test_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A command run in-process (``dispatch``, Typer's ``CliRunner``) that outlives its
    ``--timeout`` on a loaded machine makes its watchdog call ``os._exit``, which kills the
    pytest-xdist worker ("node down: Not properly terminated") and can leave the run hanging.
    Here the watchdog's hard exit is recorded instead, and the test fails saying so; tests of
    the watchdog itself pass their own ``hard_exit``."""
    from envdoctor.cli import watchdog

    exits: list[int] = []
    original = watchdog.Watchdog.__init__

    def init(self: watchdog.Watchdog, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("hard_exit", exits.append)
        original(self, *args, **kwargs)  # type: ignore[arg-type]  # forwarded as given

    monkeypatch.setattr(watchdog.Watchdog, "__init__", init)
    yield
    assert not exits, f"a command's watchdog fired in the test process (exit {exits[0]})"
