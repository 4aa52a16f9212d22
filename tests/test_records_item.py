"""``pressure.Delivery``, ``pressure.DeadLetter`` and ``pressure.InFlight`` are exported, and a
listed record's ``.item`` is its payload read as ``get()`` reads it (verified first with an
authkey), lazily: a payload that does not decode fails on ``.item`` only, never the listing."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import redis

import pressure
from pressure import queue as pressure_queue

KEY = b"k" * 32


def test_the_records_are_exported() -> None:
    for name in ("Delivery", "DeadLetter", "InFlight"):
        assert name in pressure.__all__
        assert getattr(pressure, name) is getattr(pressure_queue, name)


def test_in_flight_and_dead_letters_give_their_items(make_queue: Any) -> None:
    q = make_queue("q", reliable=True, max_deliveries=1)
    q.put({"n": 1})
    q.put(("t", 2))
    d = q.receive(block=False)
    [flight] = q.in_flight()
    assert flight.item == {"n": 1} == d.item
    assert flight.task_id == d.task_id
    assert d.bury() is True
    [dead] = q.dead_letters()
    assert dead.item == {"n": 1} and dead.reason == "buried"
    # a record pickles as its data, never with the serializer it reads with
    copy = pickle.loads(pickle.dumps(dead))
    assert copy == dead
    with pytest.raises(TypeError, match="no serializer"):
        _ = copy.item


def test_a_bad_payload_fails_on_item_not_on_listing(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("q", reliable=True)
    r.lpush(q.keys.base, b"not a pickle")  # a spec client's item this handle cannot read
    with pytest.raises((pressure.DeserializationError, pressure.Empty)):  # (a batch skips it)
        q.get(block=False)  # dead-lettered at once
    q.put("fine")
    assert q.get(block=False) == "fine"
    [flight] = q.in_flight()
    assert flight.item == "fine"
    [dead] = q.dead_letters()  # the listing works
    assert dead.payload == b"not a pickle"
    with pytest.raises(pressure.DeserializationError) as info:
        _ = dead.item
    assert info.value.payload == b"not a pickle"


def test_with_an_authkey_item_is_verified_first(make_queue: Any, r: redis.Redis) -> None:
    q = make_queue("q", reliable=True, authkey=KEY)
    r.lpush(q.keys.base, pickle.dumps("forged"))  # unsigned: never unpickled
    with pytest.raises((pressure.IntegrityError, pressure.Empty)):  # (a batch skips it: Empty)
        q.get(block=False)  # dead-lettered at once
    q.put(["signed"])
    d = q.receive(block=False)
    [flight] = q.in_flight()
    assert flight.item == ["signed"] == d.item
    [dead] = q.dead_letters()
    assert dead.payload == pickle.dumps("forged")
    with pytest.raises(pressure.IntegrityError):
        _ = dead.item


def test_ordered_queues_give_their_items(url: str, prefix: str) -> None:
    q = pressure.PriorityQueue("pq", url=url, prefix=prefix, reliable=True)
    try:
        q.put((2, "b"))
        q.put((1, "a"))
        q.receive(block=False)
        assert [f.item for f in q.in_flight()] == [(1, "a")]
    finally:
        q.delete()
        q.disconnect()
