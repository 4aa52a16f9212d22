"""The batch section of ``python -m pressure bench --batch``: put_many/get_many against raw
redis-py batches and multiprocessing.Queue.

For every topology (1 producer -> 1 consumer, 2 producers -> 2 consumers; processes started
with ``spawn``) and transport, one set of processes runs every cell - each payload size of
``--payload-sizes`` times each batch size of ``--batch-sizes`` - behind a common barrier per
cell (after a warm-up cell that opens the connections and loads the scripts). A cell moves
``--batch-messages`` messages of 100 B, fewer for bigger payloads (at most 64 MiB a cell);
the producers split them evenly and put them a batch at a time, each consumer takes exactly
its share, asking for at most a batch at a time. Rate = messages / (last get - first start).

The transports:

1. ``pressure.Queue`` (unbounded, ``serializer="bytes"``): ``put_many`` / ``get_many``;
2. raw redis-py, one command per batch each way: ``LPUSH key v1 .. vB`` and ``RPOP key B``
   (``BRPOP`` when the list is empty) - the pipelined baseline, with no round trip to spare;
3. ``multiprocessing.Queue``: it has no batch API, so items go one by one whatever the
   batch size (measured once per payload size).

Then, side by side with the same options as the queue section: single-item throughput and
light-load put-to-get latency (p50/p99) of ``pressure.Queue`` against raw LPUSH/BRPOP, and
the Redis memory per queued 100-B item (INFO ``used_memory`` delta / ``--memory-items``).
With ``--repeat R`` every measurement is taken R times, in turns, and the best counts.
"""

from __future__ import annotations

import abc
import contextlib
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.synchronize import Barrier
from typing import Any, cast

import redis

from ..queue import Queue
from ._harness import (BARRIER_TIMEOUT, GET_TIMEOUT, START_METHOD, BenchConfig, Phase, PhaseResult, ServerCpu,
                       best_round, fmt, print_lines, progress, ratio, render_table, rounds_note, size_text,
                       spawn_context, timed_phase, unique_name)
from .queues import PressureTransport, RawRedisTransport

__all__ = [
    "BatchResult",
    "BatchTransport",
    "Cell",
    "CellRun",
    "MemoryResult",
    "PressureBatch",
    "RawBatch",
    "SingleResult",
    "BatchReport",
    "WARM_CELL",
    "fill",
    "format_batch_goals",
    "format_batch_table",
    "make_cells",
    "measure_memory",
    "print_batch_report",
    "run_batches",
    "run_cells",
    "run_warm_cells",
    "used_memory",
]

#: The most bytes one cell moves (so 1 MB payloads take about as long as 100 B ones).
CELL_BYTES = 64 << 20
#: The fewest messages one cell moves.
MIN_CELL_MESSAGES = 16
#: Producer and consumer processes of each topology.
TOPOLOGIES = (1, 2)
#: The batch size and payload size the mp.Queue goal compares at.
GOAL_BATCH, GOAL_PAYLOAD = 500, 100
#: Items per put_many call when filling a queue for the memory figure.
FILL_CHUNK = 1000

PutBatch = Callable[[list[bytes]], object]
GetBatch = Callable[[int], list[bytes]]


@dataclass(frozen=True)
class Cell:
    """One measurement: ``count`` messages of ``payload`` bytes, ``batch`` at a time."""

    payload: int
    batch: int
    count: int


#: The cell run first in every set of processes, its figures dropped (``run_warm_cells``).
WARM_CELL = Cell(payload=100, batch=10, count=200)


def make_cells(config: BenchConfig, batch_sizes: Sequence[int] | None = None) -> list[Cell]:
    """Every payload size times every batch size; big payloads move fewer messages."""
    sizes = config.batch_sizes if batch_sizes is None else batch_sizes
    cells = []
    for payload in config.payload_sizes:
        count = max(min(config.batch_messages, CELL_BYTES // payload), MIN_CELL_MESSAGES)
        cells += [Cell(payload, batch, count) for batch in sizes]
    return cells


# -- transports -------------------------------------------------------------------


class BatchTransport(abc.ABC):
    """A way to move batches of bytes between processes; set up and cleaned up in the
    parent, pickled to the children, which open their side there."""

    key: str = ""
    label: str = ""
    #: False if the transport moves items one by one whatever the batch size.
    batched: bool = True

    @abc.abstractmethod
    def setup(self, ctx: SpawnContext) -> None:
        """Create the channel (parent)."""

    @abc.abstractmethod
    def open_put(self) -> PutBatch:
        """The producer's function putting a list of items (child)."""

    @abc.abstractmethod
    def open_get(self) -> GetBatch:
        """The consumer's function getting 1 to n items, blocking until one is there (child)."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Remove everything ``setup`` created (parent)."""


class PressureBatch(BatchTransport):
    """``pressure.Queue.put_many`` / ``get_many``."""

    key = "pressure"
    label = "pressure put_many/get_many"

    def __init__(self, url: str) -> None:
        self.url = url
        self.queue: Queue[bytes] | None = None

    def setup(self, ctx: SpawnContext) -> None:
        self.queue = Queue(unique_name("batch"), maxsize=0, url=self.url, serializer="bytes")

    def _queue(self) -> Queue[bytes]:
        if self.queue is None:
            raise RuntimeError("transport not set up")
        return self.queue

    def open_put(self) -> PutBatch:
        return self._queue().put_many

    def open_get(self) -> GetBatch:
        queue = self._queue()
        return lambda n: queue.get_many(n, True, GET_TIMEOUT)

    def cleanup(self) -> None:
        if self.queue is not None:
            self.queue.delete()
            self.queue.disconnect()


def _raw_get_many(client: redis.Redis, key: str, n: int) -> list[bytes]:
    """RPOP key n; if the list is empty, BRPOP one item (as a blocking get would)."""
    items = client.rpop(key, n)
    if items:
        return cast(list[bytes], items)
    deadline = time.monotonic() + GET_TIMEOUT
    while time.monotonic() < deadline:
        reply = client.brpop([key], timeout=1)
        if reply is not None:
            return [cast(bytes, reply[1])]
    raise TimeoutError(f"BRPOP {key} timed out after {GET_TIMEOUT} s")


class RawBatch(BatchTransport):
    """Raw redis-py: ``LPUSH key v1 .. vB`` and ``RPOP key B``, one round trip per batch."""

    key = "raw"
    label = "redis-py LPUSH xB / RPOP B (raw)"

    def __init__(self, url: str) -> None:
        self.url = url
        self.list_key = ""

    def setup(self, ctx: SpawnContext) -> None:
        self.list_key = unique_name("rawbatch")

    def open_put(self) -> PutBatch:
        client, key = redis.Redis.from_url(self.url), self.list_key
        return lambda items: client.lpush(key, *items)

    def open_get(self) -> GetBatch:
        client, key = redis.Redis.from_url(self.url), self.list_key
        return lambda n: _raw_get_many(client, key, n)

    def cleanup(self) -> None:
        if self.list_key:
            client = redis.Redis.from_url(self.url)
            try:
                client.delete(self.list_key)
            finally:
                client.close()


class MultiprocessingOneByOne(BatchTransport):
    """``multiprocessing.Queue``: no batch API, so every item is put and got on its own."""

    key = "mp"
    label = "multiprocessing.Queue (1 by 1)"
    batched = False

    def __init__(self) -> None:
        self.queue: Any = None

    def setup(self, ctx: SpawnContext) -> None:
        self.queue = ctx.Queue()

    def open_put(self) -> PutBatch:
        put = self.queue.put

        def put_each(items: list[bytes]) -> None:
            for item in items:
                put(item)
        return put_each

    def open_get(self) -> GetBatch:
        get = self.queue.get
        return lambda n: [get(True, GET_TIMEOUT)]

    def cleanup(self) -> None:
        if self.queue is not None:
            self.queue.close()


# -- the child processes ----------------------------------------------------------


def _produce_cell(put: PutBatch, cell: Cell, share: int) -> None:
    batch = [bytes(cell.payload)] * min(cell.batch, share)
    full, rest = divmod(share, len(batch))
    for _ in range(full):
        put(batch)
    if rest:
        put(batch[:rest])


def _consume_cell(get: GetBatch, cell: Cell, share: int) -> None:
    left, item = share, b""
    while left:
        items = get(min(cell.batch, left))
        left -= len(items)
        item = items[-1]
    if len(item) != cell.payload or left:
        raise ValueError(f"got {share - left} items, the last of {len(item)} bytes; "
                         f"expected {share} of {cell.payload}")


#: One cell as a child saw it: start and end (monotonic ns), and with a server to watch, the
#: server's CPU seconds just before the cell's barrier and after the child's last get
#: (consumers only; None where not read).
Span = tuple[int, int, float | None, float | None]


def _batch_child(role: str, transport: BatchTransport, cells: Sequence[Cell], processes: int,
                 barrier: Barrier, conn: Connection, server_url: str | None = None) -> None:
    """One producer or consumer: every cell behind the barrier; report the Span of each."""
    spans: list[Span] = []
    error: str | None = None
    try:
        with contextlib.ExitStack() as stack:
            put = transport.open_put() if role == "producer" else None
            get = transport.open_get() if role == "consumer" else None
            cpu = stack.enter_context(ServerCpu(server_url)) if server_url and get is not None else None
            for cell in cells:
                share = cell.count // processes
                cpu0 = cpu.seconds() if cpu else None
                barrier.wait(BARRIER_TIMEOUT)
                start = time.monotonic_ns()
                if put is not None:
                    _produce_cell(put, cell, share)
                else:
                    _consume_cell(cast(GetBatch, get), cell, share)
                end = time.monotonic_ns()
                spans.append((start, end, cpu0, cpu.seconds() if cpu else None))
    except BaseException:  # reported to the parent, which shows it
        error = f"{role}: {traceback.format_exc()}"
        with contextlib.suppress(Exception):
            barrier.abort()
    try:
        conn.send((spans, error))
    finally:
        conn.close()


# -- the parent -------------------------------------------------------------------


@dataclass
class BatchResult:
    """One cell of one transport in one topology: its best rate, or why it has none."""

    key: str
    processes: int
    cell: Cell
    msgs_per_s: float | None = None
    error: str | None = None

    @property
    def mb_per_s(self) -> float | None:
        return None if self.msgs_per_s is None else self.msgs_per_s * self.cell.payload / 1e6


def _time_limit(cells: Sequence[Cell]) -> float:
    return 60.0 + sum(cell.count * 0.002 + cell.count * cell.payload / 20e6 for cell in cells)


def _gather(procs: list[tuple[str, Any, Connection]], limit: float) -> list[Any]:
    """Each child's (spans, error), in order; a child that fails to report yields an error."""
    deadline = time.monotonic() + limit
    reports: list[Any] = []
    for role, process, conn in procs:
        if conn.poll(max(deadline - time.monotonic(), 0.0)):
            try:
                reports.append(conn.recv())
                continue
            except (EOFError, OSError):
                pass
        reports.append(([], f"{role} did not report (exit code {process.exitcode})"))
    return reports


@dataclass(frozen=True)
class CellRun:
    """One cell measured once: its rate and, where the server was watched, the server's CPU
    time per message (µs)."""

    msgs_per_s: float
    server_cpu_us: float | None = None


def run_cells(ctx: SpawnContext, transport: BatchTransport, cells: Sequence[Cell],
              processes: int, server_url: str | None = None) -> list[CellRun | str]:
    """Run every cell in ``processes`` producers and as many consumers; per cell, its
    CellRun or an error message. With ``server_url``, the consumers read that server's CPU
    time around each cell: from the last of them to reach the cell's barrier (every get of
    the cell before is through then, and no put of this one has started) to the last of
    them to finish."""
    transport.setup(ctx)
    barrier = ctx.Barrier(2 * processes)
    procs: list[tuple[str, Any, Connection]] = []
    try:
        for role in ("consumer", "producer"):
            for n in range(processes):
                receiver, sender = ctx.Pipe(duplex=False)
                process = ctx.Process(target=_batch_child, name=f"bench-batch-{transport.key}-{role}{n}",
                                      args=(role, transport, cells, processes, barrier, sender, server_url),
                                      daemon=True)
                process.start()
                sender.close()
                procs.append((role, process, receiver))
        reports = _gather(procs, _time_limit(cells))
    finally:
        with contextlib.suppress(Exception):
            barrier.abort()
        for _, process, conn in procs:
            process.join(10.0)
            if process.is_alive():
                process.terminate()
                process.join(5.0)
            conn.close()
        transport.cleanup()
    errors = [error for _, error in reports if error]
    outcome: list[CellRun | str] = []
    for i, cell in enumerate(cells):
        spans: list[Span] = [s[i] for s, _ in reports if len(s) > i]
        if len(spans) < len(reports):
            outcome.append(errors[0] if errors else "no result")
            continue
        moved = cell.count // processes * processes
        elapsed = max(span[1] for span in spans) - min(span[0] for span in spans)
        before = [span[2] for span in spans if span[2] is not None]
        after = [span[3] for span in spans if span[3] is not None]
        cpu_us = (max(after) - max(before)) * 1e6 / moved if before and after else None
        outcome.append(CellRun(moved / max(elapsed, 1) * 1e9, cpu_us))
    return outcome


def run_warm_cells(ctx: SpawnContext, transport: BatchTransport, cells: Sequence[Cell],
                   processes: int, server_url: str | None = None) -> list[CellRun | str]:
    """``run_cells`` after a warm-up cell (which opens the connections and loads the scripts),
    whose figures are dropped."""
    return run_cells(ctx, transport, [WARM_CELL, *cells], processes, server_url)[1:]


def _transports(url: str) -> list[Callable[[], BatchTransport]]:
    return [lambda: PressureBatch(url), lambda: RawBatch(url), MultiprocessingOneByOne]


def _keep_best(results: dict[tuple[str, int, Cell], BatchResult], key: str, processes: int,
               cells: Sequence[Cell], outcome: Sequence[CellRun | str]) -> None:
    for cell, value in zip(cells, outcome, strict=True):
        result = results.setdefault((key, processes, cell), BatchResult(key, processes, cell))
        if isinstance(value, str):
            result.error = result.error or value
        else:
            result.msgs_per_s = max(value.msgs_per_s, result.msgs_per_s or 0.0)


def _batch_round(ctx: SpawnContext, url: str, config: BenchConfig,
                 results: dict[tuple[str, int, Cell], BatchResult]) -> None:
    """One round: every topology, every transport, every cell."""
    for processes in TOPOLOGIES:
        for factory in _transports(url):
            transport = factory()
            cells = make_cells(config, None if transport.batched else (1,))
            began = time.monotonic()
            outcome = run_warm_cells(ctx, transport, cells, processes)
            _keep_best(results, transport.key, processes, cells, outcome)
            failed = sum(isinstance(v, str) for v in outcome)
            progress(f"  {transport.label:<34} {processes}x{processes} {len(cells)} cells"
                      f"{f', {failed} failed' if failed else ''}  ({time.monotonic() - began:.1f} s)")


# -- single items and memory --------------------------------------------------------


@dataclass
class SingleResult:
    """Single-item throughput and light-load latency of one transport of the queue section."""

    key: str
    label: str
    throughput: PhaseResult = field(default_factory=PhaseResult)
    latency: PhaseResult = field(default_factory=PhaseResult)


def _singles(ctx: SpawnContext, url: str, config: BenchConfig) -> list[SingleResult]:
    """pressure.Queue and raw LPUSH/BRPOP, one item at a time: best-of-repeat throughput,
    then latency at ``--rate``."""
    factories: list[Callable[[], Any]] = [lambda: PressureTransport(url, 0), lambda: RawRedisTransport(url)]
    outcomes = [SingleResult(t.key, t.label) for t in (f() for f in factories)]
    throughput = Phase("throughput", config.count, config.size)
    latency = Phase("latency", config.latency_count, config.size, rate=config.rate)
    rounds: list[list[PhaseResult]] = [[] for _ in factories]
    for _ in range(config.repeat):
        for factory, outcome, done in zip(factories, outcomes, rounds, strict=True):
            done.append(timed_phase(ctx, factory, outcome.label, throughput))
    for factory, outcome, done in zip(factories, outcomes, rounds, strict=True):
        outcome.throughput = best_round(done)
        outcome.latency = timed_phase(ctx, factory, outcome.label, latency)
    return outcomes


def used_memory(client: redis.Redis) -> int:
    """The server's INFO memory ``used_memory``, in bytes."""
    return int(client.info("memory")["used_memory"])


def fill(queue: Queue[bytes], items: int, payload: bytes) -> None:
    """Put ``items`` copies of ``payload`` with put_many, FILL_CHUNK per call."""
    chunk = [payload] * FILL_CHUNK
    full, rest = divmod(items, FILL_CHUNK)
    for _ in range(full):
        queue.put_many(chunk)
    if rest:
        queue.put_many(chunk[:rest])


@dataclass(frozen=True)
class MemoryResult:
    """Redis memory taken by ``items`` queued items of ``size`` bytes."""

    items: int
    size: int
    delta: int

    @property
    def per_item(self) -> float:
        return self.delta / self.items


def measure_memory(url: str, items: int, size: int = 100) -> MemoryResult:
    """Fill a fresh queue with ``items`` items of ``size`` bytes; the used_memory delta."""
    client = redis.Redis.from_url(url)
    queue: Queue[bytes] = Queue(unique_name("memory"), maxsize=0, url=url, serializer="bytes")
    try:
        before = used_memory(client)
        fill(queue, items, bytes(size))
        return MemoryResult(items, size, used_memory(client) - before)
    finally:
        queue.delete()
        queue.disconnect()
        client.close()


# -- the whole section and its report -------------------------------------------------


@dataclass
class BatchReport:
    """Everything the batch section measured."""

    cells: dict[tuple[str, int, Cell], BatchResult]
    singles: list[SingleResult]
    memory: MemoryResult | None = None
    memory_error: str | None = None


def run_batches(url: str, config: BenchConfig) -> BatchReport:
    """``repeat`` rounds of every cell, then single items, then memory."""
    ctx = spawn_context()
    cells: dict[tuple[str, int, Cell], BatchResult] = {}
    for n in range(config.repeat):
        progress(f" batch round {n + 1} of {config.repeat}")
        _batch_round(ctx, url, config, cells)
    report = BatchReport(cells, _singles(ctx, url, config))
    try:
        report.memory = measure_memory(url, config.memory_items)
    except redis.RedisError as exc:
        report.memory_error = f"{type(exc).__name__}: {exc}"
    return report


def _rate(report: BatchReport, key: str, processes: int, cell: Cell) -> BatchResult | None:
    if key == "mp":
        cell = Cell(cell.payload, 1, cell.count)
    return report.cells.get((key, processes, cell))


def _cell_text(result: BatchResult | None) -> tuple[str, str]:
    if result is None:
        return "-", "-"
    if result.msgs_per_s is None:
        return "error", "-"
    return fmt(result.msgs_per_s), fmt(result.mb_per_s, 1)


def _msgs(result: BatchResult | None) -> float | None:
    return None if result is None else result.msgs_per_s


def format_batch_table(report: BatchReport) -> list[str]:
    """One row per topology, payload and batch size: pressure, raw and mp.Queue side by side."""
    rows = [("procs", "payload", "batch", "pressure msgs/s", "MB/s", "raw msgs/s", "MB/s", "vs raw",
             "mp 1-by-1 msgs/s", "vs mp")]
    keys = sorted({(p, c) for k, p, c in report.cells if k == "pressure"},
                  key=lambda pc: (pc[0], pc[1].payload, pc[1].batch))
    for processes, cell in keys:
        ours, raw, mp = (_rate(report, k, processes, cell) for k in ("pressure", "raw", "mp"))
        rows.append((f"{processes}x{processes}", size_text(cell.payload), str(cell.batch),
                     *_cell_text(ours), *_cell_text(raw), fmt(ratio(_msgs(ours), _msgs(raw)), 2, "x"),
                     _cell_text(mp)[0], fmt(ratio(_msgs(ours), _msgs(mp)), 2, "x")))
    return render_table(rows)


def format_singles(report: BatchReport) -> list[str]:
    """Single-item throughput and latency, pressure against raw."""
    raw = next((s for s in report.singles if s.key == "raw"), None)
    rows = [("single items", "msgs/s", "vs raw", "p50 µs", "p99 µs", "p99 vs raw")]
    for s in report.singles:
        rows.append((s.label, "error" if s.throughput.error else fmt(s.throughput.msgs_per_s),
                     fmt(ratio(s.throughput.msgs_per_s, raw.throughput.msgs_per_s if raw else None), 2, "x"),
                     "error" if s.latency.error else fmt(s.latency.p50_us),
                     "error" if s.latency.error else fmt(s.latency.p99_us),
                     fmt(ratio(s.latency.p99_us, raw.latency.p99_us if raw else None), 2, "x")))
    return render_table(rows)


def format_memory(report: BatchReport) -> str:
    """The ``memory`` line: Redis bytes per queued item."""
    if report.memory is None:
        return f"memory: n/a ({report.memory_error or 'not measured'})"
    m = report.memory
    return (f"memory: {m.per_item:,.1f} bytes of Redis memory per queued {m.size}-B item "
            f"({m.items:,} items put with put_many, INFO used_memory +{m.delta / 1e6:,.1f} MB)")


def _verdict(text: str, value: float | None, goal: float, at_most: bool = False) -> str:
    if value is None or math.isnan(value):
        return f"  {text:<62} {'n/a':>8}  MISS (no result)"
    ok = value <= goal if at_most else value >= goal
    return f"  {text:<62} {value:>7.2f}x  {'PASS' if ok else 'MISS'}"


def _worst_vs_raw(report: BatchReport) -> tuple[float | None, str]:
    """The lowest pressure/raw ratio over every batched cell (batch > 1), and where."""
    worst: tuple[float | None, str] = (None, "no batched cell")
    for (key, processes, cell), ours in report.cells.items():
        if key != "pressure" or cell.batch == 1:
            continue
        vs_raw = ratio(ours.msgs_per_s, _msgs(_rate(report, "raw", processes, cell)))
        if vs_raw is None:
            return None, f"{processes}x{processes} {size_text(cell.payload)} x{cell.batch} failed"
        if worst[0] is None or vs_raw < worst[0]:
            worst = (vs_raw, f"worst: {processes}x{processes} {size_text(cell.payload)} x{cell.batch}")
    return worst


def format_batch_goals(report: BatchReport) -> list[str]:
    """The four batch-section goals, each PASS or MISS."""
    goal_cell = next((c for k, p, c in report.cells
                      if k == "pressure" and p == 1 and (c.batch, c.payload) == (GOAL_BATCH, GOAL_PAYLOAD)),
                     None)
    vs_mp = None
    if goal_cell is not None:
        vs_mp = ratio(_msgs(_rate(report, "pressure", 1, goal_cell)), _msgs(_rate(report, "mp", 1, goal_cell)))
    worst, where = _worst_vs_raw(report)
    by = {s.key: s for s in report.singles}
    ours, raw = by.get("pressure"), by.get("raw")
    single = ratio(ours.throughput.msgs_per_s, raw.throughput.msgs_per_s) if ours and raw else None
    p99 = ratio(ours.latency.p99_us, raw.latency.p99_us) if ours and raw else None
    return [
        "goals (batches):",
        _verdict(f"put_many/get_many {GOAL_BATCH} x {GOAL_PAYLOAD} B >= 1.0x multiprocessing.Queue",
                 vs_mp, 1.0),
        _verdict(f"batched >= 0.7x raw LPUSH/RPOP same batch ({where})", worst, 0.7),
        _verdict("single-item pressure.Queue >= 0.9x raw LPUSH/BRPOP", single, 0.9),
        _verdict("p99 put-to-get latency (light load) <= 2x raw", p99, 2.0, at_most=True),
    ]


def print_batch_report(report: BatchReport, config: BenchConfig) -> None:
    """The batch section: settings, tables, memory, errors, goals."""
    print()
    print(f"batches: 1x1 and 2x2 producer/consumer processes ('{START_METHOD}'), payloads "
          f"{', '.join(size_text(p) for p in config.payload_sizes)}, batch sizes "
          f"{', '.join(map(str, config.batch_sizes))}{rounds_note(config)}")
    print(f"  {config.batch_messages:,} messages per 100-B cell, at most {CELL_BYTES >> 20} MiB per cell; "
          f"multiprocessing.Queue has no batch API: its items go one by one")
    print_lines(format_batch_table(report))
    print(f"\n  single items: {config.count:,} messages as fast as possible; latency: "
          f"{config.latency_count:,} messages at {config.rate:,.0f}/s (put -> get)")
    print_lines(format_singles(report))
    print_lines([format_memory(report)])
    errors = sorted({f"  - {k} {p}x{p} {size_text(c.payload)} x{c.batch}: {r.error.strip().splitlines()[-1]}"
                     for (k, p, c), r in report.cells.items() if r.error})
    if errors:
        print_lines(errors, "notes:")
    print_lines(format_batch_goals(report))
