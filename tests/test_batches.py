"""put_many and get_many: one round trip per batch, atomic with respect to the bound, stats
and tokens exactly as for single items, and spec clients still seeing a consistent queue."""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any

import pytest
import redis

import pressure

from .helpers import assert_invariants, blocks, snapshot


def test_put_many_then_get_many_keep_order_and_count_like_single_items(make_queue: Any,
                                                                         r: redis.Redis) -> None:
    q, single = make_queue("batch"), make_queue("single")
    items = [f"item-{i}" for i in range(25)]
    q.put_many(items)
    for item in items:
        single.put(item)
    assert q.get_many(10) == items[:10] and q.get_many(100) == items[10:]
    for _ in items:
        single.get()
    a, b = q.statistics(), single.statistics()
    assert (a.produced_messages, a.produced_bytes, a.consumed_messages, a.consumed_bytes) == \
        (b.produced_messages, b.produced_bytes, b.consumed_messages, b.consumed_bytes)
    assert r.lrange(q.keys.base, 0, -1) == [] and q.unfinished_tasks == 25
    assert_invariants(r, q)


def test_one_round_trip_per_batch(make_queue: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    q = make_queue("trips")
    calls: list[str] = []
    original = q._backend.script

    def counting(command: Any, tail: Any, **kw: Any) -> Any:
        calls.append(command.name)
        return original(command, tail, **kw)

    def counting_moving(command: Any, tail: Any, *args: Any, **kw: Any) -> Any:
        calls.append(command.name)
        return original_moving(command, tail, *args, **kw)

    original_moving = q._backend.script_moving
    monkeypatch.setattr(q._backend, "script", counting)
    monkeypatch.setattr(q._backend, "script_moving", counting_moving)  # a batch of 4 KiB or more
    q.put_many(range(500))
    assert calls == ["put"]
    assert q.get_many(500) == list(range(500))
    assert calls == ["put", "get"]


def test_a_batch_larger_than_the_room_puts_what_fits_then_waits(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("bounded", 3)
    q.put("first")
    with pytest.raises(pressure.Full) as caught:
        q.put_many(["a", "b", "c", "d"], block=False)
    assert caught.value.items_put == 2 and q.qsize() == 3  # exactly what fitted went in
    assert r.llen(q.keys.not_full) == 0
    consumer = make_queue("bounded")
    got: list[Any] = []
    blocks(lambda: q.put_many(["c", "d"]), lambda: got.extend(consumer.get_many(2)))
    assert got == ["first", "a"] and q.get_many(10) == ["b", "c", "d"]
    assert_invariants(r, q)


def test_a_timed_put_many_reports_how_many_went_in(make_queue: Any) -> None:
    q = make_queue("timed", 2)
    with pytest.raises(pressure.Full) as caught:
        q.put_many(range(5), timeout=0.2)
    assert caught.value.items_put == 2 and q.get_many(5) == [0, 1]


def test_an_unpicklable_item_puts_nothing(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("atomic", 5)
    q.put(0)
    before = snapshot(r, q)
    with pytest.raises(pressure.SerializationError):
        q.put_many([1, 2, threading.Lock(), 3])
    assert snapshot(r, q) == before


def test_put_many_after_close_raises_shutdown_and_get_many_drains(make_queue: Any) -> None:
    q = make_queue("closing")
    q.put_many([1, 2])
    q.close()
    with pytest.raises(pressure.ShutDown) as caught:
        q.put_many([3])
    assert caught.value.items_put == 0
    assert q.get_many(5) == [1, 2]
    with pytest.raises(pressure.ShutDown):
        q.get_many(5)


def test_get_many_blocks_like_get_then_takes_what_came(make_queue: Any) -> None:
    q = make_queue("waiting")
    producer = make_queue("waiting")
    assert blocks(lambda: q.get_many(10, timeout=10), lambda: producer.put_many([1, 2, 3])) == [1, 2, 3]
    with pytest.raises(pressure.Empty):
        q.get_many(10, block=False)
    with pytest.raises(pressure.Empty):
        q.get_many(10, timeout=0.1)


@pytest.mark.parametrize(("max_items", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                                  ("3", TypeError)])
def test_get_many_refuses_a_bad_count(make_queue: Any, max_items: Any, error: type[Exception]) -> None:
    q = make_queue("bad")
    q.put(1)
    with pytest.raises(error):
        q.get_many(max_items)
    with pytest.raises(ValueError, match="^'timeout' must be a non-negative number$"):
        q.get_many(1, timeout=-1)  # even with an item there, as get does
    assert q.get_nowait() == 1


def test_reliable_get_many_needs_one_task_done_per_item(make_queue: Any) -> None:
    q = make_queue("rel", reliable=True)
    q.put_many(["a", "b", "c"])
    assert q.get_many(3) == ["a", "b", "c"]
    assert len(q.in_flight()) == 3
    for _ in range(3):
        q.task_done()
    assert q.in_flight() == [] and q.unfinished_tasks == 0


def test_spec_clients_see_a_consistent_queue(make_queue: Any, r: redis.Redis) -> None:
    """The twelve keys after batches are what single operations leave: a plain spec
    client's LLEN, stats and permit agree."""
    q = make_queue("spec", 10)
    q.put_many(range(10))
    assert r.llen(q.keys.base) == 10 and r.llen(q.keys.not_full) == 0
    assert int(r.get(q.keys.produced_messages)) == 10
    q.get_many(4)
    assert r.llen(q.keys.base) == 6 and r.llen(q.keys.not_full) == 1
    assert int(r.get(q.keys.consumed_messages)) == 4
    assert_invariants(r, q)


@pytest.mark.parametrize(("cls", "expected"), [(pressure.LifoQueue, [5, 4, 3, 2, 1]),
                                               (pressure.PriorityQueue, [1, 2, 3, 4, 5])])
def test_ordered_batches(url: str, prefix: str, cls: Any, expected: list[int]) -> None:
    q = cls("ordered", url=url, prefix=prefix)
    q.put_many([3, 1, 2, 5, 4] if cls is pressure.PriorityQueue else [1, 2, 3, 4, 5])
    assert q.get_many(10) == expected
    q.disconnect()


def test_a_waiting_consumer_gets_the_first_item_of_a_batch_at_once(make_queue: Any) -> None:
    q = make_queue("handoff")
    producer = make_queue("handoff")
    got = blocks(lambda: q.get(timeout=10), lambda: producer.put_many(["x", "y"]))
    assert got == "x" and q.get_nowait() == "y"


def _wait_for(predicate: Any, what: str, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


# -- the default mode's held batch (get.lua 'batch') ------------------------------------

def _drop_next_reply(monkeypatch: pytest.MonkeyPatch, q: Any) -> None:
    """The next reply on the handle's connection is lost: the server ran the command, then
    the connection drops before the client reads the answer."""
    conn = q._backend.thread_connection()
    real_read = conn.read_response

    def drop(*args: Any, **kwargs: Any) -> Any:
        real_read(*args, **kwargs)
        monkeypatch.setattr(conn, "read_response", real_read)
        conn.disconnect()
        raise redis.ConnectionError("connection dropped (injected)")

    monkeypatch.setattr(conn, "read_response", drop)


@pytest.mark.parametrize("serializer", ["bytes", "pickle"])
def test_a_reply_lost_mid_get_many_loses_nothing(make_queue: Any, r: redis.Redis,
                                                 monkeypatch: pytest.MonkeyPatch, serializer: str) -> None:
    """Default mode: the batch a lost reply carried is held in Redis and the next get returns
    it, in order, once: nothing lost, nothing twice, the counters as if it came at once."""
    q = make_queue("lost-batch", serializer=serializer)
    items = [b"item-%d" % i for i in range(50)]
    q.put_many(items)
    _drop_next_reply(monkeypatch, q)
    with pytest.raises(pressure.BackendError):
        q.get_many(20)
    assert r.llen(q.keys.base) == 30  # the 20 left the queue: they are held for this consumer
    assert r.llen(q.keys.held(q._consumer.id())) == 21  # as they are, under one header
    assert q.get_many(100) == items[:20]  # taken back first: the inbox entries the cancel made
    assert q.get_many(100) == items[20:]
    with pytest.raises(pressure.Empty):
        q.get_many(100, block=False)
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages) == (50, 50)
    assert s.consumed_bytes == s.produced_bytes and s.size == 0
    assert_invariants(r, q)


def test_a_returned_batch_is_dropped_at_once_and_never_taken_back(make_queue: Any,
                                                                  r: redis.Redis) -> None:
    q = make_queue("received", serializer="bytes")
    q.put_many([b"a", b"b", b"c"])
    assert q.get_many(10) == [b"a", b"b", b"c"]
    held = q.keys.held(q._consumer.id())
    # get_many had the items in hand: it dropped them from Redis (a DEL whose reply it does
    # not wait for, so another connection may see them an instant longer)
    _wait_for(lambda: not r.exists(held) and q.in_flight() == [], "the held batch to go")
    q._consumer.pending_cancel.append(q._consumer.id())  # as after a failed call: the cancel runs first
    with pytest.raises(pressure.Empty):
        q.get_many(10, block=False)  # the cancel left the received batch alone; this get dropped it
    assert not r.exists(held) and q.in_flight() == []
    q.put(b"d")
    assert q.get_many(10) == [b"d"]
    with pytest.raises(pressure.Empty):
        q.get(timeout=0.2)  # a blocking get that times out cancels its wait: nothing comes back
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (4, 4, 0)
    assert_invariants(r, q)


def test_a_held_batch_never_returned_is_requeued_by_the_sweep_past_the_lease(make_queue: Any,
                                                                            r: redis.Redis) -> None:
    """A batch get.lua took for a consumer whose get_many never returned it (a consumer on
    another host that died inside the call): requeued, in order, once its lease has passed."""
    q = make_queue("swept", lease=1.0)
    other = make_queue("swept")
    q.put_many([1, 2, 3])
    cid, stored = q._consumer.queued("batch", 2)  # taken for q, never returned by a get_many
    assert len(stored) == 3  # the two items and the header
    held = q.keys.held(cid)
    assert r.exists(held)
    time.sleep(1.2)
    other._roles.sweep()
    assert not r.exists(held) and cid.encode() not in r.hkeys(q.keys.consumers)
    assert q.statistics().consumed_messages == 0 and q.qsize() == 3  # back in the queue
    assert other.get_many(3) == [1, 2, 3]
    assert_invariants(r, q)


@pytest.mark.parametrize("items, take", [
    (["a", "b", "c"], 2),  # part of the queue: the items are copied into the held list
    (["a", "b", "c"], 3),  # the whole queue: the list itself becomes the held list (RENAME)
    (["L" * 9000, "a", "b"], 3),  # the whole queue, its next item large: read one at a time
])
def test_a_held_batch_whole_or_part_of_the_queue_is_kept_in_order_and_requeued(
        make_queue: Any, r: redis.Redis, items: list[str], take: int) -> None:
    """get.lua keeps a default-mode batch in the consumer's held list until the client has it:
    a batch that takes the whole queue renames the list rather than copying every item (one
    RENAME, one LPUSH for the header), one that takes part copies them (one RPUSH); either way the held list is the same, the reply the
    same, and a consumer that never returned it has it requeued in order."""
    q = make_queue("whole", serializer="bytes", lease=1.0)
    other = make_queue("whole", serializer="bytes")
    payloads = [item.encode() for item in items]
    q.put_many(payloads)
    r.config_resetstat()
    cid, stored = q._consumer.queued("batch", take)  # taken for q, never returned by a get_many
    stats = r.info("commandstats")
    renames = stats.get("cmdstat_rename", {}).get("calls", 0)
    assert renames == (1 if take == len(items) else 0)
    pushes = {name: stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("lpush", "rpush")}
    # the held list in one command: the header alone pushed onto the renamed list, or the header
    # and the items appended (newest first)
    assert pushes == ({"lpush": 1, "rpush": 0} if renames else {"lpush": 0, "rpush": 1})
    assert stored[:-1] == payloads[:take] and stored[-1].startswith(b"h:")
    held = q.keys.held(cid)
    assert r.lrange(held, 0, -1) == [stored[-1], *reversed(payloads[:take])]  # header, newest first
    assert r.lrange(q.keys.base, 0, -1) == list(reversed(payloads[take:]))
    s = q.statistics()
    assert (s.consumed_messages, s.consumed_bytes) == (take, sum(map(len, payloads[:take])))
    time.sleep(1.2)
    other._roles.sweep()
    assert not r.exists(held) and q.qsize() == len(items)
    assert other.get_many(10) == payloads
    assert_invariants(r, q)


def test_an_undeserializable_item_of_a_batch_is_dead_lettered_and_the_rest_returned(
        make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("poison")
    raw = make_queue("poison", serializer="bytes")
    raw.put_many([pickle.dumps(1), b"not a pickle", pickle.dumps(3)])
    assert q.get_many(10) == [1, 3]
    [dead] = q.dead_letters()
    assert dead.payload == b"not a pickle"
    with pytest.raises(pressure.Empty):
        q.get_many(10, block=False)  # the others were received: nothing comes back
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (3, 3, 0)
    assert_invariants(r, q)


def test_large_items_travel_as_chunks_of_their_own_and_arrive_whole(make_queue: Any) -> None:
    q = make_queue("large", serializer="bytes")
    items = [b"s", bytes(range(256)) * 100, b"", b"m" * 16383, b"L" * 16384, b"x" * 1_000_000, b"t"]
    q.put_many(items)
    assert q.get_many(100) == items
    s = q.statistics()
    assert s.produced_bytes == s.consumed_bytes == sum(map(len, items))


@pytest.mark.parametrize("how", ["delete", "spec delete then create"])
def test_a_held_batch_goes_with_the_queue(make_queue: Any, r: redis.Redis, how: str) -> None:
    q = make_queue("gone", serializer="bytes")
    q.put_many([b"a", b"b"])
    cid, _ = q._consumer.queued("batch", 1)  # taken for q, not returned yet: held in Redis
    held = q.keys.held(cid)
    assert r.exists(held)
    if how == "delete":
        q.delete()
        assert r.keys(f"{q.prefix}:*") == []
    else:
        r.delete(*q.keys.protocol_keys())  # a plain spec client's Delete: it cannot know ours
        make_queue("gone")  # creating the name again removes what the old queue left
        assert not r.exists(held)
