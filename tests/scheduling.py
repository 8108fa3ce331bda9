"""How the suite spreads over pytest-xdist's workers (a pytest plugin, loaded by conftest.py).

- Modules are handed out longest first, so that no worker starts a long module while the others
  have nothing left: xdist's ``--dist loadscope`` takes them in the collected order once its own
  reorder (by number of tests) is off, and this plugin sorts the collection by each module's
  time in earlier runs (pytest's cache). A module not timed yet (a fresh clone, a new module)
  counts ``_SECONDS_PER_TEST`` a test; the install test (one test of several seconds) goes
  first in any case.
- Only a module that ran whole is timed: every collected test of it reported its teardown and
  none of its tests was deselected (``-k``, ``-m``, ``--lf``, ``--deselect``, ``--sw``), in a
  run that ended with its tests' results (exit status 0 or 1, not an interruption).
- The controller reads the times once and hands them to every worker, so all of them sort the
  same way (xdist aborts a run whose workers collected different orders).
- A worker leaves without Python's teardown once its session has ended.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

_CACHE_KEY = "envdoctor/module-seconds"
_SECONDS_INPUT = "envdoctor_module_seconds"  # controller -> worker (workerinput)
_DESELECTED_OUTPUT = "envdoctor_deselected"  # worker -> controller (workeroutput)
_SECONDS_PER_TEST = 0.05


class _Run:
    """What this process knows of the run (one instance: a pytest process runs one session)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}  # earlier runs' times, read once
        self.collected: Counter[str] = Counter()  # tests per module (controller)
        self.finished: Counter[str] = Counter()  # teardown reports per module
        self.timed: dict[str, float] = {}  # this run's seconds per module
        self.deselected: set[str] = set()  # modules with a deselected test


_run = _Run()


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # our order, not xdist's count of tests
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _run.seconds = dict(workerinput.get(_SECONDS_INPUT, {}))
        return
    cache = getattr(config, "cache", None)  # None with -p no:cacheprovider
    _run.seconds = dict(cache.get(_CACHE_KEY, {})) if cache is not None else {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(controller, xdist) Every worker sorts by the times the controller read."""
    node.workerinput[_SECONDS_INPUT] = _run.seconds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    counts = Counter(_module(item.nodeid) for item in items)
    first = {_module(item.nodeid) for item in items if item.get_closest_marker("install")}

    def cost(module: str) -> tuple[bool, float]:
        known = _run.seconds.get(module)
        guess = counts[module] * _SECONDS_PER_TEST
        return module not in first, -(known if known is not None else guess)

    rank = {module: i for i, module in enumerate(sorted(counts, key=cost))}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (rank[_module(item.nodeid)], order[id(item)]))


def pytest_deselected(items: list[pytest.Item]) -> None:
    _run.deselected.update(_module(item.nodeid) for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        _run.collected = Counter(_module(item.nodeid) for item in session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """(controller, xdist) What the workers collected (the same on each)."""
    _run.collected = Counter(_module(nodeid) for nodeid in ids)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(controller, xdist) Deselection happens in the workers: they say which modules lost a
    test to it."""
    _run.deselected.update(getattr(node, "workeroutput", {}).get(_DESELECTED_OUTPUT, ()))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each module's time (setup, call and teardown of its tests), summed where the reports
    arrive: in the controller under xdist."""
    module = _module(report.nodeid)
    _run.timed[module] = _run.timed.get(module, 0.0) + report.duration
    if report.when == "teardown":
        _run.finished[module] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_DESELECTED_OUTPUT] = sorted(_run.deselected)
        return
    cache = getattr(config, "cache", None)
    if cache is None or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return
    whole = {
        module
        for module, count in _run.collected.items()
        if _run.finished[module] == count and module not in _run.deselected
    }
    root = Path(config.rootpath)
    seconds = {
        module: t
        for module, t in _run.seconds.items()
        if module not in whole and (root / module).is_file()  # a removed module is forgotten
    }
    seconds.update({module: round(_run.timed.get(module, 0.0), 3) for module in whole})
    cache.set(_CACHE_KEY, dict(sorted(seconds.items())))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A worker's last act is Python's own teardown: with torch and a few hundred modules loaded
    it took ~1 s, during which the whole run waits for it. By then the worker has sent every
    report and its result (xdist sends them when its session ends, before this hook), so it
    leaves at once: the atexit handlers registered before this one are skipped (logging's flush,
    finalizers of live temporary directories), so not when coverage measures the worker, whose
    data is written by one of them."""
    if not hasattr(config, "workerinput") or "coverage" in sys.modules:
        return

    def leave() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    atexit.register(leave)  # registered last, run first: after the worker's main loop ended
