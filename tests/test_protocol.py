"""The protocol's key layout, identifiers and token invariants, including after
injected failures: the queue must always be usable by a plain spec client."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import pytest
import redis

import pressure

from .helpers import assert_invariants, register_waiter, snapshot

SPEC_SUFFIXES = ["", ":bound", ":producer", ":consumer", ":producer_free", ":consumer_free",
                 ":stats:produced_messages", ":stats:produced_bytes", ":stats:consumed_messages",
                 ":stats:consumed_bytes", ":not_full", ":closed"]


def test_the_twelve_keys_exactly_as_the_spec_names_them(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("jobs", 2)
    assert [k.removeprefix(f"{q.prefix}:jobs") for k in q.keys.protocol_keys()] == SPEC_SUFFIXES
    q.put("a")
    q.put("b")  # full: :not_full is empty and so absent
    q.get()
    q.close()
    present = {k.decode() for k in r.keys(f"{q.prefix}:*")}
    ours = {k for k in present if k.startswith(f"{q.prefix}:jobs:pressure:")}  # pressure's extensions
    assert present - ours == {f"{q.prefix}:jobs{s}" for s in SPEC_SUFFIXES}  # no :produced_messages etc.
    assert r.get(q.keys.bound) == b"2"
    assert r.type(q.keys.base) == b"list" and r.llen(q.keys.closed) == 2
    assert int(r.get(q.keys.produced_messages)) == 2 and int(r.get(q.keys.consumed_messages)) == 1


def test_create_initialises_tokens_and_permit(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("new", 0)
    assert r.get(q.keys.bound) == b"0"  # stored even when 0
    for key in (q.keys.producer_free, q.keys.consumer_free, q.keys.not_full):
        assert r.llen(key) == 1


def test_identifiers_are_host_pid_thread(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("ids")
    q.put(1)
    expected = f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()}"
    assert r.get(q.keys.producer).decode() == expected
    ids: list[str] = []

    def other_thread() -> None:
        q.get()
        ids.append(f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()}")

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert r.get(q.keys.consumer).decode() == ids[0] != expected


def test_client_id_override(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("custom-id", client_id="worker-7")
    q.put(1)
    q.get()
    assert r.get(q.keys.producer) == r.get(q.keys.consumer) == b"worker-7"


def test_not_full_follows_the_bound(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("nf", 2)
    for step in (lambda: q.put(1), lambda: q.put(2), q.get, q.get, lambda: q.put(3)):
        step()
        assert_invariants(r, q)


def test_overfilled_queue_drains_back_to_its_bound(make_queue: Any, r: redis.Redis) -> None:
    """A v0.14 producer may over-fill; Get re-arms :not_full only below the bound (P3)."""
    q = make_queue("over", 2)
    r.lpush(q.keys.base, *[q._serializer.dumps(i) for i in range(4)])  # an over-filling spec client
    r.delete(q.keys.not_full)
    q.get()
    assert r.llen(q.keys.not_full) == 0  # 3 items, bound 2: still full
    q.get()
    assert r.llen(q.keys.not_full) == 0
    q.get()
    assert r.llen(q.keys.not_full) == 1
    assert_invariants(r, q)


def test_scripts_reload_after_script_flush(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("flush")
    q.put(1)
    r.script_flush()
    q.put(2)
    assert [q.get(), q.get()] == [1, 2]


# -- failure injection: every failed operation leaves each token list at one ----------

def test_tokens_intact_after_each_failed_operation(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("fail", 1)
    failures = [
        (lambda: q.put(lambda: 0), pressure.SerializationError),
        (lambda: (q.put(1), q.put_nowait(2)), pressure.Full),
        (lambda: q.put(2, timeout=0.05), pressure.Full),
        (lambda: (q.get(), q.get_nowait()), pressure.Empty),
        (lambda: q.get(timeout=0.05), pressure.Empty),
        (lambda: q.put(1, timeout=-1), ValueError),
        (lambda: q.get(timeout=float("nan")), ValueError),
    ]
    for call, exc in failures:
        with pytest.raises(exc):
            call()
        assert_invariants(r, q)
    q.close()
    for call, exc in [(lambda: q.put(1), pressure.ShutDown), (q.get, pressure.ShutDown),
                      (q.get_nowait, pressure.ShutDown)]:
        with pytest.raises(exc):
            call()
        assert_invariants(r, q)


def _kill_client_of(r: redis.Redis, command: str) -> int:
    """CLIENT KILL every connection whose current command is ``command``."""
    killed = 0
    for c in r.client_list():
        if c.get("cmd") == command:
            r.client_kill_filter(_id=c["id"])
            killed += 1
    return killed


@pytest.fixture
def lone_server() -> Any:
    """A server of the test's own: CLIENT KILL by command must hit this test's client only."""
    from pressure.testing import RedisServer

    with RedisServer() as server:
        yield server


def test_connection_killed_while_blocked_in_get_returns_the_role(lone_server: Any, prefix: str) -> None:
    r = redis.Redis.from_url(lone_server.url)
    q: pressure.Queue[Any] = pressure.Queue("killed", url=lone_server.url, prefix=prefix)
    errors: list[BaseException] = []

    def blocked_get() -> None:
        try:
            q.get(timeout=30)
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            errors.append(e)

    t = threading.Thread(target=blocked_get)
    t.start()
    deadline = time.monotonic() + 10
    while _kill_client_of(r, "blmove") == 0:  # CLIENT KILL the consumer's connection mid-wait
        assert time.monotonic() < deadline, "the consumer never blocked"
        time.sleep(0.02)
    t.join(30)
    assert len(errors) == 1 and isinstance(errors[0], pressure.BackendError)
    assert not isinstance(errors[0], (pressure.Empty, pressure.Full))
    assert isinstance(errors[0].__cause__, redis.ConnectionError)
    assert_invariants(r, q)  # the consumer role went back over a new connection
    q.put("after")
    assert q.get(timeout=5) == "after"


def test_connection_killed_while_waiting_on_a_full_queue(lone_server: Any, prefix: str) -> None:
    r = redis.Redis.from_url(lone_server.url)
    q: pressure.Queue[Any] = pressure.Queue("killed-full", 1, url=lone_server.url, prefix=prefix)
    q.put(0)
    errors: list[BaseException] = []

    def blocked_put() -> None:
        try:
            q.put(1, timeout=30)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=blocked_put)
    t.start()
    deadline = time.monotonic() + 10
    while _kill_client_of(r, "brpop") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    t.join(30)
    assert len(errors) == 1 and isinstance(errors[0], pressure.BackendError)
    assert_invariants(r, q)
    assert q.get() == 0
    q.put(2, timeout=5)


def test_wrong_type_key_is_a_protocol_error_and_changes_nothing(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("wrongtype", 3)
    r.delete(q.keys.base)
    r.set(q.keys.base, "not a list")
    before = snapshot(r, q)
    with pytest.raises(pressure.ProtocolError, match="WRONGTYPE"):
        q.put(1)
    with pytest.raises(pressure.ProtocolError):
        q.get_nowait()
    assert snapshot(r, q) == before


def test_literal_spec_client_and_pressure_share_a_queue(make_queue: Any, r: redis.Redis) -> None:
    """A few rounds of the spec's own command sequence against a pressure queue."""
    q = make_queue("mixed", 2, serializer="bytes")
    k = q.keys

    def spec_put(data: bytes) -> None:
        assert r.exists(k.bound)
        assert r.brpop([k.producer_free], 1) is not None
        r.set(k.producer, "spec-client")
        assert not r.exists(k.closed)
        assert r.brpop([k.not_full], 1) is not None
        length = r.lpush(k.base, data)
        if int(r.get(k.bound)) == 0 or length < int(r.get(k.bound)):
            r.lpush(k.not_full, 1)
            r.ltrim(k.not_full, 0, 0)
        r.incr(k.produced_messages)
        r.incrby(k.produced_bytes, len(data))
        r.lpush(k.producer_free, 0)

    def spec_get() -> bytes:
        assert r.brpop([k.consumer_free], 1) is not None
        r.set(k.consumer, "spec-client")
        key, value = r.brpop([k.base, k.closed], 1)
        assert key == k.base.encode()
        if int(r.get(k.bound)) == 0 or r.llen(k.base) < int(r.get(k.bound)):
            r.lpush(k.not_full, 0)
            r.ltrim(k.not_full, 0, 0)
        r.incr(k.consumed_messages)
        r.incrby(k.consumed_bytes, len(value))
        r.lpush(k.consumer_free, 0)
        return value

    spec_put(b"from-spec")
    q.put(b"from-pressure")
    assert q.full()
    assert q.get() == b"from-spec"
    assert spec_get() == b"from-pressure"
    assert_invariants(r, q)
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages, s.unfinished_tasks) == (2, 2, 2)


def _spec_lpush(r: redis.Redis, q: pressure.Queue[Any], data: bytes) -> None:
    """A plain spec producer's put (token, id, push, stats, permit), one command at a time."""
    k = q.keys
    assert r.brpop([k.producer_free], 1) is not None
    r.set(k.producer, "spec-client")
    r.lpush(k.base, data)
    r.incr(k.produced_messages)
    r.incrby(k.produced_bytes, len(data))
    r.lpush(k.producer_free, 0)


def _start_waiting_get(q: pressure.Queue[Any], r: redis.Redis, got: list[Any]) -> threading.Thread:
    """Start a blocking get in a thread and return once it is the registered waiter."""
    t = threading.Thread(target=lambda: got.append(q.get(timeout=20)))
    t.start()
    deadline = time.monotonic() + 10
    while not r.exists(q.keys.waiter):
        assert time.monotonic() < deadline, "the consumer never started waiting"
        time.sleep(0.01)
    return t


def test_waiting_consumer_gets_a_spec_producers_item(make_queue: Any, r: redis.Redis) -> None:
    """A spec producer pushes to the list, not to pressure's inbox: the waiter looks
    again at the end of each wait slice (at most about a second)."""
    q = make_queue("spec-to-waiter", serializer="bytes")
    got: list[bytes] = []
    t = _start_waiting_get(q, r, got)
    _spec_lpush(r, q, b"from spec")
    start = time.monotonic()
    t.join(20)
    assert got == [b"from spec"] and time.monotonic() - start < 5
    assert_invariants(r, q)


def test_put_hands_the_oldest_item_to_the_waiter(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("fifo-waiter", serializer="bytes")
    got: list[bytes] = []
    t = _start_waiting_get(q, r, got)
    _spec_lpush(r, q, b"first")  # pushed while pressure's consumer waits
    q.put(b"second")  # the waiter must get "first", and "second" stays queued
    t.join(20)
    assert got == [b"first"] and q.get_nowait() == b"second"
    s = q.statistics()
    assert (s.produced_messages, s.consumed_messages) == (2, 2)
    assert_invariants(r, q)


def test_delivery_to_a_waiter_counts_both_sides_and_leaves_nothing_behind(make_queue: Any,
                                                                          r: redis.Redis) -> None:
    q = make_queue("wake", serializer="bytes")
    got: list[bytes] = []
    t = _start_waiting_get(q, r, got)
    assert r.llen(q.keys.consumer_free) == 0  # the waiter holds the consumer role, as in the spec
    q.put(b"x" * 10)  # wakes the waiter, which takes the item from the list itself
    t.join(20)
    assert got == [b"x" * 10]
    s = q.statistics()
    assert (s.produced_messages, s.produced_bytes, s.consumed_messages, s.consumed_bytes) == (1, 10, 1, 10)
    assert not r.exists(q.keys.waiter) and r.keys(f"{q.prefix}:*inbox*") == []
    # default mode: once get() has the item in hand it drops it from its in-flight list (a
    # DEL whose reply it does not wait for: another connection may see it an instant longer)
    deadline = time.monotonic() + 10
    while r.keys(f"{q.prefix}:*inflight*"):
        assert time.monotonic() < deadline, "the returned item stayed in flight"
        time.sleep(0.01)
    assert q.qsize() == 0
    assert_invariants(r, q)


def test_an_item_put_for_a_waiter_that_never_read_stays_queued_for_its_next_get(
        make_queue: Any, r: redis.Redis) -> None:
    """If a waiter's connection drops before its BLMOVE, a put only wakes it (a wake-up in its
    inbox): the item stays in the list, counted there, and its next get takes it."""
    q = make_queue("inbox", serializer="bytes", client_id="consumer-1")
    k = q.keys
    # register as the waiter the way a blocking get does, then vanish before the BLMOVE
    me = q._consumer.id()
    assert register_waiter(q, me, q._consumer.record(), 10000) == -6
    make_queue("inbox", serializer="bytes").put(b"put meanwhile")
    assert r.lrange(k.inbox(me), 0, -1) == [b"s:"] and q.qsize() == 1
    assert q.get_nowait() == b"put meanwhile"
    assert r.llen(k.inbox(me)) == 0
    assert_invariants(r, q)
