"""Redis Sentinel: a handle given ``Sentinel(...).master_for(name)`` or a ``redis+sentinel://``
URL talks to the master the sentinels name, and only to it (never to a server built from
copied settings), in every feature, across pickling and through failovers."""

from __future__ import annotations

import pickle
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import pressure
from pressure.testing import SentinelTopology


@pytest.fixture(scope="module")
def topology() -> Iterator[SentinelTopology]:
    """One master + replica + 3 sentinels for the tests that do not change who is master."""
    with SentinelTopology() as topo:
        yield topo


@pytest.fixture
def prefix() -> str:
    return f"s{uuid.uuid4().hex[:12]}"


class Decoy:
    """A listening socket where copied settings would send pressure: counts the connections
    it is offered (it never answers one)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def decoy() -> Iterator[Decoy]:
    d = Decoy()
    yield d
    d.close()


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket of this process connects to during the test."""
    seen: list[Any] = []
    original = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        seen.append(address)
        original(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def test_master_for_reaches_only_the_master(topology: SentinelTopology, prefix: str,
                                            decoy: Decoy, connects: list[Any]) -> None:
    # settings copied from the pool (host/port it was given, or the defaults) lead to the decoy
    client = topology.sentinel().master_for(topology.service, host="127.0.0.1", port=decoy.port)
    q: pressure.Queue[Any] = pressure.Queue("q", connection=client, prefix=prefix)
    q.put("x")
    q.put_many(["y", "z"])
    assert [q.get(timeout=1), *q.get_many(2, timeout=1)] == ["x", "y", "z"]
    assert q.qsize() == 0
    q.disconnect()
    master = topology.master_address()
    named = {master, *topology.sentinel_addresses}
    assert decoy.accepted == 0
    assert {tuple(a) for a in connects} <= named, connects
    client.close()


def test_sentinel_url_reaches_only_the_master(topology: SentinelTopology, prefix: str,
                                              connects: list[Any]) -> None:
    q: pressure.Queue[Any] = pressure.Queue("q", url=topology.url, prefix=prefix)
    q.put(1)
    assert q.get(timeout=1) == 1
    assert q.url == topology.url
    q.disconnect()
    assert {tuple(a) for a in connects} <= {topology.master_address(), *topology.sentinel_addresses}


@pytest.mark.parametrize("kind", ["Queue", "LifoQueue", "PriorityQueue", "SimpleQueue"])
def test_every_kind_of_queue(topology: SentinelTopology, prefix: str, kind: str) -> None:
    client = topology.master_for()
    q = getattr(pressure, kind)("k", connection=client, prefix=prefix)
    for item in (3, 1, 2):
        q.put(item)
    got = [q.get(timeout=1) for _ in range(3)]
    assert got == {"Queue": [3, 1, 2], "SimpleQueue": [3, 1, 2], "LifoQueue": [2, 1, 3],
                   "PriorityQueue": [1, 2, 3]}[kind]
    client.close()


def test_reliable_mode_and_batches(topology: SentinelTopology, prefix: str) -> None:
    client = topology.master_for()
    q: pressure.Queue[Any] = pressure.Queue("r", connection=client, prefix=prefix, reliable=True)
    q.put_many(range(100))
    assert q.get_many(100, timeout=1) == list(range(100))
    for _ in range(100):
        q.task_done()
    q.join()
    assert q.in_flight() == []
    assert client.connection_pool.get_master_address() == topology.master_address()
    client.close()


def test_a_pickled_handle_rebuilds_the_sentinel_connection(topology: SentinelTopology, prefix: str,
                                                           decoy: Decoy, connects: list[Any]) -> None:
    client = topology.sentinel().master_for(topology.service, host="127.0.0.1", port=decoy.port)
    q: pressure.Queue[Any] = pressure.Queue("p", connection=client, prefix=prefix)
    q.put("before")
    copy = pickle.loads(pickle.dumps(q))
    assert copy._backend.config.sentinel is not None
    assert copy.get(timeout=1) == "before"
    copy.put("after")
    assert q.get(timeout=1) == "after"
    copy.disconnect()
    q.disconnect()
    client.close()
    assert decoy.accepted == 0
    assert {tuple(a) for a in connects} <= {topology.master_address(), *topology.sentinel_addresses}


def _square(x: int) -> int:
    return x * x


@pytest.mark.slow
def test_executor_and_its_workers(topology: SentinelTopology, prefix: str) -> None:
    client = topology.master_for()
    with pressure.Executor(connection=client, prefix=prefix, max_workers=2) as ex:
        assert list(ex.map(_square, range(20))) == [x * x for x in range(20)]
    with pressure.Executor(url=topology.url, prefix=prefix, max_workers=1) as ex:
        assert ex.submit(_square, 7).result(timeout=60) == 49
    client.close()


def test_redis_url_environment(topology: SentinelTopology, prefix: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", topology.url)
    q: pressure.Queue[Any] = pressure.Queue("e", prefix=prefix)
    q.put("x")
    assert q.get(timeout=1) == "x"
    assert q._backend.config.sentinel is not None
    q.disconnect()


def test_a_replica_client_is_refused(topology: SentinelTopology, prefix: str) -> None:
    replica = topology.sentinel().slave_for(topology.service)
    with pytest.raises(ValueError, match="master_for"):
        pressure.Queue("q", connection=replica, prefix=prefix)
    replica.close()


def test_spark_options_take_a_sentinel_url(topology: SentinelTopology) -> None:
    pytest.importorskip("pyspark")
    from pressure.spark._options import SourceOptions

    opts = SourceOptions.parse({"url": topology.url, "name": "jobs"})
    assert opts.config.sentinel is not None
    assert opts.config.url == topology.url
    copy = pickle.loads(pickle.dumps(opts))
    assert copy.config == opts.config
