"""Default-mode gets whose payload moves natively (lua/get.lua flag 'N'): get.lua decides and
accounts, and BLMOVE/RENAME behind it in one MULTI/EXEC move the item into the consumer's held
list as a batch of one, which the client drops once it has the item in hand. A consumer's gets
go native once the last payload it received was large (``NATIVE_BYTES``).

Checked here: no script reads the payload (the server's MONITOR feed), counts stay exact, and
an item whose reply is lost, whose drop never arrives, or whose consumer dies inside the get or
leaves after it, is neither lost nor delivered twice."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.connection import NATIVE_BYTES

from .faults_helpers import fork_child, kill_and_reap
from .helpers import assert_invariants
from .test_native_put import _Monitor


def _payload(tag: bytes, size: int = 10_000) -> bytes:
    return tag + b"." * (size - len(tag))


def _drained_stats(q: Any, r: redis.Redis) -> None:
    """Every item put was consumed once: the library's counts and the raw keys agree."""
    s = q.statistics()  # reads what this handle posted first
    assert s.consumed_messages == s.produced_messages and s.size == 0, s
    assert s.consumed_bytes == s.produced_bytes, s
    assert r.get(q.keys.consumed_bytes) == r.get(q.keys.produced_bytes)


def _native_moves(lines: list[str], q: Any) -> int:
    """Checks the MONITOR feed ``lines`` (_Monitor): no command a script ran returned an item
    (what a script reads of a held list is its header, index 0). Returns how many BLMOVEs from
    the gate the client sent (one per item moved natively, or asked for by a batch)."""
    for line in (line for line in lines if line.startswith("lua ")):
        command = line.split()[1].upper()
        assert command not in ("RPOP", "LPOP", "LRANGE", "LMOVE", "RPOPLPUSH", "BLMOVE"), line
        assert command != "LINDEX" or line.split()[-1] == "0", line
    return sum(line.startswith("BLMOVE ") and q.keys.gate in line for line in lines)


def test_a_get_s_payload_never_enters_lua(make_queue: Any, url: str, r: redis.Redis) -> None:
    q = make_queue("native", serializer="bytes")
    q.put_many([_payload(b"warm"), _payload(b"one"), _payload(b"two")])
    assert q.get() == _payload(b"warm")  # large: this handle's next gets move natively
    monitor = _Monitor(url)
    assert q.get() == _payload(b"one")
    assert q.get(timeout=5) == _payload(b"two")
    lines = monitor.close(r)
    assert any(line.startswith("lua ") for line in lines), lines
    assert _native_moves(lines, q) == 2, lines
    _drained_stats(q, r)


def test_items_whose_sizes_change_come_out_in_order(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("small", serializer="bytes")
    q.put_many([_payload(b"big"), b"small", _payload(b"big2", NATIVE_BYTES), b"tiny"])
    assert q.get() == _payload(b"big")
    assert q.get() == b"small"  # moved natively: the consumer cannot know the size before
    assert q.get() == _payload(b"big2", NATIVE_BYTES)  # after a small one: by the script
    assert q.get() == b"tiny"  # after a large one: natively
    _drained_stats(q, r)
    assert_invariants(r, q)


def test_items_left_after_a_native_get_keep_their_order(make_queue: Any, r: redis.Redis) -> None:
    """The list is renamed away and back inside the transaction: a spec client's puts and gets
    around it meet the same list, in order."""
    q = make_queue("order", serializer="bytes")
    items = [_payload(b"%d" % i) for i in range(6)]
    q.put_many(items[:4])
    assert q.get() == items[0]
    assert q.get() == items[1]  # native
    r.lpush(q.keys.base, items[4])  # a spec client's put
    assert r.rpop(q.keys.base) == items[2]  # a spec client's get
    q.put(items[5])
    assert [q.get() for _ in range(3)] == [items[3], items[4], items[5]]
    assert not r.exists(q.keys.gate)


def test_a_native_get_whose_reply_was_lost_is_taken_back_once(make_queue: Any, r: redis.Redis) -> None:
    """The reply of a native take never reached the client: its cancel turns the held batch of
    one into an inbox entry (counting its bytes there), and the next get returns it, once."""
    q = make_queue("lost", serializer="bytes")
    q.put_many([_payload(b"first"), _payload(b"lost"), _payload(b"after")])
    assert q.get() == _payload(b"first")
    consumer = q._consumer
    cid = consumer.id()
    consumer.native_call(cid)  # its reply, dropped here
    assert r.llen(q.keys.held(cid)) == 2
    consumer.cancel(cid)  # what a get does after a lost reply, before it gets again
    assert not r.exists(q.keys.held(cid))
    assert [q.get(timeout=5), q.get(timeout=5)] == [_payload(b"lost"), _payload(b"after")]
    _drained_stats(q, r)


def test_a_native_get_whose_drop_never_arrived_is_dropped_and_counted_by_the_next(
        make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("undropped", serializer="bytes")
    q.put_many([_payload(b"a"), _payload(b"b"), _payload(b"c")])
    assert q.get() == _payload(b"a")
    consumer = q._consumer
    delivery = consumer.receive(True, 5)  # natively; its drop is never sent
    assert delivery.item == _payload(b"b")
    consumer.native_received.clear()
    assert r.llen(q.keys.held(consumer.id())) == 2
    assert q.get() == _payload(b"c")  # drops the batch of one, counting its bytes
    _drained_stats(q, r)


class KillOnSecondLoad:
    """Loads as pickle does, once; the second load SIGKILLs its own process: the consumer dies
    inside its second get, a native one, after Redis moved the item to it."""

    loaded = 0

    def dumps(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        KillOnSecondLoad.loaded += 1
        if KillOnSecondLoad.loaded == 2:
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)  # never reached
        return pickle.loads(data)


def _two_gets(url: str, prefix: str, marker: str, reliable: bool) -> None:
    """In a forked child: two gets (the second native, and killed inside); ``marker`` is set if
    both return."""
    q: pressure.Queue[bytes] = pressure.Queue("killed", url=url, prefix=prefix, serializer=KillOnSecondLoad(),
                                              reliable=reliable, visibility_timeout=60)
    q.get()
    q.get()
    redis.Redis.from_url(url).set(marker, 1)
    time.sleep(60)


@pytest.mark.parametrize("reliable", [False, True], ids=["default", "reliable"])
def test_a_consumer_killed_inside_a_native_get_loses_nothing(url: str, prefix: str, r: redis.Redis,
                                                             reliable: bool) -> None:
    q: pressure.Queue[bytes] = pressure.Queue("killed", url=url, prefix=prefix, reliable=reliable)
    items = [_payload(b"%d" % i) for i in range(4)]
    q.put_many(items)
    pid = fork_child(_two_gets, url, prefix, f"{prefix}:test:returned", reliable)
    try:
        deadline = time.monotonic() + 10
        while r.llen(q.keys.base) > 2:  # the second item taken: the child is dying with it
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        kill_and_reap(pid)
    assert not r.exists(f"{prefix}:test:returned")
    consumer: pressure.Queue[bytes] = pressure.Queue("killed", url=url, prefix=prefix)
    # default mode: the first item was returned to the child (gone with it); the second comes
    # back. Reliable: both, unacknowledged, come back (the dead process is seen at once)
    expected = items if reliable else items[1:]
    got = [consumer.get(timeout=5) for _ in expected]
    assert sorted(got) == expected
    s = consumer.statistics()
    assert (s.produced_messages, s.consumed_messages, s.size) == (4, 4, 0)
    assert s.consumed_bytes == s.produced_bytes
    consumer.disconnect()
    q.disconnect()


def test_a_consumer_that_leaves_after_a_native_get_never_gets_it_again(make_queue: Any,
                                                                       r: redis.Redis) -> None:
    """Its leave (disconnect) drops what its last get returned, counting a native batch's
    bytes, even when the get's own drop never arrived."""
    q = make_queue("leaves", serializer="bytes")
    q.put_many([_payload(b"a"), _payload(b"b"), _payload(b"c")])
    leaving = make_queue("leaves", serializer="bytes")
    assert leaving.get() == _payload(b"a")
    assert leaving._consumer.receive(True, 5).item == _payload(b"b")  # native, never dropped
    leaving._consumer.native_received.clear()
    leaving.disconnect()
    assert q.get(timeout=5) == _payload(b"c")
    with pressure_empty():
        q.get(timeout=0.5)
    _drained_stats(q, r)


class pressure_empty:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *rest: Any) -> bool:
        assert kind is not None and issubclass(kind, pressure.Empty), kind
        return True


def test_a_closed_queue_drains_through_native_gets(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("closing", serializer="bytes")
    q.put_many([_payload(b"a"), _payload(b"b"), _payload(b"c")])
    q.close()
    assert [q.get(timeout=5) for _ in range(3)] == [_payload(b"a"), _payload(b"b"), _payload(b"c")]
    try:
        q.get(timeout=5)
    except pressure.ShutDown:
        pass
    else:
        raise AssertionError("a closed, drained queue must raise ShutDown")
    _drained_stats(q, r)


def test_a_waiting_consumer_takes_natively_when_woken(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("woken", serializer="bytes")
    q.put(_payload(b"warm"))
    assert q.get() == _payload(b"warm")
    got: list[bytes] = []
    consumer = threading.Thread(target=lambda: got.extend(q.get(timeout=30) for _ in range(3)))
    consumer.start()
    producer = make_queue("woken", serializer="bytes")
    for i in range(3):
        time.sleep(0.2)
        producer.put(_payload(b"%d" % i))
    consumer.join(30)
    assert got == [_payload(b"%d" % i) for i in range(3)]
    _drained_stats(q, r)
    assert_invariants(r, q)


def test_a_get_many_s_payloads_never_enter_lua(make_queue: Any, url: str, r: redis.Redis) -> None:
    q = make_queue("native-many", serializer="bytes")
    items = [_payload(b"%d" % i) for i in range(8)]
    q.put_many(items)
    assert q.get_many(2) == items[:2]  # large: the next batches move natively
    monitor = _Monitor(url)
    assert q.get_many(3) == items[2:5]
    assert q.get_many(10) == items[5:]  # fewer queued than asked for: the rest find the gate gone
    lines = monitor.close(r)
    assert _native_moves(lines, q) == 13
    _drained_stats(q, r)


def test_a_native_batch_whose_reply_was_lost_comes_back_in_order(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("lost-many", serializer="bytes")
    items = [_payload(b"%d" % i) for i in range(6)]
    q.put_many(items)
    assert q.get_many(1) == items[:1]
    consumer = q._consumer
    cid, _, taken = consumer.queued_after((), "batch", 3, native=True)  # its reply, dropped here
    assert isinstance(taken, tuple) and taken[1] == items[1:4]
    assert r.llen(q.keys.held(cid)) == 4
    listed = sorted(q.in_flight(), key=lambda f: int(f.id))
    assert [f.payload for f in listed] == items[1:4]  # numbered in order, oldest first
    assert [int(f.id) for f in listed] == [int(listed[0].id) + i for i in range(3)]
    consumer.cancel(cid)
    assert q.get_many(10) == items[1:4]  # as inbox entries: they come first, on their own
    assert q.get_many(10) == items[4:]
    _drained_stats(q, r)
    assert_invariants(r, q)


# -- reliable mode: one native delivery at a time, in the held list until acknowledged --------


def test_a_reliable_get_and_its_ack_never_read_the_payload_in_lua(make_queue: Any, url: str,
                                                                   r: redis.Redis) -> None:
    q = make_queue("reliable-native", serializer="bytes", reliable=True)
    q.put_many([_payload(b"warm"), _payload(b"one"), _payload(b"two")])
    assert q.get() == _payload(b"warm")
    q.task_done()
    monitor = _Monitor(url)
    for tag in (b"one", b"two"):
        assert q.get() == _payload(tag)
        q.task_done()
    q.join()
    lines = monitor.close(r)
    assert _native_moves(lines, q) == 2
    _drained_stats(q, r)


def test_a_reliable_consumer_holds_one_native_delivery_and_settles_each_way(make_queue: Any,
                                                                            r: redis.Redis) -> None:
    """The second delivery taken while the first is unacknowledged is an in-flight entry; touch,
    ack, release and delete find the native one in the held list."""
    q = make_queue("reliable-held", serializer="bytes", reliable=True)
    items = [_payload(b"%d" % i) for i in range(6)]
    q.put_many(items)
    warm = q.receive()
    assert warm.ack()
    native, entry = q.receive(), q.receive()
    held = q.keys.held(native.consumer)
    assert r.lrange(held, 0, -1)[1:] == [items[1]] and r.llen(q.keys.inflight(native.consumer)) == 1
    assert {f.payload for f in q.in_flight()} == {items[1], items[2]}
    assert native.touch() and entry.touch()
    assert native.release()  # back at the head, its bytes and message given back
    assert not r.exists(held)
    again = q.receive()
    assert again.item == items[1] and again.deliveries == 2  # a state of its own now: an entry
    assert again.ack() and entry.ack()
    third = q.receive()  # native again: the held list is free
    assert r.exists(held) and third.item == items[3]
    q.put(items[3])  # an identical copy queued: delete() takes the delivery, not the copy
    assert third.delete()
    assert not r.exists(held) and q.qsize() == 3
    rest = [q.receive() for _ in range(3)]
    assert [d.item for d in rest] == [items[4], items[5], items[3]]
    assert all(d.ack() for d in rest)
    s = q.statistics()
    assert s.taken == 0 and s.consumed_bytes == s.produced_bytes and s.size == 0, s


def test_a_lost_reply_s_cancel_leaves_a_received_native_delivery_alone(make_queue: Any,
                                                                       r: redis.Redis) -> None:
    q = make_queue("reliable-cancel", serializer="bytes", reliable=True)
    q.put_many([_payload(b"a"), _payload(b"b"), _payload(b"c")])
    q.receive().ack()
    native = q.receive()
    consumer = q._consumer
    consumer.cancel(native.consumer)  # as after a later get's lost reply: this one was received
    assert r.llen(q.keys.held(native.consumer)) == 2
    assert native.ack()
    assert q.get() == _payload(b"c")  # b was never given back: no duplicate
    q.task_done()
    _drained_stats(q, r)


def test_a_waiting_get_s_block_call_moves_an_item_queued_natively(make_queue: Any, r: redis.Redis) -> None:
    """After a get that found the queue empty, the next sends its 'block' call at once (no
    'nowait' first): it too moves an item it finds queued natively, behind a wake-up that ends
    its BLMOVE at once."""
    q = make_queue("block-native", serializer="bytes")
    q.put(_payload(b"warm"))
    assert q.get() == _payload(b"warm")  # large from now on; it left nothing queued
    q.put(_payload(b"queued"))
    consumer = q._consumer
    assert consumer.waited
    delivery = consumer.receive(True, 5)
    assert delivery.item == _payload(b"queued")
    assert r.lrange(q.keys.held(delivery.consumer), 1, -1) == [_payload(b"queued")]  # natively
    consumer.drop_received(delivery.consumer)
    q.put(_payload(b"next"))
    assert q.get(timeout=5) == _payload(b"next")
    assert r.llen(q.keys.inflight(delivery.consumer)) == 0 and r.llen(q.keys.inbox(delivery.consumer)) == 0
    _drained_stats(q, r)
    assert_invariants(r, q)
