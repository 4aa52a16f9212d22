"""AsyncQueue, reliable mode: task_done() posts its acknowledgement on the handle's get
connection (no round trip of its own) while no get uses it; the next get's exchange reads
its reply first. What the reply says comes out at the handle's next call: an acknowledgement
that did not run (NOSCRIPT) or whose reply was lost is sent again there, exactly (counted
once). join() reads this handle's unread replies first. Against a private server; the lost
reply through a proxy that drops it (tests/reply_proxy.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncQueue
from pressure.connection import _script_sha
from pressure.testing import RedisServer

from .helpers import assert_invariants
from .reply_proxy import ReplyDropper


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[ReplyDropper]:
    p = ReplyDropper(redis_server.port)
    yield p
    p.close()


def _runs(q: AsyncQueue[Any]) -> list[str]:
    """Record the names of the scripts ``q`` runs with a round trip of their own."""
    names: list[str] = []
    run = q._link.run

    async def recording(name: str, *args: Any, **kw: Any) -> Any:
        names.append(name)
        return await run(name, *args, **kw)

    q._link.run = recording  # type: ignore[method-assign]
    return names


def _unfinished(url: str, prefix: str, name: str) -> tuple[int, list[Any]]:
    sync: pressure.Queue[Any] = pressure.Queue(name, url=url, prefix=prefix, reliable=True)
    try:
        return sync.unfinished_tasks, [f.payload for f in sync.in_flight()]
    finally:
        sync.disconnect()


async def _warm(q: AsyncQueue[Any]) -> None:
    """The first acknowledgement waits for its reply (a posted call is never loaded)."""
    await q.put("warm-up")
    assert await q.get() == "warm-up"
    await q.task_done()


def test_task_done_is_posted_and_rides_with_the_next_get(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[str]("posted", url=url, prefix=prefix, reliable=True) as q:
            await _warm(q)
            await q.put_many(["a", "b", "c"])
            runs = _runs(q)
            got = []
            for _ in range(3):
                got.append(await q.get())
                await q.task_done()
            assert got == ["a", "b", "c"]
            assert "ack" not in runs, runs  # no acknowledgement waited for its reply
            await q.join()  # reads the last posted reply: this handle's task_done()s all count
            assert _unfinished(url, prefix, "posted") == (0, [])

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("posted", url=url, prefix=prefix))


def test_a_posted_acknowledgement_whose_reply_is_lost_is_sent_again_and_counts_once(
        proxy: ReplyDropper, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[str]("lost", url=proxy.url, prefix=prefix, reliable=True) as q:
            await _warm(q)
            await q.put_many(["a", "b", "c"])
            assert [await q.get(), await q.get()] == ["a", "b"]
            proxy.arm(_script_sha("ack").encode())
            await q.task_done()  # acknowledges "a", posted: it runs, its reply will be lost
            assert await q.get() == "c"  # reads the lost reply first (on a new connection)
            assert proxy.dropped.is_set()
            runs = _runs(q)
            await q.task_done()  # sends "a"'s again first, exactly; then acknowledges "b"
            assert runs.count("ack") == 1, runs
            assert _unfinished(proxy.url, prefix, "lost")[0] == 1, "a lost reply counted a task twice"
            await q.task_done()
            await q.join()
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("lost", url=proxy.url, prefix=prefix))


def test_a_posted_acknowledgement_refused_with_noscript_is_sent_again(
        url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[str]("noscript", url=url, prefix=prefix, reliable=True) as q:
            await _warm(q)
            await q.put_many(["a", "b"])
            assert await q.get() == "a"
            r.script_flush()  # as after a restart: the server has lost its scripts
            await q.task_done()  # posted (the handle thinks ack.lua is loaded): refused
            assert await q.get() == "b"  # reads the refusal
            await q.task_done()  # sends "a"'s again (loading ack.lua), then "b"'s
            await q.join()
            assert _unfinished(url, prefix, "noscript") == (0, [])

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("noscript", url=url, prefix=prefix))


def test_task_done_while_a_get_waits_on_the_connection_is_not_held_behind_it(
        url: str, prefix: str, r: redis.Redis) -> None:
    """A get waiting (a BLMOVE on the handle's connection) would hold a posted command back
    until it returns: task_done() then waits for its own reply, and join() returns."""
    async def main() -> None:
        async with AsyncQueue[str]("busy", url=url, prefix=prefix, reliable=True) as q:
            await _warm(q)
            await q.put("a")
            assert await q.get() == "a"
            waiting = asyncio.ensure_future(q.get())
            while r.get(q._keys.waiter) is None:
                await asyncio.sleep(0.01)
            await asyncio.wait_for(q.task_done(), 30)
            await asyncio.wait_for(q.join(), 30)
            assert _unfinished(url, prefix, "busy") == (0, [])
            await q.put("b")
            assert await asyncio.wait_for(waiting, 30) == "b"
            await q.task_done()
            await q.join()

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("busy", url=url, prefix=prefix))


def test_a_cancelled_get_leaves_a_delivery_whose_acknowledgement_is_owed_in_flight(
        url: str, prefix: str, r: redis.Redis) -> None:
    """A posted acknowledgement refused (NOSCRIPT) is owed again; a get cancelled meanwhile
    gives back only what the handle never received: the owed one's delivery stays in flight,
    and the acknowledgement sent again counts it, once. (Without it among the received,
    get.lua 'cancel' moved it back to the inbox: delivered twice, and join() never returned.)"""
    async def main() -> None:
        async with AsyncQueue[str]("owed", url=url, prefix=prefix, reliable=True) as q:
            await _warm(q)
            await q.put("a")
            assert await q.get() == "a"
            r.script_flush()
            await q.task_done()  # posted: refused
            getter = asyncio.ensure_future(q.get())  # reads the refusal, then waits
            while r.get(q._keys.waiter) is None:
                await asyncio.sleep(0.01)
            getter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await getter
            await asyncio.wait_for(q.join(), 30)  # sends "a"'s again: it counts
            assert _unfinished(url, prefix, "owed") == (0, [])
            with pytest.raises(pressure.Empty):
                await q.get_nowait()  # "a" is not delivered again

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("owed", url=url, prefix=prefix))
