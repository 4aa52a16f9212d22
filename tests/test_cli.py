"""The ``pressure`` command (pressure/cli/), run as users run it: in a subprocess, as
``python -m pressure`` and as the installed ``pressure`` script, against the private
redis-server of the test session, under the test's own prefix."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.executor import delete_executor
from pressure.keys import ExecutorKeys
from pressure.testing import RedisServer

from . import executor_tasks as tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
#: the console script installed beside this interpreter (pip install -e .)
SCRIPT = Path(sys.executable).parent / "pressure"
SOON = 30.0

Run = Callable[..., subprocess.CompletedProcess[str]]


def _run(argv: list[str], input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for var in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB", "PRESSURE_PREFIX"):
        env.pop(var, None)
    return subprocess.run(argv, input=input if input is not None else "", capture_output=True, text=True,
                          timeout=60, env=env, cwd=REPO_ROOT)


@pytest.fixture
def cli(url: str, prefix: str) -> Run:
    """``python -m pressure --url <private server> --prefix <the test's> ARGS...``"""

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return _run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, *args], input)

    return run


@pytest.fixture
def script(url: str, prefix: str) -> Run:
    """The installed ``pressure`` script, same options."""
    if not SCRIPT.exists():
        pytest.skip("the pressure script is not installed beside this interpreter")

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return _run([str(SCRIPT), "--url", url, "--prefix", prefix, *args], input)

    return run


@pytest.fixture
def queues(url: str, prefix: str) -> Iterator[Callable[..., pressure.Queue[Any]]]:
    made: list[pressure.Queue[Any]] = []

    def make(name: str, maxsize: int | None = None, cls: type[pressure.Queue[Any]] = pressure.Queue,
             **kw: Any) -> pressure.Queue[Any]:
        q: pressure.Queue[Any] = cls(name, maxsize, url=url, prefix=prefix, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.disconnect()


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    """A failure: non-zero status, nothing on stdout, one line on stderr naming ``words``."""
    assert out.returncode != 0, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for word in words:
        assert word in lines[0], out.stderr


# -- the command itself ---------------------------------------------------------------------


def test_help_lists_every_command_without_markup(cli: Run) -> None:
    out = cli("--help")
    assert out.returncode == 0, out.stderr
    for command in ("ls", "stat", "watch", "peek", "dead", "close", "delete", "repair", "put", "get",
                    "executors", "executor-delete", "bench", "worker"):
        assert f"  {command} " in out.stdout, command
    for command in ("ls", "stat", "watch", "dead", "put", "get", "executor-delete"):
        text = cli(command, "--help").stdout
        assert "Usage:" in text
        assert "``" not in text and "[bold" not in text and "\\b" not in text, text
    no_args = _run([sys.executable, "-m", "pressure"])
    assert no_args.returncode == 0 and "Commands:" in no_args.stdout


def test_version_from_both_entry_points(cli: Run, script: Run) -> None:
    for run in (cli, script):
        out = run("--version")
        assert out.returncode == 0 and out.stdout.strip() == f"pressure {pressure.__version__}"


def test_worker_and_bench_are_click_commands_with_help_for_users(cli: Run) -> None:
    """Their --help in the style of the others: no reST, nothing of pressure's insides."""
    out = cli("worker", "--help")
    assert out.returncode == 0 and "--processes" in out.stdout and "--authkey-file" in out.stdout
    assert "--create" in out.stdout
    bench = cli("bench", "--help")
    assert bench.returncode == 0 and "--count" in bench.stdout and "--sharded-shards" in bench.stdout
    for text in (out.stdout, bench.stdout):
        assert text.startswith("Usage: ") and "Options:" in text, text
        for inside in ("``", "**", ".lua", "HINCRBY", "claim", "argparse", "usage:"):
            assert inside not in text, (inside, text)
    out = cli("worker")  # the name is required
    assert out.returncode == 2 and "Missing argument 'NAME'" in out.stderr
    out = cli("bench", "--executor", "--batch")  # each runs one section alone
    assert out.returncode == 2 and "--executor and --batch" in out.stderr, out.stderr


def test_refused_connection_is_one_line_without_the_password() -> None:
    out = _run([sys.executable, "-m", "pressure", "--url", "redis://bob:s3cret-pw@127.0.0.1:1/0", "ls"])
    one_line_error(out, "127.0.0.1:1")
    assert "s3cret-pw" not in out.stderr + out.stdout
    out = _run([sys.executable, "-m", "pressure", "--url", "nonsense://x", "ls"])
    one_line_error(out, "nonsense")


def test_refused_password_is_one_line_without_the_password() -> None:
    with RedisServer(extra_args=("--requirepass", "right-one")) as server:
        wrong = server.url.replace("redis://", "redis://:wrong-one@")
        out = _run([sys.executable, "-m", "pressure", "--url", wrong, "ls"])
        one_line_error(out)
        assert "wrong-one" not in out.stderr + out.stdout and "right-one" not in out.stderr
        right = server.url.replace("redis://", "redis://:right-one@")
        out = _run([sys.executable, "-m", "pressure", "--url", right, "ls"])
        assert out.returncode == 0 and "no queues" in out.stdout and "right-one" not in out.stdout


# -- queues -----------------------------------------------------------------------------------


def test_ls_shows_every_kind_with_its_figures(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                               r: redis.Redis) -> None:
    assert "no queues under" in cli("ls").stdout
    jobs = queues("jobs", 10, reliable=True)
    jobs.put_many([1, 2, 3])
    jobs.receive()  # in flight, not acknowledged
    stack = queues("stack", None, pressure.LifoQueue)
    stack.put("a")
    queues("prio", 5, pressure.PriorityQueue).close()
    queues("other:name")
    out = cli("ls")
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert lines[0] == ["NAME", "KIND", "SIZE", "DELAYED", "BOUND", "CLOSED", "CONSUMERS", "IN", "FLIGHT", "DEAD"]
    assert lines[1:] == [["jobs", "fifo", "2", "0", "10", "no", "1", "1", "0"],
                         ["other:name", "fifo", "0", "0", "-", "no", "0", "0", "0"],
                         ["prio", "priority", "0", "0", "5", "yes", "0", "0", "0"],
                         ["stack", "lifo", "1", "0", "-", "no", "0", "0", "0"]]
    rows = json.loads(cli("ls", "--json").stdout)
    assert rows[0] == {"name": "jobs", "kind": "fifo", "size": 2, "delayed": 0, "bound": 10, "closed": False,
                       "consumers": 1, "in_flight": 1, "dead_letters": 0, "redelivered": 0, "produced": 3,
                       "consumed": 1, "unfinished": 3, "serializer": "pickle", "error": None}
    assert [row["name"] for row in rows] == ["jobs", "other:name", "prio", "stack"]


def test_stat_shows_statistics_and_rates(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs", 0)

    done = threading.Event()

    def produce() -> None:  # until the command has its two readings (its start may be slow)
        while not done.wait(0.02):
            q.put(0)

    producing = threading.Thread(target=produce)
    producing.start()
    try:
        out = cli("stat", "jobs", "--interval", "1", "--json")
    finally:
        done.set()
        producing.join()
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["name"] == "jobs" and figures["kind"] == "fifo" and figures["maxsize"] == 0
    assert figures["put_per_s"] > 0 and figures["get_per_s"] == 0
    size = q.qsize()
    out = cli("stat", "jobs", "--interval", "0")
    assert out.returncode == 0, out.stderr
    assert f"{size} of unbounded" in out.stdout and "rates" not in out.stdout
    q.maxsize = 2 * size
    assert f"{size} of {2 * size} (50% full)" in cli("stat", "jobs", "--interval", "0").stdout
    one_line_error(cli("stat", "nope"), "'nope'", "does not exist")
    one_line_error(cli("stat", "jobs:closed"), "would share keys")


def test_a_name_of_two_kinds_needs_kind(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    queues("twin").put(1)
    queues("twin", None, pressure.LifoQueue)
    one_line_error(cli("peek", "twin"), "--kind")
    out = cli("peek", "twin", "--kind", "fifo", "--serializer", "bytes")
    assert out.returncode == 0


def test_watch_refreshes_then_stops(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs", 4)
    q.put_many([1, 2])
    queues("other")
    out = cli("watch", "jobs", "--count", "2", "--interval", "0.1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("NAME") == 2  # two views (not a terminal: one after the other)
    assert "[##########----------]" in out.stdout
    assert "other" not in out.stdout
    assert "\x1b[" not in out.stdout  # no escape sequences where there is no terminal


def test_watch_ends_quietly_on_ctrl_c(url: str, prefix: str, queues: Callable[..., pressure.Queue[Any]]) -> None:
    queues("jobs")
    # SIGINT as a terminal's Ctrl-C gives it, even where these tests run as a background job
    # (whose SIGINT a non-interactive shell ignores: the child would inherit SIG_IGN and Python
    # would then install no KeyboardInterrupt handler)
    with subprocess.Popen([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "watch",
                           "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            first = proc.stdout.readline()  # it runs
            assert first.startswith("pressure "), first
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=SOON)
            stdout, stderr = proc.stdout.read(), proc.stderr.read()  # (communicate would skip what
        finally:                                                    # readline buffered)
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, stderr
    assert "jobs" in stdout and "Traceback" not in stderr


def test_peek_shows_json_bytes_and_what_is_not_json(cli: Run,
                                                    queues: Callable[..., pressure.Queue[Any]]) -> None:
    queues("j", serializer="json").put_many([{"a": 1}, [2], "three"])
    out = cli("peek", "j", "-n", "2")
    assert out.returncode == 0 and out.stdout.splitlines() == ['{"a": 1}', "[2]"]
    assert cli("peek", "j", "-n", "2", "--serializer", "bytes").stdout.splitlines() == ['{"a":1}', "[2]"]
    queues("p").put({1, 2})  # pickled
    assert cli("peek", "p").stdout.startswith("<not JSON,")
    assert cli("peek", "j", "-n", "0").stdout == ""


def test_dead_lists_kicks_and_purges(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs", reliable=True, max_deliveries=1, serializer="json")
    q.put_many(["a", "b", "c"])
    for _ in range(3):
        q.receive().release()  # delivered once: the most, so to the dead letters
    out = cli("dead", "jobs")
    assert out.returncode == 0, out.stderr
    assert [line.split()[-1] for line in out.stdout.splitlines()] == ["ITEM", '"a"', '"b"', '"c"']
    assert [d["payload"] for d in json.loads(cli("dead", "jobs", "--json").stdout)] == ['"a"', '"b"', '"c"']
    out = cli("dead", "jobs", "--kick", "1")
    assert out.returncode == 0 and q.qsize() == 1 and len(q.dead_letters()) == 2
    assert cli("dead", "jobs", "--kick", "zero").returncode == 2
    assert cli("dead", "jobs", "--kick", "1", "--purge").returncode == 2
    refused = cli("dead", "jobs", "--purge", input="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stderr and len(q.dead_letters()) == 2
    out = cli("dead", "jobs", "--purge", input="y\n")
    assert out.returncode == 0 and q.dead_letters() == []
    assert "no dead letters" in cli("dead", "jobs").stdout
    q.put("d")
    q.receive().release()
    assert cli("dead", "jobs", "--purge", "--yes").returncode == 0 and q.dead_letters() == []
    assert cli("dead", "jobs", "--kick", "all").stdout.startswith("0 dead letter(s)")


def test_close_delete_repair(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs")
    q.put(1)
    out = cli("repair", "jobs")
    assert out.returncode == 0 and "needed no repair" in out.stdout
    assert cli("close", "jobs").returncode == 0 and q.closed
    refused = cli("delete", "jobs", input="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stderr and q.exists
    assert "Delete fifo queue 'jobs' and its 1 item(s)" in refused.stdout
    out = cli("delete", "jobs", input="y\n")
    assert out.returncode == 0 and not q.exists
    q2 = queues("other")
    assert cli("delete", "other", "--yes").returncode == 0 and not q2.exists
    one_line_error(cli("delete", "other", "--yes"), "does not exist")
    one_line_error(cli("close", "other"), "does not exist")
    one_line_error(cli("repair", "other"), "does not exist")


def test_put_get_json_round_trip_with_the_script(script: Run, cli: Run,
                                                 queues: Callable[..., pressure.Queue[Any]]) -> None:
    one_line_error(script("put", "jobs", '{"n": 1}'), "does not exist", "--create")
    out = script("put", "jobs", '{"n": 1, "s": "\u00e9"}', "--create", "--maxsize", "2")
    assert out.returncode == 0, out.stderr
    q = queues("jobs", serializer="json")
    assert q.maxsize == 2 and q.peek() == [{"n": 1, "s": "\u00e9"}]
    assert script("put", "jobs", "[1, 2]").returncode == 0
    full = script("put", "jobs", "3", "--timeout", "0")
    assert full.returncode == 3 and "full" in full.stderr
    assert script("put", "jobs", "{not json").returncode == 2
    out = script("get", "jobs")
    assert out.returncode == 0 and json.loads(out.stdout) == {"n": 1, "s": "\u00e9"}
    assert json.loads(cli("get", "jobs").stdout) == [1, 2]
    empty = script("get", "jobs", "--timeout", "0.2")
    assert empty.returncode == 3 and "empty" in empty.stderr
    stats = q.statistics()
    assert stats.produced_messages == 2 and stats.consumed_messages == 2
    assert json.loads(cli("ls", "--json").stdout)[0]["consumers"] == 0  # the gets left no record
    q.close()
    assert script("get", "jobs", "--timeout", "0.2").returncode == 4
    assert script("put", "jobs", "1").returncode == 4


def test_put_get_bytes_and_stdin(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    assert cli("put", "raw", "-", "--serializer", "bytes", "--create", input="line one\nline two\n").returncode == 0
    q = queues("raw", serializer="bytes")
    assert q.peek() == [b"line one\nline two\n"]
    out = cli("get", "raw", "--serializer", "bytes")
    assert out.returncode == 0 and out.stdout == "line one\nline two\n"


def test_get_of_an_item_that_is_not_json_leaves_it(cli: Run,
                                                   queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs")
    q.put({"pickled"})
    one_line_error(cli("get", "jobs"), "not JSON", "--serializer bytes")
    assert q.qsize() == 1 and q.get() == {"pickled"}


def test_put_creates_an_ordered_queue(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    for item in ("[3, \"c\"]", "[1, \"a\"]", "[2, \"b\"]"):
        assert cli("put", "p", item, "--kind", "priority", "--create").returncode == 0
    assert [json.loads(cli("get", "p").stdout) for _ in range(3)] == [[1, "a"], [2, "b"], [3, "c"]]


# -- executors -------------------------------------------------------------------------------


@contextlib.contextmanager
def worker(name: str, url: str, prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    """``pressure worker NAME --create``: it may start before its executor."""
    proc = subprocess.Popen([sys.executable, "-m", "pressure", "worker", name, "--url", url, "--prefix", prefix,
                             "--processes", "1", "--create"], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=SOON)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_until(check: Callable[[], bool], timeout: float = SOON) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_executors_listed_and_deleted(cli: Run, url: str, prefix: str, r: redis.Redis) -> None:
    assert "no executors under" in cli("executors").stdout
    with worker("crunch", url, prefix) as proc:
        with pressure.Executor("crunch", url=url, prefix=prefix, local_workers=False) as ex:
            assert [ex.submit(tasks.square, i).result(timeout=SOON) for i in range(3)] == [0, 1, 4]
            wait_until(lambda: ex.workers_alive() == 1)
        rows = json.loads(cli("executors", "--json").stdout)
        assert [(row["name"], len(row["workers"]), row["queued"], row["done"]) for row in rows] == [
            ("crunch", 1, 0, 3)]
        table = cli("executors").stdout.splitlines()
        assert table[0].split() == ["NAME", "WORKERS", "QUEUED", "RUNNING", "DONE", "FAILED", "RETRIED", "LOST"]
        assert table[1].split() == ["crunch", "1", "0", "0", "3", "0", "0", "0"]
        one_line_error(cli("executor-delete", "crunch", "--yes"), "alive", "--force")
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=SOON)
    # a worker stopped says so; one killed is taken for dead a few seconds after its last heartbeat
    wait_until(lambda: json.loads(cli("executors", "--json").stdout)[0]["workers"] == [])
    one_line_error(cli("executor-delete", "nobody", "--yes"), "'nobody'", "does not exist")
    refused = cli("executor-delete", "crunch", input="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stderr and "crunch" in cli("executors").stdout
    out = cli("executor-delete", "crunch", input="y\n")
    assert out.returncode == 0, out.stderr
    assert "no executors" in cli("executors").stdout
    assert list(r.scan_iter(match=f"{prefix}:crunch*")) == []


def test_delete_executor_refuses_while_workers_are_alive(url: str, prefix: str, r: redis.Redis) -> None:
    keys = ExecutorKeys.build(prefix, "busy")
    seconds, micros = r.time()
    r.hset(keys.workers, "host:1:1#x", seconds * 1000 + micros // 1000)
    r.incr(keys.done)
    tasks_queue: pressure.Queue[int] = pressure.Queue(keys.tasks, url=url, prefix=prefix)
    tasks_queue.put(1)
    tasks_queue.disconnect()
    with pytest.raises(pressure.PressureError, match="alive"):
        delete_executor("busy", url=url, prefix=prefix)
    assert r.exists(keys.workers)
    assert delete_executor("busy", url=url, prefix=prefix, force=True) == 3  # the task queue, 2 keys
    assert list(r.scan_iter(match=f"{prefix}:busy*")) == []
    assert delete_executor("busy", url=url, prefix=prefix) == 0


# -- metrics ---------------------------------------------------------------------------------


def _samples(text: str) -> dict[str, float]:
    """``name{labels} value`` lines of Prometheus' text format, by ``name{labels}``."""
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
            for line in text.splitlines() if line and not line.startswith("#")}


def _key(name: str, **labels: str) -> str:
    """A sample's ``name{labels}``, as prometheus_client writes it (labels sorted)."""
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def test_metrics_once(cli: Run, prefix: str, queues: Callable[..., pressure.Queue[Any]], r: redis.Redis) -> None:
    pytest.importorskip("prometheus_client")
    q = queues("jobs", 8, reliable=True, max_deliveries=2)
    q.put_many([1, 2, 3, 4])
    q.receive()  # in flight
    q.receive().release()  # given back, waiting to be delivered again
    keys = ExecutorKeys.build(prefix, "crunch")
    r.set(keys.done, 5)
    queues(keys.tasks).put(1)
    out = cli("serve-metrics", "--once")
    assert out.returncode == 0, out.stderr
    samples = _samples(out.stdout)
    assert samples[_key("pressure_up", prefix=prefix)] == 1
    jobs = {"prefix": prefix, "queue": "jobs", "kind": "fifo"}
    figures = {"size": 3, "bound": 8, "closed": 0, "produced_total": 4, "consumed_total": 1, "in_flight": 1,
               "consumers": 1, "dead_letters": 0, "redelivered": 1}
    assert {f: samples[_key(f"pressure_queue_{f}", **jobs)] for f in figures} == figures
    crunch = {"prefix": prefix, "executor": "crunch"}
    assert samples[_key("pressure_executor_tasks", **crunch, state="queued")] == 1
    assert samples[_key("pressure_executor_tasks", **crunch, state="running")] == 0
    assert samples[_key("pressure_executor_tasks_finished_total", **crunch, state="done")] == 5
    assert samples[_key("pressure_executor_workers_alive", **crunch)] == 0


def test_metrics_served_over_http(url: str, prefix: str, queues: Callable[..., pressure.Queue[Any]]) -> None:
    pytest.importorskip("prometheus_client")
    import urllib.request

    queues("jobs").put(1)
    with subprocess.Popen([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "serve-metrics",
                           "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "/metrics" in line, line
            with urllib.request.urlopen(line.split()[-1], timeout=SOON) as reply:
                text = reply.read().decode()
            assert _samples(text)[_key("pressure_queue_size", prefix=prefix, queue="jobs", kind="fifo")] == 1
            proc.terminate()
            assert proc.wait(timeout=SOON) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_metrics_on_a_busy_port_is_one_line_and_a_failure(url: str, prefix: str) -> None:
    pytest.importorskip("prometheus_client")
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "serve-metrics",
                    "--port", str(port)])
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "in use" in out.stderr


def test_metrics_say_when_redis_is_down() -> None:
    pytest.importorskip("prometheus_client")
    out = _run([sys.executable, "-m", "pressure", "--url", "redis://127.0.0.1:1/0", "--prefix", "x",
                "serve-metrics", "--once"])
    assert out.returncode == 0 and _samples(out.stdout) == {'pressure_up{prefix="x"}': 0.0}


def test_stat_shows_the_tasks_by_state(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    """The task lifecycle's figures (docs: reliability.md, Task lifecycle), as tarantool/queue names them."""
    q = queues("life", 0)
    q.put(1, delay=60)
    q.put(2)
    out = cli("stat", "life", "--interval", "0", "--json")
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["tasks"] == {"total": 2, "ready": 1, "taken": 0, "delayed": 1, "buried": 0, "done": 0,
                                "expired": 0}
    assert figures["calls"]["put"] == 2 and figures["calls"]["take"] == 0
    text = cli("stat", "life", "--interval", "0").stdout
    assert "total 2, ready 1, taken 0, delayed 1" in text and "put 2, take 0" in text


@pytest.mark.parametrize("argv", [["--processes", "0"], ["--processes", "two"], ["--visibility-timeout", "-5"],
                                  ["--visibility-timeout", "nan"], ["--prefetch", "0"],
                                  ["--max-tasks-per-child", "0"]])
def test_a_bad_worker_option_is_a_usage_error_before_any_process_starts(argv: list[str]) -> None:
    # nothing listens on port 1: a worker that started would not get this far quietly
    out = _run([sys.executable, "-m", "pressure", "worker", "ex", "--url", "redis://127.0.0.1:1/0", *argv])
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "Usage:" in out.stderr and argv[0] in out.stderr, out.stderr


def test_a_worker_pool_refuses_a_visibility_timeout_that_is_not_positive() -> None:
    from pressure.executor.worker import WorkerPool

    with pytest.raises(ValueError, match="visibility_timeout"):
        WorkerPool("ex", url="redis://127.0.0.1:1/0", processes=1, visibility_timeout=-5)


# -- pressure worker: what it cannot outlast -----------------------------------------------------


def _worker_run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pressure worker ARGS...``, to its end (it must end on its own)."""
    return _run([sys.executable, "-m", "pressure", "worker", *args, "--processes", "1"])


@pytest.mark.parametrize("create", [[], ["--create"]], ids=["plain", "create"])
def test_a_worker_with_a_wrong_password_exits_1_in_one_line(create: list[str]) -> None:
    """A wrong password never mends: one line saying so and what to do (no password), exit
    status 1; not a worker retrying forever."""
    with RedisServer(extra_args=("--requirepass", "right-one")) as server:
        wrong = server.url.replace("redis://", "redis://:wrong-one@")
        out = _worker_run("ex", "--url", wrong, *create)
        assert out.returncode == 1, out.stderr
        one_line_error(out, "pressure worker: ", "authentication failed", "--url")
        assert "wrong-one" not in out.stderr and "right-one" not in out.stderr
        assert "Traceback" not in out.stderr


def test_a_worker_for_an_executor_that_does_not_exist_says_so(url: str, prefix: str, r: redis.Redis) -> None:
    """Not a worker waiting silently for tasks that never come: one line, exit status 1, and
    nothing created."""
    out = _worker_run("nobody", "--url", url, "--prefix", prefix)
    assert out.returncode == 1, out.stderr
    one_line_error(out)
    assert out.stderr.strip() == (f"pressure worker: executor 'nobody' does not exist on {url} under prefix "
                                  f"{prefix!r}: start it (pressure.Executor('nobody', ...)) or pass --create")
    assert list(r.scan_iter(match=f"{prefix}:*")) == []
    # pressure's own --url and --prefix reach the command too
    out = _run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "worker", "nobody"])
    assert out.returncode == 1 and f"under prefix {prefix!r}" in out.stderr, out.stderr


def test_a_worker_with_create_makes_the_task_queue_and_a_later_executor_uses_it(
        url: str, prefix: str, r: redis.Redis) -> None:
    """--create: the workers make the executor's task queue (empty, unbounded) and wait; the
    Executor started later uses it, with its own bound, and its tasks run there."""
    keys = ExecutorKeys.build(prefix, "later")
    bound = f"{prefix}:{keys.tasks}:bound"
    with worker("later", url, prefix) as proc:
        wait_until(lambda: bool(r.exists(bound)) or proc.poll() is not None)
        assert proc.poll() is None and r.get(bound) == b"0"
        with pressure.Executor("later", url=url, prefix=prefix, local_workers=False, max_pending=4) as ex:
            assert r.get(bound) == b"4"
            assert list(ex.map(tasks.square, range(6), timeout=SOON)) == [0, 1, 4, 9, 16, 25]
            wait_until(lambda: ex.workers_alive() == 1)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=SOON) == 0
    # and without --create, now that the executor exists, a worker starts
    with subprocess.Popen([sys.executable, "-m", "pressure", "worker", "later", "--url", url, "--prefix", prefix,
                           "--processes", "1"], env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True) as again:
        try:
            wait_until(lambda: bool(r.hlen(keys.workers)) or again.poll() is not None)
            assert again.poll() is None
        finally:
            os.killpg(again.pid, signal.SIGTERM)
            again.wait(timeout=SOON)
