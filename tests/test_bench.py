"""The benchmark's parts: the queue section's "spec literal" transport, the server-cost
paths, and a small run of the payload section (the other sections' runs are in
test_examples.py)."""

from __future__ import annotations

import multiprocessing
import re
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
@pytest.mark.timeout(360)  # a server and three Python clients under valgrind: about 100 s idle, more on a busy machine
def test_server_cost_instructions_counts_a_private_server_under_callgrind(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--server-cost-instructions: a server of its own under callgrind, each path's
    instructions per message against its baseline's (raw LPUSH + BRPOP costs some thousands;
    a script call, many more), and the server stopped after; then the clients' instructions
    per call, each client under callgrind."""
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
    # and where a put's and a get's script call spend theirs, in parts that add up
    assert "Where a script call's instructions go (100 calls of each" in out
    for line in ("put (put.lua)", "get (get.lua 'nowait', and the DEL posted in front)"):
        row = next(row for row in out.splitlines() if row.startswith(line))
        total, call, library, rest = (int(cell.split()[0].replace(",", "")) for cell in row.split("|")[1:])
        assert call > 2_000 and library > 1_000 and rest > 0
        assert call + library + rest == pytest.approx(total, abs=3)
    # and what the clients execute per call: pressure's, raw redis-py's and the script floor's
    assert "Client instructions per call (100 puts, then 100 gets" in out
    for line in ("pressure.Queue (default mode)", "redis-py lpush / brpop (raw)", "script floor"):
        row = next(row for row in out.splitlines() if row.startswith(line))
        put, get, both = (int(cell.replace(",", "")) for cell in row.split("|")[1:])
        assert put > 5_000 and get > 5_000 and both == pytest.approx(put + get, abs=2)


def test_script_cost_rows_split_a_call_in_parts_that_add_up() -> None:
    from pressure.bench.script_cost import ScriptCost, format_script_costs

    title, header, rule, row = format_script_costs([ScriptCost("put (put.lua)", 100_000, 20_000, 10_000, 20)], 500)
    assert title.startswith("Where a script call's instructions go (500 calls of each")
    assert row.split("|")[1:] and [c.strip() for c in row.split("|")] == [
        "put (put.lua)", "100,000", "20,000 (20%)", "10,000 (10%), 20 definitions", "70,000 (70%)"]


# -- the payload section ------------------------------------------------------------

_RATIO = re.compile(r"(\d+\.\d\d)x")


def test_bench_payload_prints_every_line_its_ratios_and_goals(
        url: str, r: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    """--payload runs only the payload section: a row per payload size in which every ratio
    to raw (speed and server CPU, the floor, the script floor, single items and both batch
    sizes) and pressure default's to the floor is a positive number, every line's median and
    range (the floor's with positive msgs/s, MB/s and CPU), where each single-item line's CPU
    goes (producer, consumer, Redis), the goals each met or not met, (b) beside it against
    the floor, (a) and (c) beside them the script floor's; no key left behind."""
    from pressure.bench import _cli

    before = set(r.keys("*pressure-bench*"))
    assert _cli.run(["--url", url, "--payload", "--payload-sizes", "100,20000", "--count", "600",
                     "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert set(r.keys("*pressure-bench*")) == before
    assert "error" not in out and "executor" not in out and "spec literal" not in out
    table, rest = out.split("payload | msgs | raw msgs/s (MB/s) | raw CPU µs/msg |")[1].split("every line:")
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]]
            for line in table.splitlines()[1:] if "|" in line and "--+--" not in line}
    assert list(rows) == ["100 B", "20 KB"]
    for size, (count, raw, raw_cpu, *pairs, mp) in rows.items():
        assert count == "600" and re.fullmatch(r"[\d,]+ \([\d.]+\)", raw) and float(raw_cpu) > 0, size
        assert len(pairs) == 8 and float(mp.replace(",", "")) > 0, size
        for pair in pairs:  # floor, script floor, default, bounded, reliable, default vs floor, batches
            ratios = [float(x) for x in _RATIO.findall(pair)]
            assert len(ratios) == 2 and all(x > 0 for x in ratios), (size, pair)
    spread, goals = rest.split("goals (payload sizes, from the medians):")
    spread, cpu = spread.split("where each message's CPU goes")
    lines = [line for line in spread.splitlines() if " | " in line][1:]
    assert len(lines) == 2 * 11  # raw, floor, script floor, 3 modes, 2 x (raw batch, batch), mp
    cpu_rows = [[c.strip() for c in line.split("|")] for line in cpu.splitlines() if " | " in line][1:]
    assert len(cpu_rows) == 2 * 7, cpu_rows  # raw, floor, script floor, 3 modes, mp
    for row in cpu_rows:  # producer, consumer, Redis (none for mp), total, total vs raw
        figures = [float(x) for x in re.findall(r"\d+\.\d+", " ".join(row[2:]))]
        assert len(figures) == (4 if row[1] == "multiprocessing.Queue" else 5), row
        assert all(x > 0 for x in figures), row
    assert all(float(x) > 0 for line in lines for x in _RATIO.findall(line))
    floor = [[c.strip() for c in line.split("|")] for line in lines
             if "raw kept until received (BLMOVE to a held list)" in line]
    assert [row[0] for row in floor] == ["100 B", "20 KB"], floor
    for row in floor:  # msgs/s (min-max), MB/s, CPU µs/msg (min-max), speed and CPU vs raw
        figures = [float(x.replace(",", "")) for x in re.findall(r"[\d,]+(?:\.\d+)?", " ".join(row[2:7]))]
        assert len(figures) == 9 and all(x > 0 for x in figures), row
    verdicts = [line for line in goals.strip().splitlines()]
    assert len(verdicts) == 3 + 2 * 3 + 3 + 4, verdicts  # (a) and its script floor's, (b) and (b, floor), (c)...
    assert [v.split()[0] + " " + v.split()[1] for v in verdicts if "script floor" in v] == [
        "(a, script", "(c, script"], verdicts
    growth = [v.split()[0] + " " + v.split()[1] for v in verdicts if v.startswith("  (b")]
    assert growth == ["(b) 20", "(b, floor)"] * 3, growth  # each mode's (b), then against the floor
    assert all(v.endswith("µs/msg over floor)") for v in verdicts if v.startswith("  (b, floor)")), verdicts
    for line in verdicts:
        assert re.search(r" (\d+\.\d\d)x  (met|not met) \(.+\)$", line), line
        assert float(_RATIO.findall(line)[0]) > 0, line


def test_payload_counts_options_and_goal_thresholds() -> None:
    """Each line moves --count messages at 100 B, 64 MiB at bigger sizes but never fewer than
    256; a batch size runs where the line's messages hold one. --payload runs alone, the
    default run includes it, and its rounds default to 3. A goal is met exactly at its bar."""
    from pressure import bench
    from pressure.bench import payload

    assert [payload.messages(s, 20_000) for s in (100, 10_000, 1_000_000)] == [20_000, 6_710, 256]
    assert payload.messages(1_000_000, 100) == 100
    only = bench.config_from_args(bench.parse_args(["--payload", "--payload-sizes", "100,1000000"]))
    assert (only.queues, only.executors, only.batches, only.payloads) == (False, False, False, True)
    assert only.payload_sizes == (100, 1_000_000) and only.payload_repeat == 3 and only.repeat == 1
    default = bench.config_from_args(bench.parse_args([]))
    assert (default.queues, default.executors, default.payloads) == (True, True, True)
    assert bench.config_from_args(bench.parse_args(["--repeat", "2"])).payload_repeat == 2
    for alone in ("--executor", "--no-executor", "--batch", "--server-cost", "--pool"):
        assert bench.config_from_args(bench.parse_args([alone])).payloads is False, alone
    with pytest.raises(SystemExit):
        bench.parse_args(["--payload", "--batch"])

    report = payload.PayloadReport((100, 10_000), count=1_000, maxsize=100, repeat=1)
    assert report.batches(100) == (100, 500)
    for size, raw_cpu in ((100, 10.0), (10_000, 20.0)):
        report.line("raw", size).add(1000.0, raw_cpu, None)
        report.line("floor", size).add(950.0, raw_cpu + (4.0 if size == 100 else 2.0), None)
        report.line("raw x100", size).add(1000.0, 1.0, None)
        report.line("raw x500", size).add(1000.0, 1.0, None)
        for mode, speed in (("default", 900.0), ("bounded", 800.0), ("reliable", 899.0)):
            report.line(mode, size).add(speed, raw_cpu + (10.0 if size == 100 else 12.0), None)
        report.line("batch x100", size).add(900.0, 2.0, None)
        report.line("batch x500", size).add(None, None, "TimeoutError: ...")
    goals = payload.format_payload_goals(report)
    verdict = {line.split("  ")[1].strip(): line.rsplit("x  ", 1)[-1].split(" (")[0] for line in goals[1:]}
    assert verdict["(a) 10 KB default speed >= 0.9x raw"] == "met"
    assert verdict["(a) 10 KB reliable speed >= 0.9x raw"] == "not met"
    assert verdict["(b) 10 KB default extra CPU <= 1.2x 100 B's"] == "met"  # 12 µs over raw against 10
    assert verdict["(b, floor) 10 KB default extra CPU <= 1.2x 100 B's"] == "not met"  # 10 µs over it against 6
    assert any(line.endswith("(10.0 vs 6.00 µs/msg over floor)") for line in goals), goals
    assert "0.95x / 1.45x" in payload.format_payload_table(report)[3]  # default vs floor at 10 KB: 900/950, 32/22
    assert verdict["(c) 100 B bounded speed >= 0.8x raw"] == "met"
    assert verdict["(d) 10 KB put_many/get_many 100 >= 0.9x raw"] == "met"
    failed = [line for line in goals if "put_many/get_many 500" in line]
    assert len(failed) == 2 and all(line.endswith("n/a  not met (no result; - vs 1,000 msgs/s)") for line in failed)
