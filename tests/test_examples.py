"""The README's demo and the benchmark command run end to end (small sizes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent


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


def test_bench_prints_every_transport_and_the_goals(url: str, r: redis.Redis) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pressure", "bench", "--url", url, "--count", "300",
         "--latency-count", "50", "--rate", "500"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for row in ("pressure.Queue maxsize=0", "pressure.Queue maxsize=100", "redis-py LPUSH/BRPOP (raw)",
                "multiprocessing.Queue", "spec literal"):
        assert row in out.stdout
    assert "error" not in out.stdout.split("goals")[0]
    assert ">= 0.8x raw redis-py" in out.stdout
    assert r.keys("*pressure-bench*") == []  # every key it made is gone
