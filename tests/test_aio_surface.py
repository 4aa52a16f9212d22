"""pressure.aio has the sync handle's surface: puts with delay/ttl/ttr/key (the same checks
and errors), delete(), statistics() and the inspection calls, anonymous queues, create=False
and durability=, through the sync handle's scripts and parsers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncLifoQueue, AsyncPriorityQueue, AsyncQueue

from .helpers import assert_invariants


def _sync(url: str, prefix: str, name: str = "q", **kw: Any) -> pressure.Queue[Any]:
    return pressure.Queue(name, url=url, prefix=prefix, **kw)


@pytest.mark.parametrize("kw, error, text", [
    ({"delay": -1}, ValueError, "delay must be a finite number"),
    ({"delay": "1"}, TypeError, "delay must be a number of seconds"),
    ({"ttl": 0}, ValueError, "ttl must be a positive number"),
    ({"ttr": float("nan")}, ValueError, "ttr must be"),
    ({"key": ""}, TypeError, "key must be a non-empty str"),
    ({"key": "k", "delay": 1}, ValueError, "cannot be combined"),
])
def test_put_lifecycle_arguments_are_checked_as_the_sync_handle_checks_them(
        url: str, prefix: str, r: redis.Redis, kw: dict[str, Any], error: type[Exception], text: str) -> None:
    sync = _sync(url, prefix)
    with pytest.raises(error, match=text) as expected:
        sync.put("x", **kw)

    async def main() -> None:
        q: AsyncQueue[Any] = AsyncQueue("fresh", url=url, prefix=prefix)
        for call in (lambda: q.put("x", **kw), lambda: q.put_nowait("x", **kw),
                     lambda: q.put_many(["x"], **kw)):
            with pytest.raises(error) as got:
                await call()
            assert str(got.value) == str(expected.value)
        await q.disconnect()

    asyncio.run(main())
    assert not r.keys(f"{prefix}:fresh*")  # refused before any round trip: nothing created
    sync.disconnect()


def test_utube_keys_are_for_fifo_queues_and_a_wrong_argument_names_the_public_class(url: str, prefix: str) -> None:
    async def main() -> None:
        for cls in (AsyncLifoQueue, AsyncPriorityQueue):
            q: AsyncQueue[Any] = cls("o", url=url, prefix=prefix)
            with pytest.raises(ValueError, match="key= \\(utube\\) is for FIFO queues"):
                await q.put((1, "x"), key="k")
        q = AsyncQueue("q", url=url, prefix=prefix)
        with pytest.raises(TypeError, match=r"^AsyncQueue\.put\(\) got an unexpected keyword argument 'dely'"):
            await q.put(1, dely=1)  # type: ignore[call-arg]
        await q.disconnect()

    asyncio.run(main())


def test_delay_ttl_ttr_and_key_work_as_on_the_sync_handle(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, reliable=True)

    async def main() -> None:
        async with AsyncQueue[Any]("q", url=url, prefix=prefix, ttl=30) as q:
            await q.put("later", delay=0.3)
            assert (await q.statistics()).delayed == 1 and await q.qsize() == 0
            assert await q.get(timeout=5) == "later"  # due, then delivered
            await q.put("stale", ttl=0.05)
            await asyncio.sleep(0.2)
            assert await q.qsize() == 0 and (await q.statistics()).expired == 1
            await q.put_many(["a1", "a2"], key="a")
            await q.put("b1", key="b")
            # items of one key one at a time: a2 waits until a1 is done
            d = sync.receive(block=False)
            assert d.item == "a1"
            assert sync.receive(block=False).item == "b1"
            with pytest.raises(pressure.Empty):
                sync.receive(block=False)
            d.ack()
            assert sync.receive(timeout=5).item == "a2"
            await q.put("short", ttr=0.2)  # its own visibility timeout once delivered

    asyncio.run(main())
    d = sync.receive(timeout=5)
    assert d.item == "short"
    assert sync.receive(timeout=5).item == "short"  # redelivered once its ttr passed
    assert_invariants(r, sync)
    sync.disconnect()


def test_delete_removes_the_queue_and_wakes_a_waiting_get(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        q: AsyncQueue[Any] = AsyncQueue("q", url=url, prefix=prefix)
        await q.put(1)
        other: AsyncQueue[Any] = AsyncQueue("q", url=url, prefix=prefix)
        assert await other.get() == 1
        waiting = asyncio.ensure_future(other.get())
        await asyncio.sleep(0.2)
        await q.delete()
        with pytest.raises(pressure.QueueDoesNotExist):
            await asyncio.wait_for(waiting, 10)
        assert not await q.exists()
        with pytest.raises(pressure.QueueDoesNotExist):
            await q.delete()
        await q.disconnect()
        await other.disconnect()

    asyncio.run(main())
    assert not r.keys(f"{prefix}:q*")


def test_statistics_and_inspection_agree_with_the_sync_handle(url: str, prefix: str, r: redis.Redis) -> None:
    sync = _sync(url, prefix, max_deliveries=2)

    async def main() -> None:
        async with AsyncQueue[Any]("q", 10, url=url, prefix=prefix, reliable=True, max_deliveries=2) as q:
            assert await q.exists() and not await q.closed()
            await q.put_many([{"n": 1}, {"n": 2}, {"n": 3}])
            await q.put("later", delay=60)
            assert await q.peek(2) == sync.peek(2) == [{"n": 1}, {"n": 2}]
            d = await q.receive()
            assert d.item == {"n": 1}
            [flight] = await q.in_flight()
            assert (flight.item, flight.task_id, flight.deliveries) == ({"n": 1}, d.task_id, 1)
            assert [f.item for f in sync.in_flight()] == [flight.item]
            info = await q.peek_item(d.task_id)
            assert info is not None and (info.state, info.item) == ("taken", {"n": 1})
            assert await q.peek_item("0" * 40) is None
            with pytest.raises(ValueError, match="40 lowercase hex digits"):
                await q.peek_item("nope")
            assert await d.bury() is True
            [dead] = await q.dead_letters()
            assert (dead.item, dead.reason) == ({"n": 1}, "buried")
            assert [x.item for x in sync.dead_letters()] == [dead.item]
            assert (await q.statistics()) == sync.statistics()
            s = await q.statistics()
            assert (s.size, s.delayed, s.dead_letters, s.maxsize, s.unfinished_tasks) == (2, 1, 1, 10, 3)
            assert await q.unfinished_tasks() == sync.unfinished_tasks == 3
            assert await q.kick() == 1 and await q.dead_letters() == []
            d2 = await q.receive()
            assert d2.item == {"n": 1}  # kicked back to the head
            assert await d2.release(delay=60) is True
            assert (await q.statistics()).delayed == 2
            two = await q.receive()
            assert await two.delete() is True and await two.ack() is False
            deleted = await q.delete_item(sync.peek(1) and (await q.receive()).task_id)
            assert deleted is not None and deleted.item == {"n": 3}
            assert await q.purge_dead() == 0
            report = await q.repair()
            assert report.recovered == []
            assert (await q.statistics()) == sync.statistics()

    asyncio.run(main())
    assert_invariants(r, sync)
    sync.disconnect()


def test_a_default_mode_get_is_seen_by_the_handles_own_statistics_at_once(url: str, prefix: str) -> None:
    async def main() -> None:
        async with AsyncQueue[Any]("q", url=url, prefix=prefix) as q:
            await q.put_many([1, 2])
            assert await q.get() == 1
            s = await q.statistics()  # its posted drop ran first
            assert (s.taken, s.size) == (0, 1)
            assert await q.in_flight() == []

    asyncio.run(main())


def test_anonymous_queues_and_an_int_as_maxsize(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        q: AsyncQueue[Any] = AsyncQueue(url=url, prefix=prefix)
        assert q.name.startswith("{anon-")
        bounded: AsyncQueue[Any] = AsyncQueue(5, url=url, prefix=prefix)
        assert bounded.name.startswith("{anon-") and bounded.name != q.name
        assert await bounded.maxsize() == 5
        await q.put("x")
        assert _sync(url, prefix, q.name, create=False).get(block=False) == "x"  # reachable by name
        await q.delete()
        await bounded.delete()
        await bounded.disconnect()
        await q.disconnect()

    asyncio.run(main())
    code = textwrap.dedent(f"""
        import asyncio
        from pressure.aio import AsyncPriorityQueue
        async def main():
            q = AsyncPriorityQueue(3, url={url!r}, prefix={prefix!r})
            await q.put((1, "x"))
            print(q.name, flush=True)
            await q.disconnect()
        asyncio.run(main())
    """)
    name = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert name.startswith("{anon-")
    assert not r.keys(f"{prefix}:*{name}*")  # deleted as its process exited


def test_create_false_attaches_only(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> None:
        q: AsyncQueue[Any] = AsyncQueue("missing", url=url, prefix=prefix, create=False)
        with pytest.raises(pressure.QueueDoesNotExist, match="create=False attaches only"):
            await q.put(1)
        _sync(url, prefix, "there", maxsize=3).disconnect()
        wrong: AsyncQueue[Any] = AsyncQueue("there", 4, url=url, prefix=prefix, create=False)
        with pytest.raises(pressure.QueueExistsError, match="maxsize=3, not 4"):
            await wrong.open()
        await wrong.disconnect()
        async with AsyncQueue[Any]("there", 3, url=url, prefix=prefix, create=False) as there:
            await there.put(1)
        await q.disconnect()

    asyncio.run(main())
    assert not r.keys(f"{prefix}:missing*")


def test_durability_without_replicas_raises_not_replicated_after_the_put_ran(url: str, prefix: str) -> None:
    with pytest.raises(TypeError, match="durability must be a pressure.Durability"):
        AsyncQueue("q", url=url, prefix=prefix, durability=1)  # type: ignore[arg-type]

    async def main() -> None:
        durable = pressure.Durability(replicas=1, timeout=0.05)
        async with AsyncQueue[Any]("q", url=url, prefix=prefix, reliable=True, durability=durable) as q:
            with pytest.raises(pressure.NotReplicated) as info:
                await q.put("x")  # no replica here: WAIT counts 0
            assert (info.value.confirmed, info.value.wanted) == (0, 1)
            assert await q.qsize() == 1  # it ran
            d = await q.receive()
            with pytest.raises(pressure.NotReplicated):
                await d.ack()
            with pytest.raises(pressure.NotReplicated):
                await q.put_many([1, 2])

    asyncio.run(main())
