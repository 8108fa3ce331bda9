"""Shared fixtures: scenario hosts, a report builder, and the gpu marker's skip."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envdoctor.compat.loader import load_tables
from envdoctor.engine import Report, evaluate
from envdoctor.model.facts import Facts
from envdoctor.model.views import NO_INTENT, Intent
from envdoctor.platform.host import Deadline
from envdoctor.probes import collect_facts
from envdoctor.rules import all_rules
from tests.fakes.host import SCENARIOS, FakeHost

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


_MODULE_SECONDS = "envdoctor/module-seconds"
_SECONDS_PER_TEST = 0.05  # a module not timed yet (a new one, a fresh clone): its tests x this
_timed: dict[str, float] = {}  # this run's seconds per module (the controller's reports)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's --dist loadscope hands out modules in the order they were collected
    instead of by their number of tests: ``_longest_first`` decides that order. And the
    programs the tests start get SIGINT and SIGQUIT as a terminal's foreground job has them: a
    shell starts a background job (``./scripts/test &``) with both ignored, every program
    inherits that through exec, and the tests that send them (``envdoctor run`` passing a
    signal on) waited 30 s for a signal the command was told to ignore, then failed."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_DFL in what it starts
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A pytest-xdist worker's last act is Python's own teardown: with torch and a few hundred
    modules loaded it took ~1 s, during which the whole run waits for it. By then the worker has
    sent every report (this hook runs after its session ended), so it leaves at once."""
    if not hasattr(config, "workerinput"):
        return

    def leave() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    atexit.register(leave)  # registered last, run first: after the worker's main loop ended


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each module's time (setup, call and teardown of its tests), summed where the reports
    arrive: in the controller under pytest-xdist."""
    module = _module(report.nodeid)
    _timed[module] = _timed.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remember the modules' times for the next run's order (pytest's cache directory). Only a
    run of the whole suite remembers (one test of a module is not the module's time); a worker,
    or a run without the cache, remembers nothing."""
    config = session.config
    cache = getattr(config, "cache", None)
    if cache is None or hasattr(config, "workerinput") or not _timed or config.option.keyword:
        return
    if [Path(arg).resolve() for arg in config.args] != [Path(__file__).parent]:
        return
    seconds = dict(cache.get(_MODULE_SECONDS, {}))
    seconds.update({module: round(t, 3) for module, t in _timed.items()})
    cache.set(_MODULE_SECONDS, seconds)


def _longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the modules longest first, so that no worker starts a long module while the others
    have nothing left: the last run's times where pytest's cache has them, else the number of
    tests, with the install test (one test of several seconds) first. Every worker computes the
    same order from the same cache file, which only the controller writes, at the end."""
    cache = getattr(config, "cache", None)
    seconds: dict[str, float] = cache.get(_MODULE_SECONDS, {}) if cache is not None else {}
    counts = Counter(_module(item.nodeid) for item in items)
    first = {_module(item.nodeid) for item in items if item.get_closest_marker("install")}

    def cost(module: str) -> tuple[bool, float]:
        known = seconds.get(module)
        return module not in first, -(
            known if known is not None else counts[module] * _SECONDS_PER_TEST
        )

    rank = {module: i for i, module in enumerate(sorted(counts, key=cost))}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (rank[_module(item.nodeid)], order[id(item)]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _longest_first(config, items)
    if not any(item.get_closest_marker("gpu") for item in items) or _nvml_works():
        return
    skip = pytest.mark.skip(
        reason="needs an NVIDIA GPU with a working driver (NVML did not initialise)"
    )
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
