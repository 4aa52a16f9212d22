"""``--server-cost``: what each message costs the Redis server, against raw redis-py.

Redis runs commands on one thread, so the server CPU a message takes is what caps how many
messages one Redis core can move. For each path a producer thread and a consumer thread move
``--server-cost-count`` messages (100-byte payloads) through a fresh queue, and the section
reads from the server, before and after:

* ``INFO cpu``: ``used_cpu_user_main_thread + used_cpu_sys_main_thread`` (the thread that
  runs commands; the whole process's figures where the server has no per-thread ones), in
  µs per message;
* ``INFO commandstats``: the commands run per message, counting those a Lua script runs
  (Redis counts them too), and EVALSHA calls per message.

The baselines do the same work with plain commands on a plain list: ``LPUSH`` / ``BRPOP``
for single items, ``LPUSH`` of n / ``LPOP n`` for batches, and for acknowledged gets
``BLMOVE`` to a processing list then ``LREM`` (the usual reliable-queue pattern; holding
many, ``LMOVE`` of each, then ``LREM`` of each from the oldest end). Batches run twice: a
producer and a consumer thread (the producer runs ahead: each get_many takes part of a
backlog), and "in step" (put_many then get_many in turn on one connection: a consumer that
keeps up, taking the whole queue each time). The ratio
is pressure's CPU per message over the baseline's; the goals are issue 16's (≤ 1.5x for single
items, ≤ 2x for batches and acknowledged gets). Paths run in turns for ``--repeat`` rounds;
each one's lowest cost is kept.

With ``--server-cost-instructions`` the section starts its own server under callgrind
(``_callgrind.py``; ``--url`` does not apply) and counts the instructions it executes per
message instead of timing it: repeatable within a few percent whatever else the machine
does, where ``INFO cpu`` is not; the ratio is then one of instructions (the kernel's share of
each request, alike for both, is not in it, so it is far higher than the CPU ratio).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import redis

import pressure

from ._callgrind import CallgrindRedis
from ._floor import floor_batch, floor_single
from ._harness import BenchConfig, fmt, in_two_threads, print_lines, ratio, render_table, server_cpu_seconds
from .client_cost import ClientCost, client_costs, format_client_costs
from .script_cost import ScriptCost, format_script_costs, script_costs

PAYLOAD = b"x" * 100
#: Deliveries held at once by the "holding" path (each acknowledged among the others).
HELD = 2_000


@dataclass(frozen=True)
class Cost:
    """One run of one path: server CPU (µs), commands and (under callgrind) instructions per
    message."""

    cpu_us: float
    commands: float
    evalsha: float
    instructions: float | None = None

    @property
    def cost(self) -> float:
        """What the ratio compares: instructions where counted, else CPU time."""
        return self.cpu_us if self.instructions is None else self.instructions


@dataclass(frozen=True)
class Path:
    """A pressure path, its baseline and, where there is one, the floor of its kind (``_floor``):
    ``run(url, n)`` moves n messages."""

    label: str
    goal: float
    pressure: Callable[[str, int], None]
    baseline: Callable[[str, int], None]
    floor: Callable[[str, int], None] | None = None


def _snapshot(r: redis.Redis) -> tuple[float, dict[str, int]]:
    seconds = server_cpu_seconds(r)
    calls = {name.removeprefix("cmdstat_"): int(stats["calls"])
             for name, stats in r.info("commandstats").items()}
    return seconds, calls


def measure(url: str, n: int, run: Callable[[str, int], None], counter: CallgrindRedis | None = None) -> Cost:
    """Server CPU and commands per message while ``run`` moves ``n`` messages (and, with
    ``counter``, the server under callgrind, its instructions per message)."""
    r = redis.Redis.from_url(url)
    instructions = None
    try:
        cpu0, calls0 = _snapshot(r)
        if counter is not None:
            counter.zero()
        run(url, n)
        if counter is not None:
            instructions = counter.count() / n
        cpu1, calls1 = _snapshot(r)
    finally:
        r.close()
    # the two INFO calls of the snapshot itself are not the messages' (a few µs: left in)
    diff = {k: v - calls0.get(k, 0) for k, v in calls1.items()}
    diff["info"] = 0
    return Cost((cpu1 - cpu0) * 1e6 / n, sum(diff.values()) / n, diff.get("evalsha", 0) / n, instructions)


def _queue(url: str, **kw: Any) -> pressure.Queue[bytes]:
    return pressure.Queue(f"cost-{uuid.uuid4().hex}", url=url, serializer="bytes", **kw)


def _one_by_one(ack: bool, delay: float | None = None, **kw: Any) -> Callable[[str, int], None]:
    """Single puts and gets on a fresh queue made with ``kw``; ``ack``: task_done() each;
    ``delay``: each put delayed that long (the gets and puts move them in once due)."""
    def run(url: str, n: int) -> None:
        q = _queue(url, **kw)
        try:
            def produce() -> None:
                for _ in range(n):
                    q.put(PAYLOAD, delay=delay)

            def consume() -> None:
                for _ in range(n):
                    q.get()
                    if ack:
                        q.task_done()

            in_two_threads(produce, consume)
        finally:
            q.delete()
    return run


def single(maxsize: int) -> Callable[[str, int], None]:
    return _one_by_one(False, maxsize=maxsize)


reliable = _one_by_one(True, reliable=True)
#: puts delayed 1 ms: each goes into the sorted set of delayed items, and a later put or get
#: moves it into the list once due (issue 18); its baseline is pressure's own plain put+get
delayed = _one_by_one(False, delay=0.001)


def holding(size: int) -> Callable[[str, int], None]:
    """Reliable: take ``size`` items at a time with get_many (all held at once), then
    task_done() each, oldest first: an acknowledgement among many held deliveries."""
    def run(url: str, n: int) -> None:
        q = _queue(url, reliable=True)
        held = min(size, n)
        try:
            for _ in range(n // held):
                q.put_many([PAYLOAD] * held)
                got = 0
                while got < held:
                    got += len(q.get_many(held))
                for _ in range(held):
                    q.task_done()
            q.join()
        finally:
            q.delete()
    return run


def raw_holding(size: int) -> Callable[[str, int], None]:
    """LPUSH of ``size``, each moved to a processing list (LMOVE), then removed one by one by
    value from the oldest end (LREM -1): the usual reliable-queue pattern, holding many."""
    def run(url: str, n: int) -> None:
        key = f"cost-raw-{uuid.uuid4().hex}"
        c = redis.Redis.from_url(url)
        held = min(size, n)
        try:
            for _ in range(n // held):
                c.lpush(key, *[PAYLOAD] * held)
                items = [c.lmove(key, key + ":processing", "RIGHT", "LEFT") for _ in range(held)]
                for item in items:
                    c.lrem(key + ":processing", -1, cast(str, item))  # bytes: redis-py sends either
        finally:
            c.delete(key, key + ":processing")
            c.close()
    return run


def batch(size: int) -> Callable[[str, int], None]:
    def run(url: str, n: int) -> None:
        q = _queue(url)
        chunk = [PAYLOAD] * size
        try:
            def produce() -> None:
                for _ in range(n // size):
                    q.put_many(chunk)

            def consume() -> None:
                got = 0
                while got < n // size * size:
                    got += len(q.get_many(size))

            in_two_threads(produce, consume)
        finally:
            q.delete()
    return run


def batch_in_step(size: int) -> Callable[[str, int], None]:
    """put_many then get_many of the same batch, in turn on one connection: a consumer that
    keeps up, whose get_many takes the whole queue each time."""
    def run(url: str, n: int) -> None:
        q = _queue(url)
        chunk = [PAYLOAD] * size
        try:
            for _ in range(n // size):
                q.put_many(chunk)
                q.get_many(size)
        finally:
            q.delete()
    return run


def raw_batch_in_step(size: int) -> Callable[[str, int], None]:
    def run(url: str, n: int) -> None:
        key = f"cost-raw-{uuid.uuid4().hex}"
        c = redis.Redis.from_url(url)
        chunk = [PAYLOAD] * size
        try:
            for _ in range(n // size):
                c.lpush(key, *chunk)
                c.lpop(key, size)
        finally:
            c.delete(key)
            c.close()
    return run


def _raw(url: str, body: Callable[[redis.Redis, redis.Redis, str], tuple[Callable[[], None], Callable[[], None]]],
         n: int) -> None:
    key = f"cost-raw-{uuid.uuid4().hex}"
    p, c = redis.Redis.from_url(url), redis.Redis.from_url(url)
    try:
        in_two_threads(*body(p, c, key))
    finally:
        p.delete(key, key + ":processing")
        p.close()
        c.close()


def _raw_one_by_one(take: Callable[[redis.Redis, str], None]) -> Callable[[str, int], None]:
    """LPUSH one by one; ``take(client, key)`` takes one."""
    def run(url: str, n: int) -> None:
        def body(p: redis.Redis, c: redis.Redis, key: str) -> tuple[Callable[[], None], Callable[[], None]]:
            def produce() -> None:
                for _ in range(n):
                    p.lpush(key, PAYLOAD)

            def consume() -> None:
                for _ in range(n):
                    take(c, key)
            return produce, consume
        _raw(url, body, n)
    return run


def _brpop(c: redis.Redis, key: str) -> None:
    c.brpop([key], timeout=5)


def _blmove_then_lrem(c: redis.Redis, key: str) -> None:
    """The usual reliable-queue pattern: into a processing list, removed once processed."""
    item: Any = c.blmove(key, key + ":processing", 5, "RIGHT", "LEFT")
    c.lrem(key + ":processing", 1, item)


raw_single = _raw_one_by_one(_brpop)
raw_reliable = _raw_one_by_one(_blmove_then_lrem)


def raw_batch(size: int) -> Callable[[str, int], None]:
    def run(url: str, n: int) -> None:
        def body(p: redis.Redis, c: redis.Redis, key: str) -> tuple[Callable[[], None], Callable[[], None]]:
            chunk = [PAYLOAD] * size

            def produce() -> None:
                for _ in range(n // size):
                    p.lpush(key, *chunk)

            def consume() -> None:
                got = 0
                while got < n // size * size:
                    items = c.lpop(key, size)
                    if items:
                        got += len(items)
                    else:
                        c.blmove(key, key, 1, "RIGHT", "RIGHT")  # wait for more without taking
            return produce, consume

        _raw(url, body, n)
    return run


PATHS = [
    Path("single put+get, unbounded", 1.5, single(0), raw_single, floor_single(PAYLOAD)),
    Path("single put+get, maxsize=100", 1.5, single(100), raw_single),
    Path("reliable get + task_done", 2.0, reliable, raw_reliable),
    Path(f"reliable task_done holding {HELD:,}", 2.0, holding(HELD), raw_holding(HELD)),
    Path("put_many/get_many 100", 2.0, batch(100), raw_batch(100), floor_batch(100, PAYLOAD)),
    Path("put_many/get_many 500", 2.0, batch(500), raw_batch(500), floor_batch(500, PAYLOAD)),
    Path("put_many/get_many 100, in step", 2.0, batch_in_step(100), raw_batch_in_step(100)),
    Path("put_many/get_many 500, in step", 2.0, batch_in_step(500), raw_batch_in_step(500)),
    Path("delayed put+due+get (raw = plain put+get)", 2.0, delayed, single(0)),
]


#: A path's result: pressure's cost, the baseline's, and the floor's (None: no floor line).
Result = tuple[Path, Cost, Cost, Cost | None]


@dataclass(frozen=True)
class ServerCost:
    """The section's results: each path's (``Result``), and under callgrind where a put's and
    a get's script call spend their instructions (``script_cost``) and what the clients execute
    per call (``client_cost``; else both empty)."""

    paths: list[Result]
    scripts: list[ScriptCost]
    clients: list[ClientCost] = field(default_factory=list)


def run_server_cost(url: str, config: BenchConfig) -> ServerCost:
    """Each path, its baseline and its floor, in turns for ``config.repeat`` rounds, the lowest
    cost of each kept; with ``config.server_cost_instructions`` on a server of its own under
    callgrind, and then the parts of a put's and a get's script call there, and the clients'
    instructions per call."""
    if config.server_cost_instructions:
        with CallgrindRedis() as server:
            paths = _rounds(server.url, config, server)
            scripts = script_costs(server, config.server_cost_count)
            return ServerCost(paths, scripts, client_costs(url, config.server_cost_count))
    return ServerCost(_rounds(url, config, None), [])


def _rounds(url: str, config: BenchConfig, counter: CallgrindRedis | None) -> list[Result]:
    n = config.server_cost_count
    best: dict[str, list[Cost | None]] = {}
    for _ in range(config.repeat):
        for path in PATHS:
            runs = (path.pressure, path.baseline, path.floor)
            costs = [measure(url, n, run, counter) if run is not None else None for run in runs]
            old = best.setdefault(path.label, costs)
            for i, (a, b) in enumerate(zip(old, costs)):
                if a is not None and b is not None and b.cost < a.cost:
                    old[i] = b
    results: list[Result] = []
    for path in PATHS:
        ours, base, floor = best[path.label]
        assert ours is not None and base is not None
        results.append((path, ours, base, floor))
    return results


#: Printed under the table: what the floor column is.
FLOOR_NOTE = ("floor: the protocol's Put and Get, and keeping what is taken until the client has it, "
              "in one-key scripts doing nothing more (pressure/bench/floor_*.lua): the least a queue "
              "run by Lua scripts costs here")


def _floor(floor: Cost | None, base: Cost, digits: int) -> str:
    """The floor's cost (instructions where counted, else CPU time) and its ratio to the
    baseline's, or '-'."""
    if floor is None:
        return "-"
    return f"{fmt(floor.cost, digits)} ({fmt(ratio(floor.cost, base.cost), 2, 'x')})"


def print_server_cost_report(cost: ServerCost, config: BenchConfig) -> None:
    results = cost.paths
    rounds = f"; lowest of {config.repeat} rounds" if config.repeat > 1 else ""
    if config.server_cost_instructions:
        rows: list[tuple[str, ...]] = [
            ("path", "pressure instr/msg", "raw instr/msg", "instr ratio", "floor instr/msg (ratio)", "cmds/msg (raw)",
             "EVALSHA/msg")]
        for path, ours, base, floor in results:
            rows.append((path.label, fmt(ours.instructions, 0), fmt(base.instructions, 0),
                         fmt(ratio(ours.cost, base.cost), 2, "x"),
                         _floor(floor, base, 0),
                         f"{ours.commands:.2f} ({base.commands:.2f})", fmt(ours.evalsha, 2)))
        print_lines(render_table(rows), f"Redis server instructions per message ({config.server_cost_count:,} "
                                        f"messages per path, 100-byte payloads; a private server under "
                                        f"callgrind, commandstats{rounds}; the goals are judged on CPU "
                                        f"time, without this flag)")
        print(FLOOR_NOTE)
        if cost.scripts:
            title, *table = format_script_costs(cost.scripts, config.server_cost_count)
            print_lines(table, title)
        if cost.clients:
            title, *table = format_client_costs(cost.clients, config.server_cost_count)
            print_lines(table, title)
        return
    rows = [("path", "pressure µs/msg", "raw µs/msg", "CPU ratio", "goal", "floor µs/msg (ratio)", "cmds/msg (raw)",
             "EVALSHA/msg")]
    for path, ours, base, floor in results:
        x = ratio(ours.cpu_us, base.cpu_us)
        digits = 1 if base.cpu_us >= 10 else 2
        rows.append((path.label, fmt(ours.cpu_us, digits), fmt(base.cpu_us, digits), fmt(x, 2, "x"),
                     f"≤ {path.goal}x {'PASS' if x is not None and x <= path.goal else 'MISS'}",
                     _floor(floor, base, digits),
                     f"{ours.commands:.2f} ({base.commands:.2f})", fmt(ours.evalsha, 2)))
    print_lines(render_table(rows), f"Redis server CPU per message ({config.server_cost_count:,} messages "
                                    f"per path, 100-byte payloads; INFO cpu main thread, commandstats{rounds})")
    print(FLOOR_NOTE)
