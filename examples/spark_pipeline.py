"""Spark -> bounded pressure queue -> Python worker processes -> pressure queue -> Spark stream.

A word count split between Spark and plain Python processes:

1. Spark reads a JSON dataset (generated here: LINES lines of text) and writes each line,
   as a dict, into the queue "work", bounded at MAXSIZE items. The write blocks whenever
   the queue is full: Spark goes at the workers' pace instead of filling Redis.
2. WORKERS multiprocessing workers take lines in batches, count their words and put the
   counts into the unbounded queue "results".
3. A Spark structured streaming query reads "results" and sums the counts per word.

Each phase is printed as it starts (most of a run is Spark starting up and its Python
processes connecting back), and while Spark writes, every PROGRESS_EVERY seconds, how many
lines are in and at what rate. At the end the totals are checked against a word count done
in plain Python: "OK" and exit 0, else "MISMATCH" and exit 1. Redis: REDIS_URL if set, else a private redis-server
started for the run. The queues get random names and are deleted at the end.

    python3 -m venv .venv && .venv/bin/python -m pip install -q -e '.[spark,server]'
    .venv/bin/python examples/spark_pipeline.py
"""

from __future__ import annotations

import collections
import contextlib
import json
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TextIO

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a source checkout
import pressure
from pressure.testing import RedisServer

LINES, WORKERS, MAXSIZE, BATCH = 20_000, 3, 200, 100
PROGRESS_EVERY = 2.0  # seconds between progress lines while Spark writes
VOCABULARY = ("pressure queue spark redis worker batch stream bound block wait put get row "
              "line word count sum the a of to and in is it").split()


def count_words(work: pressure.Queue[dict], results: pressure.Queue[dict]) -> None:
    """A worker process: lines in, {word, n} counts out, until "work" is closed and drained."""
    while True:
        try:
            lines = work.get_many(BATCH)  # blocks while the queue is empty
        except pressure.ShutDown:  # closed by the driver and nothing left: done
            break
        # count within the batch first (a "combiner"): fewer result rows for Spark to sum
        counts = collections.Counter(w for line in lines for w in line["text"].split())
        results.put_many([{"word": w, "n": n} for w, n in counts.items()])
    work.disconnect()
    results.disconnect()


def make_dataset(path: str) -> collections.Counter[str]:
    """LINES JSON lines {"id", "text"}; returns the word count Spark must arrive at."""
    rng, expected = random.Random(42), collections.Counter[str]()
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]  # a few words are frequent
    with open(path, "w") as f:
        for i in range(LINES):
            words = rng.choices(VOCABULARY, weights, k=rng.randint(3, 15))
            expected.update(words)
            f.write(json.dumps({"id": i, "text": " ".join(words)}) + "\n")
    return expected


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    """REDIS_URL if set; else a private redis-server (never whatever answers on 6379)."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
    else:
        with RedisServer() as server:
            yield server.url


def sample_peak(queue: pressure.Queue[dict], peak: list[int], stop: threading.Event) -> None:
    """Record the most items ever seen waiting in ``queue``, until ``stop`` is set."""
    while not stop.wait(0.005):
        peak[0] = max(peak[0], queue.qsize())


class Progress:
    """Prints what the run is doing, as it goes: each phase as it starts, and the rows written
    so far with their rate (``report``), each line stamped with the seconds since the start."""

    def __init__(self, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out if out is not None else sys.stdout
        self.clock = clock
        self.started = clock()
        self._last = (self.started, 0)  # (when, rows written) at the last report
        self._counted = 0
        self._waiting: tuple[str, float] | None = None  # what the run waits for, told when

    def _print(self, text: str) -> None:
        print(f"[{self.clock() - self.started:5.1f} s] {text}", file=self.out, flush=True)

    def phase(self, text: str) -> None:
        """A phase starts."""
        self._print(text)

    def report(self, written: int, counted: int, total: int) -> None:
        """``written`` of ``total`` rows are in the work queue, ``counted`` of them taken by
        the workers: how far, and the write's rate since the last report (or the phase); if
        neither moved, what the run waits for (again after 10 s of the same)."""
        now = self.clock()
        when, before = self._last
        if (written, counted) == (before, self._counted):  # nothing moved: say what it waits for
            waiting = ("Spark's write tasks are starting (each starts a Python worker)" if written == 0
                       else "every line is in: Spark ends its write job" if written >= total
                       else "the write waits for room in 'work'")
            if self._waiting is None or self._waiting[0] != waiting or now - self._waiting[1] >= 10:
                self._waiting = (waiting, now)
                self._print(f"  {waiting}")
            return
        rate = (written - before) / (now - when) if now > when else 0.0
        self._last, self._counted, self._waiting = (now, written), counted, None
        self._print(f"  {written:,}/{total:,} lines written ({rate:,.0f} rows/s), "
                    f"{counted:,} taken by the workers")

    def restart_rate(self) -> None:
        """The rate of the next report counts from now (a phase that writes starts)."""
        self._last = (self.clock(), self._last[1])


def watch(work: pressure.Queue[dict], progress: Progress, stop: threading.Event) -> None:
    """A progress line every PROGRESS_EVERY seconds from the work queue's counters (what went
    in, what the workers took), until ``stop`` is set."""
    while not stop.wait(PROGRESS_EVERY):
        stats = work.statistics()
        progress.report(stats.produced_messages, stats.consumed_messages, LINES)


def run(spark, url: str, tmp: str, work: pressure.Queue[dict], results: pressure.Queue[dict],
        progress: Progress) -> tuple[dict[str, int], float, float, int]:
    from pyspark.sql import functions as F

    # 3. the stream starts first and sums whatever the workers have put so far
    progress.phase("starting the streaming query on 'results' (Spark starts its Python source process)")
    query = (spark.readStream.format("pressure").option("url", url).option("serializer", "json")
             .schema("word string, n long").load(results.name)
             .groupBy("word").agg(F.sum("n").alias("n"))
             .writeStream.outputMode("complete").format("memory").queryName("word_counts")
             .option("checkpointLocation", os.path.join(tmp, "checkpoint"))
             .trigger(processingTime="1 second").start())
    # wait until it runs (its Python source process is up) before starting more processes:
    # Spark gives a new Python process 10 s to connect back, which a busy machine can miss
    query.processAllAvailable()

    # 2. the workers: spawn, not fork, as this process runs a JVM and threads; daemons, so
    # that if this script fails they go with it instead of waiting for work forever
    progress.phase(f"starting {WORKERS} worker processes")
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=count_words, args=(work, results), daemon=True)
               for _ in range(WORKERS)]
    for p in workers:
        p.start()

    # 1. Spark writes the lines. save() returns once every row is in "work": whenever the
    # queue was full, a put_many waited for a worker to make room (at most "timeout" s).
    progress.phase(f"Spark writes {LINES:,} lines into 'work' (bounded at {MAXSIZE}); the workers count them")
    peak, stop = [0], threading.Event()
    threading.Thread(target=sample_peak, args=(work, peak, stop), daemon=True).start()
    progress.restart_rate()
    watcher = threading.Thread(target=watch, args=(work, progress, stop), daemon=True)
    watcher.start()
    started = time.monotonic()
    (spark.read.schema("id long, text string").json(os.path.join(tmp, "lines.json"))
     .repartition(2)  # two Spark tasks put in parallel
     .write.format("pressure").mode("append").option("url", url).option("serializer", "json")
     .option("batchSize", str(BATCH)).option("timeout", "60")
     .save(work.name))
    written = time.monotonic() - started
    stop.set()
    watcher.join()
    progress.phase(f"the write is done: {LINES:,} lines in {written:.1f} s ({LINES / written:,.0f} rows/s)")

    progress.phase("closing 'work': the workers finish what is queued, then stop")
    work.close()  # no more lines: the workers finish what is queued, then get ShutDown
    for p in workers:
        p.join()
    if any(p.exitcode != 0 for p in workers):
        raise RuntimeError(f"worker exit codes: {[p.exitcode for p in workers]}")
    progress.phase("the stream sums the last results")
    query.processAllAvailable()  # every result the workers put is now in the sums
    elapsed = time.monotonic() - started
    got = {row.word: row.n for row in spark.table("word_counts").collect()}
    query.stop()
    return got, written, elapsed, peak[0]


def main() -> int:
    # Spark's Python workers must run this interpreter (the one with pressure installed)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import pressure.spark

    progress = Progress()
    with tempfile.TemporaryDirectory(prefix="spark-pipeline-") as tmp, redis_url() as url:
        progress.phase(f"generating {LINES:,} lines of text")
        expected = make_dataset(os.path.join(tmp, "lines.json"))
        tag = uuid.uuid4().hex[:8]
        work: pressure.Queue[dict] = pressure.Queue(f"spark-pipeline-{tag}-work", maxsize=MAXSIZE,
                                                    url=url, serializer="json")
        results: pressure.Queue[dict] = pressure.Queue(f"spark-pipeline-{tag}-results", url=url,
                                                       serializer="json")
        progress.phase("starting Spark (local[2]): a JVM, a few seconds")
        spark = (SparkSession.builder.master("local[2]").appName("pressure-spark-pipeline")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        pressure.spark.register(spark)  # the "pressure" format
        try:
            got, written, elapsed, peak = run(spark, url, tmp, work, results, progress)
        finally:
            progress.phase("stopping Spark, deleting the queues")
            spark.stop()
            for q in (work, results):
                q.delete()  # every key, the stream's log of "results" included
                q.disconnect()

    print(f"{LINES:,} lines -> {WORKERS} workers -> {sum(got.values()):,} words in {len(got)} "
          f"sums: {elapsed:.1f} s, {LINES / elapsed:,.0f} lines/s (the Spark write took "
          f"{written:.1f} s; a session's first Python data source job includes its warm-up)")
    print(f"the work queue peaked at {peak}/{MAXSIZE} items"
          f"{': the write waited for the workers' if peak >= MAXSIZE else ''}")
    for word, n in sorted(got.items(), key=lambda wn: -wn[1])[:5]:
        print(f"  {word:<10} {n:>7,}")
    if got != dict(expected):
        wrong = sorted(w for w in expected.keys() | got.keys() if got.get(w) != expected.get(w))
        print(f"MISMATCH: {len(wrong)} words differ from the plain Python count: {wrong[:10]}")
        return 1
    print("OK: Spark's sums equal the plain Python word count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
