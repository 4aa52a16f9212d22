"""A consumer that ends normally leaves the queue; only a real death is logged as one (issue
29, defect 4).

A consumer that leaves (its handle disconnected, closed in pressure.multiprocessing,
collected, or its process exiting normally) deregisters from ``:pressure:consumers`` and
gives back what it holds as a death would: nothing of it is left for the next client to
take for dead (the WARNING ``consumer ... is dead``). Children are real processes: a
``python -c`` interpreter that exits normally, a multiprocessing child, one SIGKILLed.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import redis

import pressure
import pressure.multiprocessing as pmp


def _recovered(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [rec for rec in caplog.records if getattr(rec, "event", None) == "consumer_recovered"]


def _child(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter (this checkout's pressure) that exits normally."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr
    return done


def _consumers(r: redis.Redis, q: pressure.Queue[Any]) -> list[bytes]:
    return list(r.hkeys(q.keys.consumers))


@pytest.mark.parametrize("how", ["get", "iterate", "get_many", "get_nowait"])
def test_a_child_that_consumes_and_exits_leaves(url: str, prefix: str, r: redis.Redis, how: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    q: pressure.Queue[int] = pressure.Queue("q", url=url, prefix=prefix)
    q.put_many([1, 2, 3])
    if how == "iterate":
        q.close()
    take = {"get": "[q.get(timeout=5) for _ in range(3)]", "iterate": "list(q)",
            "get_many": "q.get_many(3)", "get_nowait": "[q.get_nowait() for _ in range(3)]"}[how]
    _child(f"""
        import pressure
        q = pressure.Queue("q", url={url!r}, prefix={prefix!r})
        assert sorted({take}) == [1, 2, 3]
    """)
    assert _consumers(r, q) == []  # it left: no record for the next client to take for dead
    with caplog.at_level(logging.INFO, logger="pressure"):
        q._roles.sweep()  # what the next get does first
        with pytest.raises(pressure.ShutDown if how == "iterate" else pressure.Empty):
            q.get(timeout=0.2)
    assert _recovered(caplog) == []
    assert q.qsize() == 0  # what its gets returned is not given back
    q.disconnect()


def test_a_reliable_child_that_exits_gives_back_what_it_did_not_acknowledge(
        url: str, prefix: str, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    q: pressure.Queue[int] = pressure.Queue("q", url=url, prefix=prefix, reliable=True)
    q.put_many([1, 2, 3])
    _child(f"""
        import pressure
        q = pressure.Queue("q", url={url!r}, prefix={prefix!r}, reliable=True, visibility_timeout=300)
        assert q.get(timeout=5) == 1
        q.task_done()
        assert q.get(timeout=5) == 2  # not acknowledged: given back as it exits
    """)
    assert _consumers(r, q) == []
    assert q.qsize() == 2  # back at once, not after the visibility timeout
    with caplog.at_level(logging.INFO, logger="pressure"):
        delivery = q.receive(timeout=5)
        assert (delivery.item, delivery.deliveries) == (2, 2)  # next out, its delivery counted
        delivery.ack()
        assert q.get(timeout=5) == 3
        q.task_done()
    assert _recovered(caplog) == []
    q.disconnect()


def test_a_killed_child_is_still_a_death(url: str, prefix: str, r: redis.Redis,
                                         caplog: pytest.LogCaptureFixture) -> None:
    q: pressure.Queue[int] = pressure.Queue("q", url=url, prefix=prefix, reliable=True)
    q.put(1)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        import pressure
        q = pressure.Queue("q", url={url!r}, prefix={prefix!r}, reliable=True, visibility_timeout=300)
        q.get(timeout=5)
        print("got", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True, env=env)
    with child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "got"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert len(_consumers(r, q)) == 1
    with caplog.at_level(logging.INFO, logger="pressure"):
        assert q.get(timeout=10) == 1  # taken back from the dead
        q.task_done()
    assert len(_recovered(caplog)) == 1
    q.disconnect()


def test_disconnect_leaves(make_queue: Any, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    q = make_queue("q")
    q.put_many([1, 2])
    assert q.get() == 1
    assert len(_consumers(r, q)) == 1
    q.disconnect()
    assert _consumers(r, q) == []
    assert q.qsize() == 1  # the item it got stays got
    assert q.get() == 2  # the handle registers again
    assert len(_consumers(r, q)) == 1

    reliable = make_queue("q", reliable=True)
    reliable.put(3)
    assert reliable.get() == 3
    reliable.disconnect()
    assert q.qsize() == 1  # what it did not acknowledge is back
    q.disconnect()
    assert _consumers(r, q) == []


def test_a_collected_handle_leaves(url: str, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[int] = pressure.Queue("q", url=url, prefix=prefix)
    q.put_many([1, 2])
    other: pressure.Queue[int] | None = pressure.Queue("q", url=url, prefix=prefix)
    assert other is not None and other.get() == 1
    assert len(_consumers(r, q)) == 1
    other = None
    gc.collect()
    assert _consumers(r, q) == []
    assert q.qsize() == 1
    q.disconnect()


def test_exit_with_the_server_gone_neither_blocks_nor_raises() -> None:
    done = _child("""
        import pressure
        from pressure.testing import RedisServer
        srv = RedisServer()
        srv.start()
        q = pressure.Queue("q", url=srv.url)
        q.put(1)
        assert q.get() == 1
        srv.stop()
    """, timeout=60)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def _mp_worker(q: Any, out: Any) -> None:
    for item in iter(q.get, None):
        out.put(item * 10)


def test_multiprocessing_workers_leave(url: str, prefix: str, r: redis.Redis,
                                       caplog: pytest.LogCaptureFixture) -> None:
    jobs: pmp.Queue[int | None] = pmp.Queue(name="jobs", url=url, prefix=prefix)
    results: pmp.Queue[int] = pmp.Queue(name="results", url=url, prefix=prefix)
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_mp_worker, args=(jobs, results)) for _ in range(2)]
    for w in workers:
        w.start()
    for i in range(6):
        jobs.put(i)
    for _ in workers:
        jobs.put(None)
    got = sorted(results.get(timeout=10) for _ in range(6))
    for w in workers:
        w.join(10)
        assert w.exitcode == 0
    assert got == [i * 10 for i in range(6)]
    assert r.hkeys(jobs._queue.keys.consumers) == []
    with caplog.at_level(logging.INFO, logger="pressure"):
        jobs._queue._roles.sweep()
        with pytest.raises(pressure.Empty):
            jobs.get(timeout=0.2)
    assert _recovered(caplog) == []
    jobs.close()  # the namespace's close(): this handle's consumer leaves
    assert r.hkeys(jobs._queue.keys.consumers) == []
    results.close()
    for h in (jobs, results):
        h.disconnect()


def test_an_async_handle_leaves(url: str, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[int] = pressure.Queue("q", url=url, prefix=prefix)
    q.put_many([1, 2, 3])
    _child(f"""
        import asyncio
        from pressure.aio import AsyncQueue

        async def main():
            q = AsyncQueue("q", url={url!r}, prefix={prefix!r})
            assert await q.get() == 1  # and the process exits without disconnecting

        asyncio.run(main())
    """)
    assert _consumers(r, q) == []
    assert q.qsize() == 2
    _child(f"""
        import asyncio
        from pressure.aio import AsyncQueue

        async def main():
            async with AsyncQueue("q", url={url!r}, prefix={prefix!r}, reliable=True) as q:
                assert await q.get() == 2  # not acknowledged: back as it disconnects
            assert q._departure.joined == {{}}

        asyncio.run(main())
    """)
    assert _consumers(r, q) == []
    assert q.qsize() == 2
    q.disconnect()


def test_a_leave_is_idempotent(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("q")
    q.put(1)
    q.get()
    q._leave()
    q._leave()
    assert _consumers(r, q) == []
    assert q.qsize() == 0


def test_every_thread_of_a_handle_leaves(make_queue: Any, r: redis.Redis) -> None:
    import threading

    q = make_queue("q", reliable=True)
    q.put_many([1, 2])
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(q.get(timeout=5))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [1, 2]
    assert len(_consumers(r, q)) == 2  # a consumer per thread
    q.disconnect()
    assert _consumers(r, q) == []
    assert q.qsize() == 2  # neither acknowledged: both back


def test_executor_workers_that_stop_leave(url: str, prefix: str, r: redis.Redis,
                                          caplog: pytest.LogCaptureFixture) -> None:
    import operator

    executor = pressure.Executor("ex", url=url, prefix=prefix, max_workers=2)
    try:
        assert list(executor.map(operator.add, range(10), range(10))) == [2 * i for i in range(10)]
        tasks = executor._core._tasks
    finally:
        executor.shutdown(wait=True)
    assert r.hkeys(tasks.keys.consumers) == []  # the workers (forked processes) left
    with caplog.at_level(logging.INFO, logger="pressure"):
        q: pressure.Queue[Any] = pressure.Queue(tasks.name, url=url, prefix=prefix, reliable=True)
        q._roles.sweep()
        q.disconnect()
    assert _recovered(caplog) == []


def test_a_reliable_handle_disconnected_holds_nothing_it_gave_back(make_queue: Any) -> None:
    """disconnect() gives back what the handle held: none of it is the handle's to settle any
    more (task_done() has nothing to acknowledge, a Delivery's ack() finds nothing), and the
    items come out again, once each, with their delivery counts."""
    q = make_queue(reliable=True)
    q.put_many(["a", "b"])
    assert q.get() == "a"
    d = q.receive()
    q.disconnect()
    with pytest.raises(ValueError, match="task_done\\(\\) called too many times"):
        q.task_done()
    assert d.ack() is False
    again = [q.receive(block=False), q.receive(block=False)]
    assert [(x.item, x.deliveries) for x in again] == [("a", 2), ("b", 2)]
    assert [x.ack() for x in again] == [True, True]
    assert q.unfinished_tasks == 0 and q.qsize() == 0


def test_an_async_handle_disconnected_holds_nothing_it_gave_back(url: str, prefix: str) -> None:
    import asyncio

    from pressure.aio import AsyncQueue

    async def main() -> None:
        q: AsyncQueue[str] = AsyncQueue("aq", url=url, prefix=prefix, reliable=True)
        await q.put("a")
        assert await q.get() == "a"
        await q.disconnect()
        with pytest.raises(ValueError, match="task_done\\(\\) called too many times"):
            await q.task_done()
        d = await q.receive(block=False)
        assert (d.item, d.deliveries) == ("a", 2)
        assert await d.ack() is True
        await q.disconnect()

    asyncio.run(main())


def test_collecting_handles_whose_cluster_is_gone_waits_for_none(prefix: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A leave run by the garbage collector (in whatever thread drops the last reference) is
    sent once: a cluster master that cannot be reached is not asked again for up to the
    socket timeout, as an ordinary command is (each collected handle cost 5 s, and one test's
    leaked handles once held another test's ``Queue()`` for 45 s)."""
    from pressure.testing import ClusterTopology
    with ClusterTopology(masters=1, replicas=0) as topo:
        handles: list[pressure.Queue[int]] = []
        for i in range(3):
            q: pressure.Queue[int] = pressure.Queue(f"{{gone{i}}}", url=topo.url, prefix=prefix)
            q.put_many([1, 2])
            assert q.get() == 1
            handles.append(q)
        del q
    caplog.set_level(logging.WARNING, logger="pressure")
    start = time.monotonic()
    handles.clear()
    gc.collect()
    elapsed = time.monotonic() - start
    assert [rec.getMessage() for rec in caplog.records if getattr(rec, "event", None) == "retry"] == []
    assert elapsed < pressure.config.SOCKET_TIMEOUT  # three handles asked again: 3 x 5 s
