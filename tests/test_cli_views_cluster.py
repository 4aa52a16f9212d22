"""On a Redis Cluster: the serializer a queue records sits in its slot (beside its other keys),
the command reads it there, and a queue with a malformed key on one master leaves the queues
of every other master shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.testing import ClusterTopology

REPO_ROOT = Path(__file__).resolve().parent.parent
# tags whose slots fall on the three masters of a 3-master cluster
TAGS = ("{b}", "{a}", "{c}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterTopology]:
    with ClusterTopology(replicas=0) as topo:
        yield topo


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


def _cli(cluster: ClusterTopology, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PRESSURE_PREFIX", "PRESSURE_AUTHKEY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "pressure", "--url", cluster.url, "--prefix", prefix, *args],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO_ROOT)


def test_the_record_the_refusal_and_a_malformed_queue_on_a_cluster(cluster: ClusterTopology, prefix: str) -> None:
    queues: list[pressure.Queue[Any]] = []
    for tag, serializer in zip(TAGS, ("pickle", "json", "bytes")):
        q: pressure.Queue[Any] = pressure.Queue(f"q{tag}", url=cluster.url, prefix=prefix, serializer=serializer)
        q.put(b"x" if serializer == "bytes" else {"n": 1})
        queues.append(q)
    assert len({cluster.master_of(q.keys.base).port for q in queues}) == 3
    master = cluster.master_of(queues[0].keys.base)
    client = redis.Redis.from_url(master.url)
    client.set(f"{prefix}:weird{TAGS[0]}", "x")  # on the first queue's master
    client.set(f"{prefix}:weird{TAGS[0]}:bound", "0")
    try:
        out = _cli(cluster, prefix, "ls", "--json")
        assert out.returncode == 0, out.stderr
        rows = {row["name"]: row for row in json.loads(out.stdout)}
        assert {name: row["serializer"] for name, row in rows.items()} == {
            "q{b}": "pickle", "q{a}": "json", "q{c}": "bytes", "weird{b}": None}
        assert "WRONGTYPE" in rows["weird{b}"]["error"] and rows["q{b}"]["size"] == 1
        out = _cli(cluster, prefix, "put", "q{b}", "[1]")
        assert out.returncode == 1 and "pickle" in out.stderr and queues[0].qsize() == 1
        assert _cli(cluster, prefix, "put", "q{b}", "[1]", "--serializer", "pickle").returncode == 0
        out = _cli(cluster, prefix, "peek", "q{b}", "-n", "2", "--unpickle")
        assert out.stdout.splitlines() == ["{'n': 1}", "[1]"], out.stderr
    finally:
        client.delete(f"{prefix}:weird{TAGS[0]}", f"{prefix}:weird{TAGS[0]}:bound")
        client.close()
        for q in queues:
            q.delete()
            q.disconnect()
