"""A worker's claims on the tasks it received (claim.lua, cancel.lua, settle.lua and
``pressure/executor/_claims.py``): tasks received together are claimed together, in one
round trip, the first counted as it starts and the others held to start next (no longer
cancellable while the worker holds them, as a task in ProcessPoolExecutor's call queue),
each counted as it starts by a HINCRBY sent without waiting for its reply. A task a worker
only held is never counted; one it started is counted even if it kills the worker."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure._scripts import CANCEL, CLAIM, COUNT_START, SETTLE, STARTED, CancelStatus, ClaimStatus
from pressure.config import ConnectionConfig
from pressure.connection import Backend
from pressure.executor import worker
from pressure.executor.worker import WorkerConfig
from pressure.keys import ExecutorKeys, QueueKeys
from tests import executor_tasks as tasks
from tests.test_executor import SOON, gate, make_executor, wait_for  # noqa: F401 - fixtures
from tests.test_executor_reliability import queued

A, B = "host|1#a", "host|2#b"  # two workers' consumer ids


class Claims:
    """claim.lua, cancel.lua and settle.lua called as a worker calls them, on keys of their own."""

    def __init__(self, url: str, prefix: str, r: redis.Redis) -> None:
        self.backend = Backend(ConnectionConfig.resolve(url))
        self.keys = ExecutorKeys.build(prefix, "claims")
        self.queue = QueueKeys.build(prefix, self.keys.tasks)
        self.r = r

    def submit(self, *task_ids: str) -> None:
        for task_id in task_ids:
            self.r.hset(self.keys.claims, task_id, "q")

    def hold(self, consumer: str, *deliveries: int) -> None:
        """``consumer``'s in-flight list holds exactly these deliveries."""
        self.r.delete(self.queue.inflight(consumer))
        for seq in deliveries:
            self.r.rpush(self.queue.inflight(consumer), f"{seq}:1:0:item")

    def claim(self, consumer: str, *tasks: tuple[int, str, int]) -> list[int]:
        """claim.lua for ``tasks`` (delivery, task id, max attempts): the first starts now."""
        args: list[Any] = [consumer, self.queue.inflight_prefix]
        for t in tasks:
            args += t
        keys = CLAIM.keys(self.keys, self.queue.inflight(consumer))
        return [int(d) for d in CLAIM.call(self.backend, keys, tuple(args))]

    def cancel(self, task_id: str) -> int:
        return int(CANCEL.call(self.backend, CANCEL.keys(self.keys), (task_id, self.queue.inflight_prefix)))

    def settle(self, consumer: str, delivery: int, task_id: str) -> int:
        keys = SETTLE.keys(self.keys, self.queue.inflight(consumer), self.queue)
        return int(SETTLE.call(self.backend, keys, (consumer, delivery, task_id)))

    def count_start(self, task_id: str) -> int:
        return int(COUNT_START.call(self.backend, COUNT_START.keys(self.keys), (task_id,)))

    def mark(self, task_id: str) -> str | None:
        value = self.r.hget(self.keys.claims, task_id)
        return None if value is None else value.decode()

    def started(self, task_id: str) -> int | None:
        value = self.r.hget(self.keys.claims, task_id + STARTED)
        return None if value is None else int(value)

    def counter(self, key: str) -> int:
        return int(self.r.get(key) or 0)


@pytest.fixture
def claims(url: str, prefix: str, r: redis.Redis) -> Iterator[Claims]:
    c = Claims(url, prefix, r)
    yield c
    c.backend.disconnect()


# -- claim.lua, cancel.lua, settle.lua --------------------------------------------------------


def test_a_batch_counts_its_first_task_and_holds_the_others_uncounted(claims: Claims) -> None:
    claims.submit("t1", "t2", "t3")
    claims.hold(A, 1, 2, 3)
    assert claims.claim(A, (1, "t1", 3), (2, "t2", 3), (3, "t3", 3)) == [1, 1, 1]
    assert [claims.mark(t) for t in ("t1", "t2", "t3")] == [f"run:1:{A}:1", f"pre:0:{A}:2", f"pre:0:{A}:3"]
    # asked again (a lost reply): the same answers, nothing counted twice
    assert claims.claim(A, (1, "t1", 3), (2, "t2", 3), (3, "t3", 3)) == [1, 1, 1]
    assert claims.mark("t2") == f"pre:0:{A}:2" and claims.counter(claims.keys.retried) == 0
    # a task held to start next is not cancellable while its worker holds it
    assert claims.cancel("t2") == CancelStatus.STARTED
    # claimed on its own (a posted count that could not be sent): it starts now, counted
    assert claims.claim(A, (2, "t2", 3)) == [1]
    assert claims.mark("t2") == f"run:1:{A}:2"


def test_a_start_counted_by_its_worker_is_folded_in_by_the_next_claim(claims: Claims) -> None:
    """A started t2 (its HINCRBY) and died; t3 it only held. B's claim counts t2's start (a
    retry: the second start) and not t3's."""
    claims.submit("t1", "t2", "t3")
    claims.hold(A, 1, 2, 3)
    claims.claim(A, (1, "t1", 3), (2, "t2", 3), (3, "t3", 3))
    claims.r.hincrby(claims.keys.claims, "t2" + STARTED, 1)
    assert claims.claim(A, (2, "t2", 3)) == [1]  # asked again by A: started already, not counted again
    claims.hold(A)  # A died: its deliveries went back to the queue
    claims.hold(B, 7, 8)
    assert claims.claim(B, (7, "t2", 3), (8, "t3", 3)) == [2, 1]
    assert claims.mark("t2") == f"run:2:{B}:7" and claims.started("t2") is None
    assert claims.mark("t3") == f"pre:0:{B}:8"
    assert claims.counter(claims.keys.retried) == 1


def test_a_start_counted_by_its_worker_reaches_max_attempts(claims: Claims) -> None:
    claims.submit("t1", "t2")
    claims.hold(A, 1, 2)
    claims.claim(A, (1, "t1", 1), (2, "t2", 1))
    claims.r.hincrby(claims.keys.claims, "t2" + STARTED, 1)
    claims.hold(A)
    claims.hold(B, 7, 8)
    # t1 started once (max 1): given up; t2 started once by A's count: given up too
    assert claims.claim(B, (7, "t1", 1), (8, "t2", 1)) == [ClaimStatus.GIVE_UP, ClaimStatus.GIVE_UP]
    assert claims.counter(claims.keys.lost) == 2 and claims.started("t2") is None


def test_a_task_held_to_start_next_cancels_once_given_back_unless_started(claims: Claims) -> None:
    claims.submit("t1", "t2", "t3")
    claims.hold(A, 1, 2, 3)
    claims.claim(A, (1, "t1", 3), (2, "t2", 3), (3, "t3", 3))
    claims.r.hincrby(claims.keys.claims, "t3" + STARTED, 1)
    assert claims.cancel("t1") == CancelStatus.STARTED
    assert claims.cancel("t2") == CancelStatus.STARTED
    claims.hold(A, 1, 3)  # t2 given back to the queue (A stopped, or ran a long task)
    assert claims.cancel("t2") == CancelStatus.CANCELLED
    assert claims.mark("t2") == "cancel"
    claims.hold(A)  # t3 started, and A died: started, so not cancellable
    assert claims.cancel("t3") == CancelStatus.STARTED
    # the cancelled task reaches another worker: dropped, never run
    claims.hold(B, 9)
    assert claims.claim(B, (9, "t2", 3)) == [ClaimStatus.CANCELLED]


def test_settling_removes_the_mark_and_its_count(claims: Claims) -> None:
    claims.submit("t1", "t2")
    claims.hold(A, 1, 2)
    claims.claim(A, (1, "t1", 3), (2, "t2", 3))
    claims.r.hincrby(claims.keys.claims, "t2" + STARTED, 1)
    assert claims.settle(A, 2, "t2") == 1
    assert claims.mark("t2") is None and claims.started("t2") is None
    assert claims.r.hkeys(claims.keys.claims) == [b"t1"]


def test_a_count_that_reaches_the_server_after_its_task_finished_leaves_nothing(claims: Claims) -> None:
    """A's count of a start reaches the server after the task was settled: sent on A's main
    connection while its heartbeat thread settled the task on its own (A went on to a long
    task), or for a copy B had run and settled after A's visibility timeout passed. It counts
    nothing (a plain HINCRBY left '<task id>:started' in the claims hash for ever)."""
    claims.submit("t1", "t2")
    claims.hold(A, 1, 2)
    assert claims.claim(A, (1, "t1", 3), (2, "t2", 3)) == [1, 1]
    assert claims.count_start("t2") == 1  # counted while marked
    assert claims.settle(A, 2, "t2") == 1 and claims.mark("t2") is None and claims.started("t2") is None
    assert claims.count_start("t2") == 0  # a count arriving late: nothing
    claims.submit("t3")
    claims.hold(A, 1, 3)
    assert claims.claim(A, (1, "t1", 3), (3, "t3", 3)) == [1, 1]  # t1 asked again; t3 held next
    claims.hold(A, 1)  # t3's delivery taken back from A
    claims.hold(B, 7)
    assert claims.claim(B, (7, "t3", 3)) == [1]
    assert claims.settle(B, 7, "t3") == 1
    assert claims.count_start("t3") == 0  # A starts its copy: B has run and settled it
    claims.r.hincrby(claims.keys.claims, "t3" + STARTED, 1)  # as an older worker's plain count
    assert claims.settle(A, 3, "t3") == 0  # not A's to acknowledge any more; the count goes
    assert claims.settle(A, 1, "t1") == 1
    assert claims.r.hgetall(claims.keys.claims) == {}


# -- the worker -------------------------------------------------------------------------------


@pytest.fixture
def make_worker(url: str, prefix: str) -> Iterator[Callable[[str], worker._Worker]]:
    made: list[worker._Worker] = []

    def make(name: str) -> worker._Worker:
        w = worker._Worker(WorkerConfig(name, ConnectionConfig.resolve(url), prefix, 30.0), lambda: False)
        w.short = True  # as after a short task: it takes what is queued, up to prefetch
        made.append(w)
        return w

    yield make
    for w in made:
        w.backend.disconnect()


def test_tasks_a_worker_holds_to_start_next_cancel_only_once_given_back(
        make_executor: Callable[..., pressure.Executor], make_worker: Callable[[str], worker._Worker],
        prefix: str, r: redis.Redis) -> None:
    ex = make_executor("ahead", local_workers=False)
    futures = [ex.submit(tasks.square, i) for i in range(4)]
    wait_for(lambda: queued(r, prefix, "ahead"), lambda n: n == 4)
    w = make_worker("ahead")
    w.fetch()
    assert len(w.held) == 4
    step = w.claim_next()  # the first starts: the others are claimed with it, in the same call
    assert step is not None and step[1] == 1
    # held to start next: running, as a task in ProcessPoolExecutor's call queue is
    assert futures[3].cancel() is False and futures[3].running()
    second = w.claim_next()  # started: counted, without a round trip of its own
    assert second is not None and second[1] == 1
    w.backend.flush()
    assert r.hget(ExecutorKeys.build(prefix, "ahead").claims, futures[1]._task_id + STARTED) == b"1"
    held = list(w.held)
    w.held.clear()
    w.claimed.clear()
    w.give_back(held)  # as when the worker stops: not held by a worker, it cancels again
    assert futures[2].cancel() is True
    for delivery, decision in (step, second):
        w.done.append((delivery, w.run(delivery, decision)))
    w.finish()
    assert [futures[0].result(timeout=SOON), futures[1].result(timeout=SOON)] == [0, 1]
    w2 = make_worker("ahead")  # the given-back tasks: one runs, the cancelled one is dropped
    w2.fetch()
    while (step := w2.claim_next()) is not None:
        w2.done.append((step[0], w2.run(*step)))
    w2.finish()
    assert futures[3].result(timeout=SOON) == 9 and futures[2].cancelled()
    wait_for(lambda: r.hlen(ExecutorKeys.build(prefix, "ahead").claims), lambda n: n == 0)


def test_replies_settlement_and_the_next_get_share_one_round_trip(
        make_executor: Callable[..., pressure.Executor], make_worker: Callable[[str], worker._Worker],
        prefix: str, r: redis.Redis) -> None:
    """After a batch of short tasks, the worker sends their replies, settles them and takes
    the next batch in one round trip (one pipeline), not two."""
    ex = make_executor("trips", local_workers=False)
    futures = [ex.submit(tasks.square, i) for i in range(3)]
    wait_for(lambda: queued(r, prefix, "trips"), lambda n: n == 3)
    w = make_worker("trips")
    w.fetch()
    while (step := w.claim_next()) is not None:
        w.done.append((step[0], w.run(*step)))
    later = [ex.submit(tasks.square, i) for i in range(3, 5)]
    wait_for(lambda: queued(r, prefix, "trips"), lambda n: n == 2)
    sent: list[int] = []
    pipeline = w.backend.pipeline

    def counting(calls: Any, **kw: Any) -> list[Any]:
        sent.append(len(calls))
        return pipeline(calls, **kw)

    w.backend.pipeline = counting  # type: ignore[method-assign]
    done, w.done = w.done, []
    w.fetch(done)
    assert sent == [3]  # the replies' put, the settlement, the get
    assert len(w.held) == 2
    assert [f.result(timeout=SOON) for f in futures] == [0, 1, 4]
    while (step := w.claim_next()) is not None:
        w.done.append((step[0], w.run(*step)))
    w.finish()
    assert [f.result(timeout=SOON) for f in later] == [9, 16]


_KILLED_AFTER_POSTING = textwrap.dedent("""
    import os, signal, sys
    from pressure.config import ConnectionConfig
    from pressure.connection import Backend, pack_command
    backend = Backend(ConnectionConfig.resolve(sys.argv[1]))
    backend.post(pack_command("SET", sys.argv[2], "warm"))
    backend.flush()  # connected, and no reply left unread on the connection
    backend.post(pack_command("HINCRBY", sys.argv[2] + ":count", "starts", 1))
    os.kill(os.getpid(), signal.SIGKILL)  # as a task that kills its worker, right after
""")


def test_a_count_posted_just_before_the_process_is_killed_reaches_redis(url: str, prefix: str,
                                                                        r: redis.Redis) -> None:
    """A posted command (held by the kernel until the next one, MSG_MORE) is sent as the
    killed process's socket closes: the start of a task that kills its worker is counted."""
    key = f"{prefix}:killed"
    for i in range(1, 21):
        proc = subprocess.run([sys.executable, "-c", _KILLED_AFTER_POSTING, url, key], check=False, timeout=60)
        assert proc.returncode == -9
        wait_for(lambda: int(r.hget(key + ":count", "starts") or 0), lambda n, i=i: n == i)


def test_a_reply_is_never_sent_without_its_settlement(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis) -> None:
    """The connection breaks in the middle of the worker's write, after its reply's put and
    before its settlement (settle.lua), and the worker dies there (it never tries again).
    Both go in one transaction, so neither ran: the task comes back (visibility timeout),
    runs again, and once the executor is shut down no claim mark is left. (When the put ran
    alone, the future completed from that reply, shutdown() returned, and the task's mark
    and its delivery stayed in Redis for ever.)"""
    from pressure._packing import _script_sha
    from tests.reply_proxy import ReplyDropper

    ex = make_executor("cut", local_workers=False)
    future = ex.submit(tasks.square, 3)
    wait_for(lambda: queued(r, prefix, "cut"), lambda n: n == 1)
    proxy = ReplyDropper(int(url.rsplit(":", 1)[1].split("/")[0]))
    dying = worker._Worker(WorkerConfig("cut", ConnectionConfig.resolve(proxy.url), prefix, 1.0), lambda: False)
    try:
        dying.fetch()
        step = dying.claim_next()
        assert step is not None and step[1] == 1
        dying.done.append((step[0], dying.run(*step)))
        proxy.cut_before(_script_sha("settle").encode())
        with pytest.raises(pressure.BackendError):
            dying.finish()
        assert proxy.dropped.is_set()
    finally:
        dying.backend.disconnect()  # dead: its delivery waits out the visibility timeout
        proxy.close()
    claims = ExecutorKeys.build(prefix, "cut").claims
    assert not future.done() and r.hlen(claims) == 1  # neither the reply nor the settlement
    after = worker._Worker(WorkerConfig("cut", ConnectionConfig.resolve(url), prefix, 30.0), lambda: False)
    try:
        while not future.done():
            with contextlib.suppress(pressure.Empty):
                after.fetch()  # the dead worker's delivery comes back once its visibility timeout passes
            while (step := after.claim_next()) is not None:
                after.done.append((step[0], after.run(*step)))
            after.finish()
        assert future.result(timeout=SOON) == 9
    finally:
        after.backend.disconnect()
    ex.shutdown(wait=True)
    assert r.hgetall(claims) == {}


def test_a_worker_takes_no_more_than_its_share_of_the_short_tasks_queued_among_the_workers_alive(
        make_executor: Callable[..., pressure.Executor], make_worker: Callable[[str], worker._Worker],
        prefix: str, r: redis.Redis) -> None:
    # a map's 8 chunks, short tasks: the first worker to ask must not take the 7 left while the
    # other worker idles (ceil(queued / workers alive) at most, as their heartbeats count them)
    ex = make_executor("share", local_workers=False)
    futures = [ex.submit(tasks.square, i) for i in range(8)]
    wait_for(lambda: queued(r, prefix, "share"), lambda n: n == 8)
    first, second = make_worker("share"), make_worker("share")
    assert first.alive == 1  # not counted yet: the heartbeat counts
    first.beat(first.backend.client())
    assert first.alive == 1  # the only one recorded alive
    second.beat(second.backend.client())
    first.beat(first.backend.client())
    assert (first.alive, second.alive) == (2, 2)
    first.fetch()
    assert len(first.held) == 4  # ceil(8 / 2)
    second.fetch()
    assert len(second.held) == 2  # ceil(4 / 2)
    first.fetch()  # a worker whose own held tasks wait takes its share of the rest too
    assert len(first.held) == 5  # ceil(2 / 2) more
    for w in (first, second, first):
        while (step := w.claim_next()) is not None:
            w.done.append((step[0], w.run(*step)))
        w.finish()
        with contextlib.suppress(pressure.Empty):
            w.fetch()  # the last one
    assert [f.result(timeout=SOON) for f in futures] == [i * i for i in range(8)]
    r.hdel(ExecutorKeys.build(prefix, "share").workers, first.id, second.id)
    ex.shutdown(wait=True)


def test_a_worker_counts_the_workers_its_pool_starts_with_it_alive_until_a_beat_counts_them(
        make_executor: Callable[..., pressure.Executor], url: str, prefix: str, r: redis.Redis) -> None:
    # a pool's first map, right after it starts: its workers' first beats come after their first
    # tasks, each counting only itself maybe; their share counts the siblings until all are heard
    ex = make_executor("siblings", local_workers=False)
    where = WorkerConfig("siblings", ConnectionConfig.resolve(url), prefix, 30.0)
    first = worker._Worker(where, lambda: False, siblings=2)
    second = worker._Worker(where, lambda: False)
    try:
        assert (first.alive, second.alive) == (2, 1)
        first.beat(first.backend.client())
        assert first.alive == 2  # only itself heard from: its sibling still counted
        second.beat(second.backend.client())
        first.beat(first.backend.client())
        assert (first.alive, second.alive, first.siblings) == (2, 2, 1)  # both heard: the count from now on
        r.hdel(ExecutorKeys.build(prefix, "siblings").workers, second.id)  # gone (or not heard for ALIVE_FOR)
        first.beat(first.backend.client())
        assert first.alive == 1
    finally:
        r.hdel(ExecutorKeys.build(prefix, "siblings").workers, first.id, second.id)
        first.backend.disconnect()
        second.backend.disconnect()
    ex.shutdown(wait=True)
