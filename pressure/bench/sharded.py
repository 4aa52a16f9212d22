"""``python -m pressure bench --sharded``: a ShardedQueue's aggregate throughput on a local
3-master Redis Cluster, for several shard counts, against 1 shard and raw redis-py.

The section starts its own cluster (``pressure.testing.ClusterTopology``: 3 masters, no
replicas, private loopback ports) and stops it at the end. For each shard count (and each
batch size: 1 = ``put``/``get``, B > 1 = ``put_many``/``get_many`` of B), ``--sharded-procs``
producer processes and as many consumer processes move ``--sharded-count`` payloads of
``--size`` bytes through ``ShardedQueue(name, shards=N, serializer="bytes")``, unkeyed; the
baseline is raw redis-py ``LPUSH``/``BRPOP`` (``LPUSH`` of B values / ``RPOP key B``) on one
plain list on one master, with the same processes. The rate is count / (the last consumer's
end - the common start). It also reports each master's Redis CPU (``INFO cpu``, main thread)
during the run, as a share of the run's wall time: where the work went.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

import redis

from ..sharded import ShardedQueue
from ..testing import ClusterTopology
from ._harness import BARRIER_TIMEOUT, GET_TIMEOUT, fmt, progress, render_table

__all__ = ["Cell", "run_sharded", "print_sharded_report"]


@dataclass(frozen=True)
class Cell:
    """One measurement: how items moved, and what each master's Redis spent."""

    label: str
    shards: int  # 0: the raw baseline
    batch: int
    msgs_per_s: float | None
    #: per master (by port): Redis CPU seconds / wall seconds of the run
    node_cpu: tuple[float, ...]
    error: str | None = None


def _raw_client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=GET_TIMEOUT + 5)


def _child(role: str, target: Any, n: int, batch: int, size: int, barrier: Barrier,
           conn: Connection) -> None:
    """A producer or consumer process: ``n`` items through ``target`` (a ShardedQueue, or
    ``(port, key)`` of a raw list); sends back (start, end) or an error."""
    try:
        payload = b"x" * size
        put, get = _raw_ops(target, payload) if isinstance(target, tuple) else _queue_ops(target, payload)
        barrier.wait(BARRIER_TIMEOUT)
        start = time.monotonic()
        left = n
        while left:
            k = min(batch, left)
            if role == "put":
                put(k)
                left -= k
            else:
                left -= get(k)
        conn.send((start, time.monotonic()))
    except BaseException as exc:  # reported by the parent
        conn.send(f"{role}: {type(exc).__name__}: {exc}")


def _queue_ops(q: ShardedQueue[bytes], payload: bytes) -> tuple[Callable[[int], None], Callable[[int], int]]:
    def put(k: int) -> None:
        if k == 1:
            q.put(payload)
        else:
            q.put_many([payload] * k)

    def get(k: int) -> int:
        if k == 1:
            q.get(timeout=GET_TIMEOUT)
            return 1
        return len(q.get_many(k, timeout=GET_TIMEOUT))

    return put, get


def _raw_ops(target: tuple[int, str], payload: bytes) -> tuple[Callable[[int], None], Callable[[int], int]]:
    client = _raw_client(target[0])
    key = target[1]

    def put(k: int) -> None:
        client.lpush(key, *([payload] * k))

    return put, lambda k: _raw_get(client, key, k)


def _raw_get(client: redis.Redis, key: str, k: int) -> int:
    if k == 1:
        if client.brpop([key], timeout=GET_TIMEOUT) is None:
            raise TimeoutError("BRPOP timed out")
        return 1
    got = client.rpop(key, k)
    if got:
        return len(got)
    if client.brpop([key], timeout=GET_TIMEOUT) is None:
        raise TimeoutError("BRPOP timed out")
    return 1


def _cpu(port: int) -> float:
    client = _raw_client(port)
    try:
        info: Any = client.info("cpu")
    finally:
        client.close()
    if "used_cpu_user_main_thread" in info:
        return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _measure(target: Any, count: int, batch: int, size: int, procs: int,
             ports: list[int]) -> tuple[float | None, tuple[float, ...], str | None]:
    ctx = multiprocessing.get_context("spawn")  # the harness's START_METHOD
    barrier = ctx.Barrier(2 * procs + 1)  # the children, and this process (for the CPU figures)
    children = []
    shares = [count // procs + (1 if i < count % procs else 0) for i in range(procs)]
    for role in ("put", "get"):
        for share in shares:
            receiver, sender = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_child, args=(role, target, share, batch, size, barrier, sender), daemon=True)
            process.start()
            sender.close()
            children.append((role, process, receiver))
    barrier.wait(BARRIER_TIMEOUT)
    cpu0 = [_cpu(p) for p in ports]
    results: list[Any] = []
    for _, process, receiver in children:
        if receiver.poll(BARRIER_TIMEOUT + GET_TIMEOUT * 4):
            results.append(receiver.recv())
        else:
            results.append("a child sent nothing in time")
    cpu1 = [_cpu(p) for p in ports]
    for _, process, _ in children:
        process.join(5)
        if process.is_alive():
            process.kill()
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        return None, (), errors[0]
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    wall = end - start
    return count / wall, tuple((b - a) / wall for a, b in zip(cpu0, cpu1, strict=True)), None


def run_sharded(count: int, size: int, procs: int, shard_counts: tuple[int, ...],
                batches: tuple[int, ...], repeat: int = 1) -> list[Cell]:
    """Start a 3-master cluster, measure every cell (best of ``repeat`` rounds), stop it."""
    cells: list[Cell] = []
    with ClusterTopology(masters=3, replicas=0) as topo:
        ports = [s.port for s in topo.masters_at_start]
        progress(f"started a local 3-master Redis Cluster on ports {', '.join(map(str, ports))}; "
                 f"{procs} producer and {procs} consumer processes per cell")
        for batch in batches:
            n = count if batch == 1 else count * 10
            plans: list[tuple[str, int, Any]] = []
            raw_key = f"pressure-bench:raw:{uuid.uuid4().hex}"
            plans.append((f"raw LPUSH/{'BRPOP' if batch == 1 else 'RPOP'} (one node)", 0,
                          (topo.master_of(raw_key).port, raw_key)))
            for shards in shard_counts:
                q: ShardedQueue[bytes] = ShardedQueue(f"bench-{uuid.uuid4().hex[:8]}", shards=shards,
                                                      url=topo.url, prefix="pressure-bench",
                                                      serializer="bytes")
                plans.append((f"ShardedQueue shards={shards}", shards, q))
            for label, shards, target in plans:
                best: tuple[float | None, tuple[float, ...], str | None] = (None, (), None)
                for _ in range(repeat):
                    rate, cpu, error = _measure(target, n, batch, size, procs, ports)
                    if error is not None:
                        best = (None, (), error)
                        break
                    if best[0] is None or (rate or 0) > best[0]:
                        best = (rate, cpu, None)
                cells.append(Cell(label, shards, batch, *best))
                progress(f"  batch {batch:<4} {label:<32} "
                         f"{fmt(best[0], suffix=' msgs/s') if best[2] is None else 'error: ' + best[2]}")
            for _, _, target in plans:
                if isinstance(target, ShardedQueue):
                    target.delete()
                    target.disconnect()
    return cells


def print_sharded_report(cells: list[Cell], procs: int, cpus: int) -> None:
    print()
    print(f"ShardedQueue on a local 3-master Redis Cluster: {procs} producer + {procs} consumer "
          f"processes, unkeyed puts, {cpus} CPUs on this machine")
    for batch in sorted({c.batch for c in cells}):
        group = [c for c in cells if c.batch == batch]
        raw = next((c.msgs_per_s for c in group if c.shards == 0), None)
        one = next((c.msgs_per_s for c in group if c.shards == 1), None)
        rows: list[tuple[str, ...]] = [("path", "msgs/s", "vs 1 shard", "vs raw", "Redis CPU per master",
                                        "busiest master at 100%")]
        for c in group:
            busiest = max(c.node_cpu, default=0.0)
            rows.append((c.label, fmt(c.msgs_per_s) if c.error is None else "error",
                         _x(c.msgs_per_s, one) if c.shards else "", _x(c.msgs_per_s, raw),
                         " / ".join(f"{share * 100:.0f}%" for share in c.node_cpu),
                         fmt(c.msgs_per_s / busiest) if c.msgs_per_s and busiest > 0 else "-"))
        print()
        print(f"batch {batch} ({'put/get' if batch == 1 else 'put_many/get_many'}):")
        for line in render_table(rows):
            print("  " + line)
        for c in group:
            if c.error:
                print(f"  {c.label}: {c.error}")
    print()
    print("Redis CPU per master = that node's main-thread CPU time / the run's wall time. "
          "'busiest master at 100%' = msgs/s / the busiest master's share: the rate at which that "
          "node's core would be saturated if clients cost nothing (an extrapolation, not a "
          "measurement). On a machine with fewer cores than masters + client processes, clients "
          "and nodes share the same cores: the measured rate is the machine's ceiling, not one "
          "Redis core's, and the CPU columns show where the load went.")


def _x(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return f"{value / base:.2f}x"
