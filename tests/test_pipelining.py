"""The round-trip savers the executor uses: several gets in one script, several scripts in
one round trip, and a delivery's visibility renewed while it is processed."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

import pressure
from pressure._internal import internal

from .helpers import assert_invariants


def test_receive_more_takes_what_is_queued_in_order_and_counts_it(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("many", 10)
    for i in range(5):
        q.put(i)
    assert [d.item for d in internal(q).receive_many(3)] == [0, 1, 2]
    assert [d.item for d in internal(q).receive_many(10)] == [3, 4]
    assert internal(q).receive_many(10) == []
    s = q.statistics()
    assert (s.consumed_messages, s.size) == (5, 0)
    assert_invariants(r, q)


@pytest.mark.parametrize("reliable", [False, True])
def test_receive_more_with_a_share_takes_no_more_than_that_share_of_what_is_queued(
        make_queue: Any, r: redis.Redis, reliable: bool) -> None:
    q = make_queue("share", reliable=reliable)
    for i in range(10):
        q.put(i)
    link = internal(q)
    takes = [link.receive_many(16, share=3), link.receive_many(2, share=2),  # no more than asked
             link.receive_many(16, share=2), link.receive_many(16, share=1)]  # alone: all of it
    assert [[d.item for d in got] for got in takes] == [[0, 1, 2, 3], [4, 5], [6, 7], [8, 9]]
    q.put(10)
    takes.append(link.receive_many(16, share=5))
    assert [d.item for d in takes[-1]] == [10]  # at least one
    assert link.receive_many(16, share=2) == []
    if reliable:
        for got in takes:
            for d in got:
                d.ack()
    assert q.statistics().consumed_messages == 11
    assert_invariants(r, q)


@pytest.mark.parametrize(("cls", "expected"), [(pressure.LifoQueue, [4, 3]),
                                               (pressure.PriorityQueue, [0, 1])])
def test_receive_more_follows_the_queue_order(url: str, prefix: str, cls: Any, expected: list[int]) -> None:
    q = cls("many", url=url, prefix=prefix)
    for i in range(5):
        q.put(i)
    assert [d.item for d in internal(q).receive_many(2)] == expected
    q.disconnect()


def test_receive_more_in_reliable_mode_keeps_each_in_flight_until_acked(make_queue: Any) -> None:
    q = make_queue("many-rel", reliable=True)
    for i in range(3):
        q.put(i)
    got = internal(q).receive_many(3)
    assert sorted(f.id for f in q.in_flight()) == sorted(d.id for d in got)
    got[1].ack()
    assert len(q.in_flight()) == 2
    got[0].release()
    assert q.get_nowait() == 0  # released to the head


def test_a_default_mode_get_after_receive_more_acknowledges_them_all(make_queue: Any) -> None:
    q = make_queue("many-default")
    for i in range(3):
        q.put(i)
    assert len(internal(q).receive_many(3)) == 3
    with pytest.raises(pressure.Empty):
        q.get_nowait()  # the next get drops what the last one received
    assert q.in_flight() == []


def test_pipeline_runs_several_scripts_in_one_round_trip(make_queue: Any) -> None:
    q = make_queue("pipe", reliable=True)
    q.put("a")
    d = q.receive()
    replies = internal(q).pipeline([internal(q).put_call("b"), internal(q).put_call("c"), d._ack_call()])
    assert replies[:2] == [1, 2] and replies[2] == [1, 2]  # acknowledged, counted: b and c unfinished
    assert q.in_flight() == [] and q.peek(2) == ["b", "c"]


def test_touch_keeps_a_slow_delivery_from_being_redelivered(make_queue: Any) -> None:
    q = make_queue("touch", reliable=True, visibility_timeout=1.0)
    q.put("slow")
    d = q.receive()
    for _ in range(3):  # 1.8 s in all: past the timeout, but touched every 0.6 s
        time.sleep(0.6)
        assert d.touch()
        q._roles.sweep()
    assert [f.id for f in q.in_flight()] == [d.id] and q.qsize() == 0
    time.sleep(1.2)  # untouched: the sweep requeues it
    q._roles.sweep()
    again = q.receive(timeout=5)
    assert (again.item, again.deliveries) == ("slow", 2)
    assert not d.touch()  # that delivery is over
