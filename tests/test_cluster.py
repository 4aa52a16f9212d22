"""Redis Cluster: a handle given ``connection=RedisCluster(...)`` or a ``redis+cluster://`` URL
sends every command of its queue to the master of the queue's hash slot, follows the slot
through resharding and failover, and a name whose keys could not share a slot is refused at
once (pressure/cluster.py)."""

from __future__ import annotations

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
from pressure.cluster import hash_tag, key_slot, parse_cluster_url
from pressure.connection import ConnectionConfig
from pressure.testing import ClusterTopology
from pressure.testing.spec_client import SpecClient

# tags whose slots fall on three different masters of a 3-master cluster (slots 0-5460,
# 5461-10921, 10922-16383)
TAGS = ("{b}", "{a}", "{c}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTopology]:
    """3 masters with a replica each, for the tests that do not move slots or masters."""
    with ClusterTopology() as topo:
        yield topo


@pytest.fixture
def prefix() -> str:
    return f"c{uuid.uuid4().hex[:12]}"


def _keys_on(server: Any, pattern: str) -> list[bytes]:
    client = redis.Redis(port=server.port)
    try:
        return list(client.scan_iter(match=pattern, count=1000))
    finally:
        client.close()


def test_tags_cover_three_masters() -> None:
    assert sorted(key_slot(f"x:{tag}") // 5461 for tag in TAGS) == [0, 1, 2]


def test_hash_tag_follows_redis_rule() -> None:
    assert hash_tag("p:{jobs}") == "jobs"
    assert hash_tag("p:{}:{jobs}") is None  # an empty first tag: the whole key is hashed
    assert hash_tag("p:{jobs") is None
    assert hash_tag("{a}{b}") == "a"
    assert hash_tag("plain") is None


def test_cluster_url_is_parsed_and_printed() -> None:
    config = ConnectionConfig.from_url("redis+cluster://u:secret@127.0.0.1:7000,127.0.0.1:7001/0?socket_timeout=2")
    assert config.cluster is not None
    assert config.cluster.addresses == (("127.0.0.1", 7000), ("127.0.0.1", 7001))
    assert dict(config.kwargs)["password"] == "secret"
    assert dict(config.kwargs)["socket_timeout"] == 2.0
    assert config.url == "redis+cluster://u@127.0.0.1:7000,127.0.0.1:7001/0"
    assert "secret" not in repr(config)
    assert pickle.loads(pickle.dumps(config)) == config
    assert ConnectionConfig.from_url("rediss+cluster://h").connection_class is redis.SSLConnection
    with pytest.raises(ValueError, match="only database 0"):
        ConnectionConfig.from_url("redis+cluster://127.0.0.1:7000/3")
    settings, kwargs = parse_cluster_url("redis+cluster://[::1]:7000,h")
    assert settings.addresses == (("::1", 7000), ("h", 6379))


def _silent_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    return sock


def test_a_name_without_a_hash_tag_is_refused_before_any_round_trip() -> None:
    sock = _silent_port()  # a "cluster" that would never answer: the error comes first
    url = f"redis+cluster://127.0.0.1:{sock.getsockname()[1]}"
    try:
        with pytest.raises(ValueError, match=r"hash tag.*'\{jobs\}'"):
            pressure.Queue("jobs", url=url)
        with pytest.raises(ValueError, match="hash tag"):
            pressure.LifoQueue("jobs:{}", url=url)  # an empty tag hashes the whole key
        with pytest.raises(ValueError, match="executor 'work' cannot be placed"):
            pressure.Executor("work", url=url, local_workers=False)
        sock.settimeout(0.01)
        with pytest.raises(TimeoutError):
            sock.accept()  # nobody connected
    finally:
        sock.close()


@pytest.mark.parametrize("kind", ["Queue", "LifoQueue", "PriorityQueue", "SimpleQueue"])
def test_every_kind_of_queue_on_three_slots(cluster: ClusterTopology, prefix: str, kind: str) -> None:
    for tag in TAGS:
        q = getattr(pressure, kind)(f"k{tag}", url=cluster.url, prefix=prefix)
        for item in (3, 1, 2):
            q.put(item)
        got = [q.get(timeout=1) for _ in range(3)]
        assert got == {"Queue": [3, 1, 2], "SimpleQueue": [3, 1, 2], "LifoQueue": [2, 1, 3],
                       "PriorityQueue": [1, 2, 3]}[kind]
        owner = cluster.master_of(getattr(q, "_queue", q)._keys.base)
        assert _keys_on(owner, f"{prefix}:*")  # its keys are on the slot's master, and only there
        for server in cluster.masters_at_start:
            if server is not owner:
                assert not _keys_on(server, f"{prefix}:*k{tag}*")
        q.disconnect()


def test_reliable_mode_and_batches_with_a_cluster_client(cluster: ClusterTopology, prefix: str) -> None:
    client = cluster.cluster_client()
    queues = [pressure.Queue(f"r{tag}", connection=client, prefix=prefix, reliable=True) for tag in TAGS]
    for q in queues:
        q.put_many(range(100))
    for q in queues:
        assert q.get_many(100, timeout=1) == list(range(100))
        for _ in range(100):
            q.task_done()
        q.join()
        assert q.in_flight() == []
        q.disconnect()
    client.close()


@pytest.mark.parametrize("via", ["url", "client"])
def test_a_closed_queue_held_by_another_consumer_is_looked_at_in_its_slot(
        cluster: ClusterTopology, prefix: str, via: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A get on a closed queue whose item another consumer holds looks at the holders and
    the queue in one MULTI (recover_holders): on a cluster it runs on the slot's master,
    through a node url or a cluster client; it says 'wait' while the item is held, and
    finds the item given back in the middle of the look."""
    client = cluster.cluster_client() if via == "client" else None
    where: dict[str, Any] = {"connection": client} if client is not None else {"url": cluster.url}
    for tag in TAGS:
        holder = pressure.Queue(f"h{tag}", prefix=prefix, reliable=True, **where)
        other = pressure.Queue(f"h{tag}", prefix=prefix, reliable=True, **where)
        holder.put("x")
        d = holder.receive()
        holder.close()
        with pytest.raises(pressure.Empty):  # held, unacknowledged: it may come back
            other.get_nowait()
        look = other._consumer.roles.recover_holders

        def given_back_first(cid: str, look: Any = look, d: Any = d) -> str:
            d.release()
            return look(cid)

        monkeypatch.setattr(other._consumer.roles, "recover_holders", given_back_first)
        assert other.get(timeout=5) == "x"
        other.task_done()
        with pytest.raises(pressure.ShutDown):
            other.get_nowait()
        holder.disconnect()
        other.disconnect()
    if client is not None:
        client.close()


def test_anonymous_queues_each_find_their_slot(cluster: ClusterTopology, prefix: str) -> None:
    # 24 random slots: all on one of the 3 masters with probability 3^-23 (with 6, 1 run in
    # 243 failed: it happened)
    queues = [pressure.Queue(url=cluster.url, prefix=prefix) for _ in range(24)]
    for i, q in enumerate(queues):
        q.put(i)
    assert [q.get(timeout=1) for q in queues] == list(range(24))
    assert len({cluster.master_of(q._keys.base).port for q in queues}) >= 2
    for q in queues:
        q.delete()


def test_a_tag_in_the_prefix_places_every_queue(cluster: ClusterTopology) -> None:
    prefix = f"{{p{uuid.uuid4().hex[:8]}}}"
    q: pressure.Queue[Any] = pressure.Queue("jobs", url=cluster.url, prefix=prefix)
    q.put("x")
    assert q.get(timeout=1) == "x"


def test_a_pickled_handle_rebuilds_the_cluster_connection(cluster: ClusterTopology, prefix: str) -> None:
    client = cluster.cluster_client()
    q: pressure.Queue[Any] = pressure.Queue("{p}", connection=client, prefix=prefix)
    q.put("before")
    copy = pickle.loads(pickle.dumps(q))
    assert copy._backend.config.cluster is not None
    assert copy.get(timeout=1) == "before"
    copy.put("after")
    assert q.get(timeout=1) == "after"
    copy.disconnect()
    q.disconnect()
    client.close()


def test_a_spec_client_shares_a_tagged_queue(cluster: ClusterTopology, prefix: str) -> None:
    q: pressure.Queue[bytes] = pressure.Queue("{spec}", 5, url=cluster.url, prefix=prefix, serializer="bytes")
    owner = redis.Redis(port=cluster.master_of(f"{prefix}:{{spec}}").port)
    spec = SpecClient(owner, "{spec}", prefix=prefix)
    spec.put(b"from spec")
    assert q.get(timeout=1) == b"from spec"
    q.put(b"from pressure")
    assert spec.get(timeout=1) == b"from pressure"
    owner.close()


def test_a_single_node_url_that_does_not_serve_the_slot_says_so(cluster: ClusterTopology, prefix: str) -> None:
    name = "{n}"
    owner = cluster.master_of(f"{prefix}:{name}")
    other = next(s for s in cluster.masters_at_start if s is not owner)
    with pytest.raises(pressure.PressureError, match="Redis Cluster node.*redis\\+cluster://"):
        pressure.Queue(name, url=other.url, prefix=prefix)


def _square(x: int) -> int:
    return x * x


@pytest.mark.slow
def test_executor_and_its_workers(cluster: ClusterTopology, prefix: str) -> None:
    client = cluster.cluster_client()
    with pressure.Executor("{ex}", connection=client, prefix=prefix, max_workers=2) as ex:
        assert list(ex.map(_square, range(20))) == [x * x for x in range(20)]
    with pressure.Executor(url=cluster.url, prefix=prefix, max_workers=1) as ex:  # anonymous
        assert ex.submit(_square, 7).result(timeout=60) == 49
    client.close()


def test_spark_options_take_a_cluster_url(cluster: ClusterTopology) -> None:
    pytest.importorskip("pyspark")
    from pressure.spark._options import SourceOptions

    opts = SourceOptions.parse({"url": cluster.url, "name": "{jobs}"})
    assert opts.config.cluster is not None
    assert pickle.loads(pickle.dumps(opts)).config == opts.config


# -- resharding and failover, each on a cluster of its own -----------------------------------


def _traffic(make: Any, happen: Any) -> Any:
    from tests.sentinel_traffic import run

    return run(make, happen, producer_pause=0.001, consumer_pause=0.002)


def _check(traffic: Any) -> None:
    assert traffic.acked and not traffic.lost(), traffic.summary()
    # a duplicate only where a put or an ack raised (the caller was told it was unsure)
    assert len(traffic.duplicated()) <= len(traffic.unsure) + traffic.unsure_acks, traffic.summary()
    assert traffic.put_stall < 25 and traffic.get_stall < 25, traffic.summary()


@pytest.mark.slow
def test_a_queue_follows_its_slot_through_a_migration(prefix: str, chaos_figures: list[str]) -> None:
    name = "{m}"
    with ClusterTopology(replicas=0) as topo:
        def make() -> pressure.Queue[Any]:
            return pressure.Queue(name, url=topo.url, prefix=prefix, reliable=True, visibility_timeout=2.0)

        slot = key_slot(f"{prefix}:{name}")
        moves: list[int] = []

        def happen() -> None:
            for _ in range(2):  # there and on to a third master
                source = topo.master_of_slot(slot)
                target = next(s for s in topo.masters_at_start if s is not source and s.port not in moves)
                topo.migrate_slot(slot, target, pause=0.05, batch=2)
                moves.append(source.port)
                time.sleep(1.0)

        traffic = _traffic(make, happen)
        assert topo.master_of_slot(slot).port not in moves
    chaos_figures.append(f"cluster slot migrated twice: {traffic.summary()}")
    _check(traffic)


@pytest.mark.slow
@pytest.mark.parametrize("event", ["failover", "kill"])
def test_producer_and_consumer_keep_going_through_a_failover(event: str, prefix: str,
                                                             chaos_figures: list[str]) -> None:
    name = "{f}"
    # a killed master's slot keeps a replica to confirm writes (durability) once one is promoted
    with ClusterTopology(replicas=2 if event == "kill" else 1) as topo:
        def make() -> pressure.Queue[Any]:
            return pressure.Queue(name, connection=topo.cluster_client(), prefix=prefix, reliable=True,
                                  visibility_timeout=2.0,
                                  durability=pressure.Durability(replicas=1, timeout=0.5))

        def happen() -> None:
            master = topo.master_of(f"{prefix}:{name}")
            if event == "kill":
                topo.kill_master(master)
            else:
                topo.failover(master)

        traffic = _traffic(make, happen)
    chaos_figures.append(f"cluster {event}, durability 1 replica: {traffic.summary()}")
    _check(traffic)


def test_concurrent_threads_share_a_routed_handle(cluster: ClusterTopology, prefix: str) -> None:
    q: pressure.Queue[Any] = pressure.Queue("{t}", url=cluster.url, prefix=prefix)
    got: list[Any] = []

    def consume() -> None:
        for _ in range(50):
            got.append(q.get(timeout=5))

    threads = [threading.Thread(target=consume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for i in range(100):
        q.put(i)
    for thread in threads:
        thread.join(30)
    assert sorted(got) == list(range(100))


@pytest.mark.parametrize("reliable", [False, True], ids=["default", "reliable"])
def test_large_payloads_move_natively_on_every_slot(cluster: ClusterTopology, prefix: str, reliable: bool) -> None:
    """Puts and gets of 4 KiB or more are a MULTI/EXEC of the script and the commands that move
    the bytes (lua/put.lua ARGV[3] 'm', lua/get.lua flag 'N'): every key in the queue's slot,
    on the slot's master."""
    for tag in TAGS:
        q: pressure.Queue[bytes] = pressure.Queue(f"big{tag}", url=cluster.url, prefix=prefix, serializer="bytes",
                                                  reliable=reliable)
        items = [bytes([65 + i]) * 10_000 for i in range(6)]
        q.put(items[0])
        q.put_many(items[1:])
        got = [q.get(timeout=5) for _ in range(4)] + q.get_many(10)
        assert got == items
        if reliable:
            for _ in items:
                q.task_done()
        s = q.statistics()
        assert (s.size, s.taken, s.consumed_bytes) == (0, 0, s.produced_bytes)
        owner = cluster.master_of(q._keys.base)
        stats = redis.Redis.from_url(owner.url).info("commandstats")
        assert stats.get("cmdstat_lset", {}).get("calls", 0) > 0 and stats.get("cmdstat_blmove", {}).get("calls", 0) > 0
        q.delete()
        q.disconnect()
