"""pressure.aio against a real server: the asyncio.Queue surface, cancellation safety (a
cancelled get loses nothing and leaves no waiter), interop with sync handles on one queue,
and the executor bridge. Each test runs its own event loop (asyncio.run)."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncLifoQueue, AsyncPriorityQueue, AsyncQueue, Empty, Full, ShutDown
from pressure.keys import QueueKeys

from .helpers import assert_invariants


def _sync(url: str, prefix: str, name: str = "q", **kw: Any) -> pressure.Queue[Any]:
    return pressure.Queue(name, url=url, prefix=prefix, **kw)


def _check(r: redis.Redis, url: str, prefix: str, name: str = "q") -> None:
    """The protocol invariants, and no waiter left registered."""
    q = _sync(url, prefix, name)
    try:
        assert_invariants(r, q)
        assert r.get(q.keys.waiter) is None, "a waiter was left registered"
    finally:
        q.disconnect()


def test_import_pressure_does_not_import_aio() -> None:
    # (redis-py itself imports redis.asyncio on `import redis`: not checked)
    code = ("import sys, pressure; assert 'pressure.aio' not in sys.modules; "
            "import pressure.aio; "
            "assert pressure.aio.AsyncQueue")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_exceptions_are_pressures_and_asyncios() -> None:
    assert issubclass(Empty, pressure.Empty) and issubclass(Empty, asyncio.QueueEmpty)
    assert issubclass(Full, pressure.Full) and issubclass(Full, asyncio.QueueFull)
    assert ShutDown is pressure.ShutDown


def test_basic_surface(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[Any]("q", 3, url=url, prefix=prefix) as q:
            assert await q.empty() and await q.qsize() == 0 and await q.maxsize() == 3
            await q.put(1)
            await q.put_nowait({"two": 2})
            await q.put_many([3])
            assert await q.full()
            with pytest.raises(asyncio.QueueFull):
                await q.put_nowait(4)
            with pytest.raises(pressure.Full):
                await q.put(4, timeout=0.05)
            assert await q.get() == 1
            assert await q.get_nowait() == {"two": 2}
            assert await q.get_many(10) == [3]
            with pytest.raises(asyncio.QueueEmpty):
                await q.get_nowait()
            t0 = time.monotonic()
            with pytest.raises(pressure.Empty):
                await q.get(timeout=0.2)
            assert time.monotonic() - t0 >= 0.15
            for _ in range(3):
                await q.task_done()
            with pytest.raises(ValueError):
                await q.task_done()
            await q.join()
            await q.put_many(range(3))
            await q.close()
            with pytest.raises(ShutDown):
                await q.put(9)
            assert [x async for x in q] == [0, 1, 2]
            assert await q.is_shutdown()

    asyncio.run(main())
    _check(r, url, prefix)


def test_a_server_that_cannot_be_reached_raises_backend_error_and_the_handle_recovers(prefix: str) -> None:
    """With its server down, a call that needs a new connection (the pool connects it while
    handing it out) raised redis-py's own ConnectionError, not pressure's BackendError (on a
    cluster that also kept the handle on a dead master: see test_cluster_tools). Every call
    says BackendError; once the server is back on its port, the same handle works again."""
    from pressure.testing import RedisServer

    async def main(server: RedisServer) -> None:
        async with AsyncQueue("down", url=server.url, prefix=prefix) as q:
            await q.put(1)
            server.kill()
            for call in (lambda: q.put(2), lambda: q.qsize(), lambda: q.put_many([3, 4])):
                for _ in range(2):  # the first may be OutcomeUnknown (a pooled connection, sent)
                    with pytest.raises(pressure.BackendError):
                        await call()
            server.restart()  # (no persistence: the queue is gone with the old server's memory)
            with pytest.raises(pressure.QueueDoesNotExist):
                await q.put(5)

    with RedisServer() as server:
        asyncio.run(main(server))


def test_blocking_get_is_woken_by_a_put(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[int]("q", 0, url=url, prefix=prefix) as q:  # unbounded, named so
            getter = asyncio.create_task(q.get())
            await asyncio.sleep(0.2)
            assert not getter.done()
            await q.put(7)
            assert await asyncio.wait_for(getter, 2) == 7
            # two gets on one handle: served one after the other
            a, b = asyncio.create_task(q.get()), asyncio.create_task(q.get())
            await asyncio.sleep(0.1)
            await q.put_many([1, 2])
            assert sorted(await asyncio.gather(a, b)) == [1, 2]

    asyncio.run(main())
    _check(r, url, prefix)


@pytest.mark.parametrize("reliable", [False, True])
def test_gets_working_off_a_backlog_send_no_blmove_and_then_wait_as_before(
        url: str, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """As the sync handle's: a get after one that found its item queued sends get.lua alone
    ('nowait'); the one that finds the queue empty waits (BLMOVE) and a put wakes it."""
    async def main() -> None:
        async with AsyncQueue[Any]("backlog", url=url, prefix=prefix, reliable=reliable) as q:
            await q.put_many(list(range(5)))
            r.config_resetstat()
            got = []
            for _ in range(5):
                got.append(await q.get())
                if reliable:
                    await q.task_done()
            assert got == list(range(5))
            assert r.info("commandstats")["cmdstat_blmove"]["calls"] == 1  # the first get's only
            waiting = asyncio.ensure_future(q.get())
            while r.get(QueueKeys.build(prefix, "backlog").waiter) is None:
                await asyncio.sleep(0.01)
            await q.put("late")
            assert await asyncio.wait_for(waiting, 30) == "late"
            if reliable:
                await q.task_done()
    asyncio.run(main())
    _check(r, url, prefix, "backlog")


def test_timeouts_by_asyncio_leave_no_waiter(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[int]("q", url=url, prefix=prefix) as q:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await q.get()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(q.get(), 0.2)
            await q.put(5)
            assert await q.get(timeout=1) == 5

    asyncio.run(main())
    _check(r, url, prefix)


@pytest.mark.slow
@pytest.mark.parametrize("cls", [AsyncQueue, AsyncLifoQueue, AsyncPriorityQueue])
def test_cancelled_gets_lose_nothing(url: str, prefix: str, r: redis.Redis, cls: type[AsyncQueue[int]]) -> None:
    """Hundreds of gets cancelled at random points while a producer puts: every item is got
    exactly once, and no waiter is left."""
    n = 400
    rng = random.Random(17)

    async def main() -> list[int]:
        got: list[int] = []
        async with cls("q", url=url, prefix=prefix) as consumer, cls("q", url=url, prefix=prefix) as producer:
            async def produce() -> None:
                for i in range(n):
                    await producer.put(i)
                    await asyncio.sleep(rng.random() * 0.006)  # the consumer often waits

            task = asyncio.create_task(produce())
            cancelled = 0
            while len(got) < n:
                getter = asyncio.create_task(consumer.get() if rng.random() < 0.8 else consumer.get_many(3))
                await asyncio.sleep(rng.random() * 0.003)
                if rng.random() < 0.6 and getter.cancel():
                    cancelled += 1
                try:
                    value = await getter
                except asyncio.CancelledError:
                    continue
                got += value if isinstance(value, list) else [value]
            await task
            assert cancelled > 100
            with pytest.raises(Empty):
                await consumer.get(timeout=0.1)
        return got

    got = asyncio.run(main())
    assert sorted(got) == list(range(n)), "an item was lost or got twice"
    _check(r, url, prefix)


def test_cancelled_put_is_all_or_nothing(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[int]("q", 1, url=url, prefix=prefix) as q:
            await q.put(0)
            putter = asyncio.create_task(q.put(1))  # waits for room
            await asyncio.sleep(0.1)
            putter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await putter
            assert await q.get() == 0
            await q.put(2, timeout=2)  # the permit the cancelled put may have taken is not lost for long
            assert await q.get() == 2
            assert await q.qsize() == 0

    asyncio.run(main())
    _check(r, url, prefix)


def test_sync_producer_async_consumer(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, maxsize=10)

    async def main() -> list[int]:
        async with AsyncQueue[int]("q", url=url, prefix=prefix) as q:
            loop = asyncio.get_running_loop()
            producer = loop.run_in_executor(None, lambda: [sync.put(i) for i in range(200)] and sync.close())
            got = [item async for item in q]
            await producer
            return got

    assert asyncio.run(main()) == list(range(200))
    sync.disconnect()
    _check(r, url, prefix)


def test_async_producer_sync_consumer(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, maxsize=10)

    async def main() -> list[Any]:
        async with AsyncQueue[int]("q", url=url, prefix=prefix) as q:
            loop = asyncio.get_running_loop()
            consumer = loop.run_in_executor(None, lambda: list(sync))
            for i in range(100):
                await q.put(i)
            await q.put_many(range(100, 200))
            await q.close()
            return await consumer

    assert asyncio.run(main()) == list(range(200))
    sync.disconnect()
    _check(r, url, prefix)


def test_async_get_waiting_is_served_by_a_sync_put_and_kinds_match(url: str, prefix: str, r: redis.Redis) -> None:
    sync_p = pressure.PriorityQueue("p", url=url, prefix=prefix)

    async def main() -> None:
        async with AsyncQueue[int]("q", 0, url=url, prefix=prefix) as q:  # unbounded, named so
            getter = asyncio.create_task(q.get())
            await asyncio.sleep(0.2)
            await asyncio.to_thread(lambda: _sync(url, prefix).put(42))
            assert await asyncio.wait_for(getter, 2) == 42
        async with AsyncPriorityQueue[int]("p", url=url, prefix=prefix) as p:
            await p.put_many([5, 1, 3])
            assert await asyncio.to_thread(sync_p.get) == 1
            await asyncio.to_thread(sync_p.put, 0)
            assert await p.get_many(5) == [0, 3, 5]
        wrong = AsyncQueue[int]("q", 99, url=url, prefix=prefix)
        with pytest.raises(pressure.QueueExistsError):  # created with the bound 0 named
            await wrong.open()
        await wrong.disconnect()

    asyncio.run(main())
    sync_p.disconnect()
    _check(r, url, prefix)


def test_plain_spec_client_interop(url: str, prefix: str, r: redis.Redis) -> None:
    from pressure.testing.spec_client import SpecClient

    async def main() -> None:
        async with AsyncQueue[bytes]("q", url=url, prefix=prefix, serializer="bytes") as q:
            spec = SpecClient(r, "q", prefix=prefix)
            await asyncio.to_thread(spec.put, b"from spec")
            assert await q.get(timeout=1) == b"from spec"
            await q.put(b"from aio")
            assert await asyncio.to_thread(spec.get) == b"from aio"

    asyncio.run(main())
    _check(r, url, prefix)


def _square(x: int) -> int:
    return x * x


def test_executor_bridge(url: str, prefix: str) -> None:
    """pressure.Executor is a concurrent.futures.Executor: loop.run_in_executor takes it."""
    from pressure.executor import Executor

    with Executor(max_workers=2, url=url, prefix=prefix) as executor:
        async def main() -> list[int]:
            loop = asyncio.get_running_loop()
            return list(await asyncio.gather(*(loop.run_in_executor(executor, _square, i) for i in range(5))))

        assert asyncio.run(main()) == [0, 1, 4, 9, 16]


# -- reliable mode ------------------------------------------------------------------------

def test_reliable_get_stays_in_flight_until_task_done(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, reliable=True, serializer="json")

    async def main() -> None:
        async with AsyncQueue[Any]("q", url=url, prefix=prefix, reliable=True, serializer="json") as q:
            await q.put_many(["a", "b", "c"])
            assert await q.get() == "a"
            assert await q.get_many(5) == ["b", "c"]
            flying = sync.in_flight()
            assert sorted(f.payload for f in flying) == [b'"a"', b'"b"', b'"c"']
            assert {f.consumer for f in flying} == {q._cid}
            assert sync.unfinished_tasks == 3
            for _ in range(3):
                await q.task_done()
            assert sync.in_flight() == [] and sync.unfinished_tasks == 0
            await q.join()
            with pytest.raises(ValueError):
                await q.task_done()

    asyncio.run(main())
    sync.disconnect()
    _check(r, url, prefix)


def test_reliable_deliveries_ack_release_touch_and_dead_letters(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, reliable=True, max_deliveries=2)

    async def main() -> None:
        async with AsyncQueue[str]("q", url=url, prefix=prefix, reliable=True, max_deliveries=2) as q:
            await q.put_many(["x", "y"])
            x, y = await q.receive(), await q.receive()
            assert (x.item, x.deliveries, y.item) == ("x", 1, "y")
            assert await y.touch() and await y.ack() and not await y.ack()
            assert await x.release()
            again = await q.receive()
            assert (again.item, again.deliveries) == ("x", 2)
            assert await again.release()  # its last delivery allowed: dead-lettered
            assert [d.payload for d in sync.dead_letters()] and await q.qsize() == 0
            assert sync.in_flight() == []

    asyncio.run(main())
    sync.disconnect()
    _check(r, url, prefix)


def test_reliable_items_of_a_vanished_async_consumer_come_back_to_a_sync_one(
        url: str, prefix: str, r: redis.Redis) -> None:
    """Never acknowledged, an async delivery is redelivered after its visibility timeout, to
    any client (here a sync one), with its delivery count."""
    async def main() -> None:
        async with AsyncQueue[int]("q", url=url, prefix=prefix, reliable=True, visibility_timeout=0.3) as q:
            await q.put_many([1, 2])
            assert await q.get_many(2) == [1, 2]

    asyncio.run(main())
    time.sleep(1.2)  # the visibility timeout and the sweep's once-a-second limit pass
    sync = _sync(url, prefix, reliable=True)
    got = [sync.receive(timeout=5) for _ in range(2)]
    assert [(d.item, d.deliveries) for d in got] == [(1, 2), (2, 2)]
    for d in got:
        d.ack()
    sync.disconnect()
    _check(r, url, prefix)


@pytest.mark.slow
def test_reliable_cancelled_gets_lose_nothing_beside_sync_consumers(url: str, prefix: str, r: redis.Redis) -> None:
    """Reliable async gets cancelled at random points, a sync reliable consumer on the same
    queue, a sync producer: every item is got and acknowledged exactly once; nothing is left
    in flight, and no waiter."""
    n = 300
    rng = random.Random(5)
    sync_got: list[int] = []
    stop = threading.Event()  # set if the test fails first: the sync consumer ends all the same

    def sync_consumer() -> None:
        q = _sync(url, prefix, reliable=True)
        try:
            while not stop.is_set():
                try:
                    item = q.get(timeout=0.5)
                except pressure.Empty:
                    continue
                except pressure.ShutDown:
                    return
                sync_got.append(item)
                q.task_done()
        finally:
            q.disconnect()

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        producer = _sync(url, prefix, reliable=True)
        consumer_thread = loop.run_in_executor(None, sync_consumer)

        def produce() -> None:
            for i in range(n):
                producer.put(i)
                time.sleep(rng.random() * 0.004)

        producing = loop.run_in_executor(None, produce)
        try:
            return await consume(producer, producing, consumer_thread)
        finally:
            stop.set()

    async def consume(producer: pressure.Queue[int], producing: Any, consumer_thread: Any) -> list[int]:
        got: list[int] = []
        async with AsyncQueue[int]("q", url=url, prefix=prefix, reliable=True) as q:
            cancelled = 0
            while len(got) + len(sync_got) < n:
                getter = asyncio.create_task(q.get(timeout=0.5) if rng.random() < 0.7 else q.get_many(3, timeout=0.5))
                await asyncio.sleep(rng.random() * 0.003)
                if rng.random() < 0.5 and getter.cancel():
                    cancelled += 1
                try:
                    value = await getter
                except (asyncio.CancelledError, Empty):
                    continue
                values = value if isinstance(value, list) else [value]
                got.extend(values)
                for _ in values:
                    await q.task_done()
            # how many cancels land before their get finished depends on the machine's load
            # (27 to 95 in ten runs on a busy one): some must, for the test to mean anything
            assert cancelled >= 10
            await producing
            producer.close()
            await consumer_thread
            await q.join()
        producer.disconnect()
        return got

    got = asyncio.run(main())
    assert sorted(got + sync_got) == list(range(n)), "an item was lost or got twice"
    sync = _sync(url, prefix, reliable=True)
    assert sync.in_flight() == [] and sync.unfinished_tasks == 0
    sync.disconnect()
    _check(r, url, prefix)


def test_reliable_task_done_cancelled_still_acknowledges_once(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncQueue[int]("q", url=url, prefix=prefix, reliable=True) as q:
            await q.put_many([1, 2])
            assert await q.get_many(2) == [1, 2]
            done = asyncio.create_task(q.task_done())
            await asyncio.sleep(0)
            done.cancel()
            with pytest.raises(asyncio.CancelledError):
                await done
            await q.task_done()  # the second delivery: the cancelled one completed the first
            await q.join()
            assert await q.qsize() == 0

    asyncio.run(main())
    sync = _sync(url, prefix, reliable=True)
    assert sync.in_flight() == [] and sync.unfinished_tasks == 0
    sync.disconnect()
    _check(r, url, prefix)


def test_reliable_cancelled_get_leaves_the_deliveries_held_in_flight(url: str, prefix: str, r: redis.Redis) -> None:
    """A cancelled get's clean-up gives back only what the handle never received: the
    deliveries it holds unacknowledged (of earlier gets, and receive()'s) stay in flight,
    theirs to acknowledge, and are not delivered again."""
    async def main() -> None:
        async with AsyncQueue[str]("q", url=url, prefix=prefix, reliable=True) as q:
            await q.put_many(["a", "b", "c"])
            assert await q.get() == "a"
            explicit = await q.receive()
            assert await q.get() == "c"
            waiting = asyncio.create_task(q.get())  # the queue is empty: it waits
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            with pytest.raises(Empty):
                await q.get(timeout=0.2)  # nothing came back to the inbox
            sync = _sync(url, prefix, reliable=True)
            assert len(sync.in_flight()) == 3
            assert await explicit.ack()
            await q.task_done()
            await q.task_done()
            # Delivery.ack() counts its task, as task_done() does (as the sync handle's)
            assert sync.in_flight() == [] and sync.unfinished_tasks == 0
            sync.disconnect()

    asyncio.run(main())
    _check(r, url, prefix)


@pytest.mark.parametrize("kw", [{"visibility_timeout": -1}, {"visibility_timeout": "x"}, {"max_deliveries": 0},
                                {"lease": 0.1}])
def test_reliable_options_are_checked_before_any_round_trip(kw: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        AsyncQueue("q", url="redis://127.0.0.1:1/0", reliable=True, **kw)


@pytest.mark.parametrize("reliable", [False, True])
def test_get_many_dead_letters_an_item_that_cannot_be_loaded_and_returns_the_others(
        url: str, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """As the sync get_many: the bad item goes to the dead-letter list (it used to raise the
    serializer's own error, and in the default mode to lose the batch's other items)."""
    sync = _sync(url, prefix, serializer="json", reliable=reliable)
    sync.put("a")
    r.lpush(sync.keys.base, b"not json")
    sync.put("c")

    async def main() -> list[str]:
        async with AsyncQueue[str]("q", url=url, prefix=prefix, serializer="json", reliable=reliable) as q:
            got = await q.get_many(3)
            for _ in got:
                await q.task_done()
            return got

    assert asyncio.run(main()) == ["a", "c"]
    assert [d.payload for d in sync.dead_letters()] == [b"not json"]
    assert sync.in_flight() == [] and sync.qsize() == 0
    sync.disconnect()


@pytest.mark.parametrize(("cls", "sync_cls"), [(AsyncLifoQueue, pressure.LifoQueue),
                                               (AsyncPriorityQueue, pressure.PriorityQueue)])
def test_reliable_lifo_and_priority_share_deliveries_with_sync_handles(
        url: str, prefix: str, r: redis.Redis, cls: type[AsyncQueue[int]], sync_cls: Any) -> None:
    sync = sync_cls("q", url=url, prefix=prefix, reliable=True)
    sync.put_many([1, 3, 2])
    first = 2 if cls is AsyncLifoQueue else 1

    async def main() -> None:
        async with cls("q", url=url, prefix=prefix, reliable=True) as q:
            d = await q.receive()
            assert d.item == first and await d.touch()
            assert await d.release()  # back to the head: next out again
            assert await q.get() == first
            assert len(sync.in_flight()) == 1
            await q.task_done()

    asyncio.run(main())
    rest = [sync.get(timeout=5), sync.get(timeout=5)]
    sync.task_done()
    sync.task_done()
    assert sorted([first, *rest]) == [1, 2, 3] and sync.in_flight() == [] and sync.unfinished_tasks == 0
    sync.disconnect()


def test_reliable_async_consumer_killed_its_deliveries_come_back_at_once(url: str, prefix: str,
                                                                          r: redis.Redis) -> None:
    """SIGKILLed holding unacknowledged deliveries (a long visibility timeout), an async
    consumer's items are taken back as soon as a client on its host sees its pid gone."""
    sync = _sync(url, prefix, reliable=True, visibility_timeout=300)
    sync.put_many([1, 2])
    code = (
        "import asyncio, sys, time\n"
        "from pressure.aio import AsyncQueue\n"
        "async def main():\n"
        f"    q = AsyncQueue('q', url={url!r}, prefix={prefix!r}, reliable=True, visibility_timeout=300)\n"
        "    print(await q.get_many(2), flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "[1, 2]"
        assert len(sync.in_flight()) == 2
    finally:
        child.kill()
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
    got = [sync.receive(timeout=10) for _ in range(2)]
    assert [(d.item, d.deliveries) for d in got] == [(1, 2), (2, 2)]
    for d in got:
        d.ack()
    assert sync.in_flight() == []
    sync.disconnect()
    _check(r, url, prefix)


@pytest.mark.parametrize("how", ["get", "get_nowait"])
def test_an_item_given_back_while_an_async_get_looks_at_the_holders_is_got(
        url: str, prefix: str, r: redis.Redis, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As tests/test_consumer_death.py's sync test: the queue is closed and its one item is
    held by another consumer (get.lua -8), and given back before the get has looked at the
    holders: the async get gets it (its 'recovered' look again), never ShutDown."""
    holder = _sync(url, prefix, "back", reliable=True)
    holder.put("x")
    d = holder.receive()
    holder.close()

    async def main() -> None:
        async with AsyncQueue[Any]("back", url=url, prefix=prefix, reliable=True) as q:
            look = q._roles.recover_holders

            def given_back_first(cid: str) -> str:
                d.release()  # as when it lands between get.lua's -8 and this look
                return look(cid)

            monkeypatch.setattr(q._roles, "recover_holders", given_back_first)
            assert await (q.get(timeout=5) if how == "get" else q.get_nowait()) == "x"
            await q.task_done()
            with pytest.raises(ShutDown):
                await q.get_nowait()

    try:
        asyncio.run(main())
        _check(r, url, prefix, "back")
    finally:
        holder.disconnect()


def test_reliable_timed_out_waits_never_hand_out_a_delivery_the_handle_holds(
        url: str, prefix: str, r: redis.Redis) -> None:
    """As the sync handle's (tests/test_reliability.py): waits that end empty, and gets that
    do not wait, while the handle holds deliveries of receive(), get() and get_many(): Empty,
    each delivery acknowledged once; an item put during a wait is delivered once."""
    async def main() -> None:
        async with AsyncQueue[str]("q", url=url, prefix=prefix, reliable=True) as q:
            await q.put_many(["a", "b", "c", "d"])
            held = [await q.receive(), await q.receive()]
            assert await q.get() == "c"
            assert await q.get_many(2) == ["d"]
            for attempt in (lambda: q.receive(timeout=0.2), lambda: q.get(timeout=0.2),
                            lambda: q.get_many(5, timeout=0.2), q.get_nowait,
                            lambda: q.receive(block=False), lambda: q.get_many(5, block=False)):
                with pytest.raises(Empty):
                    await attempt()
            waiting = asyncio.create_task(q.receive(timeout=30))
            await asyncio.sleep(0.2)
            await q.put("e")
            late = await waiting
            assert late.item == "e" and late.deliveries == 1
            with pytest.raises(Empty):
                await q.receive(timeout=0.2)
            assert [await d.ack() for d in (*held, late)] == [True, True, True]
            await q.task_done()
            await q.task_done()
            sync = _sync(url, prefix, reliable=True)
            assert sync.in_flight() == [] and await q.qsize() == 0
            sync.disconnect()

    asyncio.run(main())
    _check(r, url, prefix)


def _fill_for_shutdown(url: str, prefix: str, name: str, r: redis.Redis) -> pressure.Queue[Any]:
    """A queue with ready items (one given back: a queued copy with a state of its own),
    delayed ones, items behind a utube key, and an item held by a consumer."""
    q = _sync(url, prefix, name, reliable=True)
    q.put_many(["a", "b", "c"])
    q.receive(block=False)  # "a": held
    q.receive(block=False).release()  # "b" back at the head, delivered once
    q.put_many(["d", "e"], delay=60)
    q.put_many(["k0", "k1", "k2"], key="k")
    assert r.hlen(q.keys.redeliveries) == 2  # the states of "b" (delivered once) and k0 (its key)
    return q


def test_immediate_shutdown_as_the_sync_one(url: str, prefix: str, r: redis.Redis) -> None:
    """aio's shutdown(immediate=True) runs drain.lua through the same binding as the sync
    handle: it leaves the same keys and counts."""
    def left(q: pressure.Queue[Any]) -> tuple[list[str], Any, int]:
        base = q.keys.base
        names = sorted(key.decode()[len(base):] for key in r.scan_iter(match=base + "*")
                       if b":inflight:" not in key and b":held:" not in key and b":inbox:" not in key)
        s = q.statistics()
        return names, (s.discarded_messages, s.produced_messages, s.consumed_messages), q.unfinished_tasks

    sync = _fill_for_shutdown(url, prefix, "s", r)
    sync.shutdown(immediate=True)

    aio_filled = _fill_for_shutdown(url, prefix, "a", r)

    async def main() -> None:
        async with AsyncQueue[str]("a", url=url, prefix=prefix, reliable=True) as q:
            await q.shutdown(immediate=True)

    asyncio.run(main())
    assert left(aio_filled) == left(sync)
    assert left(sync)[1][0] == 7  # b, c, k0; d, e (delayed); k1, k2 (behind k0)
    assert r.hlen(sync.keys.redeliveries) == 0 and r.exists(sync.keys.delayed, sync.keys.utube) == 0
    sync.disconnect()
    aio_filled.disconnect()
