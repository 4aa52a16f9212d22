"""pressure.aio through Redis Sentinel: a ``redis+sentinel://`` URL or a
``redis.asyncio.sentinel.Sentinel(...).master_for(name)`` client reaches the master the sentinels
name (never a server built from copied settings), for puts, gets, inspection and durability,
and after a failover, the master named then."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio.sentinel

import pressure
from pressure.aio import AsyncQueue
from pressure.testing import SentinelTopology


@pytest.fixture(scope="module")
def topology() -> Iterator[SentinelTopology]:
    with SentinelTopology() as topo:
        yield topo


@pytest.fixture
def prefix() -> str:
    return f"a{uuid.uuid4().hex[:12]}"


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket of this process connects to (asyncio's included) during the test."""
    seen: list[Any] = []
    loop_connect = asyncio.selector_events.BaseSelectorEventLoop.sock_connect
    original = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        seen.append(address)
        original(self, address)

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> None:
        seen.append(address)
        await loop_connect(self, sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", sock_connect)
    return seen


def test_a_sentinel_url_reaches_only_the_master(topology: SentinelTopology, prefix: str,
                                                connects: list[Any]) -> None:
    async def main() -> None:
        async with AsyncQueue[Any]("q", url=topology.url, prefix=prefix, reliable=True,
                                   durability=pressure.Durability(replicas=1, timeout=5)) as q:
            assert repr(q).endswith(f"url={topology.url!r}>")
            await q.put(1)
            await q.put_many([2, 3], ttl=60)
            assert await q.get(timeout=5) == 1
            assert await q.get_many(2, timeout=5) == [2, 3]
            await q.task_done()
            assert (await q.statistics()).produced_messages == 3
            await q.delete()

    asyncio.run(main())
    named = {topology.master_address(), *topology.sentinel_addresses}
    assert connects and {tuple(a)[:2] for a in connects} <= named, connects


def test_an_asyncio_master_for_client_is_followed_to_its_sentinels(topology: SentinelTopology, prefix: str,
                                                                   connects: list[Any]) -> None:
    async def main() -> None:
        sentinel = redis.asyncio.sentinel.Sentinel(topology.sentinel_addresses, socket_timeout=2.0)
        client = sentinel.master_for(topology.service)
        async with AsyncQueue[Any]("q", connection=client, prefix=prefix) as q:
            assert q.keys.base.endswith(":q")
            await q.put("x")
            assert await q.get(timeout=5) == "x"
            await q.delete()
        sync = pressure.Queue("q2", url=topology.url, prefix=prefix)
        sync.put("from sync")
        async with AsyncQueue[Any]("q2", connection=client, prefix=prefix) as q2:
            assert await q2.get(timeout=5) == "from sync"  # the same server
            await q2.delete()
        sync.disconnect()
        await client.aclose()
        for s in sentinel.sentinels:
            await s.aclose()

    asyncio.run(main())
    named = {topology.master_address(), *topology.sentinel_addresses}
    assert {tuple(a)[:2] for a in connects} <= named, connects


def test_a_replica_client_is_refused(topology: SentinelTopology, prefix: str) -> None:
    sentinel = redis.asyncio.sentinel.Sentinel(topology.sentinel_addresses)
    with pytest.raises(ValueError, match="replica client"):
        AsyncQueue("q", connection=sentinel.slave_for(topology.service), prefix=prefix)


def test_after_a_failover_the_handle_follows_the_new_master(prefix: str) -> None:
    with SentinelTopology() as topology:
        async def main() -> None:
            async with AsyncQueue[Any]("q", url=topology.url, prefix=prefix,
                                       durability=pressure.Durability(replicas=1, timeout=5)) as q:
                await q.put("before")  # a replica has it
                old = topology.master()
                new = await asyncio.to_thread(topology.failover)
                assert new is not old
                probe = redis.Redis(port=old.port)
                deadline = time.monotonic() + 30
                while probe.info("replication")["role"] != "slave":  # the old master takes writes
                    assert time.monotonic() < deadline                 # until it is demoted (~10 s)
                    await asyncio.sleep(0.1)
                probe.close()
                for _ in range(50):  # READONLY from the demoted master: refused (did not run)
                    try:
                        await q.put("after", block=False)
                        break
                    except pressure.NotReplicated:
                        break  # it ran: the new master has no replica until the old one rejoins
                    except pressure.BackendError as exc:
                        assert not isinstance(exc, pressure.OutcomeUnknown), exc
                        await asyncio.sleep(0.2)
                assert await q.get(timeout=10) == "before"
                assert await q.get(timeout=10) == "after"
                assert (await q.statistics()).produced_messages >= 2

        asyncio.run(main())
