"""The producers' permit (:not_full) and the consumed counters across the task lifecycle.

Every script that changes how many items are queued or delayed leaves :not_full holding one
element exactly while queued plus delayed items are below the bound (README, "The bound";
tests/helpers.py assert_invariants): a kick, and an item let into the queue from behind its
utube key by whatever ended its key's current one. And :stats:consumed_* count the items got:
an item that expires (dropped or dead-lettered) was never got, and a kick that brings it back
takes nothing from them.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

import pressure

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
