"""pressure.Executor.map(buffersize=), as Python 3.14's Executor.map (gh-64192), on every
version: the same checks and messages, results in order, and an input read at most
``buffersize`` tasks (chunks) ahead of the results yielded, so an endless one works.
The read-ahead is the one the Pool's imaps use (pressure/executor/_feeding.py)."""

from __future__ import annotations

import concurrent.futures
import gc
import itertools
from collections.abc import Iterator

import pytest

import pressure
from tests import executor_tasks as tasks

SOON = 30.0


@pytest.fixture
def executor(url: str, prefix: str) -> Iterator[pressure.Executor]:
    ex = pressure.Executor(url=url, prefix=prefix, max_workers=2)
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def counted(seen: list[int]) -> Iterator[int]:
    for i in itertools.count():
        seen.append(i)
        yield i


def test_buffersize_is_checked_as_in_3_14(executor: pressure.Executor) -> None:
    for bad in ("foo", 2.0, True):
        with pytest.raises(TypeError, match="^buffersize must be an integer or None$"):
            executor.map(str, range(4), buffersize=bad)  # type: ignore[arg-type]
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^buffersize must be None or > 0$"):
            executor.map(str, range(4), buffersize=bad)


@pytest.mark.parametrize("buffersize", [1, 2, 4, 8])
def test_results_in_order_whatever_the_buffersize(executor: pressure.Executor, buffersize: int) -> None:
    assert list(executor.map(tasks.square, range(4), buffersize=buffersize)) == [0, 1, 4, 9]
    assert list(executor.map(tasks.add, range(4), range(4), buffersize=buffersize)) == [0, 2, 4, 6]
    assert list(executor.map(tasks.square, range(7), chunksize=3, buffersize=buffersize)) == \
        [x * x for x in range(7)]


def test_an_endless_input_is_read_only_buffersize_ahead(executor: pressure.Executor) -> None:
    seen: list[int] = []
    results = executor.map(tasks.square, counted(seen), buffersize=3)
    assert len(seen) == 3  # submitted at the call, as 3.14's
    assert [next(results) for _ in range(20)] == [i * i for i in range(20)]
    assert len(seen) == 20 + 3
    chunks: list[int] = []
    chunked = executor.map(tasks.square, counted(chunks), chunksize=4, buffersize=2)
    assert [next(chunked) for _ in range(10)] == [i * i for i in range(10)]
    assert len(chunks) == 4 * (3 + 2)  # three chunks taken from, two more read ahead
    results.close()
    chunked.close()


def test_without_buffersize_every_task_is_submitted_at_the_call(executor: pressure.Executor) -> None:
    seen: list[int] = []
    results = executor.map(tasks.square, (seen.append(i) or i for i in range(50)))
    assert len(seen) == 50
    assert list(results) == [i * i for i in range(50)]


def test_timeout_and_cancel_with_buffersize(executor: pressure.Executor) -> None:
    results = executor.map(tasks.sleep_then, ["a", "b", "c"], [5.0, 0.0, 0.0], buffersize=2)
    with pytest.raises(concurrent.futures.TimeoutError):
        list(executor.map(tasks.sleep_then, ["x"], [5.0], timeout=0.2, buffersize=1))
    assert next(results) == "a"
    results.close()  # the task not yielded ("c") is cancelled or done, never waited for
    assert executor.submit(tasks.square, 3).result(SOON) == 9


def test_the_iterator_holds_its_executor_weakly(url: str, prefix: str) -> None:
    """As 3.14's: dropping the executor stops the submitting; the tasks submitted still
    finish (a collected executor finishes its pending work) and the iterator ends after them."""
    ex = pressure.Executor(url=url, prefix=prefix, max_workers=1)
    results = ex.map(tasks.square, itertools.count(), buffersize=2)
    del ex
    gc.collect()
    assert list(results) == [0, 1]
