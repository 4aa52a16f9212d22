"""``python -m pressure bench --pool`` runs end to end at a tiny size (every pool, so none of
their adapters rots), and its table, ratios, goals and skipped pools read as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from pressure import bench
from pressure.bench import pool as bench_pool
from pressure.bench._pool_contenders import CONTENDERS, LokyPool, default_chunksize, missing

ROOT = Path(__file__).resolve().parent.parent
_TINY = ["--workers", "2", "--pool-tasks", "40", "--pool-map-tasks", "400", "--cpu-tasks", "4", "--cpu-mb", "4",
         "--start-rounds", "2"]
_LABELS = ("multiprocessing.Pool", "pressure.multiprocessing.Pool", "loky.ProcessPoolExecutor",
           "dask distributed.Client")


def _table(report: str) -> dict[str, list[str]]:
    """The pool table's rows: measurement -> cells."""
    table = report.split("\nmeasurement ")[1].split("goals (pool)")[0]
    return {line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]]
            for line in table.splitlines() if "|" in line and not line.startswith("-")}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_pool_measures_every_pool_and_judges_the_goals(url: str, r: redis.Redis) -> None:
    out = subprocess.run([sys.executable, "-m", "pressure", "bench", "--url", url, "--pool", *_TINY],
                         capture_output=True, text=True, timeout=280, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    report = out.stdout
    header = report.split("\nmeasurement ")[1].splitlines()[0]
    assert [c.strip() for c in header.split("|")[1:]] == [
        "multiprocessing.Pool", "pressure.multiprocessing.Pool", "vs mp", "loky.ProcessPoolExecutor", "vs mp",
        "dask distributed.Client", "vs mp"]
    rows = _table(report)
    cold = rows["cold start ms, median (best)"]
    for text in (cold[0], cold[1], cold[3], cold[5]):
        median, best = re.fullmatch(r"([\d,]+\.\d) \(([\d,]+\.\d)\)", text).groups()  # type: ignore[union-attr]
        assert float(median.replace(",", "")) >= float(best.replace(",", "")) > 0
    for name in ("no-op map, chunksize 1", "no-op map, default chunksize", "no-op imap_unordered",
                 "CPU-bound map"):
        cells = rows[name + " tasks/s"]
        rates = [cells[0], cells[1], cells[3]] + ([] if "default" in name else [cells[5]])
        assert all(float(rate.replace(",", "")) > 0 for rate in rates), (name, cells)
        assert all(re.fullmatch(r"\d+\.\d\dx", ratio) for ratio in (cells[2], cells[4])), (name, cells)
    assert rows["no-op map, default chunksize tasks/s"][5:] == ["n/a", "-"]  # dask has no chunksize
    for goal in (r"default chunksize >= 0\.8x", r"CPU-bound map >= 0\.95x", r"cold start <= 3x multiprocessing\.Pool"):
        assert re.search(goal + r" +\d+\.\d\dx  (PASS|MISS)$", report, re.MULTILINE), goal
    assert re.search(r"load average [\d.]+ [\d.]+ [\d.]+ before", report)
    assert "error" not in report and "notes:" not in report
    assert r.keys("*pressure-bench*") == []  # every key it made is gone


def _result(key: str, cold: float, rates: dict[str, float], chunks: bool = True) -> bench_pool.PoolResult:
    return bench_pool.PoolResult(key, key, chunks, rates=rates, cold_s=cold, cold_best_s=cold / 2)


def test_pool_ratios_and_goals_pass_exactly_at_their_thresholds() -> None:
    """Cold start is a time ratio (at most 3x passes), the others tasks/s ratios (at least
    0.8x and 0.95x pass); a pool without a chunksize shows n/a there."""
    base = _result("stdlib", 0.010, {"map1": 1000.0, "map": 10_000.0, "imap_unordered": 500.0, "cpu": 20.0})
    ours = _result("pressure", 0.030, {"map1": 500.0, "map": 8_000.0, "imap_unordered": 1000.0, "cpu": 19.0})
    dask = _result("dask", 0.100, {"map1": 100.0, "imap_unordered": 100.0, "cpu": 20.0}, chunks=False)
    rows = _table("\n" + "\n".join(bench_pool.format_pool_table([base, ours, dask])) + "\ngoals (pool)")
    assert rows["cold start ms, median (best)"] == ["10.0 (5.0)", "30.0 (15.0)", "3.00x", "100.0 (50.0)", "10.00x"]
    assert rows["no-op map, chunksize 1 tasks/s"] == ["1,000", "500", "0.50x", "100", "0.10x"]
    assert rows["no-op map, default chunksize tasks/s"] == ["10,000", "8,000", "0.80x", "n/a", "-"]
    assert rows["no-op imap_unordered tasks/s"] == ["500", "1,000", "2.00x", "100", "0.20x"]
    assert rows["CPU-bound map tasks/s"] == ["20.0", "19.0", "0.95x", "20.0", "1.00x"]
    goals = bench_pool.format_pool_goals([base, ours, dask])
    assert all(line.endswith("PASS") for line in goals[1:]), goals
    ours.cold_s, ours.rates["map"], ours.rates["cpu"] = 0.0301, 7_999.0, 18.9
    goals = bench_pool.format_pool_goals([base, ours, dask])
    assert all(line.endswith("MISS") for line in goals[1:]), goals


def test_a_pool_not_installed_is_skipped_with_a_line_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    absent = type("AbsentPool", (LokyPool,), {"needs": "pressure_no_such_module"})
    assert missing(absent) == "pressure_no_such_module is not installed (pip install 'pressure-queue[bench]')"
    assert [missing(contender) for contender in CONTENDERS] == [None] * 4  # the test extra has all of them
    base = _result("stdlib", 0.010, {"map1": 1000.0, "map": 1000.0, "imap_unordered": 1000.0, "cpu": 10.0})
    skipped = bench_pool.PoolResult("loky", "loky.ProcessPoolExecutor", skipped=missing(absent))
    config = bench.config_from_args(bench.parse_args(["--pool"]))
    bench_pool.print_pool_report(bench_pool.PoolReport([base, skipped], (1.0, 1.0, 1.0)), config)
    report = capsys.readouterr().out
    assert "  - loky.ProcessPoolExecutor: skipped, pressure_no_such_module is not installed" in report
    assert "loky.ProcessPoolExecutor |" not in report  # no column for it


def test_default_chunksize_is_the_stdlib_pools() -> None:
    """What multiprocessing.Pool.map computes: len / (4 * workers), rounded up, at least 1."""
    assert [default_chunksize(n, 2) for n in (1, 8, 9, 2_000, 100_000)] == [1, 1, 2, 250, 12_500]
    assert default_chunksize(100_000, 3) == 8_334


def test_pool_runs_alone() -> None:
    config = bench.config_from_args(bench.parse_args(["--pool", "--pool-tasks", "7", "--pool-map-tasks", "70"]))
    assert (config.pools, config.queues, config.executors, config.batches) == (True, False, False, False)
    assert (config.pool_tasks, config.pool_map_tasks) == (7, 70)
    assert not bench.config_from_args(bench.parse_args([])).pools
    out = subprocess.run([sys.executable, "-m", "pressure", "bench", "--pool", "--executor"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert out.returncode == 2 and "--executor and --pool exclude each other" in out.stderr, out.stderr
    assert _LABELS == tuple(contender.label for contender in CONTENDERS)
