"""The ``pressure`` data source on a standalone Spark cluster (issue 14 item 4): a master and two
workers started here (``spark://``, bound to 127.0.0.1), executors in their own JVMs and Python
workers, not local[2]. Bounded batch write, batch read, and a streaming read restarted from its
checkpoint: each item once. What executors need: pressure importable by ``PYSPARK_PYTHON``, and
Redis reachable from them (and ``PRESSURE_AUTHKEY`` if the queue is signed)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
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

import pyspark
from pyspark.sql import SparkSession

import pressure.spark
from pressure.testing._server import _free_port

from .test_spark import _no_leftovers, _stream_to_files, _wait_for_batch

pytestmark = pytest.mark.slow

SPARK_HOME = Path(pyspark.__file__).parent


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in {log} within {limit:g} s:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and two one-core workers on 127.0.0.1; yields the master URL."""
    d = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(d), "SPARK_WORKER_DIR": str(d / "work")}
    port = _free_port()
    procs = [_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", "0"], d / "master.log", env)]
    try:
        _wait_for(d / "master.log", "Starting Spark master", procs[0])
        for i in range(2):
            log = d / f"worker{i}.log"
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                 "--host", "127.0.0.1", "--webui-port", "0", "--cores", "1",
                                 "--memory", "1g", "--work-dir", str(d / f"work{i}")], log, env))
            _wait_for(log, "Successfully registered with master", procs[-1])
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _executors(session: SparkSession) -> int:
    """Block managers the driver knows: its own and one per executor."""
    return int(session.sparkContext._jsc.sc().getExecutorMemoryStatus().size())


@pytest.fixture(scope="module")
def spark(cluster: str) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    active = SparkSession.getActiveSession()
    if active is not None:  # test_spark.py's local[2] session, if it ran in this process
        active.stop()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master(cluster).appName("pressure-cluster-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.executor.cores", "1").config("spark.cores.max", "2")
               .config("spark.executor.memory", "512m")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.streaming.stopTimeout", "60s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pressure.spark.register(session)
    deadline = time.monotonic() + 120  # both executors registered
    while _executors(session) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    yield session
    session.stop()


@pytest.fixture
def opts(url: str, prefix: str) -> dict[str, str]:
    return {"url": url, "prefix": prefix}


def test_the_tasks_run_on_the_cluster_executors(spark: SparkSession) -> None:
    assert _executors(spark) == 3  # the driver and two workers' executors
    pids = spark.sparkContext.parallelize(range(4), 2).map(lambda _: os.getpid()).collect()
    assert os.getpid() not in pids


def test_bounded_write_then_read_each_item_once(spark: SparkSession, make_queue: Any, opts: dict[str, str],
                                                r: redis.Redis) -> None:
    q = make_queue("cluster-bounded", 20, serializer="json")
    got: list[int] = []
    sizes: list[int] = []
    stop = threading.Event()

    def consume() -> None:  # drains half, slowly: the writers wait for room
        while not stop.is_set() and len(got) < 250:
            sizes.append(q.qsize())
            with contextlib.suppress(pressure.Empty):
                got.extend(q.get_many(min(7, 250 - len(got)), timeout=0.2))
            time.sleep(0.01)

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:  # (in this thread: the session's registered data sources are looked up per thread)
        spark.range(270).repartition(2).selectExpr("id as value").write.format("pressure") \
            .mode("append").options(**opts, serializer="json", batchSize="10").save("cluster-bounded")
        consumer.join(180)
    finally:
        stop.set()
        consumer.join()
    assert len(got) == 250 and max(sizes) <= 20
    rows = (spark.read.format("pressure").options(**opts, serializer="json", numPartitions="2")
            .schema("value long").load("cluster-bounded").collect())
    assert sorted(got + [row.value for row in rows]) == list(range(270))  # each item once
    assert q.qsize() == 0
    _no_leftovers(r, q)


def test_stream_read_restarted_from_its_checkpoint_each_item_once(
        spark: SparkSession, make_queue: Any, opts: dict[str, str], tmp_path: Path, r: redis.Redis) -> None:
    q = make_queue("cluster-events", serializer="json")
    q.put_many(list(range(300)))
    out, ck = tmp_path / "out", tmp_path / "ck"
    query = _stream_to_files(spark, opts, "cluster-events", out, ck, processingTime="100 milliseconds")
    try:
        _wait_for_batch(query, 1, limit=120)
        assert query.exception() is None
    finally:
        query.stop()
    q.put_many(list(range(300, 450)))
    query = _stream_to_files(spark, opts, "cluster-events", out, ck, availableNow=True)
    assert query.awaitTermination(240)
    assert query.exception() is None
    values = [row.value for row in spark.read.parquet(str(out)).collect()]
    assert sorted(values) == list(range(450))  # nothing lost, nothing twice
    assert q.qsize() == 0
    _no_leftovers(r, q)
