"""Every kind of call pressure makes, once each: what an ACL user must be allowed to run
(tests/test_acl.py runs it as a restricted user; README "ACL" lists the rule)."""

from __future__ import annotations

import operator
import time
from typing import Any

import pressure
from pressure.spark.log import QueueLog


def run(url: str, prefix: str) -> None:
    kw: dict[str, Any] = {"url": url, "prefix": prefix}
    for cls in (pressure.Queue, pressure.LifoQueue, pressure.PriorityQueue):
        q: pressure.Queue[Any] = cls("acl-" + cls.__name__, 4, **kw)
        q.put((1, "a"))
        q.put_many([(2, "b"), (3, "c")])
        q.get()
        q.get_nowait()
        q.task_done()
        q.task_done()
        q.put((4, "d"))
        q.get_many(5)
        q.task_done()
        q.task_done()
        try:
            q.get(timeout=0.2)  # blocks: registers as the waiter, BLMOVE
        except pressure.Empty:
            pass
        q.join()
        for call in (q.qsize, q.empty, q.full, q.statistics, q.repair, lambda: q.peek(1)):
            call()
        q.maxsize = 5
        q.close()
        q.delete()
    r: pressure.Queue[str] = pressure.Queue("acl-reliable", 4, reliable=True, visibility_timeout=1.0, **kw)
    r.put_many(["x", "y", "z"])
    d = r.receive()
    d.touch()
    d.release()
    r.get()
    r.task_done()
    for d in (r.receive(), r.receive()):
        d.ack()
    for call in (r.in_flight, r.dead_letters, r.kick, r.purge_dead):
        call()
    r.put("logged")
    log = QueueLog("acl-reliable", "g", **kw)
    tail = log.take(5)
    list(log.read(0, tail))
    log.commit(tail)
    # the task lifecycle: delayed put with ttl and ttr, release with a delay, bury, expiry
    r.put("later", delay=0.01, ttl=60, ttr=30)
    time.sleep(0.05)
    e = r.receive(timeout=5)
    e.release(delay=0.01)
    time.sleep(0.05)
    r.receive(timeout=5).bury()
    r.put("gone", ttl=0.001)
    time.sleep(0.05)
    try:
        r.get_many(5, timeout=0.2)  # "gone" expires on the way
    except pressure.Empty:
        pass
    r.statistics()
    r.delete()
    with pressure.Executor("acl-executor", max_workers=1, **kw) as ex:
        assert list(ex.map(operator.neg, [1, 2])) == [-1, -2]
        ex.statistics()
    anon: pressure.Queue[int] = pressure.Queue(**kw)  # an anonymous queue (hash-tagged name)
    anon.put(1)
    anon.get()
    anon.delete()

