"""The ``pressure`` PySpark data source, in local[2] mode against the private redis-server.

One SparkSession serves the whole run (it takes 10-25 s to start). Spark reports a
Python error as a Java exception whose text carries the Python traceback, so errors
are checked by their message.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("PySpark needs Java (17 or newer): none on this machine", allow_module_level=True)

from pyspark.sql import SparkSession

import pressure.spark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("pressure-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.streaming.stopTimeout", "60s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pressure.spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def opts(url: str, prefix: str) -> dict[str, str]:
    return {"url": url, "prefix": prefix}


def _no_leftovers(r: redis.Redis, q: pressure.Queue[Any]) -> None:
    """Nothing in flight, no consumer's list left behind, one token per role."""
    assert q.in_flight() == []
    assert r.llen(q.keys.producer_free) == 1 and r.llen(q.keys.consumer_free) == 1


def test_batch_round_trip(spark: SparkSession, make_queue: Any, opts: dict[str, str],
                          r: redis.Redis) -> None:
    df = spark.range(1000).selectExpr("id", "cast(id * 2 as string) as doubled").repartition(3)
    df.write.format("pressure").mode("append").options(**opts, serializer="json").save("jobs")
    q = make_queue("jobs", serializer="json")
    assert q.qsize() == 1000
    assert sorted(item["id"] for item in q.peek(1000)) == list(range(1000))

    read = (spark.read.format("pressure").options(**opts, serializer="json", numPartitions="2")
            .schema("id long, doubled string, _seq long, _deliveries int, _producer string")
            .load("jobs"))
    rows = read.collect()
    assert sorted(row.id for row in rows) == list(range(1000))
    assert all(row.doubled == str(row.id * 2) for row in rows)
    assert sorted(row._seq for row in rows) == list(range(1, 1001))  # the queue's order
    assert {row._deliveries for row in rows} == {1}
    assert all(row._producer for row in rows)
    assert q.qsize() == 0
    st = q.statistics()
    assert (st.produced_messages, st.consumed_messages) == (1000, 1000)
    _no_leftovers(r, q)


def test_value_column_and_default_schemas(spark: SparkSession, make_queue: Any,
                                          opts: dict[str, str]) -> None:
    raw = make_queue("raw", serializer="bytes")
    spark.createDataFrame([(b"a\x00b",), (b"c",)], "value binary").write.format("pressure") \
        .mode("append").options(**opts, serializer="bytes").save("raw")
    assert sorted(raw.get_many(10)) == [b"a\x00b", b"c"]  # two partitions: either order

    texts = make_queue("texts")  # pickle, the default
    texts.put_many(["x", {"k": 1}, 7])
    df = spark.read.format("pressure").options(**opts).load("texts")
    assert df.schema.simpleString() == "struct<value:string>"
    assert sorted(row.value for row in df.collect()) == ['7', 'x', '{"k": 1}']

    raw.put(b"\xff")
    df = spark.read.format("pressure").options(**opts, serializer="bytes", includeMetadata="true") \
        .load("raw")
    assert df.schema.names == ["value", "_seq", "_deliveries", "_producer"]
    assert [row.value for row in df.collect()] == [bytearray(b"\xff")]


def test_max_rows_and_timeout(spark: SparkSession, make_queue: Any, opts: dict[str, str]) -> None:
    q = make_queue("q", serializer="json")
    q.put_many(list(range(100)))
    reader = spark.read.format("pressure").options(**opts, serializer="json").schema("value long")
    rows = reader.option("maxRows", "30").option("numPartitions", "4").load("q").collect()
    assert sorted(row.value for row in rows) == list(range(30))
    assert q.qsize() == 70
    # an empty queue with a timeout: a partition waits for a first item
    q.get_many(1000)
    threading.Timer(1.0, q.put, args=(123,)).start()
    rows = (spark.read.format("pressure").options(**opts, serializer="json", timeout="30")
            .schema("value long").load("q").collect())
    assert [row.value for row in rows] == [123]


def test_a_failed_read_leaves_the_queue_as_it_was(spark: SparkSession, make_queue: Any,
                                                  opts: dict[str, str], r: redis.Redis) -> None:
    q = make_queue("q", serializer="json")
    q.put_many([{"a": 1}, {"a": 2}, "not a dict", {"a": 4}])
    df = spark.read.format("pressure").options(**opts, serializer="json").schema("a long").load("q")
    with pytest.raises(Exception, match="item 3 .str. does not fit the columns a"):
        df.collect()
    assert q.peek(10) == [{"a": 1}, {"a": 2}, "not a dict", {"a": 4}]
    _no_leftovers(r, q)


def test_bad_items_can_go_to_the_dead_letter_list(spark: SparkSession, make_queue: Any,
                                                  opts: dict[str, str], r: redis.Redis,
                                                  tmp_path: Path) -> None:
    q = make_queue("q", serializer="json")
    q.put_many([{"a": 1}, "not a dict", {"a": 3}])
    r.lpush(q.keys.base, b"{not json")  # a producer in another language got it wrong
    df = spark.read.format("pressure").options(**opts, serializer="json", badItems="deadLetter") \
        .schema("a long").load("q")
    assert sorted(row.a for row in df.collect()) == [1, 3]
    assert sorted(d.payload for d in q.dead_letters()) == [b'"not a dict"', b"{not json"]
    assert q.qsize() == 0
    _no_leftovers(r, q)
    # a stream steps over them too (and buries each once, however often a batch replays)
    q.purge_dead()
    q.put_many([{"a": 4}, [1, 2], {"a": 6}])
    out, ck = tmp_path / "out", tmp_path / "ck"
    query = (spark.readStream.format("pressure")
             .options(**opts, serializer="json", badItems="deadLetter").schema("a long").load("q")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert sorted(row.a for row in spark.read.parquet(str(out)).collect()) == [4, 6]
    assert [d.payload for d in q.dead_letters()] == [b"[1,2]"]


def test_bounded_write_waits_for_a_slow_consumer(spark: SparkSession, make_queue: Any,
                                                 opts: dict[str, str]) -> None:
    q = make_queue("bounded", 10, serializer="json")
    got: list[int] = []
    sizes: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set() and len(got) < 300:
            sizes.append(q.qsize())
            try:
                got.extend(q.get_many(7, timeout=0.2))
            except pressure.Empty:
                continue
            time.sleep(0.01)

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        spark.range(300).repartition(2).selectExpr("id as value").write.format("pressure") \
            .mode("append").options(**opts, serializer="json", batchSize="50").save("bounded")
        consumer.join(60)
    finally:
        stop.set()
        consumer.join()
    assert sorted(got) == list(range(300))
    assert max(sizes) <= 10  # never overfilled: the writers waited for room
    assert q.statistics().produced_messages == 300


def test_a_write_that_times_out_says_what_each_partition_put(spark: SparkSession, make_queue: Any,
                                                              opts: dict[str, str]) -> None:
    q = make_queue("full", 5, serializer="json")
    df = spark.range(40).repartition(2).selectExpr("id as value")
    with pytest.raises(Exception) as info:
        df.write.format("pressure").mode("append") \
            .options(**opts, serializer="json", timeout="1", batchSize="4").save("full")
    text = str(info.value)
    assert "partition" in text and "rows into queue 'full', then failed: Full" in text
    assert "finished partitions put" in text  # abort's summary of the others
    assert q.qsize() == 5


def test_invalid_options_fail_on_the_driver(spark: SparkSession, make_queue: Any,
                                            opts: dict[str, str]) -> None:
    make_queue("q", 0)  # unbounded, named so: a write naming another bound contradicts it
    df = spark.range(3).selectExpr("id as value")
    cases = [
        (lambda: spark.read.format("pressure").options(**opts, maxsise="3").load("q"),
         "unknown option 'maxsise'"),
        (lambda: spark.read.format("pressure").options(**opts).load(), "needs the queue's name"),
        (lambda: spark.read.format("pressure").options(**opts).load("absent"),
         "queue 'absent' does not exist"),
        (lambda: spark.read.format("pressure").options(**opts, batchSize="0").load("q"),
         "option 'batchSize' must be at least 1"),
        (lambda: spark.read.format("pressure").options(**opts, serializer="xml").load("q"),
         "option 'serializer' must be pickle, json or bytes"),
        (lambda: spark.read.format("pressure").options(**opts, timeout="-1").load("q"),
         "option 'timeout' must be a non-negative number"),
        (lambda: spark.read.format("pressure").options(**{**opts, "url": "http://x"}).load("q"),
         "option 'url' is not a Redis URL"),
        (lambda: spark.readStream.format("pressure").options(**opts).load("absent")
         .writeStream.format("noop").start().awaitTermination(60), "queue 'absent' does not exist"),
        (lambda: df.write.format("pressure").mode("overwrite").options(**opts).save("q"),
         "only appended to"),
        (lambda: df.write.format("pressure").mode("append").options(**opts, maxsize="5").save("q"),
         "already exists with maxsize=0, not 5"),
        (lambda: spark.range(2).selectExpr("id", "id as b").write.format("pressure").mode("append")
         .options(**opts, serializer="bytes").save("q"), "serializer 'bytes' writes a DataFrame"),
    ]
    for call, message in cases:
        with pytest.raises(Exception, match=message):
            result = call()
            if hasattr(result, "collect"):
                result.collect()  # a read fails at the latest when planned, before any task


def _stream_to_files(spark: SparkSession, opts: dict[str, str], name: str, out: Path, ck: Path,
                     **trigger: Any) -> Any:
    stream = (spark.readStream.format("pressure")
              .options(**opts, serializer="json", maxRowsPerBatch="50", numPartitions="2")
              .schema("value long").load(name))
    return (stream.writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(ck)).trigger(**trigger).start())


def _wait_for_batch(query: Any, batch_id: int, limit: float = 60.0) -> None:
    """Until the query has finished micro-batch ``batch_id`` (or ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while (query.lastProgress is None or query.lastProgress["batchId"] < batch_id) \
            and time.monotonic() < deadline:
        time.sleep(0.1)


def test_stream_read_across_restarts_loses_nothing(spark: SparkSession, make_queue: Any,
                                                   opts: dict[str, str], tmp_path: Path,
                                                   r: redis.Redis) -> None:
    q = make_queue("events", serializer="json")
    q.put_many(list(range(400)))
    out, ck = tmp_path / "out", tmp_path / "ck"
    query = _stream_to_files(spark, opts, "events", out, ck, processingTime="100 milliseconds")
    try:
        _wait_for_batch(query, 2)
        assert query.exception() is None
    finally:
        query.stop()
    assert q.qsize() < 400  # it read some, in batches of at most 50
    q.put_many(list(range(400, 600)))
    # restarted from its checkpoint, with availableNow: it finishes what is queued and stops
    query = _stream_to_files(spark, opts, "events", out, ck, availableNow=True)
    assert query.awaitTermination(120)
    assert query.exception() is None
    values = [row.value for row in spark.read.parquet(str(out)).collect()]
    assert sorted(values) == list(range(600))  # nothing lost, nothing twice
    assert q.qsize() == 0
    _no_leftovers(r, q)


def test_stream_read_survives_a_killed_planner(spark: SparkSession, make_queue: Any,
                                               opts: dict[str, str], tmp_path: Path) -> None:
    """SIGKILL the Python process that plans the query (it takes items into the log): the
    query fails; restarted from its checkpoint, it still delivers every item once."""
    q = make_queue("killed", serializer="json")
    q.put_many(list(range(300)))
    out, ck = tmp_path / "out", tmp_path / "ck"
    query = _stream_to_files(spark, opts, "killed", out, ck, processingTime="200 milliseconds")
    try:
        _wait_for_batch(query, 1)
        planners = _planner_pids()
        assert planners, "no python_streaming_source_runner process found"
        for pid in planners:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(Exception, match="STREAM_FAILED"):
            query.awaitTermination(60)
    finally:
        query.stop()
    assert q.qsize() < 300
    query = _stream_to_files(spark, opts, "killed", out, ck, availableNow=True)
    assert query.awaitTermination(120)
    values = [row.value for row in spark.read.parquet(str(out)).collect()]
    assert sorted(values) == list(range(300))


def test_stream_read_text_rows_with_metadata(spark: SparkSession, make_queue: Any,
                                             opts: dict[str, str], tmp_path: Path) -> None:
    """A ``value string`` schema (its rows go to Spark as Arrow batches) with the metadata."""
    q = make_queue("texts", serializer="json")
    q.put_many(["a", {"k": 1}, 7, "é"])
    out, ck = tmp_path / "out", tmp_path / "ck"
    query = (spark.readStream.format("pressure").options(**opts, serializer="json", includeMetadata="true")
             .load("texts").writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    rows = sorted(spark.read.parquet(str(out)).collect(), key=lambda row: row._seq)
    assert [row.value for row in rows] == ["a", '{"k": 1}', "7", "é"]
    assert [row._seq for row in rows] == [1, 2, 3, 4]
    assert {(row._deliveries, row._producer) for row in rows} == {(1, q.client_id)}


def _planner_pids() -> list[int]:
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"])
            if any("python_streaming_source_runner" in part for part in (p.info["cmdline"] or []))
            or _runs_module(p, "python_streaming_source_runner")]


def _runs_module(process: Any, module: str) -> bool:
    try:
        return any(module in str(part) for part in process.cmdline())
    except Exception:
        return False


def test_stream_write(spark: SparkSession, make_queue: Any, opts: dict[str, str],
                      tmp_path: Path) -> None:
    src = make_queue("in", serializer="json")
    dst = make_queue("out", serializer="json")
    src.put_many([{"n": i} for i in range(120)])
    stream = (spark.readStream.format("pressure").options(**opts, serializer="json")
              .schema("n long").load("in").selectExpr("n * 10 as value"))
    query = (stream.writeStream.format("pressure").options(**opts, serializer="json")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
             .start("out"))
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(dst.get_many(1000)) == [i * 10 for i in range(120)]


def test_registered_automatically_from_a_wheel(url: str, prefix: str, make_queue: Any,
                                               tmp_path: Path) -> None:
    """Installed from a wheel, pressure brings a top-level ``pyspark_pressure`` whose
    DefaultSource PySpark registers by itself: a fresh session reads with no register()."""
    root = Path(__file__).resolve().parent.parent
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(root)], check=True,
                   timeout=300)
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site),
                    *map(str, wheels.glob("*.whl"))], check=True, timeout=300)
    q = make_queue("auto", serializer="json")
    q.put_many([1, 2, 3])
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        import pressure
        assert pressure.__file__.startswith({str(site)!r}), pressure.__file__
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        rows = (spark.read.format("pressure").option("url", {url!r}).option("prefix", {prefix!r})
                .option("serializer", "json").schema("value long").load("auto").collect())
        print("values", sorted(row.value for row in rows))
        import pressure.spark
        pressure.spark.register(spark)  # harmless after the automatic registration
        print("again", spark.read.format("pressure").option("url", {url!r})
              .option("prefix", {prefix!r}).load("auto").count())
        spark.stop()
    """)
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "values [1, 2, 3]" in out.stdout and "again 0" in out.stdout
    assert q.qsize() == 0
