"""The benchmark's parts that need no benchmark run: the queue section's "spec literal"
transport (the runs themselves are in test_examples.py)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from multiprocessing.context import SpawnContext
from typing import Any

import pytest
import redis

from pressure.bench import queues
from pressure.testing import RedisServer


def _ctx() -> SpawnContext:
    ctx = multiprocessing.get_context("spawn")
    assert isinstance(ctx, SpawnContext)
    return ctx


@pytest.fixture
def spec_transport(url: str) -> Iterator[queues.SpecLiteralTransport]:
    transport = queues.SpecLiteralTransport(url)
    transport.setup(_ctx())
    yield transport
    transport.cleanup()


def test_spec_literal_put_that_times_out_on_a_full_queue_gives_the_producer_role_back(
        spec_transport: queues.SpecLiteralTransport, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put whose wait for ``:not_full`` runs out returns ``:producer_free`` (the literal
    client's erratum P1), so the queue is not left with no producer token for good."""
    monkeypatch.setattr(queues, "GET_TIMEOUT", 0.5)
    keys = spec_transport.keys
    assert keys is not None
    r.delete(keys.not_full)  # no permit: what a producer meets on a full queue
    put = spec_transport.open_put()
    with pytest.raises(Exception):  # noqa: B017 - the spec client's QueueFull
        put(b"x" * 16)
    assert r.llen(keys.producer_free) == 1
    assert r.llen(keys.base) == 0


def _commands(admin: redis.Redis) -> int:
    """Commands the server ran since the last CONFIG RESETSTAT, the admin's own excluded."""
    stats = admin.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items()
               if not k.startswith(("cmdstat_info", "cmdstat_config")))  # CONFIG|RESETSTAT too


def test_spec_literal_round_trips_per_put_and_get_are_as_documented() -> None:
    """The spec literal transport sends one command per round trip: 12 per put and 11 per
    get on its unbounded queue (the docstring of pressure.bench says so)."""
    with RedisServer() as server:
        transport = queues.SpecLiteralTransport(server.url)
        transport.setup(_ctx())
        admin = redis.Redis.from_url(server.url)
        try:
            put, get = transport.open_put(), transport.open_get()
            put(b"warm-up" * 2)
            assert get() == b"warm-up" * 2  # both connections are open now
            counts = []
            for operation in (lambda: put(b"p" * 16), get):
                admin.config_resetstat()
                operation()
                counts.append(_commands(admin))
            assert counts == [12, 11]
        finally:
            transport.cleanup()
            admin.close()


def test_server_cost_counts_what_the_server_runs(url: str) -> None:
    """--server-cost: the raw single-item baseline runs exactly LPUSH + BRPOP per message, and
    every pressure path costs the server something and sends at least one EVALSHA per batch."""
    from pressure.bench import server_cost

    base = server_cost.measure(url, 300, server_cost.raw_single)
    assert base.commands == pytest.approx(2.0, abs=0.02) and base.evalsha == 0 and base.cpu_us > 0
    for path in server_cost.PATHS:
        ours = server_cost.measure(url, 500, path.pressure)
        assert ours.cpu_us > 0 and ours.evalsha >= 1 / 500 and ours.commands > 0, (path.label, ours)


def test_the_floor_scripts_keep_the_protocol(make_queue: Any, r: redis.Redis) -> None:
    """--server-cost's floor lines are a yardstick only if their scripts do what a conforming
    client must: what the floor puts, pressure gets, and the reverse, with the counters and
    the permit kept; a full, closed or missing queue refused; what is taken kept until dropped."""
    from pressure.bench._floor import _source

    put, get = r.script_load(_source("floor_put.lua")), r.script_load(_source("floor_get.lua"))
    q = make_queue("floor", maxsize=3, serializer="bytes")
    base = q.keys.base
    assert r.evalsha(put, 1, base, "p", b"a") == 1
    assert r.evalsha(put, 1, base, "p", b"bb", b"ccc") == 3
    assert r.llen(q.keys.not_full) == 0  # at the bound: no permit, and the next put is refused
    assert r.evalsha(put, 1, base, "p", b"d") == -1
    assert q.get_nowait() == b"a" and q.qsize() == 2 and q.full() is False
    entry = r.evalsha(get, 1, base, "c#1", "")
    assert entry.endswith(b":bb") and entry.split(b":")[1] == b"1"
    assert r.lrange(f"{base}:pressure:inflight:c#1", 0, -1) == [entry]  # kept until dropped
    q.put(b"e")
    assert r.evalsha(get, 1, base, "c#1", 5) == [b"ccc", b"e"]
    held = r.lrange(f"{base}:pressure:held:c#1", 0, -1)
    assert held[0].startswith(b"h:") and held[1:] == [b"e", b"ccc"]  # as get.lua's: newest first
    assert r.evalsha(get, 1, base, "c#1", "") == -5
    k = q.keys
    assert r.mget(k.produced_messages, k.produced_bytes, k.consumed_messages, k.consumed_bytes) == [
        b"4", b"7", b"4", b"7"]
    assert r.llen(q.keys.not_full) == 1 and r.llen(q.keys.producer_free) == 1
    q.close()
    assert r.evalsha(put, 1, base, "p", b"f") == -3
    assert r.evalsha(put, 1, f"{base}-none", "p", b"f") == -4
    assert r.evalsha(get, 1, f"{base}-none", "c#1", "") == -4


def test_the_floor_lines_move_every_message(url: str) -> None:
    """Each floor path moves its messages through a queue of its own, which it deletes."""
    from pressure.bench import server_cost

    floors = [path for path in server_cost.PATHS if path.floor is not None]
    assert [p.label for p in floors] == ["single put+get, unbounded", "put_many/get_many 100",
                                         "put_many/get_many 500"]
    client = redis.Redis.from_url(url)
    try:
        before = set(client.keys("*cost-*"))
        for path in floors:
            assert path.floor is not None
            cost = server_cost.measure(url, 1000, path.floor)
            assert cost.evalsha >= 2 / 500 and cost.cpu_us > 0, (path.label, cost)
        assert set(client.keys("*cost-*")) == before
    finally:
        client.close()


def test_rtt_proxy_delays_and_keeps_order(url: str) -> None:
    """--rtt: every round trip through the proxy takes at least the RTT (a lower bound only:
    a loaded machine adds, never removes), and pipelined commands keep their order."""
    import time

    from pressure.bench._delay import DelayProxy

    with DelayProxy(url, 0.02) as proxy:
        r = redis.Redis.from_url(proxy.url)
        r.ping()
        start = time.monotonic()
        for _ in range(5):
            r.ping()
        assert time.monotonic() - start >= 5 * 0.02
        pipe = r.pipeline(transaction=False)
        for i in range(500):
            pipe.rpush("rtt-order", i)
        pipe.execute()
        assert [int(x) for x in r.lrange("rtt-order", 0, -1)] == list(range(500))
        r.delete("rtt-order")
        r.close()


@pytest.mark.slow
def test_server_cost_instructions_counts_a_private_server_under_callgrind(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--server-cost-instructions: a server of its own under callgrind, each path's
    instructions per message against its baseline's (raw LPUSH + BRPOP costs some thousands;
    a script call, many more), and the server stopped after."""
    import shutil

    from pressure.bench import _cli, server_cost
    from pressure.bench._callgrind import CallgrindRedis

    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed")
    with CallgrindRedis() as server:
        base = server_cost.measure(server.url, 100, server_cost.raw_single, server)
        ours = server_cost.measure(server.url, 100, server_cost.single(0), server)
        process = server.process
    assert process is not None and process.poll() is not None
    assert base.instructions is not None and 2_000 < base.instructions < 200_000
    assert ours.instructions is not None and ours.instructions > 3 * base.instructions
    assert base.commands == pytest.approx(2.0, abs=0.05)
    # --url: the session's private server (never REDIS_URL's) for the report's machine lines
    assert _cli.run(["--url", url, "--server-cost-instructions", "--server-cost-count", "100"]) == 0
    out = capsys.readouterr().out
    assert "Redis server instructions per message (100 messages per path" in out
    assert out.count("x |") >= len(server_cost.PATHS)
