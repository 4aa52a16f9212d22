"""Memory: a million 100-B items queued with put_many cost Redis a bounded number of bytes
each, and draining them with get_many(1000) does not grow the consumer's memory."""

from __future__ import annotations

import gc
from typing import Any

import psutil
import pytest
import redis

from pressure.bench import batch as bench_batch

ITEMS = 1_000_000
SIZE = 100
#: Redis bytes per queued 100-B item allowed (the payload, its list entry and pressure's framing).
MAX_BYTES_PER_ITEM = 250
#: RSS growth allowed over the drain, measured after the first batches.
MAX_RSS_GROWTH = 30 << 20
WARM_BATCHES = 20


@pytest.mark.slow
def test_a_million_queued_items_cost_bounded_memory_and_drain_flat(make_queue: Any,
                                                                  r: redis.Redis) -> None:
    """Redis memory per queued item stays under MAX_BYTES_PER_ITEM (so the framing is not
    bloated), every item comes back (the count proves nothing was lost), and the
    consumer's RSS after the first batches grows by less than MAX_RSS_GROWTH (so drained
    items are not retained, e.g. in an ack or in-flight list)."""
    q = make_queue("memory", serializer="bytes")
    before = bench_batch.used_memory(r)
    bench_batch.fill(q, ITEMS, bytes(SIZE))
    per_item = (bench_batch.used_memory(r) - before) / ITEMS
    print(f"\nRedis memory per queued {SIZE}-B item: {per_item:.1f} bytes")
    assert SIZE <= per_item < MAX_BYTES_PER_ITEM
    assert q.qsize() == ITEMS

    process, drained, baseline, peak = psutil.Process(), 0, 0, 0
    while drained < ITEMS:
        batch = q.get_many(1000, timeout=10)
        drained += len(batch)
        if len(batch[-1]) != SIZE:
            raise AssertionError(f"got a {len(batch[-1])}-byte item")
        del batch
        if drained == WARM_BATCHES * 1000:
            gc.collect()
            baseline = process.memory_info().rss
        elif drained % 50_000 == 0:
            peak = max(peak, process.memory_info().rss)
    growth = peak - baseline
    print(f"client RSS growth over the drain: {growth / 1e6:.1f} MB")
    assert drained == ITEMS and q.qsize() == 0 and r.llen(q.keys.base) == 0
    assert peak and growth < MAX_RSS_GROWTH  # peak: the drain was sampled
    q.delete()
