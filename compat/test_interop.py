"""Protocol interoperability: pressure and an independent, literal spec client on one queue.

``pressure/testing/spec_client.py`` is written from the spec's pseudocode (v0.15, and v0.1 on
request), one command per round trip. Every scenario runs on the private
redis-server with ``pressure.Queue(..., serializer="bytes")`` on the other side,
and ends with the protocol's token invariants checked in Redis. The v0.1 tests
state in their names what a v0.1 client does to a queue pressure shares; the
interleavings they need are made deterministic by running the other client's
operation from inside the v0.1 client's command stream (``After``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

import pytest
import redis

import pressure
from pressure.testing import spec_client
from pressure.testing.spec_client import SpecClient
from tests.helpers import blocks, blocks_raising

Client = Union[SpecClient, "pressure.Queue[bytes]"]
Pair = tuple[SpecClient, "pressure.Queue[bytes]"]
SIDES = ["spec", "pressure"]
#: Generous bound for "the other side noticed": pressure looks again every second.
NOTICE = 5.0


# -- helpers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Errors:
    """What one client raises for each protocol error."""

    full: type[BaseException]
    empty: type[BaseException]
    closed: type[BaseException]
    missing: type[BaseException]


SPEC_ERRORS = Errors(spec_client.QueueFull, spec_client.QueueEmpty, spec_client.QueueClosed,
                     spec_client.QueueDoesNotExist)
PRESSURE_ERRORS = Errors(pressure.Full, pressure.Empty, pressure.ShutDown, pressure.QueueDoesNotExist)


def errors(client: Client) -> Errors:
    return SPEC_ERRORS if isinstance(client, SpecClient) else PRESSURE_ERRORS


def raises_closed(client: Client, call: Callable[[], Any]) -> None:
    """``call`` fails because the queue is closed (for pressure: ShutDown, not 'does not exist')."""
    with pytest.raises(errors(client).closed) as info:
        call()
    assert not isinstance(info.value, (pressure.QueueDoesNotExist, spec_client.QueueDoesNotExist))


def sides(first: str, s: SpecClient, q: pressure.Queue[bytes]) -> tuple[Client, Client]:
    """(the client named ``first``, the other one)."""
    return (s, q) if first == "spec" else (q, s)


def assert_tokens(r: redis.Redis, s: SpecClient) -> None:
    """With no client acting: each role token list holds exactly one element, and
    :not_full holds one element iff the bound is 0 or the length is below it, else none."""
    k = s.k
    assert r.llen(f"{k}:producer_free") == 1, "producer token missing or duplicated"
    assert r.llen(f"{k}:consumer_free") == 1, "consumer token missing or duplicated"
    raw = r.get(f"{k}:bound")
    assert raw is not None, "the queue does not exist"
    bound, length = int(raw), r.llen(k)
    expected = 1 if bound == 0 or length < bound else 0
    assert r.llen(f"{k}:not_full") == expected, f"length {length}, bound {bound}"


def state(r: redis.Redis, s: SpecClient) -> tuple[int, int]:
    """(queue length, :not_full length)."""
    return r.llen(s.k), r.llen(f"{s.k}:not_full")


def wait_until(predicate: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Bounded polling: fail if ``predicate`` is not true within ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


class Background:
    """Run ``call`` in a thread; ``result()`` joins it and returns or re-raises."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._outcome: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(call,))
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self._outcome.append((False, exc))

    def result(self, limit: float = 20.0) -> Any:
        self._thread.join(limit)
        assert not self._thread.is_alive(), "background call did not finish"
        ok, value = self._outcome[0]
        if not ok:
            raise value
        return value


class After:
    """A redis client stand-in that runs ``action`` once, right after the first
    ``command`` on ``key`` that returns something: a deterministic interleaving
    inside a spec client's sequence of round trips."""

    def __init__(self, r: redis.Redis, command: str, key: str, action: Callable[[], Any]) -> None:
        self._r, self._command, self._key = r, command, key
        self._action: Callable[[], Any] | None = action
        self.fired = False

    def __getattr__(self, attr: str) -> Any:
        real = getattr(self._r, attr)
        if attr != self._command:
            return real

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            reply = real(*args, **kwargs)
            first = args[0] if isinstance(args[0], str) else args[0][0]
            if self._action is not None and first == self._key and reply is not None:
                action, self._action = self._action, None
                action()
                self.fired = True
            return reply

        return wrapped


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def pressure_queue(url: str, prefix: str) -> Iterator[Callable[..., pressure.Queue[bytes]]]:
    """pressure.Queue(name, maxsize, serializer="bytes") on the private server; disconnected after."""
    handles: list[pressure.Queue[bytes]] = []

    def make(name: str = "q", maxsize: int | None = None, **kwargs: Any) -> pressure.Queue[bytes]:
        q: pressure.Queue[bytes] = pressure.Queue(name, maxsize, serializer="bytes", url=url,
                                                  prefix=prefix, **kwargs)
        handles.append(q)
        return q

    yield make
    for q in handles:
        q.disconnect()


@pytest.fixture
def make_pair(r: redis.Redis, prefix: str,
              pressure_queue: Callable[..., pressure.Queue[bytes]]) -> Callable[..., Pair]:
    """A queue with bound ``bound`` created by ``creator``, and both clients on it."""

    def make(bound: int = 0, creator: str = "spec", version: str = "0.15") -> Pair:
        s = SpecClient(r, "q", prefix=prefix, version=version)
        if creator == "spec":
            s.create(bound)
            return s, pressure_queue()
        return s, pressure_queue(maxsize=bound)

    return make


# -- create and attach ------------------------------------------------------------------


def test_queue_created_by_spec_client_is_attached_by_pressure_with_its_bound(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """pressure reads the bound a spec Create stored and refuses the third item either way."""
    s, q = make_pair(bound=2, creator="spec")
    assert q.exists and q.maxsize == 2
    q.put(b"a")
    s.put(b"b")
    assert q.full() and q.qsize() == 2
    with pytest.raises(pressure.Full):
        q.put_nowait(b"c")
    with pytest.raises(spec_client.QueueFull):
        s.put(b"c", timeout=0.2)
    assert r.lrange(s.k, 0, -1) == [b"b", b"a"]
    assert_tokens(r, s)


def test_queue_created_by_pressure_is_used_by_spec_client_with_its_bound(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """pressure's Create writes what the spec's does: the spec client sees the queue and its bound."""
    s, q = make_pair(bound=2, creator="pressure")
    assert s.exists() and r.get(f"{s.k}:bound") == b"2"
    with pytest.raises(spec_client.QueueAlreadyExists):
        s.create(2)
    s.put(b"a")
    q.put(b"b")
    assert s.length() == 2
    with pytest.raises(spec_client.QueueFull):
        s.put_nowait(b"c")
    with pytest.raises(pressure.Full):
        q.put(b"c", timeout=0.2)
    assert_tokens(r, s)


@pytest.mark.parametrize("maxsize", [0, 3])
def test_pressure_attaching_with_a_contradicting_maxsize_raises(
        r: redis.Redis, make_pair: Callable[..., Pair],
        pressure_queue: Callable[..., pressure.Queue[bytes]], maxsize: int) -> None:
    """An explicit maxsize that is not the stored bound raises; the queue is left untouched."""
    s, _ = make_pair(bound=2, creator="spec")
    with pytest.raises(pressure.QueueExistsError, match="maxsize=2"):
        pressure_queue(maxsize=maxsize)
    assert pressure_queue(maxsize=2).maxsize == 2
    assert r.get(f"{s.k}:bound") == b"2"
    assert_tokens(r, s)


# -- FIFO across clients ----------------------------------------------------------------


@pytest.mark.parametrize("producer_side", SIDES)
def test_items_put_by_one_client_come_out_of_the_other_in_fifo_order(
        r: redis.Redis, make_pair: Callable[..., Pair], producer_side: str) -> None:
    """Ten puts by one client, ten gets by the other: same bytes, same order, queue empty after."""
    s, q = make_pair(bound=0, creator="pressure" if producer_side == "spec" else "spec")
    producer, consumer = sides(producer_side, s, q)
    items = [f"item-{i}".encode() for i in range(10)] + [b"", b"\x00\xff binary"]
    for item in items:
        producer.put(item)
    assert [consumer.get(timeout=5) for _ in items] == items
    with pytest.raises(errors(consumer).empty):
        consumer.get_nowait()
    assert_tokens(r, s)


@pytest.mark.parametrize("consumer_side", SIDES)
def test_concurrent_producers_of_both_kinds_keep_each_ones_order_on_a_bounded_queue(
        r: redis.Redis, make_pair: Callable[..., Pair], consumer_side: str) -> None:
    """A spec producer and a pressure producer in two threads share the producer role on a
    bound-3 queue (both block on it repeatedly): every item arrives once, each producer's
    items in its own order."""
    s, q = make_pair(bound=3)
    consumer = s if consumer_side == "spec" else q
    n = 40

    def start_feed(producer: Client, tag: bytes) -> Background:
        return Background(lambda: [producer.put(tag + b"%d" % i, timeout=10) for i in range(n)])

    feeds = {b"s": start_feed(s, b"s"), b"p": start_feed(q, b"p")}
    got = [consumer.get(timeout=10) for _ in range(2 * n)]
    for tag, feed in feeds.items():
        feed.result()
        assert [g for g in got if g.startswith(tag)] == [tag + b"%d" % i for i in range(n)]
    assert len(got) == 2 * n and r.llen(s.k) == 0
    assert_tokens(r, s)


def test_sequentially_interleaved_producers_are_read_in_put_order(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """Puts alternating between the clients come out, by either consumer, in put order."""
    s, q = make_pair(bound=0)
    order: list[tuple[Client, bytes]] = [(s, b"s0"), (q, b"p0"), (q, b"p1"), (s, b"s1"), (s, b"s2"), (q, b"p2")]
    for client, item in order:
        client.put(item)
    got = [client.get(timeout=5) for client in (q, s, q, s, q, s)]
    assert got == [item for _, item in order]
    assert_tokens(r, s)


# -- blocking across clients ------------------------------------------------------------


@pytest.mark.parametrize("producer_side", SIDES)
def test_put_blocked_on_a_full_queue_is_released_by_a_get_of_the_other_client(
        r: redis.Redis, make_pair: Callable[..., Pair], producer_side: str) -> None:
    """A producer blocked on :not_full (bound 1) wakes when the other client's get frees room."""
    s, q = make_pair(bound=1)
    producer, consumer = sides(producer_side, s, q)
    producer.put(b"first")
    got: list[bytes] = []
    blocks(lambda: producer.put(b"second", timeout=10), lambda: got.append(consumer.get(timeout=5)))
    assert got == [b"first"]
    assert r.lrange(s.k, 0, -1) == [b"second"]
    with pytest.raises(errors(producer).full):  # full again: the wake-up let exactly one in
        producer.put_nowait(b"third")
    assert_tokens(r, s)


@pytest.mark.parametrize("consumer_side", SIDES)
def test_get_blocked_on_an_empty_queue_receives_a_put_of_the_other_client(
        r: redis.Redis, make_pair: Callable[..., Pair], consumer_side: str) -> None:
    """A consumer blocked in get() on an empty queue (holding the consumer role) receives
    the other client's put within a few seconds."""
    s, q = make_pair(bound=2)
    consumer, producer = sides(consumer_side, s, q)
    put_at: list[float] = []

    def put() -> None:
        put_at.append(time.monotonic())
        producer.put(b"hello")

    assert blocks(lambda: consumer.get(timeout=10), put) == b"hello"
    assert time.monotonic() - put_at[0] < NOTICE
    assert_tokens(r, s)


def test_spec_get_nowait_reports_in_use_while_a_pressure_consumer_waits(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """A waiting pressure consumer holds the consumer role, as the spec's Get does: a spec
    get_nowait meanwhile raises QueueInUse (and gives nothing back it did not take)."""
    s, q = make_pair(bound=0)
    waiting = Background(lambda: q.get(timeout=10))
    wait_until(lambda: r.llen(f"{s.k}:consumer_free") == 0, "pressure holds the consumer role")
    with pytest.raises(spec_client.QueueInUse):
        s.get_nowait()
    assert r.llen(f"{s.k}:consumer_free") == 0
    s.put(b"x")
    assert waiting.result() == b"x"
    assert_tokens(r, s)


# -- close ------------------------------------------------------------------------------


@pytest.mark.parametrize("closer_side", SIDES)
def test_close_by_one_client_is_seen_by_the_other(
        r: redis.Redis, make_pair: Callable[..., Pair], closer_side: str) -> None:
    """After either client's close: both report it, puts fail, gets drain what is left, then fail."""
    s, q = make_pair(bound=5)
    closer, other = sides(closer_side, s, q)
    s.put(b"1")
    q.put(b"2")
    closer.close()
    assert s.closed() and q.closed and r.llen(f"{s.k}:closed") == 2
    for client in (other, closer):
        raises_closed(client, functools.partial(client.put, b"late", timeout=1))
    assert other.get(timeout=1) == b"1"
    assert closer.get(timeout=1) == b"2"
    for client in (other, closer):
        raises_closed(client, functools.partial(client.get, timeout=1))
    with pytest.raises(spec_client.QueueClosed):  # the spec: "closed at most once"
        s.close()
    assert s.closed() and q.closed
    assert_tokens(r, s)


@pytest.mark.parametrize("consumer_side", SIDES)
def test_close_wakes_a_consumer_blocked_in_the_other_client(
        r: redis.Redis, make_pair: Callable[..., Pair], consumer_side: str) -> None:
    """A consumer blocked on an empty queue raises its 'closed' error when the other client closes."""
    s, q = make_pair(bound=2)
    consumer, closer = sides(consumer_side, s, q)
    started = time.monotonic()
    blocks_raising(lambda: consumer.get(timeout=10), closer.close, errors(consumer).closed)
    assert time.monotonic() - started < NOTICE
    assert s.closed() and q.closed  # a woken BRPOP took one of the two markers, not both (E8)
    assert_tokens(r, s)


# -- delete -----------------------------------------------------------------------------


def assert_reports_missing(r: redis.Redis, prefix: str, client: Client) -> None:
    """Every operation of ``client`` says the queue does not exist, and none leaves a key."""
    missing = errors(client).missing
    if isinstance(client, SpecClient):
        assert not client.exists()
        calls: list[Callable[[], Any]] = [client.length, client.closed, client.close, client.delete]
    else:
        assert not client.exists
        calls = [client.qsize, client.close, client.delete]
    calls += [lambda: client.put(b"x", timeout=1), lambda: client.put_nowait(b"x"),
              lambda: client.get(timeout=1), client.get_nowait]
    for call in calls:
        with pytest.raises(missing):
            call()
    assert r.keys(f"{prefix}*") == []


def use_from_both_sides(s: SpecClient, q: pressure.Queue[bytes], consume_with_pressure: bool) -> None:
    s.put(b"a")
    q.put(b"b")
    s.put(b"c")
    assert s.get() == b"a"
    if consume_with_pressure:
        assert q.get(timeout=5) == b"b"


def test_pressure_delete_removes_every_key_a_spec_client_and_pressure_wrote(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """pressure's delete after both clients produced and consumed (an item still queued)
    leaves no key under the prefix; the spec client then reports the queue missing."""
    s, q = make_pair(bound=3, creator="spec")
    use_from_both_sides(s, q, consume_with_pressure=True)
    q.delete()
    assert r.keys(f"{prefix}*") == []
    assert_reports_missing(r, prefix, s)


def test_spec_delete_after_pressure_only_produced_removes_every_key(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """The spec Delete removes the twelve keys; a pressure producer wrote nothing else but, as
    the queue's creator, the record of its serializer (which a spec Delete cannot know): that
    is all that is left, and pressure, reporting the queue missing, removes it."""
    s, q = make_pair(bound=3, creator="pressure")
    use_from_both_sides(s, q, consume_with_pressure=False)
    s.delete()
    assert {key.decode() for key in r.keys(f"{prefix}*")} == {f"{s.k}:pressure:serializer"}
    assert_reports_missing(r, prefix, q)


def consume_then_spec_delete(s: SpecClient, q: pressure.Queue[bytes]) -> None:
    use_from_both_sides(s, q, consume_with_pressure=True)
    s.delete()


def spec_delete_while_pressure_waits(s: SpecClient, q: pressure.Queue[bytes]) -> None:
    blocks_raising(lambda: q.get(timeout=10), s.delete, pressure.QueueDoesNotExist)


def test_spec_delete_while_a_pressure_consumer_waits_leaves_no_key(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """The waiting pressure consumer notices the Delete, gives the role back (so the Delete
    completes) and removes pressure's own keys, which a spec client cannot know."""
    s, q = make_pair(bound=3)
    spec_delete_while_pressure_waits(s, q)
    assert not s.exists() and not q.exists
    assert r.keys(f"{prefix}*") == []


def test_spec_delete_of_a_queue_pressure_used_leaves_only_pressure_keys_until_pressure_notices(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """A spec Delete removes the twelve keys; pressure's own (`<base>:pressure:*`: consumer
    records, the delivery counter, an in-flight entry) stay until a pressure client touches the
    name again: one that finds the queue gone, or creates it afresh, removes them."""
    s, q = make_pair(bound=3)
    consume_then_spec_delete(s, q)
    left = {key.decode() for key in r.keys(f"{prefix}*")}
    assert left and all(key.startswith(f"{s.k}:pressure:") for key in left), left
    with pytest.raises(pressure.QueueDoesNotExist):
        q.put(b"x")  # finds the queue gone: forgets what it kept beside it
    assert r.keys(f"{prefix}*") == []
    consume_then_spec_delete(*make_pair(bound=3))  # the same again, then a fresh create by pressure
    fresh = pressure.Queue(q.name, serializer="bytes", url=q.url, prefix=prefix)
    # (and the mark that no handle named its bound: the first that names one sets it; and the
    # name of the serializer it was created with)
    assert {key.decode() for key in r.keys(f"{prefix}*")} == {
        f"{s.k}:bound", f"{s.k}:producer_free", f"{s.k}:consumer_free", f"{s.k}:not_full",
        f"{s.k}:pressure:bound_unset", f"{s.k}:pressure:serializer"}
    fresh.delete()
    fresh.disconnect()
    assert r.keys(f"{prefix}*") == []


def test_unacknowledged_item_of_a_spec_deleted_queue_stays_out_of_a_recreated_one(
        r: redis.Redis, prefix: str, pressure_queue: Callable[..., pressure.Queue[bytes]]) -> None:
    """A reliable pressure consumer holds an unacknowledged item when a spec client deletes the
    queue and creates it again: the new queue must stay empty (today the sweep requeues the
    old item into it once its visibility timeout passes, and consumed_messages goes to -1)."""
    s = SpecClient(r, "q", prefix=prefix)
    s.create(0)
    q = pressure_queue(reliable=True, visibility_timeout=0.2)
    s.put(b"old")
    assert q.get(timeout=1) == b"old"  # not acknowledged (no task_done)
    s.delete()
    s.create(0)
    with pytest.raises(pressure.Empty):
        q.get(timeout=1.5)  # sweeps at most once a second: the old entry is 0.2 s overdue by then
    assert s.length() == 0 and r.get(f"{s.k}:stats:consumed_messages") in (None, b"0")
def test_pressure_delete_wakes_a_blocked_spec_consumer_which_sees_closed_not_deleted(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """Delete wakes a spec consumer blocked in BRPOP K K:closed through :closed; a literal
    client cannot tell that from a close (F5). The delete completes once it gives the role back."""
    s, q = make_pair(bound=2)
    blocks_raising(lambda: s.get(timeout=10), q.delete, spec_client.QueueClosed)
    assert r.keys(f"{prefix}*") == []
    assert_reports_missing(r, prefix, s)


def test_spec_delete_wakes_a_blocked_pressure_consumer_with_queue_does_not_exist(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """A pressure consumer waiting on an empty queue (holding the consumer role) notices the
    spec Delete within a few seconds, raises QueueDoesNotExist and gives the role back, so
    the spec Delete, which waits for that role, completes."""
    s, q = make_pair(bound=2)
    started = time.monotonic()
    blocks_raising(lambda: q.get(timeout=10), s.delete, pressure.QueueDoesNotExist)
    assert time.monotonic() - started < NOTICE
    assert not r.exists(*(f"{s.k}{key}" for key in ("", ":bound", ":producer_free", ":consumer_free",
                                                     ":not_full", ":closed", ":consumer")))
    assert not q.exists and not s.exists()


def test_pressure_delete_wakes_a_spec_producer_blocked_on_a_full_queue_which_reports_missing(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """Delete pushes :not_full, waking the spec producer blocked on the full queue; its item
    goes into a list about to be deleted (F5), it finds :bound gone when it re-reads it and
    raises QueueDoesNotExist (P7) after giving the producer role back, which lets the delete finish."""
    s, q = make_pair(bound=1)
    s.put(b"kept")
    blocks_raising(lambda: s.put(b"lost", timeout=10), q.delete, spec_client.QueueDoesNotExist)
    assert r.keys(f"{prefix}*") == []
    assert_reports_missing(r, prefix, q)


def test_pressure_close_waits_for_a_spec_producer_blocked_on_a_full_queue(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """F6: Close needs the producer role, which a spec producer blocked on a full queue holds;
    pressure's close waits (it does not steal the role) and completes once a get frees room
    and that put goes through: its item is in the queue before the close."""
    s, q = make_pair(bound=1)
    s.put(b"A")
    blocked = Background(lambda: s.put(b"B", timeout=10))
    wait_until(lambda: r.llen(f"{s.k}:producer_free") == 0, "the spec producer holds the role")
    got: list[bytes] = []
    blocks(q.close, lambda: got.append(q.get(timeout=1)))
    blocked.result()
    assert got == [b"A"]
    assert q.closed and q.get(timeout=1) == b"B"
    raises_closed(q, lambda: q.get(timeout=1))
    assert_tokens(r, s)


# -- statistics and identifiers ---------------------------------------------------------


def test_stats_and_role_identifiers_are_shared_exactly_as_the_spec_names_them(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """After a known mix (failed puts and gets included), the four :stats:* counters hold the
    totals of both clients, and :producer/:consumer name whoever took the role last."""
    s, q = make_pair(bound=3)
    k = s.k
    s.put(b"ab")
    q.put(b"cde")
    s.put(b"f")
    with pytest.raises(pressure.Full):
        q.put_nowait(b"full")
    with pytest.raises(spec_client.QueueFull):
        s.put_nowait(b"full")
    assert r.get(f"{k}:producer") == s.client_id.encode()
    assert q.get(timeout=5) == b"ab"
    assert s.get(timeout=5) == b"cde"
    assert r.get(f"{k}:consumer") == s.client_id.encode()
    q.put(b"ghij")
    assert r.get(f"{k}:producer") == q.client_id.encode()
    assert q.get(timeout=5) == b"f"
    assert r.get(f"{k}:consumer") == q.client_id.encode()
    assert s.get_nowait() == b"ghij"
    with pytest.raises(spec_client.QueueEmpty):
        s.get(timeout=0.1)
    counters = [r.get(f"{k}:stats:{name}") for name in
                ("produced_messages", "produced_bytes", "consumed_messages", "consumed_bytes")]
    assert counters == [b"4", b"10", b"4", b"10"]
    stats = q.statistics()
    assert (stats.produced_messages, stats.produced_bytes, stats.consumed_messages,
            stats.consumed_bytes) == (4, 10, 4, 10)
    assert stats.producer == q.client_id and stats.consumer == s.client_id
    assert s.client_id.startswith("spec:") and s.client_id.count(":") == 3
    assert not r.exists(f"{k}:produced_messages", f"{k}:consumed_messages")  # P4: no pseudocode keys
    assert_tokens(r, s)


# -- spec v0.1 --------------------------------------------------------------------------


def test_v01_client_has_no_exists_length_closed_or_nonblocking_operations(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """Exists, Length, Closed and the non-blocking Put/Get came in 0.13: a v0.1 client has none,
    so it can only learn that a queue exists by failing an operation on it."""
    s, _ = make_pair(bound=2, version="0.1")
    calls: list[Callable[[], Any]] = [s.exists, s.length, s.closed, s.get_nowait,
                                      lambda: s.put_nowait(b"x"), lambda: s.put(b"x", block=False),
                                      lambda: s.get(block=False)]
    for call in calls:
        with pytest.raises(NotImplementedError, match=r"v0\.1"):
            call()
    assert r.llen(s.k) == 0
    assert_tokens(r, s)


def run_p2_sequence(r: redis.Redis, producer: Client, consumer: Client,
                    s: SpecClient) -> list[tuple[int, int]]:
    """protocol-notes P2 with bound 2: put A, get, put B, put C, put D (one more put E, to
    measure how far it goes). Returns (length, :not_full length) after each step; a put
    that finds no room within 0.3 s is recorded and skipped."""
    trace = []
    steps: list[Callable[[], Any]] = [lambda: producer.put(b"A"), lambda: consumer.get(timeout=1)]
    steps += [functools.partial(producer.put, item, timeout=0.3) for item in (b"B", b"C", b"D", b"E")]
    for step in steps:
        try:
            step()
        except (spec_client.QueueFull, pressure.Full):
            pass
        trace.append(state(r, s))
    return trace


def test_v01_alone_overfills_a_bound_2_queue_by_exactly_one(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """Pure v0.1 (P2): its Get re-arms and trims :not_full to TWO permits; put B keeps two,
    so put D succeeds at length 2: three items in a bound-2 queue. Put E blocks: one over."""
    s, _ = make_pair(bound=2, version="0.1")
    trace = run_p2_sequence(r, s, s, s)
    assert trace == [(1, 1), (0, 2), (1, 2), (2, 1), (3, 0), (3, 0)]


def test_v015_alone_keeps_the_bound_on_the_p2_sequence(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """The same sequence with v0.15's LTRIM 0 0: put D finds no permit; the invariant holds throughout."""
    s, _ = make_pair(bound=2)
    assert run_p2_sequence(r, s, s, s) == [(1, 1), (0, 1), (1, 1), (2, 0), (2, 0), (2, 0)]
    assert_tokens(r, s)


def test_v01_producer_with_pressure_consumer_keeps_the_bound_when_operations_do_not_overlap(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """pressure's get keeps :not_full at exactly 0 or 1, so the v0.1 LTRIM 0 1 never finds two:
    the P2 sequence stops at the bound, with the invariant holding after every step."""
    s, q = make_pair(bound=2, version="0.1")
    assert run_p2_sequence(r, s, q, s) == [(1, 1), (0, 1), (1, 1), (2, 0), (2, 0), (2, 0)]
    assert_tokens(r, s)


def v01_put_with_pressure_get_inside(r: redis.Redis, prefix: str, s: SpecClient,
                                     q: pressure.Queue[bytes]) -> None:
    """With A queued, a spec put of B during which (right after it pops the :not_full permit)
    pressure gets A: pressure re-arms the permit it sees missing, then the spec put re-arms too."""
    s.put(b"A")
    hooked = After(r, "brpop", f"{s.k}:not_full", lambda: q.get(timeout=1))
    SpecClient(hooked, "q", prefix=prefix, version=s.version).put(b"B")  # type: ignore[arg-type]
    assert hooked.fired


def test_v01_producer_with_pressure_consumer_can_exceed_bound_by_one_when_a_get_lands_mid_put(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """The overlap leaves two permits at length 1 (v0.1 trims to two); the v0.1 producer's next
    two puts both succeed: 3 items, bound 2. The third is refused: one over, not more.
    pressure's gets then drain it back with the invariant holding after each."""
    s, q = make_pair(bound=2, version="0.1")
    v01_put_with_pressure_get_inside(r, prefix, s, q)
    assert state(r, s) == (1, 2)
    s.put(b"C", timeout=1)
    s.put(b"D", timeout=1)
    assert state(r, s) == (3, 0)
    with pytest.raises(spec_client.QueueFull):
        s.put(b"E", timeout=0.3)
    assert_tokens(r, s)  # 0 permits at length 3: consistent, though over the bound
    assert [q.get(timeout=1) for _ in range(3)] == [b"B", b"C", b"D"]
    assert_tokens(r, s)


def test_pressure_get_after_that_overlap_restores_a_single_permit_before_it_is_used(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """If pressure's next operation comes before the v0.1 producer spends the extra permit,
    it trims :not_full back to one and the bound holds again."""
    s, q = make_pair(bound=2, version="0.1")
    v01_put_with_pressure_get_inside(r, prefix, s, q)
    assert q.get(timeout=1) == b"B"
    assert state(r, s) == (0, 1)
    s.put(b"C", timeout=1)
    s.put(b"D", timeout=1)
    with pytest.raises(spec_client.QueueFull):
        s.put(b"E", timeout=0.3)
    assert state(r, s) == (2, 0)
    assert_tokens(r, s)


def test_v015_producer_with_pressure_consumer_keeps_the_bound_in_the_same_overlap(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """The same overlap with a v0.15 producer (LTRIM 0 0) leaves one permit: put D is refused."""
    s, q = make_pair(bound=2)
    v01_put_with_pressure_get_inside(r, prefix, s, q)
    assert state(r, s) == (1, 1)
    s.put(b"C", timeout=1)
    with pytest.raises(spec_client.QueueFull):
        s.put(b"D", timeout=0.3)
    assert state(r, s) == (2, 0)
    assert_tokens(r, s)


def test_pressure_producer_with_v01_consumer_never_exceeds_bound_and_repairs_the_extra_permit(
        r: redis.Redis, make_pair: Callable[..., Pair]) -> None:
    """A v0.1 get leaves two permits (invariant broken), but pressure's put decides from the
    length and trims :not_full: the P2 sequence stops at the bound, and every pressure put
    restores the invariant. (Only a v0.1 get can break it again: the final (0, 2) below.)"""
    s, q = make_pair(bound=2, version="0.1")
    assert run_p2_sequence(r, q, s, s) == [(1, 1), (0, 2), (1, 1), (2, 0), (2, 0), (2, 0)]
    assert_tokens(r, s)
    s.get(timeout=1)
    s.get(timeout=1)
    assert state(r, s) == (0, 2)
    q.put(b"F")
    assert_tokens(r, s)


def v01_get_with_pressure_put_inside(r: redis.Redis, prefix: str, s: SpecClient,
                                     q: pressure.Queue[bytes]) -> None:
    """On a full bound-2 queue, a spec get during which (right after it pops the item) pressure
    puts into the freed slot, filling the queue again before the get re-arms :not_full."""
    q.put(b"A")
    q.put(b"B")
    hooked = After(r, "brpop", s.k, lambda: q.put(b"C", timeout=1))
    assert SpecClient(hooked, "q", prefix=prefix, version=s.version).get() == b"A"  # type: ignore[arg-type]
    assert hooked.fired


def test_pressure_producer_with_v01_consumer_leaves_a_permit_on_a_full_queue_when_a_put_lands_mid_get(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """v0.1 Get re-arms unconditionally, so the overlap leaves a permit at length 2 = bound.
    pressure ignores it (its put checks the length: Full) and deletes it, restoring the invariant;
    a v0.15 spec producer arriving first would use it and overfill (shown on a second queue)."""
    s, q = make_pair(bound=2, version="0.1")
    v01_get_with_pressure_put_inside(r, prefix, s, q)
    assert state(r, s) == (2, 1)
    with pytest.raises(pressure.Full):
        q.put_nowait(b"D")
    assert state(r, s) == (2, 0)
    assert_tokens(r, s)


def test_v015_spec_producer_uses_the_permit_a_v01_get_left_on_a_full_queue_and_overfills(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """Same overlap; the next producer is a v0.15 spec client instead of pressure: it takes the
    stray permit and the queue reaches 3 items with bound 2. With a v0.15 consumer (conditional
    re-arm, P3) the overlap leaves no permit (see the next test)."""
    s, q = make_pair(bound=2, version="0.1")
    v01_get_with_pressure_put_inside(r, prefix, s, q)
    SpecClient(r, "q", prefix=prefix).put_nowait(b"D")
    assert state(r, s) == (3, 0)
    assert_tokens(r, s)


def test_v015_consumer_with_pressure_producer_leaves_no_permit_in_the_same_overlap(
        r: redis.Redis, prefix: str, make_pair: Callable[..., Pair]) -> None:
    """v0.15 Get re-arms only below the bound (P3): after the overlap the full queue has no permit."""
    s, q = make_pair(bound=2)
    v01_get_with_pressure_put_inside(r, prefix, s, q)
    assert state(r, s) == (2, 0)
    with pytest.raises(spec_client.QueueFull):
        s.put_nowait(b"D")
    assert_tokens(r, s)


# -- LIFO and priority queues: their own layout, never mistaken for a FIFO queue ----------


@pytest.mark.parametrize("kind", ["lifo", "priority"])
def test_a_spec_client_cannot_mistake_an_ordered_queue_for_a_fifo_queue(
        r: redis.Redis, url: str, prefix: str, kind: str) -> None:
    """Asked for the same name, a spec client finds no queue; pointed at the ordered queue's
    own base ('<kind>:jobs'), its put and get fail on the sorted set with WRONGTYPE, give
    their tokens back (P1), and change nothing but the ':consumer' identifier a spec Get writes
    first: the pressure queue keeps its items and order."""
    cls = pressure.LifoQueue if kind == "lifo" else pressure.PriorityQueue
    q: pressure.Queue[bytes] = cls("jobs", 3, serializer="bytes", url=url, prefix=prefix)
    for item in (b"b", b"a", b"c"):
        q.put(item)
    same_name = SpecClient(r, "jobs", prefix=prefix)
    assert not same_name.exists()
    with pytest.raises(spec_client.QueueDoesNotExist):
        same_name.put(b"x", timeout=1)
    before = {key: r.dump(key) for key in r.keys(f"{prefix}*")}
    base = SpecClient(r, f"{kind}:jobs", prefix=prefix)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        base.length()
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        base.get(timeout=1)
    # the tokens the failed calls took are back (their values are undefined by the protocol)
    assert r.llen(q.keys.consumer_free) == r.llen(q.keys.producer_free) == 1
    after = {key: r.dump(key) for key in r.keys(f"{prefix}*")}
    for key in (q.keys.consumer, q.keys.consumer_free, q.keys.producer_free):
        before.pop(key.encode(), None)  # ':consumer': the identifier a spec Get writes first
        after.pop(key.encode(), None)
    assert after == before
    assert [q.get_nowait() for _ in range(3)] == ([b"c", b"a", b"b"] if kind == "lifo"
                                                  else [b"a", b"b", b"c"])
    q.delete()
    q.disconnect()
    assert r.keys(f"{prefix}*") == []
