"""The migration guide's example pairs (examples/migrate_*.py) run, agree, and differ as it says.

Every "after" script, run against the private test server (``REDIS_URL``) under
the test's own ``PRESSURE_PREFIX``, prints the same summary as its stdlib
"before" script and leaves no key behind in Redis; the two-host pairs run as a
consumer process started first and a producer process started after it.
Outside their module docstrings, "after" files differ from "before" files only
in the lines the guide tells a user to change.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: Seconds any one example process may take (they take well under one).
TIMEOUT = 60.0
SQUARES = sum(n * n for n in range(100))
SUMMARIES = {
    "mp": f"100 tasks done by 3 worker processes, sum of squares {SQUARES}",
    "threads": f"100 tasks done by 4 threads, sum of squares {SQUARES}",
}
HOSTS_SUMMARIES = ("consumed 100 items, sum 4950", "produced 100 items, sum 4950")

#: A line an "after" file may add or change: an import, a queue constructor, where
#: Redis is, closing or deleting the queue, or a comment.
GUIDED = re.compile(r"import|Queue\(|REDIS_URL|url=|close\(\)|delete\(\)|^\s*#")
#: What a "before" file of the two-host pair may lose besides: the manager that
#: serves the queue over TCP, and the ``None`` sentinel that close() replaces.
MANAGER_PLUMBING = re.compile(r"Manager|manager|server|address|authkey|None")


def script(name: str) -> Path:
    return EXAMPLES / f"migrate_{name}.py"


def environment(url: str, prefix: str) -> dict[str, str]:
    """The caller's environment with Redis pointed at the test server and keys under ``prefix``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "PRESSURE_"))}
    env.update(REDIS_URL=url, PRESSURE_PREFIX=prefix)
    return env


def finish(proc: subprocess.Popen[str]) -> str:
    """Wait for ``proc``; return its last stdout line after checking it succeeded silently."""
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and err == "", f"{proc.args!r}: exit {proc.returncode}\n{out}{err}"
    return out.splitlines()[-1]


def start(name: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script(name)), *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(name: str, env: dict[str, str], *args: str) -> str:
    return finish(start(name, env, *args))


def first_line(proc: subprocess.Popen[str]) -> str:
    """The first stdout line of a running ``proc`` (it must print one within TIMEOUT)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
    assert ready, f"{proc.args!r} printed nothing within {TIMEOUT} s"
    return proc.stdout.readline().strip()


def wait_for_key(r: redis.Redis, key: str, proc: subprocess.Popen[str]) -> None:
    """Wait until ``key`` exists, failing at once if ``proc`` exits first."""
    deadline = time.monotonic() + TIMEOUT
    while not r.exists(key):
        assert proc.poll() is None, f"{proc.args!r} exited early: {finish(proc)}"
        assert time.monotonic() < deadline, f"{key} never appeared"
        time.sleep(0.02)


class ServerWatch:
    """Proves a pressure run used the test server and left no key on it."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.keys = set(r.keys("*"))
        self.connections = self._connections()

    def _connections(self) -> int:
        return int(self.r.info("stats")["total_connections_received"])

    def check(self) -> None:
        assert self._connections() > self.connections, "the example never connected to REDIS_URL"
        assert set(self.r.keys("*")) - self.keys == set(), "the example left keys in Redis"


@pytest.mark.parametrize("pair", ["mp", "threads"])
def test_after_prints_what_before_prints_and_leaves_no_key(
    pair: str, url: str, prefix: str, r: redis.Redis
) -> None:
    """One script per side: same summary; the after's anonymous queues are gone at exit."""
    env = environment(url, prefix)
    before = run(f"{pair}_before", env)
    watch = ServerWatch(r)
    after = run(f"{pair}_after", env)
    assert (before, after) == (SUMMARIES[pair], SUMMARIES[pair])
    watch.check()
    assert r.keys(f"{prefix}:*") == []


def run_hosts_before(env: dict[str, str]) -> tuple[str, str]:
    """Consumer serving a BaseManager on a free localhost port, then a producer connecting to it."""
    consumer = start("hosts_before_consumer", env, "127.0.0.1:0")
    try:
        announced = first_line(consumer)
        match = re.fullmatch(r"serving jobs on (127\.0\.0\.1:\d+)", announced)
        assert match, announced
        produced = run("hosts_before_producer", env, match.group(1))
    finally:
        consumed = finish(consumer)
    return consumed, produced


def run_hosts_after(env: dict[str, str], r: redis.Redis, prefix: str) -> tuple[str, str]:
    """Consumer first (it creates "jobs" under the prefix), then the producer, on one Redis."""
    consumer = start("hosts_after_consumer", env)
    try:
        wait_for_key(r, f"{prefix}:jobs:bound", consumer)
        produced = run("hosts_after_producer", env)
    finally:
        consumed = finish(consumer)
    return consumed, produced


def test_hosts_after_prints_what_before_prints_and_consumer_deletes(
    url: str, prefix: str, r: redis.Redis
) -> None:
    """Two processes per side: same summaries; the consumer's delete() removed every key."""
    env = environment(url, prefix)
    before = run_hosts_before(env)
    watch = ServerWatch(r)
    after = run_hosts_after(env, r, prefix)
    assert before == after == HOSTS_SUMMARIES
    watch.check()
    assert r.keys(f"{prefix}:*") == []


def code_lines(path: Path) -> list[str]:
    """The non-blank lines of ``path`` after its module docstring."""
    text = path.read_text()
    first = ast.parse(text).body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant), path
    lines = text.splitlines()[first.end_lineno:]
    return [line for line in lines if line.strip()]


def changes(before: Path, after: Path) -> tuple[list[str], list[str]]:
    """(removed, added) lines between the two files' code, by difflib."""
    diff = difflib.unified_diff(code_lines(before), code_lines(after), lineterm="", n=0)
    body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    return [line[1:] for line in body if line[0] == "-"], [line[1:] for line in body if line[0] == "+"]


@pytest.mark.parametrize(
    ("before", "after", "removable", "most"),
    [
        ("mp_before", "mp_after", GUIDED, 2),
        ("threads_before", "threads_after", GUIDED, 3),
        ("hosts_before_producer", "hosts_after_producer", MANAGER_PLUMBING, 15),
        ("hosts_before_consumer", "hosts_after_consumer", MANAGER_PLUMBING, 20),
    ],
)
def test_after_changes_only_the_lines_the_guide_names(
    before: str, after: str, removable: re.Pattern[str], most: int
) -> None:
    """Added lines are imports, queue constructors, REDIS_URL/url=, close()/delete() or
    comments; removed lines are those too, or (two hosts) the manager plumbing and the
    None sentinel; and there are no more of them than the guide shows."""
    removed, added = changes(script(before), script(after))
    assert added, "no change at all: the after file does not use pressure"
    assert [line for line in added if not GUIDED.search(line)] == []
    assert [line for line in removed if not (GUIDED.search(line) or removable.search(line))] == []
    assert len(removed) + len(added) <= most, (removed, added)
    assert "pressure" not in script(before).read_text()
