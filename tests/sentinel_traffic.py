"""A producer and a reliable consumer through a Sentinel failover (tests/test_sentinel_failover.py):
what was acknowledged, got, lost and duplicated, and the longest stall of each."""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pressure


@dataclass
class Traffic:
    acked: set[int] = field(default_factory=set)       # puts that returned
    unsure: set[int] = field(default_factory=set)      # puts that raised (then put again)
    got: collections.Counter[int] = field(default_factory=collections.Counter)
    unsure_acks: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    put_stall: float = 0.0
    get_stall: float = 0.0

    def lost(self) -> set[int]:
        return self.acked - set(self.got)

    def duplicated(self) -> dict[int, int]:
        return {item: n for item, n in self.got.items() if n > 1}

    def summary(self) -> str:
        return (f"acked {len(self.acked)}, got {len(self.got)}, lost {len(self.lost())}, "
                f"duplicated {len(self.duplicated())}, unsure puts {len(self.unsure)}, unsure acks "
                f"{self.unsure_acks}, stalls put {self.put_stall:.2f} s / get {self.get_stall:.2f} s, "
                f"errors {dict(self.errors)}")


def run(make_queue: Any, event: Any, *, before: float = 1.0, after: float = 3.0,
        producer_pause: float = 0.001, consumer_pause: float = 0.0) -> Traffic:
    """Run a producer and a consumer (each its own handle from ``make_queue()``), call
    ``event()`` after ``before`` seconds, go on ``after`` seconds once it returns, then stop
    the producer and drain the queue."""
    t = Traffic()
    stop_producing = threading.Event()
    produced_all = threading.Event()

    def produce() -> None:
        q = make_queue()
        last = time.monotonic()
        i = 0
        while not stop_producing.is_set():
            try:
                q.put(i, timeout=5)
            except pressure.PressureError as exc:
                t.errors[type(exc).__name__] += 1
                t.unsure.add(i)
                time.sleep(0.01)
                continue  # put the same item again
            now = time.monotonic()
            t.put_stall = max(t.put_stall, now - last)
            last = now
            t.acked.add(i)
            i += 1
            time.sleep(producer_pause)
        produced_all.set()
        q.disconnect()

    def consume() -> None:
        q = make_queue()
        last = time.monotonic()
        quiet_since = None
        while True:
            try:
                item = q.get(timeout=0.5)
            except pressure.Empty:
                if produced_all.is_set():
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > 3:  # visibility timeouts have passed
                        break
                continue
            except pressure.PressureError as exc:
                t.errors["get " + type(exc).__name__] += 1
                time.sleep(0.01)
                continue
            quiet_since = None
            now = time.monotonic()
            t.get_stall = max(t.get_stall, now - last)
            last = now
            t.got[item] += 1
            if consumer_pause:
                time.sleep(consumer_pause)
            try:
                q.task_done()
            except (pressure.PressureError, ValueError) as exc:
                t.errors["ack " + type(exc).__name__] += 1
                t.unsure_acks += 1
                for shard in getattr(q, "_queues", (q,)):  # a ShardedQueue's shards too
                    shard._consumer.unacked.clear()  # redelivered after the visibility timeout
                getattr(q, "_gotten", []).clear()
        q.disconnect()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    time.sleep(before)
    event()
    time.sleep(after)
    stop_producing.set()
    for thread in threads:
        thread.join(120)
    return t
