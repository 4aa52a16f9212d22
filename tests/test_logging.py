"""Structured, rate-limited log records (pressure/_log.py): each recovery, requeue, dead
letter and worker lifecycle event is logged with its fields, and a flood is bounded."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure import _log

from .helpers import register_waiter


@pytest.fixture(autouse=True)
def limiter(monkeypatch: pytest.MonkeyPatch) -> Iterator[_log.RateLimiter]:
    """A fresh limiter per test (the process's one counts what earlier tests logged)."""
    fresh = _log.RateLimiter()
    monkeypatch.setattr(_log, "limiter", fresh)
    yield fresh


def _events(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [rec for rec in caplog.records if getattr(rec, "event", None) == name]


def _wait_for(predicate: Any, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- the limiter ---------------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_logs_a_bounded_number_of_records_then_says_how_many_it_left_out(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    monkeypatch.setattr(_log, "limiter", _log.RateLimiter(burst=5, interval=60.0, clock=clock))
    with caplog.at_level(logging.INFO, logger="pressure"):
        for i in range(5000):
            _log.event(_log.QUEUE, logging.WARNING, "dead_letter", "queue %r: item %d", "a", i,
                       queue="a", key="p:a", count=1)
        # another queue, and another event, have limits of their own
        _log.event(_log.QUEUE, logging.WARNING, "dead_letter", "b", queue="b", key="p:b", count=1)
        _log.event(_log.QUEUE, logging.WARNING, "requeue", "a", queue="a", key="p:a", count=1)
        assert len(caplog.records) == 5 + 2
        assert [rec.getMessage() for rec in caplog.records[:5]] == [f"queue 'a': item {i}" for i in range(5)]
        clock.now += 61
        _log.event(_log.QUEUE, logging.WARNING, "dead_letter", "queue %r: item %d", "a", 5000,
                   queue="a", key="p:a", count=1)
    summary, after = caplog.records[-2:]
    assert summary.event == "suppressed"  # type: ignore[attr-defined]
    assert summary.fields == {"event": "suppressed", "suppressed": 4995,  # type: ignore[attr-defined]
                              "of_event": "dead_letter", "queue": "a", "key": "p:a"}
    assert summary.getMessage() == "queue 'a': 4995 similar 'dead_letter' records suppressed in the last 61 s"
    assert summary.name == "pressure.queue" and summary.levelno == logging.WARNING
    assert after.getMessage() == "queue 'a': item 5000"


def test_summaries_still_owed_are_logged_by_flush(monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_log, "limiter", _log.RateLimiter(burst=1, interval=60.0))
    with caplog.at_level(logging.INFO, logger="pressure"):
        for _ in range(4):
            _log.event(_log.WORKER, logging.WARNING, "worker_lost", "lost", executor="e", prefix="p")
        _log.flush()
        _log.flush()  # nothing owed any more
    assert [rec.getMessage() for rec in caplog.records] == [
        "lost", "executor 'e': 3 similar 'worker_lost' records suppressed in the last 0 s"]
    assert caplog.records[1].name == "pressure.executor.worker"


def test_a_disabled_level_costs_no_window(caplog: pytest.LogCaptureFixture, limiter: _log.RateLimiter) -> None:
    with caplog.at_level(logging.WARNING, logger="pressure"):
        _log.event(_log.QUEUE, logging.INFO, "redelivery", "x", queue="q")
    assert caplog.records == [] and limiter.owed() == []


# -- queue events ----------------------------------------------------------------------

def test_redelivery_kick_purge_and_dead_letters_are_logged(make_queue: Any, caplog: pytest.LogCaptureFixture,
                                                           r: redis.Redis) -> None:
    q = make_queue("ev", reliable=True, max_deliveries=2, serializer="json")
    q.put("a")
    with caplog.at_level(logging.INFO, logger="pressure"):
        q.receive().release()
        again = q.receive()
        assert again.deliveries == 2
        again.release()  # its second delivery was the last allowed: dead-lettered
        r.lpush(q.keys.base, b"not json")
        with pytest.raises(pressure.DeserializationError):
            q.get(timeout=5)  # dead-lettered: its task counts as done, no task_done() for it
        assert q.kick(1) == 1
        assert q.purge_dead() == 1
    (redelivery,) = _events(caplog, "redelivery")
    assert redelivery.name == "pressure.queue" and redelivery.levelno == logging.INFO
    assert redelivery.fields["queue"] == "ev" and redelivery.deliveries == 2  # type: ignore[attr-defined]
    assert redelivery.key == q.keys.base  # type: ignore[attr-defined]
    (dead,) = _events(caplog, "dead_letter")
    assert (dead.reason, dead.count, dead.levelno) == ("undeserializable", 1, logging.ERROR)  # type: ignore[attr-defined]
    (kick,) = _events(caplog, "kick")
    (purge,) = _events(caplog, "purge_dead")
    assert kick.count == 1 and purge.count == 1  # type: ignore[attr-defined]


def test_a_bad_signature_is_logged_as_a_dead_letter(make_queue: Any, caplog: pytest.LogCaptureFixture,
                                                    r: redis.Redis) -> None:
    q = make_queue("signed", authkey=b"k" * 32)
    r.lpush(q.keys.base, b"forged")
    q.put("genuine")
    with caplog.at_level(logging.WARNING, logger="pressure"):
        assert q.get(timeout=5) == "genuine"
    (dead,) = _events(caplog, "dead_letter")
    assert dead.reason == "bad_signature" and dead.levelno == logging.WARNING  # type: ignore[attr-defined]
    assert "queue 'signed'" in dead.getMessage()


def test_expired_deliveries_are_logged_as_requeued_and_dead_lettered(
        make_queue: Any, caplog: pytest.LogCaptureFixture) -> None:
    requeuing = make_queue("vis", reliable=True, visibility_timeout=0.2)
    burying = make_queue("bury", reliable=True, visibility_timeout=0.2, max_deliveries=1)
    for q in (requeuing, burying):
        q.put("x")
        assert make_queue(q.name, reliable=True, visibility_timeout=0.2, client_id="slow").get() == "x"
    time.sleep(1.1)  # the visibility timeouts, and the sweeps' once-a-second limit, pass
    with caplog.at_level(logging.WARNING, logger="pressure"):
        requeuing._roles.sweep()
        burying._roles.sweep()
    (requeue,) = _events(caplog, "requeue")
    (dead,) = _events(caplog, "dead_letter")
    assert (requeue.queue, requeue.count, requeue.reason) == ("vis", 1, "expired")  # type: ignore[attr-defined]
    assert (dead.queue, dead.count, dead.reason) == ("bury", 1, "max_deliveries")  # type: ignore[attr-defined]


def _blocked_get(q: pressure.Queue[Any]) -> None:
    q.get()


def test_a_dead_consumer_recovered_is_logged(make_queue: Any, r: redis.Redis,
                                             caplog: pytest.LogCaptureFixture) -> None:
    q = make_queue("dead")
    child = multiprocessing.get_context("fork").Process(target=_blocked_get, args=(q,))
    child.start()
    _wait_for(lambda: r.exists(q.keys.waiter))
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    q.put("x")
    with caplog.at_level(logging.WARNING, logger="pressure"):
        assert q.get(timeout=10) == "x"
    (rec,) = _events(caplog, "consumer_recovered")
    assert rec.queue == "dead" and f":{child.pid}:" in rec.consumer  # type: ignore[attr-defined]
    assert rec.fields["count"] >= 0 and "dead" in rec.fields  # type: ignore[attr-defined]


def test_a_repair_is_logged(make_queue: Any, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    q = make_queue("rep")
    r.delete(q.keys.producer_free)  # a lost token
    with caplog.at_level(logging.WARNING, logger="pressure"):
        q.repair()
    (rec,) = _events(caplog, "repaired")
    assert rec.reset == {"producer_free": "0"} and rec.recovered == []  # type: ignore[attr-defined]


def test_a_role_token_held_by_a_dead_spec_client_is_logged_when_restored(
        make_queue: Any, r: redis.Redis, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from pressure import _roles

    monkeypatch.setattr(_roles, "SPEC_HOLDER_GRACE", 0.0)
    q = make_queue("spec")
    child = multiprocessing.get_context("fork").Process(target=os._exit, args=(0,))
    child.start()
    child.join()
    holder = f"{pressure.identity.hostname()}:{child.pid}"
    r.lpop(q.keys.producer_free)  # a plain spec client took the producer role, then died
    r.set(q.keys.producer, holder)
    with caplog.at_level(logging.WARNING, logger="pressure"):
        q.put("x", timeout=10)
    (rec,) = _events(caplog, "role_restored")
    assert rec.holder == holder and rec.role == q.keys.producer_free  # type: ignore[attr-defined]


def test_a_waiter_lost_elsewhere_is_not_logged_as_recovered_on_this_host(
        make_queue: Any, caplog: pytest.LogCaptureFixture) -> None:
    q = make_queue("elsewhere", lease=1.0)
    register_waiter(q, "far:1:1", "far|1|1.0|1000|d", 1000)
    with caplog.at_level(logging.WARNING, logger="pressure"):
        q._roles.sweep()
    assert _events(caplog, "consumer_recovered") == []


# -- the connection layer -------------------------------------------------------------

def test_a_refused_command_retried_is_logged_once(make_queue: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A command the server refuses for now (LOADING, BUSY, a failover's READONLY...) is sent
    again: logged once per call, with the server and the error."""
    from pressure._wire import _RetryLater

    q = make_queue("retry")
    refusals = [redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory")] * 3

    def attempt() -> str:
        if refusals:
            raise _RetryLater(refusals.pop())
        return "served"

    with caplog.at_level(logging.WARNING, logger="pressure"):
        assert q._backend._until_served("script info", attempt) == "served"
    (rec,) = _events(caplog, "retry")
    assert rec.name == "pressure.connection" and "loading" in rec.error  # type: ignore[attr-defined]
    assert rec.server == q._backend.config.url and rec.command == "script info"  # type: ignore[attr-defined]


# -- executor workers -----------------------------------------------------------------

def test_worker_start_stop_and_a_foreign_item_are_logged(url: str, prefix: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    from pressure.executor.worker import WorkerConfig, run_worker
    from pressure.keys import ExecutorKeys

    keys = ExecutorKeys.build(prefix, "ex")
    tasks: pressure.Queue[Any] = pressure.Queue(keys.tasks, url=url, prefix=prefix, reliable=True)
    tasks.put("not a task")
    stop = threading.Event()
    where = WorkerConfig("ex", pressure.config.ConnectionConfig.resolve(url), prefix, 30.0, 8, ())
    with caplog.at_level(logging.INFO, logger="pressure"):
        worker = threading.Thread(target=run_worker, args=(where, stop.is_set, None, ()))
        worker.start()
        _wait_for(lambda: len(tasks.dead_letters()) == 1)
        stop.set()
        worker.join(10)
    assert not worker.is_alive()
    (start,) = _events(caplog, "worker_start")
    (dead,) = _events(caplog, "dead_letter")
    (stopped,) = _events(caplog, "worker_stop")
    assert start.name == "pressure.executor.worker" and start.executor == "ex"  # type: ignore[attr-defined]
    assert dead.reason == "not_a_task" and dead.queue == keys.tasks  # type: ignore[attr-defined]
    assert stopped.worker == start.worker  # type: ignore[attr-defined]
    tasks.disconnect()


def test_a_worker_process_lost_is_logged(url: str, prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    from pressure.executor.worker import WorkerPool

    with caplog.at_level(logging.INFO, logger="pressure"):
        with WorkerPool("lost", url=url, prefix=prefix, processes=1) as pool:
            victim = pool.procs[0]
            _wait_for(victim.is_alive)
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()
            assert pool.check() == 1
    (start,) = _events(caplog, "pool_start")
    (lost,) = _events(caplog, "worker_lost")
    (stop,) = _events(caplog, "pool_stop")
    assert start.processes == 1 and lost.pid == victim.pid  # type: ignore[attr-defined]
    assert lost.exitcode == -signal.SIGKILL and lost.executor == "lost"  # type: ignore[attr-defined]
    assert stop.levelno == logging.INFO


def test_async_dead_letters_and_redeliveries_are_logged(url: str, prefix: str, r: redis.Redis,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from pressure.aio import AsyncQueue

    async def main() -> None:
        async with AsyncQueue[str]("aq", url=url, prefix=prefix, serializer="json", reliable=True) as q:
            await q.put("a")
            await (await q.receive()).release()
            again = await q.receive()
            await again.ack()
            await r_lpush()
            with pytest.raises(pressure.DeserializationError):
                await q.get(timeout=5)

    async def r_lpush() -> None:
        r.lpush(pressure.keys.QueueKeys.build(prefix, "aq").base, b"not json")

    with caplog.at_level(logging.INFO, logger="pressure"):
        asyncio.run(main())
    (redelivery,) = _events(caplog, "redelivery")
    (dead,) = _events(caplog, "dead_letter")
    assert redelivery.deliveries == 2 and redelivery.queue == "aq"  # type: ignore[attr-defined]
    assert dead.reason == "undeserializable" and dead.key == f"{prefix}:aq"  # type: ignore[attr-defined]


# -- every call site --------------------------------------------------------------------

def _event_calls() -> list[tuple[str, str, list[str]]]:
    """(module, event name, field names) of every ``*.event(...)`` call in the package."""
    import ast
    from pathlib import Path

    root = Path(pressure.__file__).resolve().parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "event"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("_log", "_events")):
                name = node.args[2]
                assert isinstance(name, ast.Constant), f"{path}:{node.lineno}: the event name is not a literal"
                fields = [kw.arg for kw in node.keywords if kw.arg not in ("exc_info", "limit")]
                calls.append((f"{path.name}:{node.lineno}", name.value, [f for f in fields if f]))
    return calls


def test_no_field_overwrites_a_log_record_attribute_and_every_event_is_documented() -> None:
    """A field named as a LogRecord attribute ('thread', 'process', 'name'...) makes
    logging raise KeyError where the record is made: in an error path, the worst place."""
    from pathlib import Path

    reserved = set(vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", (), None))) | {"message", "asctime"}
    page = (Path(pressure.__file__).resolve().parent.parent / "docs" / "pages" / "metrics.md").read_text()
    section = page.split("\n## Logging\n", 1)[1].split("\n## ", 1)[0]
    calls = _event_calls()
    assert len(calls) > 30
    for where, name, fields in calls:
        assert not set(fields) & reserved, f"{where}: {set(fields) & reserved}"
        assert f"`{name}`" in section, f"{where}: event {name!r} is not in metrics.md's Logging section"
        for field in fields:
            assert f"`{field}`" in section, f"{where}: field {field!r} of {name!r} is not documented"


def test_an_outage_and_its_end_are_logged_with_their_counts(caplog: pytest.LogCaptureFixture) -> None:
    from pressure.outage import Complaint

    complaint = Complaint(_log.WORKER, "worker w", first=1000.0)
    with caplog.at_level(logging.WARNING, logger="pressure"):
        for _ in range(3):
            complaint.failed(pressure.BackendError("unreachable"))
        complaint.succeeded()
    (outage,) = _events(caplog, "outage")  # spaced out by the complaint itself: once here
    (over,) = _events(caplog, "outage_over")
    assert (outage.what, outage.failures, outage.error) == ("worker w", 1, "unreachable")  # type: ignore[attr-defined]
    assert over.failures == 3 and over.name == "pressure.executor.worker"  # type: ignore[attr-defined]


def test_every_log_call_has_as_many_arguments_as_its_message_has_placeholders() -> None:
    """A static check of every ``_log.event`` and logger call in pressure/ with a literal
    message: one argument per %-placeholder. (disconnect()'s "acks_unconfirmed" had two
    placeholders and one argument: logging printed '--- Logging error ---' in its place.)"""
    import ast
    import re
    from pathlib import Path

    placeholder = re.compile(r"%(?!%)[#0\- +]?\d*(?:\.\d+)?[sdrfgxi]")
    where = {"event": 3, "log": 1, **dict.fromkeys(("debug", "info", "warning", "error", "exception",
                                                    "critical"), 0)}
    wrong, seen = [], 0
    for path in sorted(Path(pressure.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            i = where.get(name)
            if i is None or len(node.args) <= i or any(isinstance(a, ast.Starred) for a in node.args):
                continue
            message = node.args[i]
            if not (isinstance(message, ast.Constant) and isinstance(message.value, str)):
                continue
            seen += 1
            wanted, given = len(placeholder.findall(message.value)), len(node.args) - i - 1
            if wanted != given:
                wrong.append(f"{path.name}:{node.lineno}: {wanted} placeholders, {given} arguments")
    assert seen > 50  # the check found the calls
    assert wrong == []
