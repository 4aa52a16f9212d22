"""The differential suite: every scenario of compat/scenarios.py, against the stdlib and pressure.

``test_scenario[stdlib-<name>]`` runs a scenario against ``queue`` and
``multiprocessing``; ``test_scenario[pressure-<name>]`` runs the very same
function against ``pressure.Queue``/``LifoQueue``/``PriorityQueue``/
``SimpleQueue`` and ``pressure.multiprocessing``, built on this session's
private server under the test's own prefix (anonymous queues, deleted after
the test). Where pressure deliberately differs, the scenario names the docs'
entry (``difference=``; docs/pages/queues.md, Differences from the stdlib) and asserts
each side's documented behaviour.

The stdlib side of a scenario that needs what this interpreter lacks
(``queue.ShutDown`` before Python 3.13) runs under another interpreter that
has it, through compat/stdlib_runner.py; it is skipped only when no such
interpreter exists, and says so.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import pickle
import queue
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from compat import scenarios as sc

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stdlib_runner.py")
#: What the other interpreter must have for the scenarios this one cannot host.
PROBE = "import queue; queue.ShutDown; queue.Queue.shutdown"
#: The longest the other interpreter may take for every scenario it runs.
RUNNER_LIMIT = 100.0

CASES = [
    pytest.param(side, item.name, id=f"{side}-{item.name}",
                 marks=[pytest.mark.slow] if item.slow else [])
    for item in sc.SCENARIOS.values()
    for side in ("stdlib", "pressure")
]


# -- the pressure implementation ------------------------------------------------------------


def _optional(module: str, name: str) -> tuple[Any, str]:
    """``module.name`` if it imports, else None and why not."""
    try:
        return getattr(importlib.import_module(module), name), ""
    except (ImportError, AttributeError) as exc:
        return None, f"{module}.{name} is not available: {exc}"


def _pressure_impl(url: str, prefix: str, late_by: float) -> sc.Impl:
    """pressure's queues on the private server, each deleted (and disconnected) afterwards."""
    impl = sc.Impl(name="pressure", Full=pressure.Full, Empty=pressure.Empty,
                   ShutDown=pressure.ShutDown, close_is_global=True,
                   serialization_error=pressure.SerializationError,
                   pickles_process_queues=True, stores_nonpositive_maxsize_as_zero=True,
                   orders_incomparable_priorities=True,
                   late_by=late_by)

    def owned(handle: Any, delete: bool) -> Any:
        impl.cleanups.append(lambda: _release(handle, delete))
        return handle

    def thread_factory(kind: str) -> Callable[..., Any]:
        cls, reason = _optional("pressure", kind)
        if cls is None:
            impl.reasons[kind] = reason
            return sc.missing
        if kind == "SimpleQueue":
            return lambda: owned(cls(url=url, prefix=prefix), True)
        # maxsize positional, as code written for queue.Queue(10) passes it
        return lambda maxsize=0: owned(cls(maxsize, url=url, prefix=prefix), True)

    def process_factory(kind: str) -> Callable[..., Any]:
        get_context, reason = _optional("pressure.multiprocessing", "get_context")
        if get_context is None:
            impl.reasons[kind] = reason
            return sc.missing
        attribute = {"ProcessQueue": "Queue", "ProcessSimpleQueue": "SimpleQueue"}.get(kind, kind)

        def make(*maxsize: int, method: str | None = None) -> Any:
            cls = getattr(get_context(method), attribute)
            return owned(cls(*maxsize, url=url, prefix=prefix), True)
        return make

    for kind in ("Queue", "LifoQueue", "PriorityQueue", "SimpleQueue"):
        setattr(impl, kind, thread_factory(kind))
    for kind in ("ProcessQueue", "JoinableQueue", "ProcessSimpleQueue"):
        setattr(impl, kind, process_factory(kind))
    impl.adopt = lambda handle: owned(handle, False)
    impl.attach = lambda handle: owned(pickle.loads(pickle.dumps(handle)), False)
    return impl


def _release(handle: Any, delete: bool) -> None:
    """Delete a queue the test made (if it still exists) and close the handle's sockets."""
    try:
        if delete:
            handle.delete()
    except pressure.QueueDoesNotExist:
        pass
    finally:
        handle.disconnect()


@pytest.fixture
def pressure_impl(url: str, prefix: str, r: redis.Redis) -> Iterator[sc.Impl]:
    """pressure on the private server; a timed wait may end one server tick (1/hz) late."""
    hz = int(str(r.config_get("hz")["hz"]))
    impl = _pressure_impl(url, prefix, late_by=1.0 / hz)
    yield impl
    impl.close()


@pytest.fixture
def stdlib_impl() -> Iterator[sc.Impl]:
    """queue and multiprocessing of this interpreter."""
    impl = sc.stdlib_impl()
    yield impl
    impl.close()


# -- the stdlib side under another interpreter ------------------------------------------------


def _python_candidates() -> list[str]:
    """python3.14/python3.13 on PATH, then every pyenv interpreter, newest first."""
    found = [path for name in ("python3.14", "python3.13") if (path := shutil.which(name))]
    pyenv = glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python3"))
    found += sorted(pyenv, key=_version_key, reverse=True)
    return found


def _version_key(path: str) -> tuple[int, ...]:
    version = path.split(os.sep)[-3]
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _python_with_shutdown() -> str | None:
    """The first interpreter whose queue module has ShutDown and Queue.shutdown."""
    for python in _python_candidates():
        try:
            probe = subprocess.run([python, "-c", PROBE], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return python
    return None


@pytest.fixture(scope="session")
def stdlib_elsewhere() -> dict[str, Any]:
    """Run, once per session, the stdlib side of every scenario this interpreter cannot host;
    maps each name to the runner's JSON result (``{"skip": reason}`` with no interpreter)."""
    here = sc.stdlib_impl()
    names = [name for name, item in sc.SCENARIOS.items() if sc.unavailable(here, item)]
    python = _python_with_shutdown()
    if python is None:
        reason = (f"the stdlib side needs queue.ShutDown (Python 3.13+): this is Python "
                  f"{sys.version.split()[0]} and no python3.13+ was found on PATH or under "
                  f"~/.pyenv/versions/*/bin")
        return {name: {"skip": reason} for name in names}
    done = subprocess.run([python, RUNNER, *names], capture_output=True, text=True,
                          timeout=RUNNER_LIMIT)
    assert done.returncode == 0, f"{python} {RUNNER} failed:\n{done.stderr}"
    results = {line["scenario"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert set(results) == set(names), f"runner answered {sorted(results)} for {names}"
    return results


def _check_elsewhere(result: dict[str, Any]) -> None:
    if "skip" in result:
        pytest.skip(result["skip"])
    where = f"(stdlib under Python {result['python']}, via compat/stdlib_runner.py)"
    if result["outcome"] == "skipped":
        pytest.skip(f"{result['detail']} {where}")
    if result["outcome"] != "passed":
        pytest.fail(f"{result['outcome']} {where}:\n{result['detail']}", pytrace=False)


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("side", "name"), CASES)
def test_scenario(side: str, name: str, request: pytest.FixtureRequest) -> None:
    """One scenario on one side: the stdlib's own behaviour, or pressure's."""
    item = sc.SCENARIOS[name]
    impl: sc.Impl = request.getfixturevalue(f"{side}_impl")
    reason = sc.unavailable(impl, item)
    if reason is None:
        sc.run(item, impl)
    elif side == "stdlib":
        _check_elsewhere(request.getfixturevalue("stdlib_elsewhere")[name])
    else:
        pytest.skip(reason)


def test_registry_is_consistent() -> None:
    """Every scenario is documented and tagged; every difference named is used and known."""
    used = {item.difference for item in sc.SCENARIOS.values()} - {None}
    assert used == set(sc.DIFFERENCES)
    for item in sc.SCENARIOS.values():
        assert item.doc, f"{item.name} has no docstring"
        assert item.tags, f"{item.name} has no tags"


class _PutNeverBlocks(queue.Queue[Any]):
    """A broken queue: a blocking put on a full queue fails at once instead of waiting."""

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block=False)


class _ServesNewestFirst(queue.LifoQueue[Any]):
    """A broken FIFO: it serves the newest item first."""


class _ShrinkIgnored(queue.Queue[Any]):
    """A broken queue: assigning maxsize has no effect."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "maxsize" or not hasattr(self, "maxsize"):
            super().__setattr__(name, value)


class _GetReturnsEarly(queue.Queue[Any]):
    """A broken queue: a timed get gives up after a tenth of its timeout."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return super().get(block, None if timeout is None else timeout / 10)


@pytest.mark.parametrize(("broken", "name"), [
    (_PutNeverBlocks, "fifo_put_and_get_block_until_triggered"),
    (_PutNeverBlocks, "put_timeout_raises_full_after_the_timeout"),
    (_ServesNewestFirst, "fifo_order_is_preserved"),
    (_ServesNewestFirst, "many_producers_one_consumer_keep_each_producers_order"),
    (_ShrinkIgnored, "shrinking_maxsize_makes_the_queue_full"),
    (_GetReturnsEarly, "get_timeout_raises_empty_after_the_timeout"),
])
def test_scenarios_catch_a_broken_queue(broken: type[queue.Queue[Any]], name: str) -> None:
    """The scenarios can fail: a queue.Queue broken in one way fails the scenario that pins it."""
    impl = sc.stdlib_impl()
    impl.Queue = broken
    with pytest.raises(AssertionError):
        sc.run(sc.SCENARIOS[name], impl)


def test_every_difference_is_listed_in_the_docs() -> None:
    """The docs' "Differences from the stdlib" (docs/pages/queues.md) names, in bold, each
    difference a scenario pins."""
    page = (Path(__file__).resolve().parent.parent / "docs/pages/queues.md").read_text("utf-8")
    section = page.split("\n## Differences from the stdlib\n", 1)[1].split("\n## ", 1)[0]
    bold = {" ".join(b.split()) for b in re.findall(r"\*\*(.+?)\*\*", section, re.S)}
    missing = [d for d in sc.DIFFERENCES if d not in bold]
    assert not missing, f"not listed in bold in the docs' differences (queues.md): {missing}"
