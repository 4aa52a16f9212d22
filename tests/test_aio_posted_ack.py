"""AsyncQueue: task_done() posts its acknowledgement (reliable mode; the count of an item
its gets returned in the default mode, at the end of this file) on the handle's get
connection (no round trip of its own) while no get uses it; the next get's exchange reads
its reply first. What the reply says comes out at the handle's next call: an acknowledgement
that did not run (NOSCRIPT) or whose reply was lost is sent again there, exactly (counted
once). join() reads this handle's unread replies first. Against a private server; the lost
reply through a proxy that drops it (tests/reply_proxy.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncQueue
from pressure.connection import _script_sha
from pressure.keys import QueueKeys
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


async def _close_seen(q: AsyncQueue[Any]) -> None:
    """Wait until the proxy's close of the handle's connection has reached this process: the
    next get then reads the lost reply first and goes on a new connection. (A get sent before
    that goes into the closed connection: OutcomeUnknown; see the test of that below.) The
    event loop has read the connection's end (its stream has been fed its EOF): the replies
    before it (the default mode's DEL, unless the proxy dropped that too) and the close are
    both there."""
    for _ in range(1000):
        reader = getattr(q._conn.conn, "_reader", None)
        if reader is None or reader.at_eof() or getattr(reader, "_eof", False):  # (at_eof: and read)
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the proxy's close never reached the handle")


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
            await _close_seen(q)
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


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_sent_behind_a_posted_command_whose_reply_is_lost_loses_nothing(
        proxy: ReplyDropper, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """The get goes out at once behind the posted command (its reply is read with the get's):
    if the connection breaks there, the get may or may not have run (OutcomeUnknown), and
    what it may have taken is not lost: the next get returns it."""
    async def main() -> None:
        async with AsyncQueue[str]("lostget", url=proxy.url, prefix=prefix, reliable=reliable) as q:
            await _warm(q)
            await q.put_many(["a", "b"])
            assert await q.get() == "a"
            proxy.arm(_script_sha("ack").encode())
            await q.task_done()  # posted: it runs, its reply will be lost with the connection
            got = []
            for _ in range(3):
                try:
                    got.append(await q.get(timeout=5))
                    break
                except pressure.OutcomeUnknown:
                    pass  # the get went into the closed connection
            assert got == ["b"]
            assert proxy.dropped.is_set()
            for _ in range(3):  # (default mode: the lost count's outcome may come first)
                try:
                    await q.task_done()  # "b"'s (reliable: "a"'s sent again first, exactly)
                    break
                except pressure.OutcomeUnknown:
                    pass
            await q.join()
            assert _unfinished(proxy.url, prefix, "lostget") == (0, [])
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()  # nothing counted twice

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("lostget", url=proxy.url, prefix=prefix))


@pytest.mark.parametrize("reliable", [False, True])
def test_a_posted_acknowledgement_refused_with_noscript_is_sent_again(
        url: str, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """(The default mode: the count of an item the handle's gets returned.)"""
    async def main() -> None:
        async with AsyncQueue[str]("noscript", url=url, prefix=prefix, reliable=reliable) as q:
            await _warm(q)
            await q.put_many(["a", "b"])
            assert await q.get() == "a"
            r.script_flush()  # as after a restart: the server has lost its scripts
            await q.task_done()  # posted (the handle thinks ack.lua is loaded): refused
            assert await q.get() == "b"  # reads the refusal
            await q.task_done()  # sends "a"'s again (loading ack.lua), then "b"'s
            await q.join()
            assert _unfinished(url, prefix, "noscript") == (0, [])
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()  # counted once each

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


# -- the default mode: task_done() posts the count of an item this handle's gets returned --


def test_default_mode_task_done_posts_its_count_and_join_reads_it(url: str, prefix: str, r: redis.Redis) -> None:
    """As the sync handle's: no round trip of its own (it waited for ack.lua's reply before:
    two round trips per item for a get + task_done consumer)."""
    async def main() -> None:
        async with AsyncQueue[str]("counted", url=url, prefix=prefix) as q:
            await _warm(q)
            await q.put_many(["a", "b", "c", "d"])
            runs = _runs(q)
            assert await q.get() == "a"
            await q.task_done()
            assert await q.get_many(3) == ["b", "c", "d"]
            for _ in range(3):
                await q.task_done()
            assert "ack" not in runs, runs  # no count waited for its reply
            await q.join()  # reads the unread replies first: this handle's counts all count
            assert _unfinished(url, prefix, "counted")[0] == 0
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()  # a call too many (no item of this handle's): from itself

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("counted", url=url, prefix=prefix))


def test_default_mode_posted_count_whose_reply_is_lost_is_outcome_unknown_at_the_next_call(
        proxy: ReplyDropper, prefix: str, r: redis.Redis) -> None:
    """A count whose reply was lost may or may not have run: the handle's next call raises
    OutcomeUnknown (as a task_done() that waited would have), and never counts it again."""
    async def main() -> None:
        async with AsyncQueue[str]("lostcount", url=proxy.url, prefix=prefix) as q:
            await _warm(q)
            await q.put_many(["a", "b"])
            assert await q.get() == "a"
            proxy.arm(_script_sha("ack").encode())
            await q.task_done()  # posted: it runs, its reply will be lost
            await _close_seen(q)
            assert await q.get() == "b"  # reads the lost reply first (on a new connection)
            assert proxy.dropped.is_set()
            with pytest.raises(pressure.OutcomeUnknown):
                await q.task_done()  # the last call's outcome first: this one did nothing
            await q.task_done()  # "b"'s
            await q.join()  # the lost one ran: nothing counted twice, nothing missing
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()

    asyncio.run(main())
    assert_invariants(r, pressure.Queue("lostcount", url=proxy.url, prefix=prefix))


@pytest.mark.parametrize("reliable", [False, True])
def test_the_posted_reply_is_read_with_the_next_gets_reply_one_round_trip(
        prefix: str, reliable: bool) -> None:
    """Across a network the posted command's reply has not arrived when the next get goes
    out: the get reads it with its own reply, in its one round trip. (It was read first, in
    an exchange of its own: a posted task_done() still cost a round trip, only later.) The
    server is paused (SIGSTOP) from before the task_done() until the get has sent, so that
    no reply can have arrived whatever the machine's timing."""
    async def main(server: RedisServer) -> None:
        async with AsyncQueue[str]("rtt", url=server.url, prefix=prefix, reliable=reliable) as q:
            await _warm(q)
            await q.put_many(["a", "b", "c"])
            assert await q.get() == "a"
            exchanges: list[tuple[str, int]] = []
            exchange = q._link.exchange

            async def recording(conn: Any, data: Any, replies: int, what: str, *a: Any, **kw: Any) -> Any:
                exchanges.append((what, replies))
                return await exchange(conn, data, replies, what, *a, **kw)

            q._link.exchange = recording  # type: ignore[method-assign]
            for expected in ("b", "c"):
                exchanges.clear()
                server.pause()
                try:
                    await q.task_done()  # posted (nothing awaited of the server)
                    getting = asyncio.ensure_future(q.get())
                    for _ in range(1000):  # until the get's first exchange has started
                        if exchanges:
                            break
                        await asyncio.sleep(0.01)
                finally:
                    server.resume()
                assert await getting == expected
                # the get reads the task_done()'s reply with its own (one round trip); only a
                # reply that had arrived already (the default mode's DEL, posted by the last
                # get before the pause) may be read before it, without waiting
                what, replies = exchanges[-1]
                assert what == "script get" and replies >= 2, exchanges
                assert all(e == ("a posted command", 1) for e in exchanges[:-1]), exchanges
            await q.task_done()
            await q.join()

    with RedisServer() as server:
        asyncio.run(main(server))
        assert_invariants(redis.Redis.from_url(server.url), pressure.Queue("rtt", url=server.url, prefix=prefix))


async def _traffic(url: str, prefix: str, name: str, reliable: bool, total: int,
                   disrupt: Callable[[], Awaitable[None]]) -> tuple[set[int], list[int], set[int]]:
    """A producer putting 0..total-1 and a consumer (get + task_done, posted) on two
    AsyncQueues, each retrying what failed, while ``disrupt()`` is called again and again until
    the producer is done; in reliable mode, then join(). (Items whose put returned, items
    received, items whose put was OutcomeUnknown.)"""
    put: set[int] = set()
    maybe: set[int] = set()
    got: list[int] = []
    async with AsyncQueue[int](name, url=url, prefix=prefix, reliable=reliable) as p, \
            AsyncQueue[int](name, url=url, prefix=prefix, reliable=reliable) as c:

        async def produce() -> None:
            for i in range(total):
                while True:
                    try:
                        await p.put(i)
                        put.add(i)
                        break
                    except pressure.OutcomeUnknown:
                        maybe.add(i)  # it may be in the queue: not put again
                        break
                    except pressure.PressureError:
                        await asyncio.sleep(0.02)
                await asyncio.sleep(0)

        async def consume() -> None:
            while True:
                try:
                    got.append(await c.get(timeout=2))
                except pressure.Empty:
                    if producing.done():
                        return
                    continue
                except pressure.PressureError:
                    await asyncio.sleep(0.02)
                    continue
                while True:
                    try:
                        await c.task_done()
                        break
                    except pressure.OutcomeUnknown:
                        if reliable:
                            continue  # (reliable: sent again in the exact form)
                        break  # (the default mode: a count whose reply was lost may have run)
                    except pressure.PressureError:
                        await asyncio.sleep(0.02)

        async def disrupting() -> None:
            while not producing.done():
                await disrupt()

        producing = asyncio.ensure_future(produce())
        await asyncio.gather(producing, consume(), disrupting())
        while reliable:  # every acknowledgement counted exactly once: join() returns
            try:
                await asyncio.wait_for(c.join(), 60)
                break
            except pressure.BackendError:  # a connection the last disruption broke
                await asyncio.sleep(0.02)
    return put, got, maybe


@pytest.mark.parametrize("reliable", [False, True])
def test_connections_killed_under_traffic_lose_nothing(
        url: str, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """A producer and a consumer while every client connection is killed over and over
    (CLIENT KILL, about 55 rounds): posted commands and gets whose replies are lost with them.
    Every item whose put returned comes out (reliable: at least once; the default mode may
    lose the item in hand of a get whose reply is lost, as documented, so there only
    duplicates are checked), and the queue ends empty."""
    name = f"killed{int(reliable)}"

    async def kill() -> None:
        await asyncio.sleep(0.01)
        r.client_kill_filter(_type="normal", skipme=True)

    put, got, maybe = asyncio.run(_traffic(url, prefix, name, reliable, 2000, kill))
    assert set(got) <= put | maybe
    if reliable:
        assert put <= set(got), sorted(put - set(got))[:10]
    else:
        assert len(got) == len(set(got)), "the default mode delivered an item twice"
    assert r.llen(QueueKeys.build(prefix, name).base) == 0  # nothing left behind in the queue


@pytest.mark.slow
def test_redis_restarts_under_traffic_lose_nothing_in_reliable_mode(prefix: str) -> None:
    """As above, with the server SIGKILLed and restarted from its AOF (fsync always) three
    times under traffic (about 470, 940 and 1,400 items in): posted acknowledgements lost with
    it are sent again, and every item whose put returned comes out."""
    restarts = 0

    with RedisServer(appendonly=True) as server:
        async def restart() -> None:
            nonlocal restarts
            await asyncio.sleep(0.3 if restarts < 3 else 0.05)
            if restarts < 3:
                await asyncio.to_thread(server.restart)
                restarts += 1

        put, got, maybe = asyncio.run(_traffic(server.url, prefix, "restarts", True, 1500, restart))
    assert restarts == 3  # under traffic
    assert set(got) <= put | maybe
    assert put <= set(got), sorted(put - set(got))[:10]


def test_without_redis_py_8s_can_read_the_posted_replies_are_read_first() -> None:
    """redis-py before 8 has only can_read_destructive, which may consume what it finds: it
    is never called; the replies are then read first (True), as before this change."""
    from pressure.aio._getconn import _arrived

    class OldConnection:  # redis-py 5-7's asyncio connection, as far as _arrived looks
        async def can_read_destructive(self) -> bool:
            raise AssertionError("called the destructive check")

    class NewConnection:
        def __init__(self, waiting: bool) -> None:
            self.waiting = waiting

        async def can_read(self) -> bool:
            return self.waiting

    async def main() -> None:
        assert await _arrived(OldConnection()) is True
        assert await _arrived(NewConnection(False)) is False
        assert await _arrived(NewConnection(True)) is True

    asyncio.run(main())


@pytest.mark.parametrize("reliable", [False, True])
def test_connections_the_server_closed_while_idle_are_not_used(prefix: str, reliable: bool) -> None:
    """CLIENT KILL of a handle's idle connections, and its next put and get at once, before
    the event loop has read the closes: each went into its closed connection and failed as
    OutcomeUnknown (it might have run). The closes are seen in the kernel (poll, peek) and the
    commands go on new connections: no error, nothing lost or doubled."""
    import time

    async def main(server: RedisServer, r: redis.Redis) -> None:
        async with AsyncQueue[int]("idle", url=server.url, prefix=prefix, reliable=reliable) as q:
            await _warm_int(q)
            await q.put(1)
            assert await q.get() == 1
            await q.task_done()  # (posted)
            await q.put(2)
            r.client_kill_filter(_type="normal", skipme=True)
            time.sleep(0.05)  # the closes reach this process's kernel; the event loop does not run
            await q.put(3)  # on the pool's connection, which the server closed
            assert await q.get() == 2  # on the handle's get connection, closed too
            await q.task_done()
            assert await q.get() == 3
            await q.task_done()
            await q.join()

    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        asyncio.run(main(server, r))
        r.close()


async def _warm_int(q: AsyncQueue[int]) -> None:
    await q.put(0)
    assert await q.get() == 0
    await q.task_done()


def test_a_task_done_too_many_runs_after_the_handles_posted_counts(url: str, prefix: str) -> None:
    """The posted counts go on the handle's get connection, a call too many waits on a pooled
    one: Redis could run it first, count it, and the ValueError came from a later call (a CI
    run of test_aio.py::test_basic_surface: "DID NOT RAISE"). It now reads the handle's
    posted replies first (they ran), so its own ValueError is its own."""
    async def main() -> None:
        async with AsyncQueue[int]("toomany", url=url, prefix=prefix) as q:
            await _warm_int(q)
            await q.put_many([1, 2])
            assert await q.get_many(2) == [1, 2]
            await q.task_done()
            await q.task_done()  # both posted (no round trip of their own)
            assert q._counting, "the counts were not posted"
            order: list[str] = []
            exchange, run = q._conn.exchange, q._link.run

            async def on_get_connection(*args: Any, **kw: Any) -> Any:
                order.append("get connection")
                return await exchange(*args, **kw)

            async def on_a_pooled_one(name: str, *args: Any, **kw: Any) -> Any:
                order.append(f"pooled {name}")
                return await run(name, *args, **kw)

            q._conn.exchange = on_get_connection  # type: ignore[method-assign]
            q._link.run = on_a_pooled_one  # type: ignore[method-assign]
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()
            assert order[0] == "get connection" and order[-1] == "pooled ack", order

    asyncio.run(main())
