"""QueueLog: the replayable log a streaming reader plans by (pressure/spark/log.py)."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import redis

import pressure
from pressure.spark.log import QueueLog
from pressure.testing import RedisServer

from .helpers import assert_invariants


def test_take_read_commit(make_queue: Any, url: str, prefix: str) -> None:
    q = make_queue("q", 10)
    q.put_many([{"n": i} for i in range(6)])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert (log.tail(), log.committed()) == (0, 0)
    assert log.take(4) == 4
    assert q.qsize() == 2
    entries = list(log.read(0, 4))
    assert [e.number for e in entries] == [1, 2, 3, 4]
    assert [pickle.loads(e.payload) for e in entries] == [{"n": i} for i in range(4)]
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert all(e.deliveries == 1 and e.producer == q.client_id for e in entries)
    # a range reads again, as often as asked, until committed
    assert [e.number for e in log.read(2, 4)] == [3, 4]
    assert log.commit(2) == 2
    assert log.commit(1) == 2  # commits only move forward
    assert [e.number for e in log.read(2, 4)] == [3, 4]
    with pytest.raises(pressure.PressureError, match="no longer holds entry 1"):
        list(log.read(0, 4))
    assert log.take(100) == 6
    assert q.qsize() == 0
    assert log.bury(5) and log.bury(5)  # once in the list, however often buried
    assert [pickle.loads(d.payload) for d in q.dead_letters()] == [{"n": 4}]
    assert not log.bury(1)  # committed: gone
    st = q.statistics()
    assert (st.produced_messages, st.consumed_messages) == (6, 6)
    assert q.in_flight() == []


def test_take_frees_room_for_blocked_producer(make_queue: Any, url: str, prefix: str) -> None:
    q = make_queue("q", 2)
    q.put_many([1, 2])
    assert q.full()
    log = QueueLog("q", "g", url=url, prefix=prefix)
    log.take(1)
    q.put(3, timeout=1)  # a permit is back: :not_full agrees with the length
    assert q.qsize() == 2
    r = redis.Redis.from_url(url)
    assert_invariants(r, q)


def test_groups_are_separate_and_logs_go_with_the_queue(make_queue: Any, url: str, prefix: str,
                                                        r: redis.Redis) -> None:
    q = make_queue("q")
    q.put_many(range(4))
    a = QueueLog("q", "a", url=url, prefix=prefix)
    b = QueueLog("q", "b", url=url, prefix=prefix)
    assert a.take(1) == 1
    assert b.take(1) == 1
    assert [pickle.loads(e.payload) for e in a.read(0, 1)] == [0]
    assert [pickle.loads(e.payload) for e in b.read(0, 1)] == [1]
    assert r.keys(f"{prefix}:q:pressure:logs*")
    q.delete()
    assert r.keys(f"{prefix}*") == []


def test_a_fresh_create_drops_logs_a_spec_delete_left(make_queue: Any, url: str, prefix: str,
                                                      r: redis.Redis) -> None:
    q = make_queue("q")
    q.put_many(range(3))
    QueueLog("q", "g", url=url, prefix=prefix).take(3)
    r.delete(*q.keys.protocol_keys())  # what a plain spec client's Delete removes
    q2 = make_queue("q")
    assert QueueLog("q", "g", url=url, prefix=prefix).tail() == 0
    assert not r.keys(f"{prefix}:q:pressure:logs*")
    q2.delete()


def test_read_chunks_cut_items_of_any_bytes(make_queue: Any, url: str, prefix: str) -> None:
    """log_read.lua hands back the log's chunks (a take's 1000 items each), which the reader
    cuts by their lengths: items holding spaces, digits, newlines or nothing come back whole,
    across chunks (4000 items per round trip) and from inside one."""
    q = make_queue("q", serializer="bytes")
    odd = [b"", b" ", b"1 2 3", b"\n\x00-0", "é".encode(), b"x" * 5000]
    items = [odd[i % len(odd)] + str(i).encode() * (i % 3) for i in range(4500)]
    for start in range(0, len(items), 1000):
        q.put_many(items[start:start + 1000])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert log.take(len(items)) == len(items)
    chunks = list(log.read_chunks(0, 4500))
    assert [len(c) for c in chunks] == [4000, 500]
    assert [p for c in chunks for p in c.payloads] == items
    assert [n for c in chunks for n in c.numbers] == list(range(1, 4501))
    entries = list(log.read(4000, 4500))
    assert [e.payload for e in entries] == items[4000:]
    assert [e.payload for e in log.read(1498, 2503)] == items[1498:2503]  # three chunks, cut
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert all(e.deliveries == 1 and e.producer == q.client_id and e.taken_at > 0 for e in entries)
    log.commit(2500)
    with pytest.raises(pressure.PressureError, match="no longer holds entry 2500"):
        list(log.read_chunks(2499, 4500))
    assert sum(map(len, log.read_chunks(2500, 4500))) == 2000


def test_ordered_queues(make_queue: Any, url: str, prefix: str) -> None:
    pq = pressure.PriorityQueue("pq", url=url, prefix=prefix)
    for x in (5, 1, 3):
        pq.put(x)
    log = QueueLog("pq", "g", url=url, prefix=prefix, kind="priority")
    log.take(10)
    assert [pickle.loads(e.payload) for e in log.read(0, 3)] == [1, 3, 5]
    pq.delete()


def test_pickles_and_checks_arguments(make_queue: Any, url: str, prefix: str) -> None:
    q = make_queue("q")
    q.put("x")
    log = pickle.loads(pickle.dumps(QueueLog("q", "g", url=url, prefix=prefix)))
    assert log.take(1) == 1
    assert [e.payload for e in log.read(0, 1)] == [pickle.dumps("x", protocol=pickle.HIGHEST_PROTOCOL)]
    with pytest.raises(ValueError, match="group"):
        QueueLog("q", "", url=url, prefix=prefix)
    with pytest.raises(ValueError, match="kind"):
        QueueLog("q", "g", url=url, prefix=prefix, kind="stack")
    with pytest.raises(ValueError, match="negative"):
        log.take(-1)
    with pytest.raises(pressure.QueueDoesNotExist):
        QueueLog("missing", "g", url=url, prefix=prefix).take(1)


def test_a_reader_killed_between_get_and_append_loses_nothing(make_queue: Any, url: str,
                                                              prefix: str) -> None:
    """SIGKILL after the reliable get and before log_append: the items are in flight under a
    dead pid, and the next take on this host requeues and logs them, once each."""
    q = make_queue("q")
    q.put_many(range(5))
    child = textwrap.dedent(f"""
        import os, signal
        from pressure._internal import internal
        from pressure.spark.log import QueueLog
        log = QueueLog("q", "g", url={url!r}, prefix={prefix!r})
        got = internal(log.queue).receive_many(3)
        assert len(got) == 3
        print("taken", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert q.qsize() == 2
    assert len(q.in_flight()) == 3
    log = QueueLog("q", "g", url=url, prefix=prefix)
    deadline = time.monotonic() + 10
    while log.tail() < 5 and time.monotonic() < deadline:
        log.take(10)  # its sweep (at most once a second) recovers the dead reader's items
        time.sleep(0.2)
    assert sorted(pickle.loads(e.payload) for e in log.read(0, log.tail())) == [0, 1, 2, 3, 4]
    assert q.in_flight() == [] and q.qsize() == 0


def test_a_take_logs_a_chunk_per_round_trip(make_queue: Any, url: str, prefix: str,
                                            r: redis.Redis) -> None:
    """A take stores what each round trip logs as one stream entry, numbered by its last item,
    so the server does no work per item when it is read: 2,500 items, three entries. A commit
    inside a chunk keeps the chunk, but what it committed reads and buries as gone."""
    q = make_queue("q", serializer="bytes")
    for start in range(0, 2500, 1000):
        q.put_many([b"%d" % i for i in range(start, min(start + 1000, 2500))])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert log.take(2500) == 2500
    key = f"{q.keys.logs}:g"
    assert [entry_id for entry_id, _ in r.xrange(key)] == [b"1000-0", b"2000-0", b"2500-0"]
    log.commit(1500)
    assert r.xlen(key) == 2  # 1001-2000 is half committed: kept
    with pytest.raises(pressure.PressureError, match="no longer holds entry 1500"):
        list(log.read(1499, 1600))
    assert not log.bury(1200)
    assert [e.payload for e in log.read(1500, 2010)] == [b"%d" % i for i in range(1500, 2010)]
    assert log.bury(1501) and [d.payload for d in q.dead_letters()] == [b"1500"]  # item 1501
    log.commit(2000)
    assert [entry_id for entry_id, _ in r.xrange(key)] == [b"2500-0"]


def test_a_log_of_an_entry_per_item_reads_on(make_queue: Any, url: str, prefix: str,
                                            r: redis.Redis) -> None:
    """A log written before chunks (an entry per item, fields i, s, d, t, p) reads, buries and
    commits as before, and goes on with chunks: a query restarted on a newer pressure replays it."""
    q = make_queue("q", serializer="bytes")
    key = f"{q.keys.logs}:g"
    for n in (1, 2, 3):
        r.xadd(key, {"i": b"old %d" % n, "s": n + 10, "d": 1, "t": 1700000000000 + n, "p": "prod"},
               id=f"{n}-0")
    r.set(f"{key}:tail", 3)
    r.sadd(q.keys.logs, "g")
    q.put_many([b"new 4", b"new 5"])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert log.take(10) == 5
    entries = list(log.read(0, 5))
    assert [e.payload for e in entries] == [b"old 1", b"old 2", b"old 3", b"new 4", b"new 5"]
    assert [e.seq for e in entries[:3]] == [11, 12, 13] and entries[1].taken_at == 1700000000.002
    assert [e.producer for e in entries[:3]] == ["prod"] * 3
    assert [c.numbers for c in log.read_chunks(1, 5)] == [range(2, 6)]
    assert log.bury(2) and [d.payload for d in q.dead_letters()] == [b"old 2"]
    log.commit(2)
    assert [e.payload for e in log.read(2, 5)] == [b"old 3", b"new 4", b"new 5"]
    assert r.xlen(key) == 2


def test_a_take_counts_and_logs_redeliveries_as_a_get_does(make_queue: Any, url: str, prefix: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """The log's take makes no Delivery (serializer 'bytes', FIFO, no authkey) and still logs
    each redelivery, with its count in the entry."""
    q = make_queue("q", reliable=True, serializer="bytes")
    q.put_many([b"a", b"b"])
    q.receive().release()  # 'a' is queued again, delivered once
    log = QueueLog("q", "g", url=url, prefix=prefix)
    with caplog.at_level(logging.INFO, logger="pressure"):
        assert log.take(5) == 2
    assert sorted((e.payload, e.deliveries) for e in log.read(0, 2)) == [(b"a", 2), (b"b", 1)]
    (again,) = [rec for rec in caplog.records if getattr(rec, "event", None) == "redelivery"]
    assert (again.deliveries, again.levelno) == (2, logging.INFO)  # type: ignore[attr-defined]
    assert q.in_flight() == [] and q.qsize() == 0


@pytest.mark.parametrize("signed", [False, True], ids=["one-step", "signed-two-steps"])
def test_a_logged_item_leaves_the_queues_care_so_its_utube_keys_next_comes_in(
        make_queue: Any, url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch,
        signed: bool) -> None:
    """A logged item is done with, as a default-mode get's is: its ttl, ttr and utube key go
    from :pressure:meta, and its key's next item enters the queue (taken by the same take).
    Before, a take left them: the key's next item waited behind it for ever, and the meta
    hash grew by an entry per item put with a ttl. The same on a signed queue, whose take
    verifies each item before log_append.lua logs it."""
    kw: dict[str, Any] = {}
    if signed:
        monkeypatch.setenv("PRESSURE_AUTHKEY", "a-key-for-the-log-test")
        kw["authkey"] = b"a-key-for-the-log-test"
    q = make_queue("q", serializer="bytes", **kw)
    q.put(b"a1", key="a")
    q.put(b"a2", key="a")
    q.put(b"x", ttl=60)
    q.put(b"y", ttr=30)
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert log.take(10) == 4
    payloads = [e.payload for e in log.read(0, 4)]
    if signed:  # as stored, signed: the stream's reader verifies them (tests/test_signing.py)
        payloads = [q._serializer.loads(p) for p in payloads]
    assert payloads == [b"a1", b"x", b"y", b"a2"]
    assert r.hlen(q.keys.meta) == 0 and not r.exists(q.keys.utube)
    assert q.qsize() == 0 and q.in_flight() == []
    assert_invariants(r, q)


def test_a_take_is_one_script_call_per_1000_items_with_nothing_in_flight(prefix: str) -> None:
    """Unsigned, a take's round trip moves its items from the queue into the log in one step
    (get.lua 'log'): 2,500 items, three script calls (before: a reliable get and log_append.lua
    per 1,000, six), and no item ever in the reader's in-flight list. On a server of its own:
    the count is the server's, and no other test's client may add to it."""
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        q: pressure.Queue[bytes] = pressure.Queue("q", url=server.url, prefix=prefix, serializer="bytes")
        log = QueueLog("q", "g", url=server.url, prefix=prefix)
        q.put(b"warm-up")
        assert log.take(1) == 1  # the scripts loaded, the first get's sweep done
        log.commit(1)
        for start in range(0, 2500, 1000):
            q.put_many([b"%d" % i for i in range(start, min(start + 1000, 2500))])

        def script_calls() -> int:
            stats = r.info("commandstats")
            return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))

        before = script_calls()
        assert log.take(2500) == 2501
        assert script_calls() - before == 3
        assert [e.payload for e in log.read(1, 2501)] == [b"%d" % i for i in range(2500)]
        assert not r.keys(f"{q.keys.base}:pressure:inflight:*")
        st = q.statistics()
        assert (st.consumed_messages, st.consumed_bytes) == (2501, 7 + sum(len(b"%d" % i) for i in range(2500)))
        log.disconnect()
        q.disconnect()
        r.close()


def test_entries_delivered_to_the_reader_before_are_logged_first(
        make_queue: Any, url: str, prefix: str, r: redis.Redis) -> None:
    """Entries waiting in the reader's inbox (delivered to it, never received: a reply lost)
    are logged first, the two-step way, then the queue's items in one step each round trip."""
    from pressure._internal import internal

    q = make_queue("q", serializer="bytes", reliable=True)
    q.put_many([b"first", b"second", b"third"])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    link = internal(log.queue)
    got = link.receive_many(1)  # 'first', in the reader's in-flight list: as a lost reply leaves it
    cid = got[0].consumer
    entry = r.lpop(q.keys.inflight(cid))
    r.rpush(q.keys.inbox(cid), entry)
    assert log.take(10) == 3
    assert [e.payload for e in log.read(0, 3)] == [b"first", b"second", b"third"]
    assert q.qsize() == 0 and q.in_flight() == [] and not r.exists(q.keys.inbox(cid))


@pytest.mark.parametrize("spoil", ["log-a-string", "tail-not-a-number", "logs-a-list"])
def test_a_take_into_a_spoiled_log_changes_nothing(make_queue: Any, url: str, prefix: str,
                                                   r: redis.Redis, spoil: str) -> None:
    """A log whose keys another client gave the wrong type: the take fails (ProtocolError)
    before any item leaves the queue."""
    q = make_queue("q", serializer="bytes")
    q.put_many([b"a", b"b"])
    log_key = f"{q.keys.logs}:g"
    if spoil == "log-a-string":
        r.set(log_key, "x")
    elif spoil == "tail-not-a-number":
        r.set(f"{log_key}:tail", "x")
    else:
        r.rpush(q.keys.logs, "x")
    log = QueueLog("q", "g", url=url, prefix=prefix)
    with pytest.raises(pressure.ProtocolError):
        log.take(10)
    assert q.qsize() == 2 and q.in_flight() == []
    assert q.statistics().consumed_messages == 0


@pytest.mark.parametrize("signed", [False, True], ids=["one-step", "signed-two-steps"])
@pytest.mark.parametrize("log_state", ["committed-empty", "entries-past-the-tail"])
def test_a_log_whose_tail_is_lost_goes_on_after_what_it_holds(
        make_queue: Any, url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch,
        signed: bool, log_state: str) -> None:
    """A log's tail key lost (evicted, overwritten) under a stream that holds entries past it,
    or that commits emptied (a stream keeps its last id): the next chunk's id was at or below
    the stream's last one, and XADD refused it on every take for ever (a one-step take would
    have lost the items it had taken). The log goes on after the last number it holds or has
    committed; an empty stream is dropped first (its last id no longer shows)."""
    kw: dict[str, Any] = {}
    if signed:
        monkeypatch.setenv("PRESSURE_AUTHKEY", "a-key-for-the-log-test")
        kw["authkey"] = b"a-key-for-the-log-test"
    q = make_queue("q", serializer="bytes", **kw)
    q.put_many([b"a", b"b", b"c"])
    log = QueueLog("q", "g", url=url, prefix=prefix)
    assert log.take(3) == 3
    if log_state == "committed-empty":
        log.commit(3)
        r.delete(f"{q.keys.logs}:g:tail")
        first = 4
    else:
        r.set(f"{q.keys.logs}:g:tail", 1)
        first = 4
    q.put_many([b"d", b"e"])
    assert log.take(5) == first + 1
    payloads = [e.payload for e in log.read(first - 1, first + 1)]
    if signed:
        payloads = [q._serializer.loads(p) for p in payloads]
    assert payloads == [b"d", b"e"]
    assert q.qsize() == 0 and q.in_flight() == []
