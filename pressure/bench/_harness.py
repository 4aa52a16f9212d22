"""The harness every section of ``python -m pressure bench`` shares.

* the options as one ``BenchConfig``, the constants (start method, time limits, key prefix);
* one measurement ("phase"): a ``Transport`` moves ``Phase.count`` payloads from a producer
  process to a consumer process, spawned behind a common start barrier; ``run_phase`` and
  ``timed_phase`` run it and return a ``PhaseResult`` (msgs/s, p50/p99 latency);
* the server: ``redis_url`` picks ``--url``, ``REDIS_URL`` or a private redis-server;
  ``server_cpu_seconds`` reads its main thread's CPU time (``INFO cpu``);
* the report: machine facts, aligned tables, number formats, PASS/MISS goal lines, progress
  lines on stderr.

It imports no section; the sections (``queues``, ``batch``, ``executor``, ``spark``) import it.
"""

from __future__ import annotations

import abc
import contextlib
import math
import multiprocessing
import multiprocessing.connection
import os
import platform
import struct
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.synchronize import Barrier
from typing import Any

import redis

from ..connection import ConnectionConfig
from ..testing import RedisServer

__all__ = [
    "BARRIER_TIMEOUT",
    "GET_TIMEOUT",
    "KEY_PREFIX",
    "PRIVATE",
    "STAMP",
    "START_METHOD",
    "START_ROUNDS",
    "WARMUP",
    "BenchConfig",
    "Get",
    "Phase",
    "PhaseResult",
    "Put",
    "ServerCpu",
    "SideResult",
    "Transport",
    "best_round",
    "delete_keys",
    "fmt",
    "goal_line",
    "machine_facts",
    "print_lines",
    "print_machine",
    "progress",
    "ratio",
    "redis_url",
    "render_table",
    "rounds_note",
    "run_phase",
    "safe_url",
    "server_cpu_seconds",
    "size_text",
    "spawn_context",
    "timed_phase",
    "unique_name",
    "usable_cpus",
]

#: Children are spawned: no socket, lock or thread is inherited from the parent.
START_METHOD = "spawn"
#: Messages moved before the start barrier (connections, scripts, feeder threads).
WARMUP = 200
#: The longest a single get may wait before the consumer gives up.
GET_TIMEOUT = 30.0
#: The longest a process waits at the start barrier.
BARRIER_TIMEOUT = 60.0
#: The payload header: the producer's time.monotonic_ns().
STAMP = struct.Struct("<Q")
KEY_PREFIX = "pressure-bench"
#: How ``redis_url`` says it started a server of the run's own.
PRIVATE = "private redis-server"

Put = Callable[[bytes], object]
Get = Callable[[], bytes]


# -- configuration and results ----------------------------------------------------

#: The default of --start-rounds: a round of both executors takes well under 0.1 s.
START_ROUNDS = 15


@dataclass(frozen=True)
class BenchConfig:
    """The command-line options."""

    url: str | None
    count: int
    size: int
    maxsize: int
    latency_count: int
    rate: float
    repeat: int = 1
    #: Which sections run.
    queues: bool = True
    executors: bool = True
    batches: bool = False
    #: The executor section: worker processes per executor, no-op tasks, CPU-bound tasks
    #: and the MiB each of them hashes.
    workers: int = 2
    executor_tasks: int = 2_000
    #: Start-and-stop rounds of each executor (at least; --repeat may ask for more).
    start_rounds: int = START_ROUNDS
    cpu_tasks: int = 40
    cpu_mb: int = 256
    #: The batch section: batch sizes, payload sizes (the payload section's too), messages
    #: per 100-B cell (fewer for bigger payloads) and the items queued for the memory figure.
    batch_sizes: tuple[int, ...] = (1, 10, 100, 500)
    payload_sizes: tuple[int, ...] = (100, 10_000, 1_000_000)
    batch_messages: int = 20_000
    memory_items: int = 200_000
    #: The Spark section: rows, partitions, items per round trip, rows per micro-batch of
    #: the stream reader, rounds.
    spark: bool = False
    spark_rows: int = 200_000
    spark_partitions: int = 2
    spark_batch: int = 500
    spark_stream_batch: int = 50_000
    spark_rounds: int = 2
    #: The server-cost section: messages per path.
    server_cost: bool = False
    server_cost_count: int = 20_000
    server_cost_instructions: bool = False
    #: The payload section: whether it runs, and its rounds (it reports their median).
    payloads: bool = False
    payload_repeat: int = 3
    #: Round-trip time (s) a proxy adds in front of Redis for the queue and batch sections.
    rtt: float = 0.0
    #: The pool section: no-op tasks per map with chunksize 1 and per imap_unordered, and
    #: per map with the default chunksize.
    pools: bool = False
    pool_tasks: int = 5_000
    pool_map_tasks: int = 100_000


@dataclass(frozen=True)
class Phase:
    """One measurement: ``count`` messages of ``size`` bytes, paced at ``rate`` if set; with
    ``server_url``, the consumer also reads that server's CPU time (``server_cpu_seconds``)
    just before the start barrier, once the warm-up is through, and after its last get."""

    name: str
    count: int
    size: int
    rate: float | None = None
    warmup: int = WARMUP
    server_url: str | None = None

    @property
    def time_limit(self) -> float:
        """How long the parent waits for both processes before giving up."""
        return 30.0 + self.count * 0.005 + (self.count / self.rate if self.rate else 0.0)


@dataclass
class SideResult:
    """What one child process reports."""

    elapsed_ns: int = 0
    latencies_ns: list[int] | None = None
    #: The server's CPU seconds over the timed part (Phase.server_url), the consumer's.
    server_cpu_s: float | None = None
    #: This process's own CPU seconds (user + system, every thread) over its timed part.
    cpu_s: float = 0.0
    error: str | None = None


@dataclass
class PhaseResult:
    """The outcome of one phase for one transport."""

    msgs_per_s: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    achieved_rate: float | None = None
    #: The server's CPU time per message, in µs (Phase.server_url).
    server_cpu_us: float | None = None
    #: The producer's and the consumer's own CPU time per message, in µs.
    producer_cpu_us: float | None = None
    consumer_cpu_us: float | None = None
    error: str | None = None


# -- transports -------------------------------------------------------------------


class Transport(abc.ABC):
    """A way to move bytes from one process to another.

    ``setup`` and ``cleanup`` run in the parent; the instance is then pickled
    to both children, which call ``open_put`` / ``open_get`` there.
    """

    key: str = ""
    label: str = ""

    @abc.abstractmethod
    def setup(self, ctx: SpawnContext) -> None:
        """Create the channel (parent)."""

    @abc.abstractmethod
    def open_put(self) -> Put:
        """Return the producer's put function (child)."""

    @abc.abstractmethod
    def open_get(self) -> Get:
        """Return the consumer's get function (child)."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Remove everything ``setup`` created (parent)."""


def server_cpu_seconds(client: redis.Redis) -> float:
    """The CPU time (user + system, s) the server's main thread, which runs the commands, has
    used: ``INFO cpu`` ``used_cpu_*_main_thread``, or the whole process's ``used_cpu_*``
    where the server has no per-thread figures (before Redis 7)."""
    cpu = client.info("cpu")
    if "used_cpu_user_main_thread" in cpu:
        return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class ServerCpu:
    """A connection of its own for reading ``server_cpu_seconds``, opened on entering (so
    opening it is not in what it reads) and closed on leaving."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)

    def __enter__(self) -> ServerCpu:
        self.client.ping()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def seconds(self) -> float:
        return server_cpu_seconds(self.client)


def spawn_context() -> SpawnContext:
    """The multiprocessing context every section's children are started with (START_METHOD)."""
    ctx = multiprocessing.get_context(START_METHOD)
    if not isinstance(ctx, SpawnContext):
        raise TypeError(f"expected a spawn context, got {ctx!r}")
    return ctx


def unique_name(kind: str) -> str:
    return f"{KEY_PREFIX}-{kind}-{uuid.uuid4().hex}"


def delete_keys(url: str, keys: Sequence[str]) -> None:
    """DEL exactly these keys (never a flush, never a pattern)."""
    client = redis.Redis.from_url(url)
    try:
        client.delete(*keys)
    finally:
        client.close()


# -- the child processes ----------------------------------------------------------


def _produce(put: Put, phase: Phase, barrier: Barrier) -> SideResult:
    pad = b"\0" * (phase.size - STAMP.size)
    pack, now = STAMP.pack, time.monotonic_ns
    for _ in range(phase.warmup):
        put(pack(now()) + pad)
    barrier.wait(BARRIER_TIMEOUT)
    start, cpu_start = now(), time.process_time()
    if phase.rate:
        interval = 1e9 / phase.rate
        for i in range(phase.count):
            delay = start + i * interval - now()
            if delay > 0:
                time.sleep(delay / 1e9)
            put(pack(now()) + pad)
    else:
        for _ in range(phase.count):
            put(pack(now()) + pad)
    return SideResult(elapsed_ns=now() - start, cpu_s=time.process_time() - cpu_start)


def _check_size(item: bytes, size: int) -> None:
    if len(item) != size:
        raise ValueError(f"got a {len(item)}-byte payload, expected {size}")


def _consume(get: Get, phase: Phase, barrier: Barrier) -> SideResult:
    if phase.server_url is None:
        return _consume_phase(get, phase, barrier, None)
    with ServerCpu(phase.server_url) as cpu:
        return _consume_phase(get, phase, barrier, cpu)


def _consume_phase(get: Get, phase: Phase, barrier: Barrier, cpu: ServerCpu | None) -> SideResult:
    now, unpack = time.monotonic_ns, STAMP.unpack_from
    for _ in range(phase.warmup):
        _check_size(get(), phase.size)
    cpu0 = cpu.seconds() if cpu else 0.0
    barrier.wait(BARRIER_TIMEOUT)
    start, cpu_start = now(), time.process_time()
    if phase.rate:
        latencies = [0] * phase.count
        for i in range(phase.count):
            item = get()
            latencies[i] = now() - unpack(item)[0]
            _check_size(item, phase.size)
        return SideResult(elapsed_ns=now() - start, latencies_ns=latencies,
                          server_cpu_s=cpu.seconds() - cpu0 if cpu else None,
                          cpu_s=time.process_time() - cpu_start)
    item = b""
    for _ in range(phase.count):
        item = get()
    elapsed, own = now() - start, time.process_time() - cpu_start
    cpu1 = cpu.seconds() if cpu else 0.0
    _check_size(item, phase.size)
    return SideResult(elapsed_ns=elapsed, server_cpu_s=cpu1 - cpu0 if cpu else None, cpu_s=own)


def _child_main(role: str, transport: Transport, phase: Phase, barrier: Barrier,
                conn: Connection) -> None:
    """Entry point of both children: run one side and report over ``conn``."""
    try:
        if role == "producer":
            result = _produce(transport.open_put(), phase, barrier)
        else:
            result = _consume(transport.open_get(), phase, barrier)
    except BaseException:  # reported to the parent, which shows it
        result = SideResult(error=f"{role}: {traceback.format_exc()}")
        with contextlib.suppress(Exception):
            barrier.abort()
    try:
        conn.send(result)
    finally:
        conn.close()


# -- the parent -------------------------------------------------------------------


@dataclass
class _Child:
    role: str
    process: multiprocessing.process.BaseProcess
    conn: Connection
    result: SideResult | None = None


def _start_pair(ctx: SpawnContext, transport: Transport, phase: Phase) -> tuple[list[_Child], Barrier]:
    barrier = ctx.Barrier(2)
    children = []
    for role in ("consumer", "producer"):
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_child_main, name=f"bench-{transport.key}-{role}",
                              args=(role, transport, phase, barrier, sender), daemon=True)
        process.start()
        sender.close()
        children.append(_Child(role, process, receiver))
    return children, barrier


def _receive(child: _Child) -> str | None:
    """Read a child's report if one is there; return an error message, if any."""
    try:
        if child.conn.poll():
            child.result = child.conn.recv()
    except (EOFError, OSError):
        pass
    if child.result is None:
        code = child.process.exitcode
        return None if code is None else f"{child.role} exited with code {code} without reporting"
    return child.result.error


def _collect(children: list[_Child], limit: float) -> str | None:
    """Wait for both reports; return an error message if something went wrong."""
    deadline = time.monotonic() + limit
    while any(c.result is None for c in children):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return f"timed out after {limit:.0f} s"
        waiting = [c for c in children if c.result is None]
        handles: list[Any] = [c.conn for c in waiting] + [c.process.sentinel for c in waiting]
        multiprocessing.connection.wait(handles, timeout=min(remaining, 1.0))
        for child in waiting:
            error = _receive(child)
            if error:
                return error
    return None


def _stop(children: list[_Child], barrier: Barrier, failed: bool) -> None:
    """Reap both children; after a failure, terminate them instead of waiting."""
    with contextlib.suppress(Exception):
        barrier.abort()
    for child in children:
        child.process.join(1.0 if failed else 10.0)
        if child.process.is_alive():
            child.process.terminate()
            child.process.join(5.0)
        child.conn.close()


def _percentile(ordered: Sequence[int], pct: float) -> int:
    """Nearest-rank percentile of an ascending sequence."""
    rank = max(math.ceil(pct / 100.0 * len(ordered)), 1)
    return ordered[rank - 1]


def _summarize(phase: Phase, producer: SideResult, consumer: SideResult) -> PhaseResult:
    result = PhaseResult(msgs_per_s=phase.count / max(consumer.elapsed_ns, 1) * 1e9,
                         producer_cpu_us=producer.cpu_s * 1e6 / phase.count,
                         consumer_cpu_us=consumer.cpu_s * 1e6 / phase.count)
    if consumer.server_cpu_s is not None:
        result.server_cpu_us = consumer.server_cpu_s * 1e6 / phase.count
    if consumer.latencies_ns:
        ordered = sorted(consumer.latencies_ns)
        result.p50_us = _percentile(ordered, 50) / 1000.0
        result.p99_us = _percentile(ordered, 99) / 1000.0
        result.achieved_rate = phase.count / max(producer.elapsed_ns, 1) * 1e9
    return result


def run_phase(ctx: SpawnContext, factory: Callable[[], Transport], phase: Phase) -> PhaseResult:
    """Run one phase of one transport in a fresh producer/consumer pair."""
    transport = factory()
    transport.setup(ctx)
    children: list[_Child] = []
    barrier: Barrier | None = None
    error: str | None = "interrupted"
    try:
        children, barrier = _start_pair(ctx, transport, phase)
        error = _collect(children, phase.time_limit)
        if error:
            return PhaseResult(error=error)
        consumer, producer = (c.result for c in children)
        assert consumer is not None and producer is not None
        return _summarize(phase, producer, consumer)
    finally:
        if barrier is not None:
            _stop(children, barrier, failed=error is not None)
        transport.cleanup()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed_phase(ctx: SpawnContext, factory: Callable[[], Transport], label: str,
                 phase: Phase) -> PhaseResult:
    began = time.monotonic()
    result = run_phase(ctx, factory, phase)
    took = time.monotonic() - began
    if result.error:
        status = "error"
        progress(f"{label} {phase.name} failed: {result.error.rstrip()}")
    elif result.p50_us is not None:
        status = f"p50 {result.p50_us:,.0f} µs"
    else:
        status = f"{result.msgs_per_s or 0:,.0f} msgs/s"
    progress(f"  {label:<28} {phase.name:<10} {status:>16}  ({took:.1f} s)")
    return result


def best_round(results: list[PhaseResult]) -> PhaseResult:
    """The fastest round, or the first error if any round failed."""
    errors = [r for r in results if r.error]
    if errors:
        return errors[0]
    return max(results, key=lambda r: r.msgs_per_s or 0.0)


# -- the server -------------------------------------------------------------------


def _answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=2.0)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, ValueError, OSError):
        return False


def safe_url(url: str) -> str:
    try:
        return ConnectionConfig.from_url(url).url
    except ValueError:
        return "<invalid url>"


@contextlib.contextmanager
def redis_url(url: str | None) -> Iterator[tuple[str, str]]:
    """Yield ``(url, how it was chosen)``; a private server lives until the block ends."""
    if url is not None:
        if not _answers(url):
            raise ConnectionError(f"Redis at {safe_url(url)} (--url) does not answer")
        yield url, "--url"
        return
    env = os.environ.get("REDIS_URL")
    if env and _answers(env):
        yield env, "REDIS_URL"
        return
    if env:
        print(f"REDIS_URL ({safe_url(env)}) does not answer", flush=True)
    with RedisServer() as server:
        print(f"started a private redis-server ({server.binary}) on {server.url}; "
              f"it is stopped at the end", flush=True)
        yield server.url, PRIVATE


# -- the report -------------------------------------------------------------------


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def machine_facts(url: str) -> list[tuple[str, str]]:
    """Python, Redis server, redis-py, hiredis, CPUs."""
    client = redis.Redis.from_url(url)
    try:
        server = client.info("server")
    finally:
        client.close()
    try:
        import hiredis

        hiredis_text = f"installed ({hiredis.__version__})"
    except ImportError:
        hiredis_text = "not installed"
    used = "used by redis-py" if redis.utils.HIREDIS_AVAILABLE else "not used by redis-py"
    usable = usable_cpus()
    return [
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("redis server", f"{server.get('redis_version', '?')} ({server.get('os', '?')})"),
        ("redis-py", redis.__version__),
        ("hiredis", f"{hiredis_text}, {used}"),
        ("CPUs", f"{os.cpu_count()} ({usable} usable by this process)"),
        ("platform", platform.platform()),
    ]


def print_machine(url: str, how: str) -> None:
    """The server and the machine the figures come from."""
    print()
    print(f"pressure bench on {safe_url(url)} ({how})")
    for name, value in machine_facts(url):
        print(f"  {name}: {value}")


def size_text(size: int) -> str:
    """A payload size for a table: ``100 B``, ``10 KB``, ``1 MB`` (decimal units; other sizes
    in bytes)."""
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def ratio(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return value / base


def render_table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """A header row and data rows as aligned text: the first column left, the others right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append(" | ".join(cells))
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return lines


def goal_line(text: str, value: float | None, goal: float) -> str:
    if value is None:
        return f"  {text:<52} {'n/a':>8}  MISS (no result)"
    verdict = "PASS" if value >= goal else "MISS"
    return f"  {text:<52} {value:>7.2f}x  {verdict}"


def rounds_note(config: BenchConfig) -> str:
    return f" (best of {config.repeat} rounds)" if config.repeat > 1 else ""


def print_lines(lines: list[str], title: str | None = None) -> None:
    print()
    if title:
        print(title)
    for line in lines:
        print(line)


def in_two_threads(produce: Callable[[], None], consume: Callable[[], None]) -> None:
    """Run ``produce`` and ``consume`` in two threads at once; the first error of either is
    raised here once both have ended."""
    errors: list[BaseException] = []

    def guard(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # reported in the caller
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(fn,)) for fn in (produce, consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
