"""Puts whose payloads move natively (lua/put.lua ARGV[3] 'm'): put.lua decides and accounts,
and LSET/LPUSHX/RENAME behind it in one MULTI/EXEC move the bytes, which never enter Lua.
What is checked here: the bytes never reach a script (the server's MONITOR feed), the list
holds the bare payloads in order (a spec client reads them), the counts are exact, and a
refusal, a script the server lost (NOSCRIPT) or a batch the bound cuts leaves exactly what the
Lua path leaves."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.connection import NATIVE_BYTES

from .helpers import assert_invariants

BIG = NATIVE_BYTES


def _payload(tag: bytes, size: int = 10_000) -> bytes:
    return tag + b"." * (size - len(tag))


class _Monitor:
    """The commands the server runs while it is open (MONITOR): each its text, those a script
    calls prefixed 'lua ' (redis-py's client_type 'lua')."""

    def __init__(self, url: str) -> None:
        self.lines: list[str] = []
        self._client = redis.Redis.from_url(url)
        self._monitor = self._client.monitor().__enter__()  # (it reads MONITOR's OK)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                seen = self._monitor.next_command()
                lua = "lua " if seen.get("client_type") == "lua" else ""
                self.lines.append(lua + str(seen["command"]))
            except Exception:  # noqa: BLE001 - the connection closed by close()
                return

    def close(self, r: redis.Redis) -> list[str]:
        r.set("monitor-end", "1")  # the last line: everything before it was read
        deadline = time.monotonic() + 10
        while not any("monitor-end" in line for line in self.lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._stop.set()
        self._monitor.connection.disconnect()
        self._client.close()
        r.delete("monitor-end")
        return self.lines


def test_a_put_s_payload_never_enters_lua(make_queue: Any, url: str, r: redis.Redis) -> None:
    q = make_queue("native", serializer="bytes")
    q.put(_payload(b"warm"))  # the script is loaded before the MONITOR opens
    q.get()
    monitor = _Monitor(url)
    q.put(_payload(b"one"))
    q.put_many([_payload(b"two"), _payload(b"three")])
    lines = monitor.close(r)
    carriers = [line for line in lines if "one...." in line or "two...." in line or "three...." in line]
    assert carriers, lines
    # only the native commands carry a payload: never EVALSHA's arguments, never a script's command
    assert all(line.startswith(("LSET ", "LPUSHX ")) for line in carriers), carriers
    assert q.get_many(10) == [_payload(b"one"), _payload(b"two"), _payload(b"three")]


def test_the_list_holds_the_bare_payloads_in_order(make_queue: Any, r: redis.Redis) -> None:
    """A spec client's LPUSH and RPOP meet the payloads themselves, interleaved in put order."""
    q = make_queue("spec", serializer="bytes")
    q.put(_payload(b"a"))
    r.lpush(q.keys.base, b"spec")  # a spec client's put (the counters are its business)
    q.put_many([_payload(b"b"), b"small", _payload(b"c")])
    q.put(b"tiny")  # below NATIVE_BYTES: put.lua takes it as an argument
    assert r.lrange(q.keys.base, 0, -1)[::-1] == [
        _payload(b"a"), b"spec", _payload(b"b"), b"small", _payload(b"c"), b"tiny"]
    assert r.rpop(q.keys.base) == _payload(b"a")
    assert q.get_many(10) == [b"spec", _payload(b"b"), b"small", _payload(b"c"), b"tiny"]
    assert not r.exists(q.keys.gate)


def test_counts_are_exact(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("counts", serializer="bytes")
    sizes = [BIG, 10_000, 3, 100_000]
    q.put(b"x" * sizes[0])
    q.put_many([b"y" * n for n in sizes[1:]])
    assert int(r.get(q.keys.produced_messages) or 0) == 4
    assert int(r.get(q.keys.produced_bytes) or 0) == sum(sizes)
    assert q.qsize() == 4
    assert [len(item) for item in q.get_many(10)] == sizes
    assert int(r.get(q.keys.consumed_bytes) or 0) == sum(sizes)
    q.task_done(); q.task_done(); q.task_done(); q.task_done()
    q.join()
    assert_invariants(r, q)


def test_a_refused_put_leaves_the_queue_as_it_was(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("refused", 1, serializer="bytes")
    q.put(_payload(b"first"))
    before = r.lrange(q.keys.base, 0, -1)
    with pytest.raises(pressure.Full):
        q.put(_payload(b"second"), block=False)
    with pytest.raises(pressure.Full) as caught:
        q.put_many([_payload(b"x"), _payload(b"y")], block=False)
    assert caught.value.items_put == 0
    assert r.lrange(q.keys.base, 0, -1) == before
    assert int(r.get(q.keys.produced_messages) or 0) == 1
    assert not r.exists(q.keys.gate)
    assert_invariants(r, q)
    q.close()
    with pytest.raises(pressure.ShutDown):
        q.put(_payload(b"closed"))
    assert r.lrange(q.keys.base, 0, -1) == before and not r.exists(q.keys.gate)


def test_a_put_on_a_deleted_queue_pushes_nothing(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("gone", serializer="bytes")
    other = make_queue("gone", serializer="bytes")
    other.delete()
    with pytest.raises(pressure.QueueDoesNotExist):
        q.put(_payload(b"late"))
    assert not r.exists(q.keys.base) and not r.exists(q.keys.gate)


def test_a_batch_the_bound_cuts_puts_what_fits_in_order(make_queue: Any, r: redis.Redis) -> None:
    """The native form is all or none (-10): the same call then goes as arguments, which put
    what fits, and the rest wait for room as put_many's always do."""
    q = make_queue("cut", 3, serializer="bytes")
    q.put(_payload(b"first"))
    with pytest.raises(pressure.Full) as caught:
        q.put_many([_payload(b"a"), _payload(b"b"), _payload(b"c")], block=False)
    assert caught.value.items_put == 2
    assert q.get_many(10) == [_payload(b"first"), _payload(b"a"), _payload(b"b")]
    assert int(r.get(q.keys.produced_messages) or 0) == 3
    assert_invariants(r, q)


def test_a_batch_above_the_room_goes_as_arguments_until_a_whole_one_fits(make_queue: Any, url: str,
                                                                         r: redis.Redis) -> None:
    """After a native put the bound cut (-10), put_many sends its batches as arguments (one
    round trip each, as before native puts) until one at least as big goes in whole: a
    producer that keeps a bounded queue near full, or a put_many above its bound, never pays a
    native attempt that fails on every batch."""
    def native_puts(lines: list[str]) -> int:  # (a native get's MULTI has no LSET of a payload)
        return sum(line.startswith("LSET") and len(line) > BIG for line in lines)

    q = make_queue("short", 4, serializer="bytes")
    monitor = _Monitor(url)
    with pytest.raises(pressure.Full) as caught:  # native, cut: then as arguments, 4 fit
        q.put_many([_payload(b"%d" % i) for i in range(6)], block=False)
    assert caught.value.items_put == 4
    assert q.get_many(10) == [_payload(b"%d" % i) for i in range(4)]
    q.put_many([_payload(b"x"), _payload(b"y")])  # as arguments: it fits, but is smaller than the cut one
    assert q.get_many(10) == [_payload(b"x"), _payload(b"y")]
    assert native_puts(monitor.close(r)) == 1  # the cut one
    q.maxsize = 10
    monitor = _Monitor(url)
    q.put_many([_payload(b"v")] * 6)  # as arguments, whole: native again from the next one
    assert native_puts(monitor.close(r)) == 0
    assert q.get_many(10) == [_payload(b"v")] * 6
    monitor = _Monitor(url)
    q.put_many([_payload(b"u")] * 3)
    assert native_puts(monitor.close(r)) == 1
    assert q.get_many(10) == [_payload(b"u")] * 3
    assert int(r.get(q.keys.produced_messages) or 0) == 15
    assert_invariants(r, q)


def test_a_script_the_server_lost_moves_nothing_twice(make_queue: Any, r: redis.Redis) -> None:
    """A server that lost its scripts (a restart, a failover, SCRIPT FLUSH) answers the
    transaction's EVALSHA with NOSCRIPT, and the LSET and RENAME behind it fail on a gate that
    does not exist: nothing moved. The client loads the script and sends the put again: one copy."""
    q = make_queue("flushed", serializer="bytes")
    q.put(_payload(b"before"))
    r.script_flush()
    q.put(_payload(b"after"))
    q.put_many([_payload(b"m1"), _payload(b"m2")])
    r.script_flush()
    q.put_many([_payload(b"m3"), _payload(b"m4")])
    assert q.get_many(10) == [_payload(b"before"), _payload(b"after"), _payload(b"m1"), _payload(b"m2"),
                              _payload(b"m3"), _payload(b"m4")]
    assert int(r.get(q.keys.produced_messages) or 0) == 6
    assert not r.exists(q.keys.gate)


def test_a_stale_gate_never_joins_the_queue(make_queue: Any, r: redis.Redis) -> None:
    """Another client with write access leaves a list at the gate's name: a native put into an
    empty queue replaces it, and into a queue that holds items renames over it."""
    q = make_queue("stale", serializer="bytes")
    r.rpush(q.keys.gate, b"intruder")
    q.put(_payload(b"a"))
    r.rpush(q.keys.gate, b"intruder")
    q.put(_payload(b"b"))
    assert q.get_many(10) == [_payload(b"a"), _payload(b"b")]
    assert not r.exists(q.keys.gate)


def test_a_waiting_consumer_takes_a_native_put(make_queue: Any) -> None:
    """The wake-up put.lua leaves is read after the EXEC: the item is in the list by then."""
    q = make_queue("woken", serializer="bytes")
    got: list[bytes] = []
    consumer = threading.Thread(target=lambda: got.append(q.get(timeout=30)))
    consumer.start()
    time.sleep(0.3)
    q.put(_payload(b"wake"))
    consumer.join(30)
    assert got == [_payload(b"wake")]


def test_a_blocked_producer_puts_natively_once_there_is_room(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("room", 1, serializer="bytes")
    q.put(_payload(b"one"))
    putter = threading.Thread(target=lambda: q.put(_payload(b"two"), timeout=30))
    putter.start()
    time.sleep(0.3)
    assert q.get() == _payload(b"one")
    putter.join(30)
    assert q.get(timeout=5) == _payload(b"two")
    assert int(r.get(q.keys.produced_messages) or 0) == 2
    assert_invariants(r, q)
