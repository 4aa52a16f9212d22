"""Replies lost on a broken connection (the command ran, its reply never came): counting
stays exact. A proxy in front of a private server drops the reply of a chosen command
(tests/reply_proxy.py), as a connection killed at that moment would."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import pressure
import pressure.reliable
from pressure.connection import _script_sha
from pressure.testing import RedisServer

from .helpers import assert_invariants, blocks
from .reply_proxy import ReplyDropper


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[ReplyDropper]:
    p = ReplyDropper(redis_server.port)
    yield p
    p.close()


def _sha(script: str) -> bytes:
    return _script_sha(script).encode()


def _in_flight(q: pressure.Queue[Any]) -> list[Any]:
    return [pickle.loads(f.payload) for f in q.in_flight()]


def _warm_up(q: pressure.Queue[Any]) -> None:
    """Load the scripts on the server: the first EVALSHA of a script gets NOSCRIPT, and a
    reply dropped then would be that refusal's, not the reply of a command that ran."""
    q.put("warm-up")
    assert q.get_many(2, timeout=5) == ["warm-up"]
    q.task_done()
    assert q.unfinished_tasks == 0


def _consume_in_thread(q: pressure.Queue[Any], r: redis.Redis,
                       *steps: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``steps`` one after the other in a thread (their results, and the exception that
    stopped them, end up in the returned list) and return once the thread's consumer waits
    on the empty queue."""
    got: list[Any] = []

    def consume() -> None:
        try:
            for step in steps:
                got.append(step())
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            got.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    deadline = time.monotonic() + 10
    while r.get(q.keys.waiter) is None:
        assert time.monotonic() < deadline, "the consumer never waited"
        time.sleep(0.01)
    return t, got


@pytest.fixture(params=["posted", "waited"])
def ack_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """task_done() as it is (its acknowledgement posted, the reply read with the next command),
    or waiting for the reply, as with ``durability=`` or a delivery in doubt."""
    if request.param == "waited":
        monkeypatch.setattr(pressure.reliable.Reliability, "_can_post", lambda self, delivery: False)
    return str(request.param)


def test_task_done_whose_reply_is_lost_counts_once(proxy: ReplyDropper, prefix: str, r: redis.Redis,
                                                   ack_mode: str) -> None:
    q: pressure.Queue[str] = pressure.Queue("lost-ack", url=proxy.url, prefix=prefix, reliable=True)
    _warm_up(q)
    q.put("a")
    q.put("b")
    assert [q.get(), q.get()] == ["a", "b"]
    proxy.arm(_sha("ack"))
    try:
        q.task_done()  # acknowledges "a": it runs, its reply is lost
    except pressure.OutcomeUnknown:
        q.task_done()  # may or may not have run: calling it again must count "a" once
    # posted: the reply is lost as the next call reads it, which sends "a"'s acknowledgement
    # again in the exact form
    assert q.unfinished_tasks == 1, "a lost reply counted a task twice"
    assert proxy.dropped.is_set()
    assert _in_flight(q) == ["b"]
    blocks(q.join, q.task_done)  # join() waits for "b"
    assert q.unfinished_tasks == 0 and _in_flight(q) == []
    with pytest.raises(ValueError, match="task_done"):
        q.task_done()
    assert_invariants(r, q)
    q.disconnect()


def test_async_task_done_whose_reply_is_lost_asks_again_and_counts_once(
        proxy: ReplyDropper, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """AsyncQueue, reliable: a task_done() that waits for its reply (not posted: while a get
    uses the handle's connection, or for a delivery in doubt; forced here), whose
    acknowledgement ran but whose reply was lost (the connection dropped), asks again at once,
    in the form that counts only if the first did not run, and returns: counted once. (It
    raised UnboundLocalError instead.) The posted way: tests/test_aio_posted_ack.py."""
    from pressure.aio import AsyncQueue
    from pressure.aio._reliable import _Settling

    monkeypatch.setattr(_Settling, "_post_ack", lambda self, delivery: False)

    async def main() -> None:
        async with AsyncQueue[str]("lost-async-ack", url=proxy.url, prefix=prefix, reliable=True) as q:
            await q.put_many(["warm-up", "a", "b"])
            assert await q.get() == "warm-up"
            await q.task_done()  # the scripts are loaded: the dropped reply is the ack's own
            assert [await q.get(), await q.get()] == ["a", "b"]
            proxy.arm(_sha("ack"))
            await q.task_done()  # acknowledges "a": it runs, its reply is lost, asked again
            assert proxy.dropped.is_set()
            sync = pressure.Queue("lost-async-ack", url=proxy.url, prefix=prefix, reliable=True)
            try:
                assert sync.unfinished_tasks == 1, "a lost reply counted a task twice"
                assert _in_flight(sync) == ["b"]
            finally:
                sync.disconnect()
            await q.task_done()
            await q.join()
            with pytest.raises(ValueError, match="task_done"):
                await q.task_done()

    import asyncio
    asyncio.run(main())
    assert_invariants(r, pressure.Queue("lost-async-ack", url=proxy.url, prefix=prefix))


def test_task_done_again_after_outcome_unknown_counts_once(proxy: ReplyDropper, prefix: str,
                                                           r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply is lost and the server stays unreachable a moment: task_done() raises
    OutcomeUnknown; called again once Redis is back, it counts the task at most once. (When
    task_done() waits for its reply: with ``durability=``, or for a delivery in doubt.)"""
    monkeypatch.setattr(pressure.reliable.Reliability, "_can_post", lambda self, delivery: False)
    q: pressure.Queue[str] = pressure.Queue("lost-ack-2", url=proxy.url, prefix=prefix, reliable=True)
    _warm_up(q)
    q.put("a")
    q.put("b")
    assert [q.get(), q.get()] == ["a", "b"]
    proxy.arm(_sha("ack"), refuse_after=True)
    with pytest.raises(pressure.OutcomeUnknown):
        q.task_done()
    assert proxy.dropped.is_set()
    proxy.refuse = False
    q.task_done()  # "a" again: its first acknowledgement ran, so this one counts nothing
    assert q.unfinished_tasks == 1, "task_done() after OutcomeUnknown counted a task twice"
    assert _in_flight(q) == ["b"]
    q.task_done()
    assert q.unfinished_tasks == 0 and _in_flight(q) == []
    assert_invariants(r, q)
    q.disconnect()


def test_posted_task_done_whose_reply_is_lost_while_redis_is_away_counts_once(
        proxy: ReplyDropper, prefix: str, r: redis.Redis) -> None:
    """The posted acknowledgement runs, its reply is lost and the server stays unreachable a
    moment: the next call raises (sending it again is refused) and keeps it owed; once Redis
    is back, the call after sends it again, counting nothing twice."""
    q: pressure.Queue[str] = pressure.Queue("lost-ack-3", url=proxy.url, prefix=prefix, reliable=True)
    _warm_up(q)
    q.put("a")
    q.put("b")
    assert [q.get(), q.get()] == ["a", "b"]
    proxy.arm(_sha("ack"), refuse_after=True)
    q.task_done()  # posted: nothing waits for it
    with pytest.raises(pressure.BackendError):
        q.unfinished_tasks  # noqa: B018 - reads the lost reply; sending "a"'s again is refused
    assert proxy.dropped.is_set()
    proxy.refuse = False
    assert q.unfinished_tasks == 1, "a lost posted acknowledgement counted a task twice"
    assert _in_flight(q) == ["b"]
    q.task_done()
    assert q.unfinished_tasks == 0 and _in_flight(q) == []
    assert_invariants(r, q)
    q.disconnect()


def test_task_done_whose_first_send_never_ran_counts_once(proxy: ReplyDropper, prefix: str,
                                                          r: redis.Redis, ack_mode: str) -> None:
    """The other half of exactness: an acknowledgement that never reached the server is
    counted by the next call (waited for: by the next task_done())."""
    q: pressure.Queue[str] = pressure.Queue("unsent-ack", url=proxy.url, prefix=prefix, reliable=True)
    _warm_up(q)  # a handle posts acknowledgements once its ack script is known loaded
    q.put("a")
    assert q.get() == "a"
    proxy.refuse = True
    q._backend.disconnect()  # the next command needs a new connection, which is refused
    if ack_mode == "waited":
        with pytest.raises(pressure.BackendError) as info:
            q.task_done()
        assert not isinstance(info.value, pressure.OutcomeUnknown)
        proxy.refuse = False
        q.task_done()
    else:
        q.task_done()  # posted: it could not be sent, so it is owed
        proxy.refuse = False
    assert q.unfinished_tasks == 0 and _in_flight(q) == []
    q.disconnect()


@pytest.mark.parametrize("reliable", [True, False], ids=["reliable", "default"])
def test_get_many_keeps_its_first_item_when_a_later_reply_is_lost(proxy: ReplyDropper, prefix: str,
                                                                  r: redis.Redis, reliable: bool) -> None:
    """get_many on an empty queue waits for one item, then takes what else is queued in a
    second round trip; if that one's reply is lost, the first item is still returned (not
    kept as received while the caller never sees it), and nothing is lost or doubled."""
    q: pressure.Queue[str] = pressure.Queue("lost-many", url=proxy.url, prefix=prefix, reliable=reliable)
    producer: pressure.Queue[str] = pressure.Queue("lost-many", url=proxy.url, prefix=prefix)
    _warm_up(q)
    t, got = _consume_in_thread(q, r, lambda: q.get_many(5, timeout=30))
    # the waiting get receives "a"; the get.lua call that takes more after it loses its reply
    proxy.arm(b"$4\r\nmany\r\n" if reliable else b"$5\r\nbatch\r\n")
    producer.put("a")
    t.join(30)
    assert proxy.dropped.is_set()
    assert got == [["a"]], f"get_many lost its first item to a later lost reply: {got}"
    producer.put("b")
    assert q.get(timeout=5) == "b"  # nothing the lost reply took is left behind or doubled
    if reliable:
        assert sorted(_in_flight(q)) == ["a", "b"]
        q.task_done()
        q.task_done()
        assert q.unfinished_tasks == 0 and _in_flight(q) == []
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    assert_invariants(r, q)
    producer.disconnect()
    q.disconnect()


@pytest.mark.parametrize("reliable", [False, True], ids=["default", "reliable"])
def test_get_many_loses_nothing_a_lost_reply_took_after_its_first_item(
        proxy: ReplyDropper, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """As above, but the lost round trip took items: they wait in the consumer's lists for its
    next get (which takes them back), and the first item's drop must not delete them."""
    q: pressure.Queue[str] = pressure.Queue("lost-more", url=proxy.url, prefix=prefix, reliable=reliable)
    producer: pressure.Queue[str] = pressure.Queue("lost-more", url=proxy.url, prefix=prefix)
    _warm_up(q)
    # one thread throughout: its consumer lists (named after the thread) hold what was taken
    t, got = _consume_in_thread(q, r, lambda: q.get_many(5, timeout=30),
                                lambda: [q.get(timeout=5), q.get(timeout=5)], q.get_nowait)
    proxy.arm(b"$4\r\nmany\r\n" if reliable else b"$5\r\nbatch\r\n")
    producer.put_many(["a", "b", "c"])  # the woken get takes "a"; the lost batch takes "b", "c"
    t.join(30)
    assert proxy.dropped.is_set()
    assert got[:2] == [["a"], ["b", "c"]], f"what the lost reply took was lost or reordered: {got}"
    assert isinstance(got[2], pressure.Empty), got
    if reliable:
        for _ in range(3):
            q.task_done()
        assert q.unfinished_tasks == 0
    assert_invariants(r, q)
    producer.disconnect()
    q.disconnect()


def test_get_whose_reply_is_lost_is_received_once(proxy: ReplyDropper, prefix: str, r: redis.Redis) -> None:
    q: pressure.Queue[str] = pressure.Queue("lost-get", url=proxy.url, prefix=prefix, reliable=True)
    _warm_up(q)
    q.put("a")
    q.put("b")
    proxy.arm(_sha("get"))
    with pytest.raises(pressure.OutcomeUnknown):
        q.get_nowait()  # "a" was delivered; the reply is lost
    assert [q.get(timeout=5), q.get(timeout=5)] == ["a", "b"]
    q.task_done()
    assert q.unfinished_tasks == 1 and _in_flight(q) == ["b"]
    q.task_done()
    assert q.unfinished_tasks == 0
    assert_invariants(r, q)
    q.disconnect()


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_working_off_a_backlog_whose_reply_is_lost_loses_nothing(
        proxy: ReplyDropper, prefix: str, r: redis.Redis, reliable: bool) -> None:
    """A blocking get after one that found its item queued sends get.lua alone ('nowait', no
    BLMOVE behind it): if its reply is lost, the item it took waits in the consumer's
    in-flight list and the next get receives it, once."""
    q: pressure.Queue[str] = pressure.Queue("lost-backlog", url=proxy.url, prefix=prefix, reliable=reliable)
    _warm_up(q)
    q.put_many(["a", "b", "c"])
    assert q.get(timeout=5) == "a"  # found queued: the next get takes the nowait path
    proxy.arm(_sha("get"))
    with pytest.raises(pressure.OutcomeUnknown):
        q.get(timeout=5)  # "b" was delivered; the reply is lost
    assert proxy.dropped.is_set()
    assert [q.get(timeout=5), q.get(timeout=5)] == ["b", "c"]
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    if reliable:
        for _ in range(3):
            q.task_done()
        assert q.unfinished_tasks == 0
    assert_invariants(r, q)
    q.disconnect()


def test_a_get_whose_connection_breaks_behind_a_posted_drop_says_so_and_loses_nothing(
        proxy: ReplyDropper, prefix: str, r: redis.Redis) -> None:
    """A default-mode get posts the drop of its lists (a DEL whose reply is read behind the
    next command's). If the connection breaks while that reply is read, the next command's
    reply is lost with it: a pressure error that says so (never a crash of redis-py's parser
    on a dropped connection), and the item that command may have taken comes back."""
    q: pressure.Queue[str] = pressure.Queue("posted", url=proxy.url, prefix=prefix)
    _warm_up(q)
    q.put_many(["a", "b"])
    assert q.get(timeout=5) == "a"  # posts the DEL of this consumer's lists
    proxy.arm(b"$3\r\nDEL\r\n")
    with pytest.raises(pressure.BackendError):
        q.get(timeout=5)  # sent behind the DEL; the connection breaks on the DEL's reply
    assert proxy.dropped.is_set()
    assert q.get(timeout=5) == "b"
    with pytest.raises(pressure.Empty):
        q.get_nowait()
    assert_invariants(r, q)
    q.disconnect()


def test_a_log_take_whose_reply_is_lost_logs_each_item_once(proxy: ReplyDropper, prefix: str,
                                                             r: redis.Redis) -> None:
    """A stream reader's take moves each 1,000 items into its log in one atomic step
    (get.lua 'log'): if the reply is lost, those items are in the log, nothing is in flight,
    and the next take goes on after them. Every item is logged once, in order."""
    from pressure.spark.log import QueueLog

    q: pressure.Queue[bytes] = pressure.Queue("lost-log", url=proxy.url, prefix=prefix, serializer="bytes")
    log = QueueLog("lost-log", "g", url=proxy.url, prefix=prefix)
    q.put(b"warm-up")
    assert log.take(1) == 1  # get.lua loaded: the reply dropped is that of a call that ran
    q.put_many([b"%d" % i for i in range(1500)])
    proxy.arm(_sha("get"))
    with pytest.raises(pressure.BackendError):
        log.take(1500)
    assert proxy.dropped.is_set()
    assert log.tail() == 1001 and q.qsize() == 500 and q.in_flight() == []
    assert log.take(1500) == 1501
    assert [e.payload for e in log.read(1, 1501)] == [b"%d" % i for i in range(1500)]
    assert q.qsize() == 0 and q.in_flight() == []
    assert_invariants(r, q)
    log.disconnect()
    q.disconnect()
