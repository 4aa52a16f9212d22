"""Every kind of call pressure makes, once each: what an ACL user must be allowed to run
(tests/test_acl.py runs it as a restricted user; docs/pages/security.md, "ACL", lists the rule)."""

from __future__ import annotations

import asyncio
import contextlib
import operator
import threading
import time
from collections.abc import Callable
from typing import Any

import pressure
from pressure.spark.log import QueueLog


def run(url: str, prefix: str) -> None:
    kw: dict[str, Any] = {"url": url, "prefix": prefix}
    for cls in (pressure.Queue, pressure.LifoQueue, pressure.PriorityQueue):
        q: pressure.Queue[Any] = cls("acl-" + cls.__name__, 4, **kw)
        q.put((1, "a"))
        q.put_many([(2, "b"), (3, "c")])
        q.get()
        q.get_nowait()
        q.task_done()
        q.task_done()
        q.put((4, "d"))
        q.get_many(5)
        q.task_done()
        q.task_done()
        try:
            q.get(timeout=0.2)  # blocks: registers as the waiter, BLMOVE
        except pressure.Empty:
            pass
        q.put_many([(5, "e"), (6, "f"), (7, "g"), (8, "h")])
        with contextlib.suppress(pressure.Full):
            q.put((9, "i"), timeout=0.2)  # blocks on the full queue
        q.get_many(4)
        for _ in range(4):
            q.task_done()
        q.join()
        for call in (q.qsize, q.empty, q.full, q.statistics, q.repair, lambda: q.peek(1)):
            call()
        q.maxsize = 5
        q.close()
        q.delete()
    # payloads of 4 KiB or more move natively: MULTI, put.lua, LSET, LPUSHX, RENAME, EXEC
    b: pressure.Queue[bytes] = pressure.Queue("acl-native", 4, serializer="bytes", **kw)
    b.put(b"n" * 5000)
    b.put_many([b"m" * 5000, b"o" * 5000])
    b.get_many(3)
    b.delete()
    r: pressure.Queue[str] = pressure.Queue("acl-reliable", 4, reliable=True, visibility_timeout=1.0, **kw)
    r.put_many(["x", "y", "z"])
    d = r.receive()
    d.touch()
    d.release()
    r.get()
    r.task_done()
    for d in (r.receive(), r.receive()):
        d.ack()
    r.statistics()  # reads the posted acks' replies first (flush: one PING behind them)
    j: pressure.Queue[str] = pressure.Queue("acl-reliable-join", 4, reliable=True, **kw)
    j.put_many(["j1", "j2"])
    j.get()
    j.task_done()  # posted: join() reads its reply first (flush: one PING behind it)
    j.get()
    j.task_done()
    j.join()  # nothing unfinished: returns at once
    j.put("j3")
    other: pressure.Queue[str] = pressure.Queue("acl-reliable-join", reliable=True, **kw)
    finished = _in_a_while(lambda: (other.get(), other.task_done(), other.unfinished_tasks))
    try:
        j.join()  # waits on the queue's stream (XREAD) until the other handle's task_done
    finally:
        finished()
        other.disconnect()
    j.delete()
    for call in (r.in_flight, r.dead_letters, r.kick, r.purge_dead):
        call()
    r.put("logged")
    log = QueueLog("acl-reliable", "g", **kw)
    tail = log.take(5)
    list(log.read(0, tail))
    log.commit(tail)
    # the task lifecycle: delayed put with ttl and ttr, release with a delay, bury, expiry
    r.put("later", delay=0.01, ttl=60, ttr=30)
    time.sleep(0.05)
    e = r.receive(timeout=5)
    e.release(delay=0.01)
    time.sleep(0.05)
    r.receive(timeout=5).bury()
    r.put("gone", ttl=0.001)
    time.sleep(0.05)
    try:
        r.get_many(5, timeout=0.2)  # "gone" expires on the way
    except pressure.Empty:
        pass
    r.statistics()
    r.delete()
    with pressure.Executor("acl-executor", max_workers=1, **kw) as ex:
        assert list(ex.map(operator.neg, [1, 2])) == [-1, -2]
        ex.statistics()
    anon: pressure.Queue[int] = pressure.Queue(**kw)  # an anonymous queue (hash-tagged name)
    anon.put(1)
    anon.get()
    anon.delete()
    asyncio.run(_run_async(kw))


def _in_a_while(call: Callable[[], object]) -> Callable[[], None]:
    """Start ``call`` in a thread in 0.2 s; what is returned waits for it and raises its
    exception (so nothing of this run goes on behind it)."""
    errors: list[BaseException] = []

    def run() -> None:
        time.sleep(0.2)
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if errors:
            raise errors[0]

    return wait


async def _run_async(kw: dict[str, Any]) -> None:
    """pressure.aio's calls: plain and reliable queues, a cancelled get (CLIENT UNBLOCK),
    posted acknowledgements then join() (which reads their replies: a PING behind them)."""
    from pressure.aio import AsyncLifoQueue, AsyncPriorityQueue, AsyncQueue

    for cls in (AsyncQueue, AsyncLifoQueue, AsyncPriorityQueue):
        async with cls("acl-aio-" + cls.__name__, 4, **kw) as q:
            await q.put((1, "a"))
            await q.put_nowait((2, "b"))
            await q.put((3, "c"))
            await q.put((4, "d"))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(q.put((5, "e")), 0.2)  # blocks on the full queue
            await q.get_many(2)
            await q.task_done()
            await q.task_done()
            await q.get()
            await q.get_many(5)
            await q.task_done()
            await q.task_done()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(q.get(), 0.2)  # cancelled while blocked
            await q.join()
            for call in (q.qsize, q.empty, q.full, q.maxsize, q.is_shutdown):
                await call()
            await q.shutdown()
    async with AsyncQueue("acl-aio-reliable", 4, reliable=True, visibility_timeout=1.0, **kw) as r:
        for item in ("x", "y", "z"):
            await r.put(item)
        d = await r.receive()
        await d.touch()
        await d.release()
        await r.get()
        await r.task_done()
        d = await r.receive()
        await d.ack()
        await r.shutdown()
    async with AsyncQueue("acl-aio-reliable-join", 4, reliable=True, **kw) as j:
        await j.put("j1")
        await j.get()
        await j.task_done()  # posted: join() reads its reply first (a PING behind it)
        await j.join()
        await j.put("j2")

        async def finish() -> None:
            async with AsyncQueue("acl-aio-reliable-join", reliable=True, **kw) as other:
                await asyncio.sleep(0.2)
                await other.get()
                await other.task_done()
                await other.join()

        finishing = asyncio.create_task(finish())
        await j.join()  # waits on the queue's stream (XREAD) until the other's task_done
        await finishing
        await j.shutdown()

