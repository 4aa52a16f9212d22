"""The README's demo, the executor examples and the benchmark command run end to end
(small sizes)."""

from __future__ import annotations

import math
import os
import re
import runpy
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from pressure import bench
from pressure.bench import batch as bench_batch
from pressure.bench import executor as bench_executor
from pressure.keys import ExecutorKeys

ROOT = Path(__file__).resolve().parent.parent
#: The executor benchmark's options for a quick run.
_TINY_EXECUTOR = ["--workers", "2", "--executor-tasks", "40", "--cpu-tasks", "4", "--cpu-mb", "16"]


def test_demo_processes_every_job_once_and_cleans_up(url: str, r: redis.Redis) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--url", url, "--jobs", "40",
         "--workers", "3", "--maxsize", "4"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK: all 40 jobs were processed exactly once" in out.stdout
    assert "produced messages  40" in out.stdout
    assert r.keys("*demo-*") == []  # its queues are deleted, every key of them
    assert "is dead" not in out.stdout + out.stderr  # its workers leave; none dies


def test_bench_prints_every_transport_and_the_goals(url: str, r: redis.Redis) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pressure", "bench", "--url", url, "--count", "300",
         "--latency-count", "50", "--rate", "500", *_TINY_EXECUTOR, "--payload-sizes", "100,20000",
         "--repeat", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for row in ("pressure.Queue maxsize=0", "pressure.Queue maxsize=100", "redis-py LPUSH/BRPOP (raw)",
                "multiprocessing.Queue", "spec literal", "pressure.Queue reliable=True",
                "AsyncQueue reliable=True", "redis.asyncio LPUSH/BRPOP",  # and by default the executors too:
                "concurrent.futures.ProcessPoolExecutor", "pressure.Executor",
                "put_many/get_many 100"):  # and the payload section
        assert row in out.stdout
    assert "error" not in out.stdout  # in no table
    assert ">= 0.8x raw redis-py" in out.stdout
    assert "goals (executor):" in out.stdout and "goals (payload sizes, from the medians):" in out.stdout
    assert r.keys("*pressure-bench*") == []  # every key it made is gone


# -- the executor benchmark ---------------------------------------------------------


def _bench(url: str, *args: str) -> str:
    """Run ``python -m pressure bench`` and return its report; it must exit 0."""
    out = subprocess.run([sys.executable, "-m", "pressure", "bench", "--url", url, *args],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_bench_executor_only_compares_both_executors(url: str, r: redis.Redis) -> None:
    """--executor runs only the executor section: both executors measured side by side with
    numbers (no errors), ratios to the stdlib, both goals judged; no queue rows; no keys left."""
    report = _bench(url, "--executor", *_TINY_EXECUTOR)
    table = report.split("executor  ")[1].split("goals")[0]
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]]
            for line in table.splitlines() if "|" in line}
    for label in ("concurrent.futures.ProcessPoolExecutor", "pressure.Executor"):
        cold, cold_ratio, shutdown, rate, rate_ratio, seconds, speed = rows[label]
        median, best = re.fullmatch(r"(\d+\.\d) \((\d+\.\d)\)", cold).groups()  # type: ignore[union-attr]
        assert float(median) >= float(best) > 0 and float(shutdown) > 0
        assert float(rate.replace(",", "")) > 0 and float(seconds) > 0
        assert cold_ratio.endswith("x") and rate_ratio.endswith("x") and speed.endswith("x")
    assert rows["concurrent.futures.ProcessPoolExecutor"][1] == "1.00x"
    assert rows["concurrent.futures.ProcessPoolExecutor"][4] == "1.00x"
    for goal in (r"cold start <= 3x \(speed >= 0\.33x\)", r"no-op >= 1\.0x ProcessPoolExecutor",
                 r"CPU-bound within 10% \(>= 0\.9x\)"):
        assert re.search(goal + r" +\d+\.\d\dx  (PASS|MISS)$", report, re.MULTILINE), goal
    assert re.search(r"idle shutdown <= 50 ms +\d+\.\dms  (PASS|MISS)$", report, re.MULTILINE)
    assert "multiprocessing.Queue" not in report and "raw redis-py" not in report
    assert r.keys("*pressure-bench*") == []


def test_bench_sections_are_exclusive() -> None:
    """--executor and --no-executor cannot be combined; either one picks its section."""
    with pytest.raises(SystemExit):
        bench.parse_args(["--executor", "--no-executor"])
    only_queues = bench.config_from_args(bench.parse_args(["--no-executor"]))
    only_executors = bench.config_from_args(bench.parse_args(["--executor"]))
    both = bench.config_from_args(bench.parse_args([]))
    assert (only_queues.queues, only_queues.executors) == (True, False)
    assert (only_executors.queues, only_executors.executors) == (False, True)
    assert (both.queues, both.executors) == (True, True)


def test_executor_ratios_and_goals() -> None:
    """The cold start ratio is a time ratio (the goal reads it as a speed), the no-op ratio a
    rate ratio, the CPU-bound one a speed ratio (stdlib time / pressure time); idle shutdown
    is judged in ms; each goal passes exactly at its threshold."""
    results = [bench_executor.ExecutorResult("stdlib", "stdlib", noop_per_s=1000.0, cpu_s=2.0,
                                             cold_s=0.010, shutdown_s=0.003),
               bench_executor.ExecutorResult("pressure", "pressure", noop_per_s=1000.0, cpu_s=2.5,
                                             cold_s=0.040, shutdown_s=0.050)]
    table = bench_executor.format_executor_table(results)
    assert [c.strip() for c in table[-1].split("|")] == ["pressure", "40.0", "4.00x", "50.0", "1,000", "1.00x",
                                                         "2.50", "0.80x"]
    results[1].cold_best_s = 0.0305  # the median is the figure; the best is shown beside it
    assert bench_executor.format_executor_table(results)[-1].split("|")[1].strip() == "40.0 (30.5)"
    goals = bench_executor.format_executor_goals(results)
    assert goals[1].endswith("0.25x  MISS") and goals[2].endswith("50.0ms  PASS")
    assert goals[3].endswith("1.00x  PASS") and goals[4].endswith("0.80x  MISS")


def test_executor_failure_is_reported_not_hidden() -> None:
    """An executor that failed shows 'error' in the table, and its goals cannot pass."""
    results = [bench_executor.ExecutorResult("stdlib", "stdlib", noop_per_s=1000.0, cpu_s=2.0),
               bench_executor.ExecutorResult("pressure", "pressure", error="warm-up: TimeoutError: ...")]
    assert [c.strip() for c in bench_executor.format_executor_table(results)[-1].split("|")] == [
        "pressure", "-", "-", "-", "error", "-", "error", "-"]
    goals = bench_executor.format_executor_goals(results)
    assert all(line.endswith("MISS (no result)") for line in goals[1:])


# -- the batch benchmark ------------------------------------------------------------

_TINY_BATCH = ["--batch", "--batch-messages", "1000", "--payload-sizes", "100,10000", "--batch-sizes",
               "1,500", "--count", "300", "--latency-count", "50", "--rate", "500",
               "--memory-items", "5000"]


def test_bench_batch_only_reports_every_cell_memory_and_goals(url: str, r: redis.Redis) -> None:
    """--batch runs only the batch section: every (topology, payload, batch) row has numbers
    for pressure, raw and mp.Queue (no error), the single-item rows, a plausible memory line,
    all four goals judged; neither the queue nor the executor section; no keys left."""
    report = _bench(url, *_TINY_BATCH)
    table = report.split("procs ")[1].split("single items:")[0]
    rows = [[c.strip() for c in line.split("|")] for line in table.splitlines() if "|" in line][1:]
    assert [row[:3] for row in rows] == [[p, size, b] for p in ("1x1", "2x2")
                                         for size in ("100 B", "10 KB") for b in ("1", "500")]
    for row in rows:
        assert all(re.fullmatch(r"[\d,.]+x?", cell) for cell in row[3:]), row
    assert "pressure.Queue maxsize=0" in report and "redis-py LPUSH/BRPOP (raw)" in report
    memory = re.search(r"^memory: ([\d,.]+) bytes of Redis memory per queued 100-B item", report,
                       re.MULTILINE)
    assert memory and 100 <= float(memory.group(1).replace(",", "")) < 1000
    goals = report.split("goals (batches):")[1].strip().splitlines()
    assert len(goals) == 4 and all(re.search(r"\d\.\d\dx  (PASS|MISS)$", g) for g in goals), goals
    assert "error" not in report and "spec literal" not in report and "goals (executor)" not in report
    assert r.keys("*pressure-bench*") == []


def test_bench_batch_options_select_only_the_batch_section() -> None:
    """--batch is opt-in and exclusive with --executor; the size lists parse and reject junk."""
    default = bench.config_from_args(bench.parse_args([]))
    only = bench.config_from_args(bench.parse_args(["--batch", "--batch-sizes", "2,50",
                                                    "--payload-sizes", "64"]))
    assert default.batches is False
    assert (only.queues, only.executors, only.batches) == (False, False, True)
    assert only.batch_sizes == (2, 50) and only.payload_sizes == (64,)
    for bad in (["--batch", "--executor"], ["--batch-sizes", "0,10"], ["--payload-sizes", "1k"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_big_payload_cells_move_fewer_messages() -> None:
    """Each cell moves at most CELL_BYTES (but at least MIN_CELL_MESSAGES), so 1 MB cells
    take about as long as 100 B ones; every batch size gets every payload size."""
    config = bench.config_from_args(bench.parse_args(["--batch"]))
    counts = {(c.payload, c.batch): c.count for c in bench_batch.make_cells(config)}
    assert len(counts) == 12
    assert counts[(100, 500)] == 20_000 and counts[(1_000_000, 1)] == bench_batch.CELL_BYTES // 1_000_000 == 67
    assert counts[(10_000, 10)] == bench_batch.CELL_BYTES // 10_000


def _report(ours: float, raw: float, mp: float, p99: tuple[float, float]) -> bench_batch.BatchReport:
    """A report with one 500 x 100 B cell per transport and single-item results."""
    cell = bench_batch.Cell(100, 500, 1000)
    one = bench_batch.Cell(100, 1, 1000)
    cells = {("pressure", 1, cell): bench_batch.BatchResult("pressure", 1, cell, ours),
             ("raw", 1, cell): bench_batch.BatchResult("raw", 1, cell, raw),
             ("mp", 1, one): bench_batch.BatchResult("mp", 1, one, mp)}
    singles = [bench_batch.SingleResult(k, k, bench.PhaseResult(msgs_per_s=1000.0),
                                        bench.PhaseResult(p99_us=us)) for k, us in zip(("pressure", "raw"), p99)]
    return bench_batch.BatchReport(cells, singles)


def test_batch_goals_pass_exactly_at_their_thresholds() -> None:
    """vs mp at 1.0x and vs raw at 0.7x pass, below them miss; p99 passes at 2x raw, misses
    above; a failed cell is shown as 'error' and its goals cannot pass."""
    passing = bench_batch.format_batch_goals(_report(700.0, 1000.0, 700.0, (200.0, 100.0)))
    assert [line.split()[-1] for line in passing[1:]] == ["PASS"] * 4
    missing = bench_batch.format_batch_goals(_report(690.0, 1000.0, 700.0, (201.0, 100.0)))
    assert [line.split()[-1] for line in missing[1:]] == ["MISS", "MISS", "PASS", "MISS"]
    broken = _report(700.0, 1000.0, 700.0, (200.0, 100.0))
    for result in broken.cells.values():
        if result.key == "pressure":
            result.msgs_per_s, result.error = None, "consumer: TimeoutError"
    assert bench_batch.format_batch_table(broken)[-1].split("|")[3].strip() == "error"
    assert all(line.endswith("MISS (no result)") for line in bench_batch.format_batch_goals(broken)[1:3])


# -- the executor examples ------------------------------------------------------------

EXAMPLES = ROOT / "examples"
WORKER_HOSTS = ("host-a", "host-b")


def _example_env(url: str, prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PRESSURE_HOSTNAME", "EXECUTOR_NAME")}
    return {**env, "REDIS_URL": url, "PRESSURE_PREFIX": prefix}


def _run_example(script: str, env: dict[str, str]) -> tuple[str, dict[str, int]]:
    """Run an example; its summary line and its chunks-by-host counts."""
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                         timeout=120, env=env, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    summary, hosts = out.stdout.splitlines()
    counts = {host: int(n) for host, n in
              (item.rsplit(" ", 1) for item in hosts.removeprefix("chunks by host: ").split(", "))}
    return summary, counts


def _expected_summary() -> tuple[str, int]:
    """The before example's summary, computed with a sieve; and its number of chunks."""
    settings = runpy.run_path(str(EXAMPLES / "executor_before.py"))
    limit, chunk = settings["LIMIT"], settings["CHUNK"]
    sieve = bytearray([1]) * (limit + 2)
    sieve[:2] = b"\0\0"
    for n in range(2, math.isqrt(limit + 1) + 1):
        if sieve[n]:
            sieve[n * n::n] = bytes(len(range(n * n, limit + 2, n)))
    primes = sum(sieve[:limit])
    twins = sum(1 for p in range(limit) if sieve[p] and sieve[p + 2])
    chunks = math.ceil(limit / chunk)
    return f"below {limit}: {primes} primes, {twins} twin prime pairs, {chunks} chunks", chunks


def test_executor_before_and_after_agree_and_leave_no_keys(url: str, r: redis.Redis,
                                                          prefix: str) -> None:
    """The ProcessPoolExecutor program and its pressure.Executor version print the same,
    correct summary; each chunk is counted by exactly one host (the local workers); the
    anonymous executor leaves no key behind."""
    expected, chunks = _expected_summary()
    env = _example_env(url, prefix)
    for script in ("executor_before.py", "executor_after.py"):
        summary, by_host = _run_example(script, env)
        assert summary == expected, script
        assert len(by_host) == 1 and sum(by_host.values()) == chunks, (script, by_host)
    assert r.keys(f"*{prefix}*") == []


def _start_group(name: str, host: str, url: str, prefix: str, log: Path) -> subprocess.Popen[bytes]:
    """``python -m pressure worker NAME --create --processes 2`` as the host ``host``, in its own
    session, as examples/executor_two_hosts.sh starts it (before the executor: --create)."""
    env = {**_example_env(url, prefix), "PRESSURE_HOSTNAME": host, "PYTHONPATH": str(EXAMPLES)}
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "pressure", "worker", name, "--create", "--processes", "2",
             "--visibility-timeout", "10"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def _wait_for_workers(r: redis.Redis, keys: ExecutorKeys, per_host: int, logs: list[Path]) -> None:
    """Until each worker host has ``per_host`` workers heard from (within 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        hosts = Counter(os.fsdecode(w).split(":")[0] for w in r.hkeys(keys.workers))
        if all(hosts[h] >= per_host for h in WORKER_HOSTS):
            return
        assert time.monotonic() < deadline, (hosts, [log.read_text() for log in logs])
        time.sleep(0.1)


def _stop_group(group: subprocess.Popen[bytes]) -> None:
    """SIGTERM (its workers finish their tasks and exit); SIGKILL its session if it hangs."""
    group.terminate()
    try:
        group.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(group.pid, signal.SIGKILL)
        group.wait(timeout=10)


def test_executor_after_uses_worker_groups_on_two_hosts(url: str, r: redis.Redis, prefix: str,
                                                        tmp_path: Path) -> None:
    """With EXECUTOR_NAME, the after example starts no worker of its own: the two worker groups
    (two hosts by PRESSURE_HOSTNAME) share its chunks, both do some, and every task is done
    exactly once (the executor's done counter) with the correct summary."""
    name = "primes"
    keys = ExecutorKeys.build(prefix, name)
    logs = [tmp_path / f"{host}.log" for host in WORKER_HOSTS]
    groups: list[subprocess.Popen[bytes]] = []
    try:
        for host, log in zip(WORKER_HOSTS, logs, strict=True):
            groups.append(_start_group(name, host, url, prefix, log))
        _wait_for_workers(r, keys, 2, logs)
        summary, by_host = _run_example("executor_after.py",
                                        {**_example_env(url, prefix), "EXECUTOR_NAME": name})
        expected, chunks = _expected_summary()
        assert summary == expected
        assert set(by_host) == set(WORKER_HOSTS) and sum(by_host.values()) == chunks, by_host
        map_tasks = math.ceil(chunks / 2)  # map(..., chunksize=2)
        assert int(r.get(keys.done) or 0) == map_tasks + chunks
    finally:
        for group in groups:
            _stop_group(group)
        leftovers = r.keys(f"{prefix}:*")
        if leftovers:
            r.delete(*leftovers)  # a named executor's queue outlives it, by design


# -- Spark --------------------------------------------------------------------------


def _spark_pipeline() -> Any:
    """examples/spark_pipeline.py as a module (importing it starts nothing, needs no pyspark)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("spark_pipeline", ROOT / "examples" / "spark_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spark_pipeline_prints_its_phases_and_the_write_rate() -> None:
    import io

    now = [100.0]
    out = io.StringIO()
    progress = _spark_pipeline().Progress(out, clock=lambda: now[0])
    now[0] += 1.25
    progress.phase("starting Spark")
    progress.restart_rate()
    for _ in range(3):  # nothing moves yet: said once, then again after 10 s of the same
        now[0] += 5.0
        progress.report(0, 0, 20_000)
    now[0] += 2.0
    progress.report(4_000, 3_500, 20_000)
    now[0] += 4.0
    progress.report(12_000, 11_900, 20_000)
    progress.report(12_000, 12_000, 20_000)  # no time passed: no rate to tell
    now[0] += 2.0
    progress.report(20_000, 20_000, 20_000)
    now[0] += 2.0
    progress.report(20_000, 20_000, 20_000)
    assert out.getvalue().splitlines() == [
        "[  1.2 s] starting Spark",
        "[  6.2 s]   Spark's write tasks are starting (each starts a Python worker)",
        "[ 16.2 s]   Spark's write tasks are starting (each starts a Python worker)",
        "[ 18.2 s]   4,000/20,000 lines written (235 rows/s), 3,500 taken by the workers",
        "[ 22.2 s]   12,000/20,000 lines written (2,000 rows/s), 11,900 taken by the workers",
        "[ 22.2 s]   12,000/20,000 lines written (0 rows/s), 12,000 taken by the workers",
        "[ 24.2 s]   20,000/20,000 lines written (4,000 rows/s), 20,000 taken by the workers",
        "[ 26.2 s]   every line is in: Spark ends its write job",
    ]


@pytest.mark.slow
def test_spark_pipeline_example(url: str, r: redis.Redis) -> None:
    pytest.importorskip("pyspark")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "spark_pipeline.py")],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "REDIS_URL": url})
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "OK: Spark's sums equal the plain Python word count" in out.stdout
    # every phase is told as it starts, in order, and the write's progress with its rate
    phases = ["generating 20,000 lines", "starting Spark", "starting the streaming query",
              "starting 3 worker processes", "Spark writes 20,000 lines", "the write is done: 20,000 lines in",
              "closing 'work'",
              "the stream sums the last results", "stopping Spark"]
    where = [out.stdout.find(phase) for phase in phases]
    assert -1 not in where and where == sorted(where), out.stdout
    assert re.search(r"the write is done: 20,000 lines in [\d.]+ s \([\d,]+ rows/s\)", out.stdout), out.stdout
    assert " 0/20,000 lines written" not in out.stdout  # a wait is told as one, not as a 0 rate
    # the bound held; whether the 5-ms sampler saw the queue exactly full depends on the
    # machine's load, so "peaked at 200/200" is not asserted (a timing fact, not a guarantee)
    peak = re.search(r"the work queue peaked at (\d+)/200 items", out.stdout)
    assert peak is not None and 0 < int(peak.group(1)) <= 200, out.stdout
    assert r.keys("*spark-pipeline-*") == []  # both queues, the stream's log included


@pytest.mark.slow
def test_spark_bench(url: str, r: redis.Redis) -> None:
    pytest.importorskip("pyspark")
    out = subprocess.run(
        [sys.executable, "-m", "pressure", "bench", "--spark", "--url", url, "--spark-rows", "5000",
         "--spark-rounds", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    for row in ('df.write.format("pressure")', 'readStream.format("pressure")',
                "baseline: foreachPartition", "a job per micro-batch", "a stream source reading nothing"):
        assert row in out.stdout
    assert r.keys("*pressure-bench-spark*") == []


def test_demo_with_no_server_named_runs_on_a_private_one_never_the_default_address() -> None:
    """The README's first command: with no --url, REDIS_URL or REDIS_SERVER the demo starts its
    own redis-server; it never probes 127.0.0.1:6379, where another program's Redis may run."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB")}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--jobs", "20", "--workers", "2"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "redis: none named" in out.stdout and "STARTED A PRIVATE redis-server" in out.stdout
    assert "127.0.0.1:6379/" not in out.stdout
