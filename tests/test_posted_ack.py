"""Reliable mode, one round trip per item: task_done() posts its acknowledgement (ack.lua)
without waiting for the reply, which comes back with the handle's next command. The
acknowledgement really runs; one that did not run (NOSCRIPT, a connection killed under it)
is sent again by the next call, counted exactly once; a consumer that dies with its
acknowledgement lost has the item redelivered, never lost; join() in another process sees
every task_done()."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest
import redis

import pressure
from tests.test_executor import SOON, wait_for


def _reliable(url: str, prefix: str, name: str = "acks", **kw: Any) -> pressure.Queue[Any]:
    return pressure.Queue(name, url=url, prefix=prefix, reliable=True, **kw)


def _warm(q: pressure.Queue[Any]) -> None:
    """One item got and acknowledged: the ack script is loaded, so the next task_done() posts."""
    q.put("warm")
    assert q.get(timeout=SOON) == "warm"
    q.task_done()


def _tasks_done(r: redis.Redis, q: pressure.Queue[Any]) -> int:
    return int(r.get(q.keys.tasks_done) or 0)


def _thread_connection_id(q: pressure.Queue[Any]) -> int:
    conn = q._backend.thread_connection()
    conn.send_command("CLIENT", "ID")
    return int(conn.read_response())


def test_task_done_waits_for_no_reply_and_the_ack_runs(url: str, prefix: str, r: redis.Redis) -> None:
    q = _reliable(url, prefix)
    _warm(q)
    for item in ("a", "b"):
        q.put(item)
    assert q.get(timeout=SOON) == "a"
    sends: list[str] = []
    reads: list[str] = []
    send, read = q._backend._send, q._backend._read

    def counting_send(conn: Any, data: list[bytes], what: str) -> None:
        sends.append(what)
        send(conn, data, what)

    def counting_read(conn: Any, what: str, mutating: bool) -> Any:
        reads.append(what)
        return read(conn, what, mutating)

    q._backend._send = counting_send  # type: ignore[method-assign]
    q._backend._read = counting_read  # type: ignore[method-assign]
    q.task_done()
    assert sends == [] and reads == []  # no round trip of its own: nothing sent, nothing read
    assert q.get(timeout=SOON) == "b"  # the acknowledgement went, and its reply came, with the get
    # (the get alone: its last one found its item queued, so this one sends get.lua alone)
    assert sends == ["script get"] and set(reads) == {"script get"}
    del q._backend._send, q._backend._read
    assert len(q.in_flight()) == 1  # only b is in flight: a's acknowledgement ran
    q.task_done()
    q.join()  # reads the last posted reply: this handle's task_done()s all count
    assert q.unfinished_tasks == 0 and _tasks_done(r, q) == 3
    assert q.in_flight() == []
    q.delete()


def test_an_ack_refused_with_noscript_is_sent_again_exactly(url: str, prefix: str, r: redis.Redis) -> None:
    q = _reliable(url, prefix)
    _warm(q)
    for item in ("a", "b"):
        q.put(item)
    assert q.get(timeout=SOON) == "a"
    r.script_flush()  # the server forgets every script; the handle believes ack.lua loaded
    q.task_done()  # posted: NOSCRIPT, it did not run
    assert q.get(timeout=SOON) == "b"
    q.task_done()  # first sends a's acknowledgement again, then posts b's
    q.join()
    assert q.unfinished_tasks == 0 and _tasks_done(r, q) == 3 and q.in_flight() == []
    q.delete()


def test_an_ack_lost_with_its_connection_is_sent_again_exactly(url: str, prefix: str, r: redis.Redis) -> None:
    q = _reliable(url, prefix)
    _warm(q)
    for item in ("a", "b"):
        q.put(item)
    assert q.get(timeout=SOON) == "a"
    r.client_kill_filter(_id=_thread_connection_id(q))
    q.task_done()  # posted on a connection the server closed: it never runs
    assert q.get(timeout=SOON) == "b"  # reconnects; a's acknowledgement is owed
    q.task_done()
    q.join()
    assert q.unfinished_tasks == 0 and _tasks_done(r, q) == 3 and q.in_flight() == []
    q.delete()


def test_a_consumer_gone_with_its_ack_lost_has_the_item_redelivered(url: str, prefix: str,
                                                                    r: redis.Redis) -> None:
    """At least once: the lost acknowledgement means a redelivery, never a loss."""
    q = _reliable(url, prefix, visibility_timeout=1.0)
    _warm(q)
    q.put("x")
    assert q.get(timeout=SOON) == "x"
    r.client_kill_filter(_id=_thread_connection_id(q))
    q.task_done()  # never runs; the handle is never used again (as if its process died)
    other = _reliable(url, prefix, visibility_timeout=1.0)
    delivery = other.receive(timeout=SOON)  # after the visibility timeout
    assert delivery.item == "x" and delivery.deliveries == 2
    delivery.ack()  # counts the task, once
    other.join()
    assert _tasks_done(r, other) == 2
    other.delete()


def _consume(url: str, prefix: str, n: int, then_sleep: float) -> None:
    q = _reliable(url, prefix)
    for _ in range(n):
        q.get(timeout=SOON)
        q.task_done()
    time.sleep(then_sleep)  # idle: no command carries the last posted acknowledgement


@pytest.mark.parametrize("then_sleep", [0.0, SOON], ids=["exits", "stays idle"])
def test_join_in_another_process_sees_every_task_done(url: str, prefix: str, then_sleep: float) -> None:
    q = _reliable(url, prefix)
    for i in range(20):
        q.put(i)
    ctx = multiprocessing.get_context()
    proc = ctx.Process(target=_consume, args=(url, prefix, 20, then_sleep))
    proc.start()
    try:
        q.join()  # returns once the consumer's last acknowledgement reached Redis
        assert q.unfinished_tasks == 0
        wait_for(lambda: q.in_flight(), lambda held: held == [])
    finally:
        proc.kill()
        proc.join()
    q.delete()


def test_an_error_a_posted_ack_replied_is_raised_by_the_next_call(url: str, prefix: str, r: redis.Redis) -> None:
    """task_done() returns before its reply; what the reply refuses (here: the queue was
    deleted under it) is raised by the handle's next call, once."""
    q = _reliable(url, prefix)
    _warm(q)  # a handle's first task_done() waits for its reply: the script is not known loaded
    q.put("a")
    assert q.get(timeout=SOON) == "a"
    other = _reliable(url, prefix)
    other.delete()
    q.task_done()  # posted: returns before the reply says the queue is gone
    with pytest.raises(pressure.QueueDoesNotExist):
        q.in_flight()
    assert q.in_flight() == []  # raised once


def test_task_done_for_many_held_deliveries_posts_each_ack_once() -> None:
    """A handle that takes many items at once and then calls task_done() for each (a batch
    reader) posts each acknowledgement once: none is refused with NOSCRIPT and sent again.
    Before, the first ack.lua call of the handle was a posted one, never loaded on
    NOSCRIPT, and every task_done() behind it was posted before a reply was read: all of
    them were refused and sent again one round trip apiece (join() found them owed)."""
    from pressure.testing import RedisServer

    n = 300
    with RedisServer() as server:
        q = pressure.Queue("many", url=server.url, reliable=True, serializer="bytes")
        q.put_many([b"x"] * n)
        got = 0
        while got < n:
            got += len(q.get_many(100))
        r = redis.Redis.from_url(server.url)
        r.config_resetstat()
        for _ in range(n):
            q.task_done()
        q.join()
        evalsha = r.info("commandstats")["cmdstat_evalsha"]
        # a few NOSCRIPTs are the first calls of join()'s own scripts (loaded then): not n
        assert evalsha["failed_calls"] <= 3
        assert evalsha["calls"] <= n + 6
        assert q.unfinished_tasks == 0 and not q.in_flight()
        q.delete()
        r.close()


# -- the default mode: task_done() for an item this handle got posts its count too ----------

def _plain(url: str, prefix: str, name: str = "counts", **kw: Any) -> pressure.Queue[Any]:
    return pressure.Queue(name, url=url, prefix=prefix, **kw)


def test_default_mode_task_done_posts_its_count(url: str, prefix: str, r: redis.Redis) -> None:
    """get(); task_done() is one round trip per item in the default mode too: the count
    (ack.lua '-') goes with the next get, and join() sees every one."""
    q = _plain(url, prefix)
    _warm(q)
    for item in ("a", "b"):
        q.put(item)
    assert q.get(timeout=SOON) == "a"
    sends: list[str] = []
    send = q._backend._send

    def counting_send(conn: Any, data: list[bytes], what: str) -> None:
        sends.append(what)
        send(conn, data, what)

    q._backend._send = counting_send  # type: ignore[method-assign]
    q.task_done()
    assert sends == []  # no round trip of its own
    assert q.get(timeout=SOON) == "b"
    assert sends == ["script get"]  # one write: the count went with it
    del q._backend._send
    q.task_done()
    q.join()  # reads the last posted reply
    assert q.unfinished_tasks == 0 and _tasks_done(r, q) == 3
    q.delete()


def test_default_mode_task_done_past_zero_raises_at_once_unless_this_handle_got_items(
        url: str, prefix: str) -> None:
    """A task_done() for no item this handle got waits for its reply: a call too many raises
    ValueError itself, as queue.Queue's does. One for an item this handle got posts its
    count: if another handle counted that item already, the ValueError comes from a later call."""
    q, other = _plain(url, prefix), _plain(url, prefix)
    _warm(q)
    q.put("a")
    assert q.get(timeout=SOON) == "a"
    other.task_done()  # another handle counts q's item (allowed, as across threads)
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        other.task_done()  # other got nothing: answered at once
    q.task_done()  # q got "a": posted; the count is 0 already
    with pytest.raises(ValueError, match=r"^task_done\(\) called too many times$"):
        _ = q.unfinished_tasks  # the next call that reads the reply raises it
    assert q.unfinished_tasks == 0
    q.delete()


def test_default_mode_count_refused_with_noscript_is_sent_again(url: str, prefix: str, r: redis.Redis) -> None:
    q = _plain(url, prefix)
    _warm(q)
    for item in ("a", "b"):
        q.put(item)
    assert q.get(timeout=SOON) == "a"
    r.script_flush()
    q.task_done()  # posted: NOSCRIPT, it did not run
    assert q.get(timeout=SOON) == "b"
    q.task_done()  # first counts a's again (it waits), then posts b's
    q.join()
    assert q.unfinished_tasks == 0 and _tasks_done(r, q) == 3
    q.delete()


def test_default_mode_count_lost_with_its_connection_is_outcome_unknown(url: str, prefix: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A posted count whose reply was lost with its connection (``LOST``: it may or may not
    have run; it has no delivery to make it exact) is OutcomeUnknown at the handle's next call,
    as a task_done() that waited would have raised; one refused (it did not run) is owed."""
    from pressure._wire import LOST

    q = _plain(url, prefix)
    _warm(q)
    q.put_many(["a", "b"])
    assert q.get_many(2) == ["a", "b"]
    checks: list[Any] = []
    monkeypatch.setattr(q._backend, "post", lambda command, check=None: checks.append(check))
    q.task_done()
    q.task_done()
    checks[0](LOST)
    checks[1](redis.exceptions.ResponseError("READONLY You can't write against a read only replica."))
    monkeypatch.undo()
    assert len(q._consumer.counts_owed) == 1  # refused: sent again by the next call
    with pytest.raises(pressure.OutcomeUnknown, match="may or may not have counted"):
        q.qsize() if False else q.get(block=False)
    assert q.unfinished_tasks == 1  # the refused one counted now; the lost one never ran here
    q.delete()


def test_default_mode_tokens_are_bounded_for_a_consumer_that_never_calls_task_done(
        url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Most consumers never call task_done(): the tokens their gets leave are bounded, and a
    task_done() past them waits for its reply, as before."""
    from pressure import _consumer_state

    monkeypatch.setattr(_consumer_state, "OWING_MOST", 3)
    q = _plain(url, prefix)
    q.put_many(list(range(10)))
    assert q.get_many(10) == list(range(10))
    assert len(q._consumer.owing) == 3
    for _ in range(10):
        q.task_done()
    q.join()
    assert q.unfinished_tasks == 0
    q.delete()


def test_disconnect_with_a_posted_acknowledgement_unconfirmed_logs_why(
        prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    """Redis gone before a posted acknowledgement's reply came back: disconnect() says so in a
    WARNING that names the error (its message had two placeholders and one argument: logging
    printed '--- Logging error ---' instead)."""
    from pressure.testing import RedisServer

    with RedisServer() as server:
        q = _reliable(server.url, prefix)
        _warm(q)
        q.put("a")
        assert q.get(timeout=SOON) == "a"
        q.task_done()  # posted
        server.kill()
        with caplog.at_level("WARNING", logger="pressure"):
            q.disconnect()
    (record,) = [rec for rec in caplog.records if getattr(rec, "event", None) == "acks_unconfirmed"
                 or "acknowledgements not confirmed" in rec.msg]
    message = record.getMessage()  # formats: raised TypeError before
    assert "redelivered" in message and "script ack on" in message and "did not run" in message, message


def test_disconnect_after_delete_with_a_posted_acknowledgement_warns_of_nothing(
        url: str, prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    """The queue deleted behind a posted acknowledgement: nothing of it is in flight, so
    disconnect() has nothing to warn of (it warned that the items would be redelivered)."""
    q = _reliable(url, prefix, "deleted")
    _warm(q)
    q.put("a")
    assert q.get(timeout=SOON) == "a"
    q.task_done()  # posted
    q.delete()
    with caplog.at_level("WARNING", logger="pressure"):
        q.disconnect()
    assert not [rec for rec in caplog.records if "acknowledgements not confirmed" in rec.msg]
