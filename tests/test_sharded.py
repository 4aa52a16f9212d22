"""Sharded queues (pressure/sharded.py): N pressure queues used as one, FIFO per shard, on a
single server and on a local 3-master Redis Cluster whose masters each get their share."""

from __future__ import annotations

import collections
import pickle
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.cluster import key_slot
from pressure.sharded import shard_names, shard_of
from pressure.testing import ClusterTopology

from .faults_helpers import fork_child, kill_and_reap


def _sharded(url: str, prefix: str, shards: int = 3, maxsize: int | None = None,
             **kw: Any) -> pressure.ShardedQueue[Any]:
    return pressure.ShardedQueue(f"s{uuid.uuid4().hex[:6]}", maxsize, shards=shards, url=url,
                                 prefix=prefix, **kw)


def _wait_for(predicate: Any, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# -- names and keys ----------------------------------------------------------------------


def test_shard_names_spread_over_the_slot_range() -> None:
    for n in (1, 2, 3, 6, 12):
        names = shard_names("jobs", n)
        assert len(set(names)) == n and all(name.startswith("jobs{") for name in names)
        slots = [key_slot(f"p:{name}") for name in names]
        # shard i of n hashes into the i-th n-th of the slot range: evenly over equal masters
        assert [s * n // 16384 for s in slots] == list(range(n))
    assert shard_names("jobs", 3) == shard_names("jobs", 3)  # the same in every process


def test_a_key_picks_its_shard_by_crc32() -> None:
    import zlib

    assert shard_of("user-7", 5) == zlib.crc32(b"user-7") % 5
    assert shard_of(b"user-7", 5) == shard_of("user-7", 5)
    assert shard_of(42, 5) == shard_of("42", 5)


# -- bad input: refused before any round trip ------------------------------------------


def _silent_url() -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    return sock, f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@pytest.mark.parametrize(("args", "kw", "error"), [
    (("jobs",), {"shards": 0}, ValueError),
    (("jobs",), {"shards": 257}, ValueError),
    (("jobs",), {"shards": "3"}, TypeError),
    (("jobs",), {"shards": True}, TypeError),
    (("{jobs}",), {"shards": 3}, ValueError),
    (("jobs",), {"shards": 3, "prefix": "{app}"}, ValueError),
    (("jobs",), {"shards": 3, "prefix": ""}, ValueError),
    ((b"jobs",), {"shards": 3}, TypeError),
    (("",), {"shards": 3}, ValueError),
    (("jobs", "10"), {"shards": 3}, TypeError),
    (("jobs",), {"shards": 3, "wait_slice": 0}, ValueError),
    (("jobs",), {"shards": 3, "visibility_timeout": -1}, ValueError),
    (("jobs",), {"shards": 3, "bogus": 1}, TypeError),
])
def test_bad_arguments_are_refused_before_any_round_trip(args: Any, kw: dict[str, Any],
                                                         error: type[Exception]) -> None:
    sock, url = _silent_url()
    try:
        with pytest.raises(error):
            pressure.ShardedQueue(*args, url=url, **kw)
        sock.settimeout(0.01)
        with pytest.raises(TimeoutError):
            sock.accept()  # nobody connected
    finally:
        sock.close()


def test_a_hash_tag_in_the_environments_prefix_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESSURE_PREFIX", "{app}")
    with pytest.raises(ValueError, match="prefix must not hold"):
        pressure.ShardedQueue("jobs", shards=2, url="redis://127.0.0.1:1/0")


def test_a_bad_key_or_timeout_leaves_the_queue_unchanged(url: str, prefix: str) -> None:
    q = _sharded(url, prefix)
    with pytest.raises(TypeError, match="key must be"):
        q.put("x", key=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be"):
        q.put_many(["x"], key=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        q.put("x", timeout=-1)
    with pytest.raises(ValueError, match="non-negative"):
        q.get(timeout=-1)
    with pytest.raises(ValueError, match="at least 1"):
        q.get_many(0)
    assert q.qsize() == 0 and q.statistics().produced_messages == 0


# -- the ordering contract ---------------------------------------------------------------


def test_items_of_one_key_keep_their_order(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=4)
    for seq in range(200):
        q.put((seq % 7, seq), key=f"k{seq % 7}")
    sizes = [q.shard(i).qsize() for i in range(4)]
    assert sum(sizes) == 200 and sizes.count(0) <= 1  # 7 keys over 4 shards
    got: dict[int, list[int]] = collections.defaultdict(list)
    for _ in range(200):
        k, seq = q.get(timeout=5)
        got[k].append(seq)
    assert all(seqs == sorted(seqs) and len(seqs) >= 28 for seqs in got.values())
    with pytest.raises(pressure.Empty):
        q.get_nowait()


def test_puts_without_a_key_take_the_shards_in_turn(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    for i in range(30):
        q.put(i)
    assert [q.shard(i).qsize() for i in range(3)] == [10, 10, 10]
    assert sorted(q.get() for _ in range(30)) == list(range(30))


def test_a_bound_per_shard(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3, maxsize=2)
    assert q.maxsize == 2
    for i in range(6):
        q.put_nowait(i)  # past a full shard to the next with room
    assert q.full() and q.qsize() == 6
    with pytest.raises(pressure.Full):
        q.put_nowait(6)
    with pytest.raises(pressure.Full):
        q.put(6, timeout=0.2)
    with pytest.raises(pressure.Full):
        q.put(6, key="k", timeout=0.1)
    q.get()
    q.put(6, timeout=5)  # the shard with room takes it
    assert q.qsize() == 6
    q.maxsize = 3
    assert all(q.shard(i).maxsize == 3 for i in range(3))


def test_a_blocking_get_sees_items_on_any_shard(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    got: list[Any] = []
    for target in range(3):
        thread = threading.Thread(target=lambda: got.append(q.get(timeout=30)))
        thread.start()
        time.sleep(0.3)  # it is waiting, on one shard or another
        key = next(f"k{i}" for i in range(100) if q.shard_for(f"k{i}") == target)
        q.put(target, key=key)
        thread.join(30)
    assert got == [0, 1, 2]


def test_a_get_that_times_out_takes_nothing(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3, wait_slice=0.05)
    other = pickle.loads(pickle.dumps(q))
    stop = threading.Event()

    def timed_out_gets() -> None:
        while not stop.is_set():
            try:
                q.get(timeout=0.07)
            except pressure.Empty:
                continue
            raise AssertionError("the queue was empty")

    thread = threading.Thread(target=timed_out_gets)
    thread.start()
    time.sleep(0.5)
    stop.set()
    thread.join(30)
    for i in range(3):
        assert q.shard(i).in_flight() == []
    for i in range(9):
        other.put(i)  # three on each shard
    assert sorted(other.get() for _ in range(9)) == list(range(9))


def test_batches(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    q.put_many(range(2500))  # 1000, 1000 and 500, each in one shard
    assert sorted(q.shard(i).qsize() for i in range(3)) == [500, 1000, 1000]
    q.put_many(["a", "b", "c"], key="k")
    batches = []
    while True:
        try:
            batches.append(q.get_many(1000, block=False))
        except pressure.Empty:
            break
    for batch in batches:  # one shard's, in order
        ints = [x for x in batch if isinstance(x, int)]
        assert ints == sorted(ints) and batch[:len(ints)] == ints
    everything = [x for batch in batches for x in batch]
    assert sorted(x for x in everything if isinstance(x, int)) == list(range(2500))
    assert [x for x in everything if isinstance(x, str)] == ["a", "b", "c"]


def test_put_many_reports_how_many_went_in(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=2, maxsize=1000)
    with pytest.raises(pressure.Full) as info:
        q.put_many(range(2500), timeout=0.2)
    assert info.value.items_put == 2000 and q.qsize() == 2000
    small = _sharded(url, prefix, shards=3, maxsize=10)
    small.put_many(range(25), timeout=5)  # past full shards to the ones with room
    assert small.qsize() == 25 and sorted(small.shard(i).qsize() for i in range(3))[-1] == 10
    with pytest.raises(pressure.Full) as info:
        small.put_many(range(10), block=False)
    assert info.value.items_put == 5 and small.full()


def test_close_drains_then_shuts_down(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    q.put_many(range(5))
    q.close()
    assert q.closed
    with pytest.raises(pressure.ShutDown):
        q.put(9)
    assert sorted(q) == list(range(5))
    with pytest.raises(pressure.ShutDown):
        q.get(timeout=1)
    stats = q.statistics()
    assert stats.closed and stats.produced_messages == 5 and stats.consumed_messages == 5
    assert len(stats.shards) == 3
    q.delete()
    assert not q.shard(0).exists
    with pytest.raises(pressure.QueueDoesNotExist):
        q.delete()


@pytest.mark.parametrize("reliable", [False, True])
def test_task_done_and_join(url: str, prefix: str, reliable: bool) -> None:
    q = _sharded(url, prefix, shards=3, reliable=reliable)
    q.put_many(range(30))
    assert q.unfinished_tasks == 30

    def work() -> None:
        mine = pickle.loads(pickle.dumps(q))  # a handle per thread (reliable: per consumer)
        for _ in range(15):
            mine.get(timeout=5)
            mine.task_done()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    q.join()
    assert q.unfinished_tasks == 0
    for thread in threads:
        thread.join(10)
    with pytest.raises(ValueError, match="too many"):
        q.task_done()
    assert all(q.shard(i).in_flight() == [] for i in range(3))


def test_reliable_deliveries_are_settled_on_their_shard(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=2, reliable=True)
    q.put("a", key="x")
    delivery = q.receive(timeout=5)
    assert delivery.item == "a"
    delivery.release()
    again = q.receive(timeout=5)
    assert again.item == "a" and again.deliveries == 2
    again.ack()
    assert all(q.shard(i).in_flight() == [] for i in range(2)) and q.qsize() == 0


def test_a_pickled_handle_reaches_the_same_shards(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    copy = pickle.loads(pickle.dumps(q))
    assert copy.shards == 3 and copy.name == q.name
    copy.put("x", key="k")
    assert q.get(timeout=5) == "x"
    assert "url" in repr(copy)


# -- consumers SIGKILLed ---------------------------------------------------------------------


def _consume_forever(url: str, prefix: str, name: str, marker: str, reliable: bool) -> None:
    q: pressure.ShardedQueue[Any] = pressure.ShardedQueue(name, shards=3, url=url, prefix=prefix,
                                                          reliable=reliable)
    client = redis.Redis.from_url(url)
    while True:
        q.get()
        client.incr(marker)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_consumer_killed_while_waiting_or_holding_loses_nothing_it_did_not_get(
        url: str, prefix: str, r: redis.Redis, reliable: bool) -> None:
    q = _sharded(url, prefix, shards=3, reliable=reliable)
    marker = f"{prefix}:test:got"
    pid = fork_child(_consume_forever, url, prefix, q.name, marker, reliable)
    try:
        time.sleep(0.5)  # it is blocked in get(), holding a shard's consumer role
        q.put(0)  # the one item it can get: a get of its that ran is one it counted
        _wait_for(lambda: int(r.get(marker) or 0) >= 1)
        time.sleep(0.3)  # back in get(), waiting on the shards again
    finally:
        kill_and_reap(pid)
    got_by_child = int(r.get(marker) or 0)
    assert got_by_child == 1
    q.put_many(range(1, 30))
    got = []
    deadline = time.monotonic() + 60
    while len(got) < (30 if reliable else 30 - got_by_child) and time.monotonic() < deadline:
        try:
            got.append(q.get(timeout=1))
            q.task_done()
        except pressure.Empty:
            continue
    if reliable:  # what the dead consumer held comes back (once seen dead on this host)
        assert sorted(got) == list(range(30))
    else:  # it loses only what its gets returned
        assert sorted(got) == list(range(1, 30))
    assert len(set(got)) == len(got)


# -- on a Redis Cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTopology]:
    with ClusterTopology(replicas=0) as topo:
        yield topo


@pytest.mark.parametrize("shards", [3, 6])
def test_shards_spread_over_the_masters(cluster: ClusterTopology, prefix: str, shards: int) -> None:
    q: pressure.ShardedQueue[Any] = pressure.ShardedQueue("jobs", shards=shards, url=cluster.url,
                                                          prefix=prefix)
    owners = collections.Counter(cluster.master_of(q.shard(i).keys.base).port for i in range(shards))
    assert sorted(owners.values()) == [shards // 3] * 3
    for seq in range(60):
        q.put(seq, key=seq % 5)
    got = collections.defaultdict(list)
    for _ in range(60):
        seq = q.get(timeout=5)
        got[seq % 5].append(seq)
    assert all(seqs == sorted(seqs) for seqs in got.values())
    q.delete()


def test_a_cluster_client_and_a_pickled_handle(cluster: ClusterTopology, prefix: str) -> None:
    client = cluster.cluster_client()
    q: pressure.ShardedQueue[Any] = pressure.ShardedQueue("c", 10, shards=3, connection=client,
                                                          prefix=prefix, reliable=True)
    q.put_many(range(20))
    copy = pickle.loads(pickle.dumps(q))
    assert sorted(copy.get() for _ in range(20)) == list(range(20))
    for _ in range(20):
        copy.task_done()
    copy.join()
    assert copy.statistics().consumed_messages == 20
    client.close()


@pytest.mark.slow
def test_a_shard_master_failed_over_under_traffic(prefix: str, chaos_figures: list[str]) -> None:
    """Keyed producers and a reliable consumer, one shard's master killed: nothing acknowledged
    is lost (durability: a replica confirms every put and ack), per-key order holds apart from
    redeliveries, and the other shards never stop."""
    with ClusterTopology(replicas=2) as topo:
        def make() -> pressure.ShardedQueue[Any]:
            return pressure.ShardedQueue("f", shards=3, connection=topo.cluster_client(), prefix=prefix,
                                         reliable=True, visibility_timeout=2.0,
                                         durability=pressure.Durability(replicas=1, timeout=0.5))

        from tests.sentinel_traffic import run

        def happen() -> None:
            topo.kill_master(topo.master_of(make().shard(1).keys.base))

        traffic = run(make, happen, producer_pause=0.001, consumer_pause=0.002)
    chaos_figures.append(f"sharded queue, a shard's master killed: {traffic.summary()}")
    assert traffic.acked and not traffic.lost(), traffic.summary()
    assert len(traffic.duplicated()) <= len(traffic.unsure) + traffic.unsure_acks, traffic.summary()


@pytest.mark.slow
def test_the_sharded_bench_runs_on_a_cluster_of_its_own() -> None:
    from pressure.bench.sharded import print_sharded_report, run_sharded

    cells = run_sharded(200, 100, 1, (1, 3), (1, 10))
    assert [(c.batch, c.shards) for c in cells] == [(1, 0), (1, 1), (1, 3), (10, 0), (10, 1), (10, 3)]
    assert all(c.error is None and c.msgs_per_s and len(c.node_cpu) == 3 for c in cells), cells
    print_sharded_report(cells, 1, 2)


def test_put_many_puts_nothing_if_an_item_cannot_be_serialized(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3)
    items: list[Any] = [*range(2500), threading.Lock()]  # the bad one in the third chunk
    with pytest.raises(pressure.SerializationError):
        q.put_many(items)
    assert q.qsize() == 0


def test_a_get_goes_on_waiting_on_open_shards_when_one_is_closed(url: str, prefix: str) -> None:
    q = _sharded(url, prefix, shards=3, wait_slice=0.05)
    q.shard(1).close()  # one shard closed (a close interrupted half way): the others still serve
    with pytest.raises(pressure.Empty):
        q.get(timeout=0.3)
    key = next(f"k{i}" for i in range(100) if q.shard_for(f"k{i}") == 2)
    threading.Timer(0.3, lambda: q.put("late", key=key)).start()
    assert q.get(timeout=30) == "late"
    q.close()
    with pytest.raises(pressure.ShutDown):
        q.get(timeout=5)
