"""The Spark section of ``python -m pressure bench --spark``: the ``pressure`` data source
against raw redis-py doing the same work from Spark tasks.

One local SparkSession (``local[2]``) moves ``--spark-rows`` small rows (one ``value``
column: an 18-byte JSON string), in ``--spark-partitions`` partitions and batches of
``--spark-batch`` items, through each path:

* **write** - ``df.write.format("pressure")`` into an unbounded queue, against the
  baseline ``df.foreachPartition(f)`` where ``f`` JSON-encodes each value and sends one
  ``LPUSH key v1 .. vB`` per batch to a plain list;
* **read** - ``spark.readStream.format("pressure")`` with ``trigger(availableNow=True)``
  into the ``noop`` sink (``maxRowsPerBatch`` = ``--spark-stream-batch``; the driver moves
  the items into the group's log 1000 per round trip, whatever the batch size), from a
  queue filled beforehand, against the baseline: one task per partition sends ``RPOP key B``
  until it has its share, JSON-decodes each item and yields it as a row of a DataFrame
  written to the ``noop`` sink (``mapPartitionsWithIndex`` + ``createDataFrame``), one such
  job per ``--spark-stream-batch`` rows, one after the other, as the stream runs one
  micro-batch after the other (issue 16's goal for the stream is >= 0.5x this baseline at
  50,000 rows per micro-batch); the same baseline as one job for all the rows, against
  which the batch reader ``spark.read.format("pressure")`` runs the same way (the stream's
  ratio to it is printed too); and, as the ceiling of any Python stream source on the
  machine, ``spark.readStream.format("pressure-bench-null")`` (``pressure.bench._spark_null``):
  the same rows made in memory, no Redis, the same micro-batches and sink, so its time is
  Spark's own (query start and stop, checkpoint and planning steps, Python workers, Arrow).

A path's time runs from the job's (or query's) start until it returns, so it includes
Spark's per-job (per-micro-batch) overhead; filling a queue or list before a read is not
timed. Every path runs once on a few rows first (a session's first job of each kind is
many times slower), then ``--spark-rounds`` rounds in turns; the best round counts. Every
run checks the row count; every queue and list has a unique name and is deleted after.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import redis

from ..queue import Queue
from ._harness import BenchConfig, fmt, print_lines, progress, ratio, render_table, unique_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

__all__ = [
    "SparkCase",
    "SparkJob",
    "SparkResult",
    "format_spark_table",
    "make_cases",
    "print_spark_report",
    "run_spark",
]

#: Rows moved by the warm-up run of each path.
WARMUP_ROWS = 2_000
#: Items per round trip when filling a queue or list before a read (untimed).
FILL_CHUNK = 1_000


@dataclass(frozen=True)
class SparkJob:
    """What every path moves: ``rows`` rows in ``partitions`` partitions, ``batch`` per round
    trip; the stream reader plans at most ``stream_batch`` rows per micro-batch."""

    url: str
    rows: int
    partitions: int
    batch: int
    stream_batch: int
    tmp: str
    #: what a path says about its last run, by case key (the stream reader's time split)
    notes: dict[str, str] = field(default_factory=dict, compare=False)


def _value(i: int) -> str:
    return f"row-{i:012d}"


def _frame(spark: SparkSession, job: SparkJob) -> Any:
    """The rows to write: one string column, ``value``."""
    return spark.range(0, job.rows, 1, job.partitions).selectExpr(
        "format_string('row-%012d', id) AS value")


def _check(what: str, got: int, expected: int) -> None:
    if got != expected:
        raise RuntimeError(f"{what}: {got} rows, expected {expected}")


def _delete_list(url: str, key: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.delete(key)
    finally:
        client.close()


def _new_queue(job: SparkJob) -> Queue[Any]:
    return Queue(unique_name("spark"), maxsize=0, url=job.url, serializer="json")


def _fill_queue(queue: Queue[Any], rows: int) -> None:
    for start in range(0, rows, FILL_CHUNK):
        queue.put_many([_value(i) for i in range(start, min(start + FILL_CHUNK, rows))])


def _fill_list(url: str, key: str, rows: int) -> None:
    client = redis.Redis.from_url(url)
    try:
        for start in range(0, rows, FILL_CHUNK):
            client.lpush(key, *(json.dumps(_value(i)) for i in range(start, min(start + FILL_CHUNK, rows))))
    finally:
        client.close()


# -- what the Spark tasks run (module level: pickled by reference) --------------------------


def _lpush_partition(url: str, key: str, batch: int, rows: Iterable[Row]) -> None:
    """The write baseline: one ``LPUSH key v1 .. vB`` per ``batch`` JSON-encoded values."""
    client = redis.Redis.from_url(url)
    try:
        chunk: list[str] = []
        for row in rows:
            chunk.append(json.dumps(row[0]))
            if len(chunk) >= batch:
                client.lpush(key, *chunk)
                chunk = []
        if chunk:
            client.lpush(key, *chunk)
    finally:
        client.close()


def _shares(rows: int, partitions: int) -> list[int]:
    """``rows`` split among ``partitions`` as evenly as can be (the first ones one more)."""
    return [rows // partitions + (1 if i < rows % partitions else 0) for i in range(partitions)]


def _rpop_partition(url: str, key: str, batch: int, shares: list[int], index: int,
                    _: Iterable[Any]) -> Iterator[tuple[str]]:
    """The read baseline: ``RPOP key B`` until this partition has its share, decoded."""
    client = redis.Redis.from_url(url)
    try:
        left = shares[index]
        while left:
            items = cast("list[bytes] | None", client.rpop(key, min(batch, left)))
            if not items:
                raise RuntimeError(f"list {key} ran dry with {left} items of partition {index} to go")
            left -= len(items)
            for item in items:
                yield (json.loads(item),)
    finally:
        client.close()


# -- the paths ---------------------------------------------------------------------------


def write_pressure(spark: SparkSession, job: SparkJob) -> float:
    queue = _new_queue(job)
    try:
        frame = _frame(spark, job)
        began = time.monotonic()
        (frame.write.format("pressure").mode("append").option("url", job.url)
         .option("serializer", "json").option("batchSize", str(job.batch)).save(queue.name))
        took = time.monotonic() - began
        _check("queue", queue.qsize(), job.rows)
        return took
    finally:
        queue.delete()
        queue.disconnect()


def write_raw(spark: SparkSession, job: SparkJob) -> float:
    key = unique_name("spark-raw")
    client = redis.Redis.from_url(job.url)
    try:
        frame = _frame(spark, job)
        began = time.monotonic()
        frame.foreachPartition(functools.partial(_lpush_partition, job.url, key, job.batch))
        took = time.monotonic() - began
        _check("list", int(client.llen(key)), job.rows)
        return took
    finally:
        client.delete(key)
        client.close()


def _run_stream(stream: DataFrame, job: SparkJob, key: str) -> float:
    """Run the stream ``stream`` (a loaded streaming DataFrame) to the noop sink until it has
    read what is there (``availableNow``); its time, from its start until it returns. Checks
    it read ``job.rows`` rows and notes where its time went under ``key``."""
    checkpoint = tempfile.mkdtemp(prefix="checkpoint-", dir=job.tmp)
    try:
        began = time.monotonic()
        query = (stream.writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        took = time.monotonic() - began
        _check(key, sum(int(p["numInputRows"]) for p in query.recentProgress), job.rows)
        job.notes[key] = _stream_split(took, query.recentProgress)
        return took
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def read_stream_pressure(spark: SparkSession, job: SparkJob) -> float:
    queue = _new_queue(job)
    try:
        _fill_queue(queue, job.rows)
        took = _run_stream(
            spark.readStream.format("pressure").option("url", job.url).option("serializer", "json")
            .option("maxRowsPerBatch", str(job.stream_batch)).option("numPartitions", str(job.partitions))
            .schema("value string").load(queue.name), job, "read-stream")
        _check("queue left", queue.qsize(), 0)
        return took
    finally:
        queue.delete()  # the group's log included
        queue.disconnect()


def _stream_split(took: float, progress: Sequence[Any]) -> str:
    """Where a stream query's time went, from Spark's progress reports: outside its
    micro-batches (starting and stopping the query), planning (``latestOffset``: the driver
    takes items into the log), the batches' tasks (``addBatch``), Spark's checkpoint and
    planning steps (``walCommit``, ``commitOffsets``, ``queryPlanning``, ``getBatch``)."""
    def total(*names: str) -> float:
        return sum(int(p["durationMs"].get(name, 0)) for p in progress for name in names) / 1000

    triggers = total("triggerExecution")
    return (f"{len(progress)} micro-batches in {took:.2f} s: query start/stop {took - triggers:.2f} s, "
            f"latestOffset {total('latestOffset'):.2f} s, addBatch {total('addBatch'):.2f} s, "
            f"Spark's checkpoint+planning {total('walCommit', 'commitOffsets', 'queryPlanning', 'getBatch'):.2f} s")


def read_batch_pressure(spark: SparkSession, job: SparkJob) -> float:
    queue = _new_queue(job)
    try:
        _fill_queue(queue, job.rows)
        began = time.monotonic()
        (spark.read.format("pressure").option("url", job.url).option("serializer", "json")
         .option("numPartitions", str(job.partitions)).option("batchSize", str(job.batch))
         .schema("value string").load(queue.name).write.format("noop").mode("overwrite").save())
        took = time.monotonic() - began
        _check("queue left", queue.qsize(), 0)
        return took
    finally:
        queue.delete()
        queue.disconnect()


def _rpop_job(spark: SparkSession, job: SparkJob, key: str, rows: int) -> None:
    """One Spark job: ``rows`` rows popped from ``key`` by the partitions, to the noop sink."""
    rdd = spark.sparkContext.parallelize(range(job.partitions), job.partitions).mapPartitionsWithIndex(
        functools.partial(_rpop_partition, job.url, key, job.batch, _shares(rows, job.partitions)))
    spark.createDataFrame(rdd, "value string").write.format("noop").mode("overwrite").save()


def _read_raw(spark: SparkSession, job: SparkJob, per_job: int) -> float:
    """The read baseline: a list of ``job.rows`` items popped by jobs of ``per_job`` rows."""
    key = unique_name("spark-raw")
    try:
        _fill_list(job.url, key, job.rows)
        began = time.monotonic()
        for done in range(0, job.rows, per_job):
            _rpop_job(spark, job, key, min(per_job, job.rows - done))
        took = time.monotonic() - began
        client = redis.Redis.from_url(job.url)
        try:
            _check("list left", int(client.llen(key)), 0)
        finally:
            client.close()
        return took
    finally:
        _delete_list(job.url, key)


def read_raw(spark: SparkSession, job: SparkJob) -> float:
    """The read baseline in one job."""
    return _read_raw(spark, job, job.rows)


def read_raw_micro_batches(spark: SparkSession, job: SparkJob) -> float:
    """The read baseline in a job per ``stream_batch`` rows: the stream's micro-batches."""
    return _read_raw(spark, job, job.stream_batch)


def read_stream_null(spark: SparkSession, job: SparkJob) -> float:
    """The ceiling: a Python stream source that makes the rows in memory (no Redis)."""
    from ._spark_null import NAME

    return _run_stream(spark.readStream.format(NAME).option("rows", str(job.rows))
                       .option("batch", str(job.stream_batch)).option("partitions", str(job.partitions))
                       .load(), job, "read-stream-null")


# -- the section -----------------------------------------------------------------------


@dataclass(frozen=True)
class SparkCase:
    """One path: what it is, how to run it, and the key of the baseline it is compared to."""

    key: str
    label: str
    run: Callable[[SparkSession, SparkJob], float]
    baseline: str | None = None


def make_cases() -> list[SparkCase]:
    """The paths, in table order."""
    return [
        SparkCase("write-raw", 'write  baseline: foreachPartition, LPUSH xB', write_raw),
        SparkCase("write", 'write  df.write.format("pressure")', write_pressure, "write-raw"),
        SparkCase("read-raw", "read   baseline: mapPartitions, RPOP B -> noop", read_raw),
        SparkCase("read-raw-mb", "read   baseline as above, a job per micro-batch", read_raw_micro_batches),
        SparkCase("read-stream", 'read   readStream.format("pressure") -> noop', read_stream_pressure,
                  "read-raw-mb"),
        SparkCase("read-stream-null", "read   ceiling: a stream source reading nothing", read_stream_null,
                  "read-raw-mb"),
        SparkCase("read-batch", 'read   read.format("pressure") -> noop', read_batch_pressure,
                  "read-raw"),
    ]


@dataclass
class SparkResult:
    """The rounds of one path: seconds each, or the first error."""

    case: SparkCase
    rows: int
    seconds: list[float] = field(default_factory=list)
    error: str | None = None
    #: what the path said about its best round
    note: str | None = None

    @property
    def best(self) -> float | None:
        return min(self.seconds) if self.seconds and self.error is None else None

    @property
    def rows_per_s(self) -> float | None:
        best = self.best
        return None if best is None else self.rows / max(best, 1e-9)


def _session() -> SparkSession:
    # Spark's Python workers must run this interpreter, the one with pressure installed
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from .. import spark as pressure_spark

    session = (SparkSession.builder.master("local[2]").appName("pressure-bench-spark")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pressure_spark.register(session)
    from ._spark_null import NullSource

    session.dataSource.register(NullSource)
    return session


def _attempt(case: SparkCase, spark: SparkSession, job: SparkJob) -> float | str:
    try:
        return case.run(spark, job)
    except Exception as exc:  # reported in the table's notes, the other paths go on
        text = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {text[0] if text else ''}"


def run_spark(url: str, config: BenchConfig) -> list[SparkResult]:
    """A warm-up run of every path, then ``spark_rounds`` rounds in turns."""
    began = time.monotonic()
    spark = _session()
    progress(f"  Spark session started ({time.monotonic() - began:.1f} s)")
    tmp = tempfile.mkdtemp(prefix="pressure-bench-spark-")
    job = SparkJob(url, config.spark_rows, config.spark_partitions, config.spark_batch,
                   config.spark_stream_batch, tmp)
    warm = SparkJob(url, min(WARMUP_ROWS, job.rows), job.partitions, job.batch,
                    min(job.stream_batch, WARMUP_ROWS), tmp)
    cases = make_cases()
    results = [SparkResult(case, job.rows) for case in cases]
    try:
        for case, result in zip(cases, results, strict=True):
            started = time.monotonic()
            outcome = _attempt(case, spark, warm)
            if isinstance(outcome, str):
                result.error = f"warm-up: {outcome}"
            progress(f"  {case.label:<48} warm-up  ({time.monotonic() - started:.1f} s)")
        for n in range(config.spark_rounds):
            for case, result in zip(cases, results, strict=True):
                if result.error:
                    continue
                outcome = _attempt(case, spark, job)
                if isinstance(outcome, str):
                    result.error = outcome
                    status = "error"
                else:
                    if not result.seconds or outcome < min(result.seconds):
                        result.note = job.notes.get(case.key)
                    result.seconds.append(outcome)
                    status = f"{job.rows / max(outcome, 1e-9):,.0f} rows/s"
                progress(f"  {case.label:<48} round {n + 1}  {status:>16}  "
                          f"({outcome if isinstance(outcome, str) else f'{outcome:.1f} s'})")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def format_spark_table(results: list[SparkResult]) -> list[str]:
    """One row per path: best rows/s, best seconds, and the ratio to its baseline."""
    by = {r.case.key: r for r in results}
    rows = [("path", "rows/s", "best s", "vs baseline")]
    for r in results:
        base = by.get(r.case.baseline) if r.case.baseline else None
        rows.append((r.case.label, "error" if r.error else fmt(r.rows_per_s),
                     "-" if r.best is None else f"{r.best:.2f}",
                     fmt(ratio(r.rows_per_s, base.rows_per_s), 2, "x") if base else ""))
    return render_table(rows)


def print_spark_report(results: list[SparkResult], config: BenchConfig) -> None:
    """The Spark section: settings, table, errors."""
    print()
    print(f"spark: {config.spark_rows:,} rows (18-B JSON strings) in {config.spark_partitions} "
          f"partitions, batches of {config.spark_batch}, local[2]; the stream readers plan, and "
          f"the micro-batch baseline pops, {config.spark_stream_batch:,} rows per micro-batch; "
          f"best of {config.spark_rounds} rounds after a warm-up run")
    print_lines(format_spark_table(results))
    notes = [f"  - {r.case.label.split(maxsplit=1)[1]}, best round: {r.note}"
             for r in results if r.note and not r.error]
    by = {r.case.key: r for r in results}
    stream, one_job = by.get("read-stream"), by.get("read-raw")
    if stream and one_job and stream.rows_per_s and one_job.rows_per_s:
        notes.append(f"  - the stream against the read baseline in one job: "
                     f"{fmt(ratio(stream.rows_per_s, one_job.rows_per_s), 2, 'x')}")
    if notes:
        print_lines(notes, "where the time went:")
    errors = [f"  - {r.case.label}: {r.error}" for r in results if r.error]
    if errors:
        print_lines(errors, "notes:")
