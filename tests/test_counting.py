"""Counting (docs: reliability.md, Counting rules): every way an item's processing ends counts once toward
``join()``; items that come back do not. And the counts every view shows (the library's
``statistics()``, the CLI's ``ls``/``stat``/``executors`` and their JSON, the metrics) are one
definition each (lua/stats.lua): a wake-up entry is not an item."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from typing import Any

import pytest
import redis
from click.testing import CliRunner

import pressure
from pressure import serializers
from pressure.aio import AsyncQueue
from pressure.cli import cli as pressure_cli

from . import executor_tasks as tasks
from .test_executor import gate, make_executor  # noqa: F401 - fixtures

SOON = 30.0


def _joined(q: pressure.Queue[Any], limit: float = SOON) -> bool:
    """Whether ``q.join()`` returns within ``limit`` seconds (it is left waiting if not)."""
    done = threading.Event()

    def join() -> None:
        q.join()
        done.set()

    threading.Thread(target=join, daemon=True).start()
    return done.wait(limit)


# -- every end of an item counts once ------------------------------------------------------


def test_a_consumer_that_only_receives_and_acks_can_be_joined(make_queue: Any) -> None:
    q = make_queue("acks", reliable=True)
    q.put_many(["a", "b"])
    d = q.receive(timeout=SOON)
    assert d.ack() is True
    assert q.unfinished_tasks == 1
    assert d.ack() is False  # acknowledged twice: counted once
    assert q.unfinished_tasks == 1
    assert q.receive(timeout=SOON).ack() is True
    assert q.unfinished_tasks == 0 and q.statistics().done == 2
    assert _joined(q)


def test_every_way_an_item_ends_counts_once_and_what_comes_back_does_not(make_queue: Any, url: str,
                                                                         prefix: str) -> None:
    q = make_queue("ends", reliable=True, max_deliveries=2, serializer="json")
    raw = pressure.Queue("ends", url=url, prefix=prefix, serializer="bytes")
    try:
        q.put_many(["ack", "task_done", "delete", "delete_item", "bury", "poison", "release"])
        left = 7

        def check() -> None:
            assert q.unfinished_tasks == left and q.statistics().unfinished_tasks == left

        assert q.receive(timeout=SOON).ack()
        left -= 1
        check()
        assert q.get(timeout=SOON) == "task_done"
        q.task_done()
        left -= 1
        check()
        d = q.receive(timeout=SOON)
        assert d.item == "delete" and d.delete()  # taken, deleted: its ack finds nothing to count
        left -= 1
        check()
        assert d.ack() is False
        check()
        assert q.delete_item(_task_id(q, "delete_item")) is not None  # ready, deleted
        left -= 1
        check()
        buried = q.receive(timeout=SOON)
        assert buried.item == "bury" and buried.bury()
        left -= 1
        check()
        for _ in range(2):  # the second release is past max_deliveries: a dead letter
            poison = q.receive(timeout=SOON)
            assert poison.item == "poison" and poison.release()
        left -= 1
        check()
        released = q.receive(timeout=SOON)
        assert released.item == "release" and released.release()  # back: not done
        check()
        assert q.kick(1) == 1  # "bury", the oldest dead letter, back in the queue: unfinished again
        left += 1
        check()
        assert q.receive(timeout=SOON).item == "bury"
        again = q.receive(timeout=SOON)
        assert again.item == "release"
        assert again.ack()
        left -= 1
        check()
        assert q.purge_dead() == 1  # "poison": counted when it was dead-lettered, not again
        check()
        raw.put(b"not json")  # counted as put; cannot be loaded: dead-lettered, done
        left += 1
        with pytest.raises(pressure.DeserializationError):
            q.get(timeout=SOON)
        left -= 1
        check()
        q.put("late", ttl=0.01)
        q.put("discarded")
        left += 2
        time.sleep(0.05)
        q.shutdown(immediate=True)  # discards both ("late" had expired too: counted once)
        left -= 2
        check()
        assert left == 1 and [json.loads(f.payload) for f in q.in_flight()] == ["bury"]  # not settled
    finally:
        raw.disconnect()


def _task_id(q: pressure.Queue[Any], item: Any) -> str:
    """The task id of ``item`` as ``q`` stores it (an unsigned queue: its serialized bytes)."""
    return hashlib.sha1(serializers.dumps(q._serializer, item)).hexdigest()


def test_an_expired_item_counts_once_dropped_or_dead_lettered(make_queue: Any) -> None:
    for dead in (False, True):
        q = make_queue(f"ttl{dead}", reliable=True, ttl=0.01, dead_letter_expired=dead)
        q.put_many(["a", "b"])
        time.sleep(0.05)
        with pytest.raises(pressure.Empty):
            q.receive(block=False)
        assert q.unfinished_tasks == 0 and _joined(q)


def test_task_done_in_reliable_mode_with_no_delivery_held_is_a_call_too_many(make_queue: Any) -> None:
    """receive()'s deliveries are settled by their own ack(): a task_done() after it would
    count the item twice."""
    q = make_queue("toomany", reliable=True)
    q.put_many(["a", "b"])
    q.receive(timeout=SOON).ack()
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        q.task_done()
    assert q.unfinished_tasks == 1


def test_an_async_delivery_ack_counts(url: str, prefix: str) -> None:
    async def main() -> None:
        async with AsyncQueue[str]("aq", url=url, prefix=prefix, reliable=True) as q:
            await q.put_many(["a", "b"])
            assert await (await q.receive()).ack()
            assert await q.get() == "b"
            await q.task_done()
            with pytest.raises(ValueError, match="too many"):
                await q.task_done()
            await asyncio.wait_for(q.join(), SOON)
        sync = pressure.Queue[str]("aq", url=url, prefix=prefix)
        assert sync.unfinished_tasks == 0 and sync.statistics().done == 2
        sync.disconnect()

    asyncio.run(main())


# -- one definition per count, in every view ------------------------------------------------


def _ls(url: str, prefix: str) -> dict[str, dict[str, Any]]:
    out = CliRunner().invoke(pressure_cli, ["--url", url, "--prefix", prefix, "ls", "--json"])
    assert out.exit_code == 0, out.output
    return {row["name"]: row for row in json.loads(out.output)}


def _stat(url: str, prefix: str, name: str) -> dict[str, Any]:
    out = CliRunner().invoke(pressure_cli, ["--url", url, "--prefix", prefix, "stat", name, "--interval", "0",
                                            "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)  # type: ignore[no-any-return]


def _metrics(url: str, prefix: str) -> dict[tuple[str, str], float]:
    pytest.importorskip("prometheus_client")
    from pressure.cli.metrics import Collector

    samples: dict[tuple[str, str], float] = {}
    for family in Collector(url=url, prefix=prefix).collect():
        for sample in family.samples:
            who = sample.labels.get("queue") or sample.labels.get("executor") or ""
            state = sample.labels.get("state")
            samples[(sample.name + (f"/{state}" if state else ""), who)] = sample.value
    return samples


def _figures(url: str, prefix: str, q: pressure.Queue[Any]) -> None:
    """The library, ``ls --json``, ``stat --json`` and the metrics all give ``q`` the same
    size, in flight, consumers, dead letters and unfinished tasks."""
    s = q.statistics()
    library = {"size": s.size, "in_flight": s.taken, "consumers": s.consumers, "dead_letters": s.dead_letters,
               "unfinished": s.unfinished_tasks}
    assert s.taken == len(q.in_flight())
    row = _ls(url, prefix)[q.name]
    assert {k: row[k] for k in library} == library
    stat = _stat(url, prefix, q.name)
    assert {"size": stat["size"], "in_flight": stat["in_flight"], "consumers": stat["consumers"],
            "dead_letters": stat["dead_letters"], "unfinished": stat["unfinished_tasks"]} == library
    assert stat["taken"] == stat["tasks"]["taken"] == s.taken
    m = _metrics(url, prefix)
    assert {"size": m[("pressure_queue_size", q.name)], "in_flight": m[("pressure_queue_in_flight", q.name)],
            "consumers": m[("pressure_queue_consumers", q.name)],
            "dead_letters": m[("pressure_queue_dead_letters", q.name)],
            "unfinished": m[("pressure_queue_unfinished_tasks", q.name)]} == library


def test_every_view_counts_alike(url: str, prefix: str, make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("views", reliable=True, max_deliveries=1)
    q.put_many(list(range(8)))
    q.receive(timeout=SOON)  # in flight
    q.receive(timeout=SOON).release()  # past max_deliveries: a dead letter
    other = make_queue("views")  # default mode: registered by its get, holding nothing once returned
    assert other.get_many(2) == [2, 3]
    deadline = time.monotonic() + SOON
    while r.keys(q.keys.held("*")):  # the batch's drop, posted, reaches Redis
        assert time.monotonic() < deadline, "the batch was never dropped"
        time.sleep(0.01)
    r.lpush(q.keys.inbox("ghost#1"), "s:")  # a consumer's wake-up entries: no items
    r.lpush(q.keys.inflight(q.in_flight()[0].consumer), "s:")
    r.hset(q.keys.consumers, "ghost#1", "host|1|0|1000|r")
    # a default-mode consumer's batch, its get not returned yet: its header, then two items
    r.rpush(q.keys.held("ghost#2"), "h:90:0:", *r.lrange(q.keys.base, -2, -1))
    r.hset(q.keys.consumers, "ghost#2", "host|1|0|1000|d")
    _figures(url, prefix, q)
    s = q.statistics()
    assert (s.size, s.taken, s.consumers, s.dead_letters, s.unfinished_tasks) == (4, 3, 4, 1, 7)


def test_a_consumer_woken_to_end_its_wait_leaves_no_wake_up_in_flight(url: str, prefix: str, make_queue: Any,
                                                                   r: redis.Redis) -> None:
    """A get waiting on a queue that is closed under it ends in ShutDown; the wake-up that
    ended its wait is gone with it, not left in its in-flight list to be counted as an item."""
    q = make_queue("woken", reliable=True)
    got: list[BaseException] = []

    def wait() -> None:
        try:
            q.get(timeout=SOON)
        except BaseException as exc:  # noqa: BLE001 - what ended the wait
            got.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + SOON
    while not r.exists(q.keys.waiter):
        assert time.monotonic() < deadline, "the get never waited"
        time.sleep(0.01)
    make_queue("woken").close()
    waiter.join(SOON)
    assert len(got) == 1 and isinstance(got[0], pressure.ShutDown)
    for cid in r.hkeys(q.keys.consumers):
        assert b"s:" not in r.lrange(q.keys.inflight(cid.decode()), 0, -1)
    assert q.statistics().taken == 0
    _figures(url, prefix, q)


def test_an_executor_shows_no_running_task_for_a_wake_up(url: str, prefix: str, make_queue: Any,
                                                         r: redis.Redis) -> None:
    """``pressure executors``, its JSON and ``pressure_executor_tasks{state="running"}``
    count the task queue's items in flight as the queue's ``statistics().taken`` does."""
    tasks = make_queue("crunch:tasks", reliable=True)
    make_queue("crunch:results:1")
    tasks.put_many([b"t1", b"t2"])
    tasks.receive(timeout=SOON)  # one running
    cid = tasks.in_flight()[0].consumer
    r.lpush(tasks.keys.inflight(cid), "s:", "s:")  # wake-ups a worker's gets used
    r.script_flush()  # the CLI loads the script it counts with where the server lacks it
    out = CliRunner().invoke(pressure_cli, ["--url", url, "--prefix", prefix, "executors", "--json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.output)
    assert (row["name"], row["queued"], row["running"]) == ("crunch", 1, 1)
    assert tasks.statistics().taken == 1
    assert _metrics(url, prefix)[("pressure_executor_tasks/running", "crunch")] == 1


def test_an_executors_settled_tasks_count_as_done(url: str, prefix: str,
                                                  make_executor: Any) -> None:  # noqa: F811
    """A worker settles each task it ran (settle.lua): its task queue can be joined."""
    executor = make_executor("settled", max_workers=1)
    assert [f.result(timeout=SOON) for f in [executor.submit(tasks.square, i) for i in range(4)]] == [0, 1, 4, 9]
    queue = pressure.Queue("settled:tasks", url=url, prefix=prefix, serializer="bytes")
    try:
        deadline = time.monotonic() + SOON
        while queue.unfinished_tasks:  # the last settlement may trail its result
            assert time.monotonic() < deadline, f"{queue.unfinished_tasks} tasks never counted done"
            time.sleep(0.01)
        assert queue.statistics().done == 4 and _joined(queue)
    finally:
        queue.disconnect()
