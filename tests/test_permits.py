"""The producers' permit (:not_full) and the consumed counters across the task lifecycle.

Every script that changes how many items are queued or delayed leaves :not_full holding one
element exactly while queued plus delayed items are below the bound (docs: reliability.md, "The bound";
tests/helpers.py assert_invariants): a kick, and an item let into the queue from behind its
utube key by whatever ended its key's current one. And :stats:consumed_* count the items got:
an item that expires (dropped or dead-lettered) was never got, and a kick that brings it back
takes nothing from them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import pressure
from pressure._internal import internal
from pressure._scripts import LOG_APPEND
from pressure.spark.log import QueueLog

from .helpers import assert_invariants


def _consumed(r: redis.Redis, q: pressure.Queue[Any]) -> tuple[int, int]:
    k = q.keys
    return int(r.get(k.consumed_messages) or 0), int(r.get(k.consumed_bytes) or 0)


# -- kick ------------------------------------------------------------------------------------

def test_a_kick_counts_the_delayed_items_against_the_bound(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("kick", 2, reliable=True)
    q.put("parked")
    assert q.receive(block=False).bury()
    q.put("later", delay=600.0)
    assert_invariants(r, q)  # one delayed of two: room left
    assert q.kick() == 1  # one queued and one delayed: full
    assert_invariants(r, q)
    assert q.full()
    with pytest.raises(pressure.Full):
        q.put_nowait("more")
    assert_invariants(r, q)


# -- utube: an item let in from behind its key counts ------------------------------------------

def _ack(q: pressure.Queue[Any], d: Any, r: redis.Redis) -> None:
    assert d.ack()


def _delete(q: pressure.Queue[Any], d: Any, r: redis.Redis) -> None:
    assert d.delete()


def _delete_item(q: pressure.Queue[Any], d: Any, r: redis.Redis) -> None:
    assert q.delete_item(d.task_id) is not None


def _bury(q: pressure.Queue[Any], d: Any, r: redis.Redis) -> None:
    assert d.bury()


def _dead_after_max_deliveries(q: pressure.Queue[Any], d: Any, r: redis.Redis) -> None:
    assert d.release()  # max_deliveries=1: to the dead letters


@pytest.mark.parametrize("end", [_ack, _delete, _delete_item, _bury, _dead_after_max_deliveries])
def test_an_item_let_in_behind_its_key_counts_against_the_bound(
        make_queue: Any, r: redis.Redis, end: Callable[[pressure.Queue[Any], Any, redis.Redis], None]) -> None:
    q = make_queue("ut", 1, reliable=True, max_deliveries=1)
    q.put("a1", key="k")
    d = q.receive(block=False)  # a1 taken: the queue is empty, room for one
    q.put("a2", key="k")  # waits behind a1: neither in the length nor against the bound
    assert r.llen(q.keys.base) == 0
    assert_invariants(r, q)
    end(q, d, r)  # a1 done: a2 comes in, and fills the bound
    assert r.llen(q.keys.base) == 1
    assert_invariants(r, q)
    assert q.full()
    with pytest.raises(pressure.Full):
        q.put_nowait("more")
    assert q.receive(block=False).item == "a2"
    assert_invariants(r, q)


def test_an_item_logged_lets_the_next_of_its_key_in_counted(make_queue: Any, url: str, prefix: str,
                                                            r: redis.Redis) -> None:
    q = make_queue("utlog", 1, reliable=True, serializer="bytes")
    q.put(b"a1", key="k")
    log = QueueLog("utlog", "g", url=url, prefix=prefix)
    link = internal(log.queue)
    cid, got, _ = link.receive_ids(1)  # a1 in flight
    assert len(got) == 1
    q.put(b"a2", key="k")
    assert_invariants(r, q)
    k = q.keys
    link.run(LOG_APPEND.name, LOG_APPEND.keys(k.inflight(cid), f"{k.logs}:g", f"{k.logs}:g:tail", k.producer,
                                              k.logs, k.meta), LOG_APPEND.check(("g", *got)))
    assert r.llen(k.base) == 1  # a1 logged: a2 came in
    assert_invariants(r, q)
    log.queue.close()


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_that_lets_the_next_of_a_key_in_keeps_one_permit(make_queue: Any, r: redis.Redis,
                                                                reliable: bool) -> None:
    q = make_queue(f"utd{int(reliable)}", 2, reliable=reliable)
    q.put_many(["a1", "a2"], key="k")
    q.put("x")  # a1, x queued (a2 behind a1): full
    assert_invariants(r, q)
    # both out at once, then a2 comes in (the default mode: a1 is done as it is taken)
    assert q.get_many(2, block=False) == ["a1", "x"]
    if reliable:
        assert r.llen(q.keys.base) == 0
        q.task_done()  # a1 acknowledged: a2 comes in
    assert r.llen(q.keys.base) == 1
    assert_invariants(r, q)
    assert q.get_nowait() == "a2"
    assert_invariants(r, q)


def test_an_expired_item_lets_the_next_of_its_key_in_counted(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("utx", 2, reliable=True)
    q.put("old", key="k", ttl=0.05)
    q.put("new", key="k")  # behind old
    q.put("x")  # old, x queued: full
    time.sleep(0.1)
    assert_invariants(r, q)
    # old expires on the way out and new comes in, taken in turn
    assert q.get_many(2, block=False) == ["x", "new"]
    assert_invariants(r, q)


# -- consumed counters and expired dead letters -------------------------------------------------

def test_an_expired_dead_letter_was_never_consumed_nor_is_its_kick(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("exp", reliable=True, ttl=0.05, dead_letter_expired=True)
    q.put("old")
    time.sleep(0.1)
    with pytest.raises(pressure.Empty):
        q.get_nowait()  # expired on the way: dead-lettered, never handed out
    assert [d.reason for d in q.dead_letters()] == ["expired"]
    assert _consumed(r, q) == (0, 0)
    assert q.statistics().calls["take"] == 0
    assert q.kick() == 1  # back in the queue: still never got
    assert _consumed(r, q) == (0, 0)
    stats = q.statistics()
    assert stats.calls["take"] == 0 and stats.calls["kick"] == 1
    d = q.receive(block=False)
    assert d.item == "old"
    assert _consumed(r, q)[0] == 1 and q.statistics().calls["take"] == 1
    assert d.release()  # counted as consumed, so given back, not dropped as a stranger's
    assert q.qsize() == 1 and _consumed(r, q) == (0, 0)
    d = q.receive(block=False)
    assert d.item == "old" and d.ack()
    stats = q.statistics()
    assert stats.calls["take"] == 2 and stats.calls["ack"] == 1 and stats.consumed_messages == 1


def test_a_kick_takes_back_from_consumed_only_what_was_consumed(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("mix", reliable=True, dead_letter_expired=True)
    q.put("buried")
    assert q.receive(block=False).bury()
    q.put("old", ttl=0.05)
    time.sleep(0.1)
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    assert [d.reason for d in q.dead_letters()] == ["buried", "expired"]
    before = _consumed(r, q)
    assert before[0] == 1
    assert q.kick() == 2
    assert _consumed(r, q) == (0, 0)  # the buried one's take undone; the expired one had none
    stats = q.statistics()
    assert stats.calls["take"] == 1 and stats.calls["kick"] == 2
    assert sorted(q.receive(block=False).item for _ in range(2)) == ["buried", "old"]
    assert q.statistics().calls["take"] == 3


def test_an_item_let_in_behind_its_key_may_pass_a_bound_filled_meanwhile(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("utpast", 1, reliable=True)
    q.put("a1", key="k")
    d = q.receive(block=False)
    q.put("a2", key="k")  # behind a1: room still for one
    q.put("x")  # full
    assert d.ack()  # a2 comes in all the same: it was accepted when put
    assert r.llen(q.keys.base) == 2
    assert_invariants(r, q)
    with pytest.raises(pressure.Full):
        q.put_nowait("more")
    assert q.receive(block=False).item == "x"
    assert_invariants(r, q)  # a2 queued: full still
    assert q.receive(block=False).item == "a2"
    assert_invariants(r, q)
    q.put_nowait("more")
