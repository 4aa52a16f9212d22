"""``python -m pressure bench``: pressure.Queue and pressure.Executor against their baselines.

Queues and executors by default, on one machine and one Redis server:
``--no-executor`` runs only the queues, ``--executor`` only the executors, ``--batch``
only the batches, ``--spark`` only the Spark data source.

**Queues.** For each transport the benchmark starts one producer process and one consumer
process (multiprocessing, start method ``spawn``) and moves the same raw-bytes
payloads through it, in two phases:

* **throughput** - ``--count`` messages as fast as the producer can put them;
  the rate is ``count / (last get - start)``, where both processes leave a
  common start barrier together (after a short warm-up that opens the
  connections and loads the Lua scripts); with ``--repeat R`` the transports
  take turns for R rounds and each one's best round is reported;
* **latency** - ``--latency-count`` messages paced at ``--rate`` per second;
  each payload starts with the producer's ``time.monotonic_ns()`` (CLOCK_MONOTONIC,
  which every process on a Linux host shares), so the consumer measures
  put-to-get latency directly. p50 and p99 are reported.

The transports:

1. ``pressure.Queue`` unbounded (``maxsize=0``), ``serializer="bytes"``;
2. ``pressure.Queue`` with ``maxsize=--maxsize``;
3. raw redis-py ``LPUSH`` / ``BRPOP`` on a plain list - the baseline;
4. ``multiprocessing.Queue``;
5. "spec literal": the protocol's reference command sequence, one Redis
   command per round trip (errata fixed: finite timeouts, ``LTRIM 0 0``,
   ``:stats:*`` key names) - 12 round trips per put and 12 per get.

Results come back to the parent over ``multiprocessing`` pipes, never through
the transport being measured.

**Executors** (``pressure.bench_executor``): ``pressure.Executor`` against
``concurrent.futures.ProcessPoolExecutor``, no-op tasks/s and CPU-bound wall time.

**Batches** (``pressure.bench_batch``, opt-in with ``--batch``, which runs only it: it takes
about a minute per round): ``put_many``/``get_many`` against raw redis-py batches and
``multiprocessing.Queue``, for several batch and payload sizes, 1x1 and 2x2 processes; plus
single-item throughput and latency against raw LPUSH/BRPOP and Redis memory per queued item.

**Spark** (``pressure.bench_spark``, opt-in with ``--spark``, which runs only it; needs the
``spark`` extra and Java): the ``pressure`` data source's writer and readers against raw
redis-py LPUSH/RPOP batches run from Spark tasks, rows/s in one local SparkSession.

Nothing is flushed: every queue, list and executor has a unique (uuid) name
and its keys are deleted afterwards. Without ``--url`` the benchmark uses
``REDIS_URL`` if it answers, else starts a private ``redis-server``
(``pressure.server.RedisServer``) and stops it at the end.

The exit status is 0 whether or not the goals are met: this is a report.
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import functools
import math
import multiprocessing
import multiprocessing.connection
import os
import platform
import struct
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.synchronize import Barrier
from typing import Any, cast

import redis

from . import identity
from .connection import ConnectionConfig
from .errors import QueueDoesNotExist, ShutDown
from .keys import QueueKeys
from .queue import Queue
from .server import RedisServer, ServerUnavailable

__all__ = [
    "BenchConfig",
    "MultiprocessingTransport",
    "Phase",
    "PhaseResult",
    "PressureTransport",
    "RawRedisTransport",
    "SpecLiteralClient",
    "SpecLiteralTransport",
    "Transport",
    "TransportResult",
    "add_arguments",
    "build_parser",
    "format_goals",
    "format_notes",
    "format_table",
    "machine_facts",
    "main",
    "make_transports",
    "print_machine",
    "print_report",
    "redis_url",
    "run",
    "run_all",
    "run_phase",
]

#: Children are spawned: no socket, lock or thread is inherited from the parent.
START_METHOD = "spawn"
#: Messages moved before the start barrier (connections, scripts, feeder threads).
WARMUP = 200
#: The longest a single get may wait before the consumer gives up.
GET_TIMEOUT = 30.0
#: The longest a process waits at the start barrier.
BARRIER_TIMEOUT = 60.0
#: Server-side wait of one blocking command in the spec-literal client.
SPEC_WAIT = 1
#: The payload header: the producer's time.monotonic_ns().
_STAMP = struct.Struct("<Q")
_KEY_PREFIX = "pressure-bench"

Put = Callable[[bytes], object]
Get = Callable[[], bytes]


# -- configuration ----------------------------------------------------------------


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
    cpu_tasks: int = 40
    cpu_mb: int = 256
    #: The batch section: batch sizes, payload sizes, messages per 100-B cell (fewer for
    #: bigger payloads) and the items queued for the memory figure.
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


@dataclass(frozen=True)
class Phase:
    """One measurement: ``count`` messages of ``size`` bytes, paced at ``rate`` if set."""

    name: str
    count: int
    size: int
    rate: float | None = None
    warmup: int = WARMUP

    @property
    def time_limit(self) -> float:
        """How long the parent waits for both processes before giving up."""
        return 30.0 + self.count * 0.005 + (self.count / self.rate if self.rate else 0.0)


@dataclass
class SideResult:
    """What one child process reports."""

    elapsed_ns: int = 0
    latencies_ns: list[int] | None = None
    error: str | None = None


@dataclass
class PhaseResult:
    """The outcome of one phase for one transport."""

    msgs_per_s: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    achieved_rate: float | None = None
    error: str | None = None


@dataclass
class TransportResult:
    """Both phases of one transport."""

    key: str
    label: str
    throughput: PhaseResult = field(default_factory=PhaseResult)
    latency: PhaseResult = field(default_factory=PhaseResult)


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


def _unique(kind: str) -> str:
    return f"{_KEY_PREFIX}-{kind}-{uuid.uuid4().hex}"


def _delete_keys(url: str, keys: Sequence[str]) -> None:
    """DEL exactly these keys (never a flush, never a pattern)."""
    client = redis.Redis.from_url(url)
    try:
        client.delete(*keys)
    finally:
        client.close()


class PressureTransport(Transport):
    """``pressure.Queue`` with ``serializer="bytes"``."""

    def __init__(self, url: str, maxsize: int) -> None:
        self.url = url
        self.maxsize = maxsize
        self.key = "pressure" if maxsize == 0 else "pressure-bounded"
        self.label = f"pressure.Queue maxsize={maxsize}"
        self.queue: Queue[bytes] | None = None

    def setup(self, ctx: SpawnContext) -> None:
        self.queue = Queue(_unique("q"), maxsize=self.maxsize, url=self.url, serializer="bytes")

    def _queue(self) -> Queue[bytes]:
        if self.queue is None:
            raise RuntimeError("transport not set up")
        return self.queue

    def open_put(self) -> Put:
        return self._queue().put

    def open_get(self) -> Get:
        return functools.partial(self._queue().get, True, GET_TIMEOUT)

    def cleanup(self) -> None:
        if self.queue is not None:
            # protocol Delete: every key, the consumers' in-flight lists included; a consumer
            # killed mid-run holds nothing delete() cannot take back
            self.queue.delete()
            self.queue.disconnect()


def _raw_get(client: redis.Redis, key: str) -> bytes:
    reply = client.brpop([key], timeout=int(GET_TIMEOUT))
    if reply is None:
        raise TimeoutError(f"BRPOP {key} timed out after {GET_TIMEOUT} s")
    return cast(bytes, reply[1])


class RawRedisTransport(Transport):
    """The baseline: redis-py LPUSH / BRPOP on a plain list, one round trip each."""

    key = "raw"
    label = "redis-py LPUSH/BRPOP (raw)"

    def __init__(self, url: str) -> None:
        self.url = url
        self.list_key = ""

    def setup(self, ctx: SpawnContext) -> None:
        self.list_key = _unique("raw")

    def open_put(self) -> Put:
        return functools.partial(redis.Redis.from_url(self.url).lpush, self.list_key)

    def open_get(self) -> Get:
        return functools.partial(_raw_get, redis.Redis.from_url(self.url), self.list_key)

    def cleanup(self) -> None:
        if self.list_key:
            _delete_keys(self.url, [self.list_key])


class MultiprocessingTransport(Transport):
    """``multiprocessing.Queue`` (unbounded): a pipe plus a feeder thread."""

    key = "mp"
    label = "multiprocessing.Queue"

    def __init__(self) -> None:
        self.queue: Any = None

    def setup(self, ctx: SpawnContext) -> None:
        self.queue = ctx.Queue()

    def open_put(self) -> Put:
        return self.queue.put  # type: ignore[no-any-return]

    def open_get(self) -> Get:
        return functools.partial(self.queue.get, True, GET_TIMEOUT)

    def cleanup(self) -> None:
        if self.queue is not None:
            self.queue.close()


class SpecLiteralClient:
    """The protocol's reference Put and Get, one Redis command per round trip.

    Only the errata are fixed: blocking pops use a finite timeout (and loop),
    ``:not_full`` is trimmed with ``LTRIM 0 0``, and the counters are the
    ``:stats:*`` keys. Get reads ``LLEN`` and ``GET :bound`` to decide whether
    to push ``:not_full``.
    """

    def __init__(self, client: redis.Redis, keys: QueueKeys, client_id: str) -> None:
        self.r = client
        self.k = keys
        self.client_id = client_id

    def _pop(self, *keys: str) -> tuple[bytes, bytes]:
        deadline = time.monotonic() + GET_TIMEOUT
        while True:
            reply = self.r.brpop(list(keys), timeout=SPEC_WAIT)
            if reply is not None:
                return cast(tuple[bytes, bytes], tuple(reply))
            if time.monotonic() > deadline:
                raise TimeoutError(f"BRPOP {' '.join(keys)} timed out after {GET_TIMEOUT} s")

    def _mark_not_full(self, length: int) -> None:
        r, k = self.r, self.k
        bound = int(r.get(k.bound) or 0)
        if bound == 0 or length < bound:
            r.lpush(k.not_full, 1)
            r.ltrim(k.not_full, 0, 0)

    def put(self, item: bytes) -> None:
        """EXISTS, BRPOP, SET, EXISTS, BRPOP, LPUSH, GET, [LPUSH, LTRIM], INCR, INCRBY, LPUSH."""
        r, k = self.r, self.k
        if not r.exists(k.bound):
            raise QueueDoesNotExist(k.base)
        self._pop(k.producer_free)
        r.set(k.producer, self.client_id)
        if r.exists(k.closed):
            r.lpush(k.producer_free, 1)
            raise ShutDown(k.base)
        self._pop(k.not_full)
        length = int(r.lpush(k.base, item))
        self._mark_not_full(length)
        r.incr(k.produced_messages)
        r.incrby(k.produced_bytes, len(item))
        r.lpush(k.producer_free, 1)

    def get(self) -> bytes:
        """EXISTS, BRPOP, SET, EXISTS, BRPOP, LLEN, GET, [LPUSH, LTRIM], INCR, INCRBY, LPUSH."""
        r, k = self.r, self.k
        if not r.exists(k.bound):
            raise QueueDoesNotExist(k.base)
        self._pop(k.consumer_free)
        r.set(k.consumer, self.client_id)
        if r.exists(k.closed) and r.llen(k.base) == 0:
            r.lpush(k.consumer_free, 1)
            raise ShutDown(k.base)
        key, item = self._pop(k.base, k.closed)
        if key.decode() == k.closed:
            r.lpush(k.closed, 1)
            r.lpush(k.consumer_free, 1)
            raise ShutDown(k.base)
        self._mark_not_full(int(r.llen(k.base)))
        r.incr(k.consumed_messages)
        r.incrby(k.consumed_bytes, len(item))
        r.lpush(k.consumer_free, 1)
        return item


class SpecLiteralTransport(Transport):
    """The spec's command sequence on a queue created by ``pressure.Queue``."""

    key = "spec"
    label = "spec literal (1 cmd/RTT)"

    def __init__(self, url: str) -> None:
        self.url = url
        self.keys: QueueKeys | None = None

    def setup(self, ctx: SpawnContext) -> None:
        queue: Queue[bytes] = Queue(_unique("spec"), maxsize=0, url=self.url, serializer="bytes")
        self.keys = queue.keys
        queue.disconnect()

    def _client(self) -> SpecLiteralClient:
        if self.keys is None:
            raise RuntimeError("transport not set up")
        return SpecLiteralClient(redis.Redis.from_url(self.url), self.keys, identity.client_id())

    def open_put(self) -> Put:
        return self._client().put

    def open_get(self) -> Get:
        return self._client().get

    def cleanup(self) -> None:
        if self.keys is not None:
            _delete_keys(self.url, self.keys.all_keys())


def make_transports(url: str, maxsize: int) -> list[Callable[[], Transport]]:
    """Factories for the five transports, in table order (a fresh one per phase)."""
    return [
        functools.partial(PressureTransport, url, 0),
        functools.partial(PressureTransport, url, maxsize),
        functools.partial(RawRedisTransport, url),
        MultiprocessingTransport,
        functools.partial(SpecLiteralTransport, url),
    ]


# -- the child processes ----------------------------------------------------------


def _produce(put: Put, phase: Phase, barrier: Barrier) -> SideResult:
    pad = b"\0" * (phase.size - _STAMP.size)
    pack, now = _STAMP.pack, time.monotonic_ns
    for _ in range(phase.warmup):
        put(pack(now()) + pad)
    barrier.wait(BARRIER_TIMEOUT)
    start = now()
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
    return SideResult(elapsed_ns=now() - start)


def _check_size(item: bytes, size: int) -> None:
    if len(item) != size:
        raise ValueError(f"got a {len(item)}-byte payload, expected {size}")


def _consume(get: Get, phase: Phase, barrier: Barrier) -> SideResult:
    now, unpack = time.monotonic_ns, _STAMP.unpack_from
    for _ in range(phase.warmup):
        _check_size(get(), phase.size)
    barrier.wait(BARRIER_TIMEOUT)
    start = now()
    if phase.rate:
        latencies = [0] * phase.count
        for i in range(phase.count):
            item = get()
            latencies[i] = now() - unpack(item)[0]
            _check_size(item, phase.size)
        return SideResult(elapsed_ns=now() - start, latencies_ns=latencies)
    item = b""
    for _ in range(phase.count):
        item = get()
    elapsed = now() - start
    _check_size(item, phase.size)
    return SideResult(elapsed_ns=elapsed)


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
    result = PhaseResult(msgs_per_s=phase.count / max(consumer.elapsed_ns, 1) * 1e9)
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


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _timed_phase(ctx: SpawnContext, factory: Callable[[], Transport], label: str,
                 phase: Phase) -> PhaseResult:
    began = time.monotonic()
    result = run_phase(ctx, factory, phase)
    took = time.monotonic() - began
    if result.error:
        status = "error"
        _progress(f"{label} {phase.name} failed: {result.error.rstrip()}")
    elif result.p50_us is not None:
        status = f"p50 {result.p50_us:,.0f} µs"
    else:
        status = f"{result.msgs_per_s or 0:,.0f} msgs/s"
    _progress(f"  {label:<28} {phase.name:<10} {status:>16}  ({took:.1f} s)")
    return result


def _best(results: list[PhaseResult]) -> PhaseResult:
    """The fastest round, or the first error if any round failed."""
    errors = [r for r in results if r.error]
    if errors:
        return errors[0]
    return max(results, key=lambda r: r.msgs_per_s or 0.0)


def run_all(url: str, config: BenchConfig) -> list[TransportResult]:
    """Throughput (best of ``repeat`` interleaved rounds), then latency, for every transport."""
    ctx = multiprocessing.get_context(START_METHOD)
    assert isinstance(ctx, SpawnContext)
    throughput = Phase("throughput", config.count, config.size)
    latency = Phase("latency", config.latency_count, config.size, rate=config.rate)
    factories = make_transports(url, config.maxsize)
    outcomes = [TransportResult(t.key, t.label) for t in (f() for f in factories)]
    rounds: list[list[PhaseResult]] = [[] for _ in factories]
    for _ in range(config.repeat):
        for factory, outcome, done in zip(factories, outcomes, rounds, strict=True):
            done.append(_timed_phase(ctx, factory, outcome.label, throughput))
    for factory, outcome, done in zip(factories, outcomes, rounds, strict=True):
        outcome.throughput = _best(done)
        outcome.latency = _timed_phase(ctx, factory, outcome.label, latency)
    return outcomes


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


def _safe_url(url: str) -> str:
    try:
        return ConnectionConfig.from_url(url).url
    except ValueError:
        return "<invalid url>"


@contextlib.contextmanager
def redis_url(url: str | None) -> Iterator[tuple[str, str]]:
    """Yield ``(url, how it was chosen)``; a private server lives until the block ends."""
    if url is not None:
        if not _answers(url):
            raise ConnectionError(f"Redis at {_safe_url(url)} (--url) does not answer")
        yield url, "--url"
        return
    env = os.environ.get("REDIS_URL")
    if env and _answers(env):
        yield env, "REDIS_URL"
        return
    if env:
        print(f"REDIS_URL ({_safe_url(env)}) does not answer", flush=True)
    with RedisServer() as server:
        print(f"started a private redis-server ({server.binary}) on {server.url}; "
              f"it is stopped at the end", flush=True)
        yield server.url, "private redis-server"


# -- the report -------------------------------------------------------------------


def _usable_cpus() -> int:
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
    usable = _usable_cpus()
    return [
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("redis server", f"{server.get('redis_version', '?')} ({server.get('os', '?')})"),
        ("redis-py", redis.__version__),
        ("hiredis", f"{hiredis_text}, {used}"),
        ("CPUs", f"{os.cpu_count()} ({usable} usable by this process)"),
        ("platform", platform.platform()),
    ]


def _fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or not base:
        return None
    return value / base


def _by_key(results: list[TransportResult]) -> dict[str, TransportResult]:
    return {r.key: r for r in results}


def format_table(results: list[TransportResult]) -> list[str]:
    """The results table, one row per transport."""
    raw = _by_key(results).get("raw")
    raw_rate = raw.throughput.msgs_per_s if raw else None
    raw_p99 = raw.latency.p99_us if raw else None
    header = ("transport", "msgs/s", "vs raw", "p50 µs", "p99 µs", "p99 vs raw")
    rows = [header]
    for r in results:
        rows.append((
            r.label,
            "error" if r.throughput.error else _fmt(r.throughput.msgs_per_s),
            _fmt(_ratio(r.throughput.msgs_per_s, raw_rate), 2, "x"),
            "error" if r.latency.error else _fmt(r.latency.p50_us),
            "error" if r.latency.error else _fmt(r.latency.p99_us),
            _fmt(_ratio(r.latency.p99_us, raw_p99), 2, "x"),
        ))
    return _render(rows)


def _render(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """A header row and data rows as aligned text: the first column left, the others right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append(" | ".join(cells))
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return lines


def format_notes(results: list[TransportResult], config: BenchConfig) -> list[str]:
    """Errors, and transports whose producer could not keep up with --rate."""
    notes = []
    for r in results:
        for phase in ("throughput", "latency"):
            result: PhaseResult = getattr(r, phase)
            if result.error:
                notes.append(f"{r.label} {phase}: {result.error.strip().splitlines()[-1]}")
        achieved = r.latency.achieved_rate
        if achieved is not None and achieved < 0.95 * config.rate:
            notes.append(f"{r.label}: the producer managed only {achieved:,.0f} msgs/s of the "
                         f"{config.rate:,.0f}/s asked, so its latencies include queueing")
    return notes


def _goal_line(text: str, value: float | None, goal: float) -> str:
    if value is None:
        return f"  {text:<52} {'n/a':>8}  MISS (no result)"
    verdict = "PASS" if value >= goal else "MISS"
    return f"  {text:<52} {value:>7.2f}x  {verdict}"


def format_goals(results: list[TransportResult], maxsize: int) -> list[str]:
    """The three throughput goals, each PASS or MISS."""
    by = _by_key(results)

    def rate(key: str) -> float | None:
        return by[key].throughput.msgs_per_s if key in by else None

    unbounded, bounded = rate("pressure"), rate("pressure-bounded")
    return [
        "goals (throughput):",
        _goal_line("pressure.Queue maxsize=0 >= 0.8x raw redis-py", _ratio(unbounded, rate("raw")), 0.8),
        _goal_line(f"pressure.Queue maxsize={maxsize} >= 0.7x raw redis-py",
                   _ratio(bounded, rate("raw")), 0.7),
        _goal_line("pressure.Queue maxsize=0 >= 10x spec literal", _ratio(unbounded, rate("spec")), 10.0),
    ]


def print_machine(url: str, how: str) -> None:
    """The server and the machine the figures come from."""
    print()
    print(f"pressure bench on {_safe_url(url)} ({how})")
    for name, value in machine_facts(url):
        print(f"  {name}: {value}")


def _rounds(config: BenchConfig) -> str:
    return f" (best of {config.repeat} rounds)" if config.repeat > 1 else ""


def _print_lines(lines: list[str], title: str | None = None) -> None:
    print()
    if title:
        print(title)
    for line in lines:
        print(line)


def print_report(results: list[TransportResult], config: BenchConfig) -> None:
    """The queue section: settings, table, notes, goals."""
    print()
    print(f"queues: 1 producer process -> 1 consumer process per transport "
          f"(multiprocessing '{START_METHOD}'), {config.size}-byte payloads")
    print(f"  throughput: {config.count:,} messages as fast as possible{_rounds(config)}; "
          f"latency: {config.latency_count:,} messages at {config.rate:,.0f}/s (put -> get)")
    _print_lines(format_table(results))
    notes = format_notes(results, config)
    if notes:
        _print_lines([f"  - {note}" for note in notes], "notes:")
    _print_lines(format_goals(results, config.maxsize))


# -- command line -----------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _payload_size(text: str) -> int:
    value = int(text)
    if value < _STAMP.size:
        raise argparse.ArgumentTypeError(f"must be at least {_STAMP.size} (the timestamp), not {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _size_list(text: str) -> tuple[int, ...]:
    """A comma-separated list of positive integers (each at least 8 when used as payloads)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, not {text}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"must be positive integers, not {text}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` options (shared by ``python -m pressure bench`` and ``run``)."""
    parser.add_argument("--url", help="Redis server URL (default: $REDIS_URL if it answers, "
                        "else a private redis-server started for the run)")
    parser.add_argument("--count", type=_positive_int, default=20_000,
                        help="messages in the throughput phase (default: %(default)s)")
    parser.add_argument("--size", type=_payload_size, default=100,
                        help="payload size in bytes, at least 8 (default: %(default)s)")
    parser.add_argument("--maxsize", type=_positive_int, default=100,
                        help="bound of the bounded pressure.Queue (default: %(default)s)")
    parser.add_argument("--latency-count", type=_positive_int, default=2_000,
                        help="messages in the latency phase (default: %(default)s)")
    parser.add_argument("--rate", type=_positive_float, default=2_000.0,
                        help="messages per second in the latency phase (default: %(default)s)")
    parser.add_argument("--repeat", type=_positive_int, default=1,
                        help="throughput rounds per transport and executor rounds, interleaved; "
                        "the best counts (default: %(default)s)")
    sections = parser.add_mutually_exclusive_group()
    sections.add_argument("--executor", action="store_true",
                          help="run only the executor section (default: both sections)")
    sections.add_argument("--no-executor", action="store_true",
                          help="run only the queue section (default: both sections)")
    sections.add_argument("--batch", action="store_true",
                          help="run only the batch section (put_many/get_many); it is opt-in, "
                          "not in the default run, because it takes about a minute per --repeat round")
    sections.add_argument("--spark", action="store_true",
                          help="run only the Spark section (the pressure data source against raw "
                          "redis-py from Spark tasks); opt-in, it needs pyspark and Java")
    parser.add_argument("--no-batch", action="store_true",
                        help="skip the batch section (the default; kept for scripts)")
    parser.add_argument("--batch-sizes", type=_size_list, default=(1, 10, 100, 500),
                        help="comma-separated batch sizes of the batch section (default: 1,10,100,500)")
    parser.add_argument("--payload-sizes", type=_size_list, default=(100, 10_000, 1_000_000),
                        help="comma-separated payload sizes in bytes of the batch section, each at "
                        "least 8 (default: 100,10000,1000000); bigger payloads move fewer messages")
    parser.add_argument("--batch-messages", type=_positive_int, default=20_000,
                        help="messages per batch-section cell at 100 B (default: %(default)s)")
    parser.add_argument("--memory-items", type=_positive_int, default=200_000,
                        help="100-B items queued for the batch section's memory line "
                        "(default: %(default)s)")
    parser.add_argument("--spark-rows", type=_positive_int, default=200_000,
                        help="rows each Spark path moves (default: %(default)s)")
    parser.add_argument("--spark-partitions", type=_positive_int, default=2,
                        help="partitions of the Spark DataFrames (default: %(default)s)")
    parser.add_argument("--spark-batch", type=_positive_int, default=500,
                        help="items per round trip in the Spark section, at most 1000 "
                        "(default: %(default)s)")
    parser.add_argument("--spark-stream-batch", type=_positive_int, default=50_000,
                        help="rows per micro-batch of the Spark stream reader (default: %(default)s)")
    parser.add_argument("--spark-rounds", type=_positive_int, default=2,
                        help="timed rounds of every Spark path, after a warm-up run; the best "
                        "counts (default: %(default)s)")
    parser.add_argument("--workers", type=_positive_int, default=_usable_cpus(),
                        help="worker processes of each executor (default: the CPUs usable, "
                        "here %(default)s)")
    parser.add_argument("--executor-tasks", type=_positive_int, default=2_000,
                        help="no-op tasks per executor round (default: %(default)s)")
    parser.add_argument("--cpu-tasks", type=_positive_int, default=40,
                        help="CPU-bound tasks per executor round (default: %(default)s)")
    parser.add_argument("--cpu-mb", type=_positive_int, default=256,
                        help="MiB hashed by each CPU-bound task (default: %(default)s)")


def build_parser(prog: str = "python -m pressure bench") -> argparse.ArgumentParser:
    """A stand-alone parser for the bench options."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_arguments(parser)
    return parser


def _config(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(url=args.url, count=args.count, size=args.size, maxsize=args.maxsize,
                       latency_count=args.latency_count, rate=args.rate, repeat=args.repeat,
                       queues=not (args.executor or args.batch or args.spark),
                       executors=not (args.no_executor or args.batch or args.spark),
                       batches=args.batch and not args.no_batch,
                       workers=args.workers, executor_tasks=args.executor_tasks,
                       cpu_tasks=args.cpu_tasks, cpu_mb=args.cpu_mb,
                       batch_sizes=args.batch_sizes, payload_sizes=args.payload_sizes,
                       batch_messages=args.batch_messages, memory_items=args.memory_items,
                       spark=args.spark, spark_rows=args.spark_rows,
                       spark_partitions=args.spark_partitions, spark_batch=args.spark_batch,
                       spark_stream_batch=args.spark_stream_batch, spark_rounds=args.spark_rounds)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed options; 0 even if goals are missed."""
    config = _config(args)
    if min(config.payload_sizes) < _STAMP.size:
        print(f"pressure bench: --payload-sizes must be at least {_STAMP.size}", file=sys.stderr)
        return 2
    if config.spark_batch > 1000:
        print("pressure bench: --spark-batch must be at most 1000", file=sys.stderr)
        return 2
    try:
        with redis_url(config.url) as (url, how):
            reports: list[Callable[[], None]] = []
            if config.queues:
                _progress(f"benchmarking 5 transports on {_safe_url(url)} ...")
                results = run_all(url, config)
                reports.append(functools.partial(print_report, results, config))
            if config.executors:
                from . import bench_executor

                _progress(f"benchmarking 2 executors with {config.workers} workers each ...")
                executor_results = bench_executor.run_executors(url, config)
                reports.append(functools.partial(bench_executor.print_executor_report,
                                                 executor_results, config))
            if config.batches:
                from . import bench_batch

                _progress(f"benchmarking batches on {_safe_url(url)} ...")
                batch_report = bench_batch.run_batches(url, config)
                reports.append(functools.partial(bench_batch.print_batch_report, batch_report, config))
            if config.spark:
                from . import bench_spark

                _progress(f"benchmarking the Spark data source on {_safe_url(url)} ...")
                spark_results = bench_spark.run_spark(url, config)
                reports.append(functools.partial(bench_spark.print_spark_report, spark_results, config))
            print_machine(url, how)
            for report in reports:
                report()
    except (ConnectionError, ServerUnavailable, redis.RedisError, OSError) as exc:
        print(f"pressure bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pressure bench: interrupted", file=sys.stderr)
        return 130
    return 0


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (the options after ``bench``; default ``sys.argv[1:]``) and run."""
    return main(build_parser().parse_args(argv))


#: Names that moved to pressure.bench_executor, still reachable here (loaded on first use).
_EXECUTOR_NAMES = frozenset({"EXECUTOR_START_METHOD", "ExecutorResult", "format_executor_goals",
                             "format_executor_table", "hash_task", "noop_task",
                             "print_executor_report", "run_executors"})


def __getattr__(name: str) -> Any:
    if name in _EXECUTOR_NAMES:
        from . import bench_executor

        return getattr(bench_executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(run())
