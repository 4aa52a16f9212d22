"""What the ``pressure`` command shows, run as a person runs it (``python -m pressure`` in a
subprocess, against the test session's private redis-server, under the test's own prefix):
pickled and signed items, the serializer a queue records, a queue with a malformed key (ls,
watch, the exporter), and the details of watch, dead, repair, peek and a server that is not Redis."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.keys import QueueKeys
from pressure.serializers import PickleSerializer
from pressure.signing import MAGIC, SignedSerializer, Signer
from pressure.testing.spec_client import SpecClient

REPO_ROOT = Path(__file__).resolve().parent.parent
KEY = "k" * 32
OTHER_KEY = "o" * 32

Run = Callable[..., subprocess.CompletedProcess[str]]


def _run(argv: list[str], input: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **env}
    for var in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB", "PRESSURE_PREFIX", "PRESSURE_AUTHKEY",
                "PRESSURE_REQUIRE_AUTHKEY"):
        if var not in env:
            environ.pop(var, None)
    return subprocess.run(argv, input=input if input is not None else "", capture_output=True, text=True,
                          timeout=60, env=environ, cwd=REPO_ROOT)


@pytest.fixture
def cli(url: str, prefix: str) -> Run:
    """``python -m pressure --url <private server> --prefix <the test's> ARGS...`` (keyword
    arguments: environment variables)."""

    def run(*args: str, input: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return _run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, *args], input, **env)

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
    assert out.stdout == "", out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for word in words:
        assert word in lines[0], out.stderr


def stored(r: redis.Redis, prefix: str, name: str) -> list[bytes]:
    return list(r.lrange(QueueKeys.build(prefix, name).base, 0, -1))


# -- 1. pickled queues, signed queues, and the serializer a queue records ------------------------


def test_put_refuses_a_pickle_queue_unless_told_to_pickle(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                                         r: redis.Redis, prefix: str) -> None:
    later = queues("later")  # the default serializer: pickle
    later.put({"from": "python"})
    before = stored(r, prefix, "later")
    out = cli("put", "later", '{"from":"cli"}')
    one_line_error(out, "'later'", "pickle", "nothing was put", "--serializer pickle")
    assert stored(r, prefix, "later") == before  # nothing written
    assert cli("put", "later", '{"from":"cli"}', "--serializer", "pickle").returncode == 0
    assert later.get(timeout=1) == {"from": "python"}
    assert later.get(timeout=1) == {"from": "cli"}  # what a Python consumer reads: no dead letter
    assert later.dead_letters() == []
    one_line_error(cli("put", "later", "raw", "--serializer", "bytes"), "pickle", "nothing was put")


def test_put_into_a_queue_of_unknown_serializer_goes_as_before(cli: Run, r: redis.Redis, prefix: str) -> None:
    SpecClient(r, "spec", prefix=prefix).create(0)  # a spec client's queue records nothing
    assert cli("put", "spec", "[1]").returncode == 0
    assert cli("put", "spec", "raw", "--serializer", "bytes").returncode == 0
    assert stored(r, prefix, "spec") == [b"raw", b"[1]"]


def test_put_create_records_what_it_writes(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                           r: redis.Redis, prefix: str) -> None:
    assert cli("put", "made", "[1]", "--create").returncode == 0
    assert r.get(QueueKeys.build(prefix, "made").serializer) == b"json"
    assert json.loads(cli("stat", "made", "--interval", "0", "--json").stdout)["serializer"] == "json"
    assert queues("made", serializer="json").get(timeout=1) == [1]
    assert cli("put", "signed", "[2]", "--create", PRESSURE_AUTHKEY=KEY).returncode == 0
    assert r.get(QueueKeys.build(prefix, "signed").serializer) == b"signed json"
    assert queues("signed", serializer="json", authkey=KEY).get(timeout=1) == [2]


def test_put_orders_a_priority_queue_by_the_value_not_its_bytes(cli: Run,
                                                                 queues: Callable[..., pressure.Queue[Any]]) -> None:
    for item in ('[10, "ten"]', '[2, "two"]', '[-1, "minus one"]'):
        assert cli("put", "p", item, "--kind", "priority", "--create").returncode == 0
    q = queues("p", cls=pressure.PriorityQueue, serializer="json")
    assert [q.get(timeout=1) for _ in range(3)] == [[-1, "minus one"], [2, "two"], [10, "ten"]]


def test_ls_and_stat_json_show_the_serializer(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                              r: redis.Redis, prefix: str) -> None:
    queues("p")
    queues("j", serializer="json")
    queues("s", authkey=KEY)
    SpecClient(r, "spec", prefix=prefix).create(0)
    rows = {row["name"]: row["serializer"] for row in json.loads(cli("ls", "--json").stdout)}
    assert rows == {"p": "pickle", "j": "json", "s": "signed pickle", "spec": None}
    assert json.loads(cli("stat", "spec", "--interval", "0", "--json").stdout)["serializer"] is None
    out = cli("stat", "s", "--interval", "0")
    assert "serializer    signed pickle" in out.stdout, out.stdout


def test_pickled_items_are_shown_only_with_unpickle(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("later", reliable=True, max_deliveries=1)
    q.put_many([{"from": "python"}, {"n": 2}, {3}])
    out = cli("peek", "later", "-n", "3")
    assert out.returncode == 0 and out.stderr == ""
    assert all(line.startswith("<not JSON, a pickle of ") and "--unpickle" in line
               for line in out.stdout.splitlines()), out.stdout
    out = cli("peek", "later", "-n", "3", "--unpickle")
    assert out.returncode == 0 and out.stdout.splitlines() == ["{'from': 'python'}", "{'n': 2}", "{3}"]
    (warning,) = out.stderr.splitlines()
    assert warning.startswith("warning: --unpickle runs") and "code" in warning
    one_line_error(cli("get", "later"), "put back", "--unpickle")
    assert q.qsize() == 3
    out = cli("get", "later", "--unpickle")
    assert out.returncode == 0 and out.stdout == "{'from': 'python'}\n" and q.qsize() == 2
    q.receive().release()  # delivered once: the most, so to the dead letters
    out = cli("dead", "later", "--unpickle")
    assert out.returncode == 0 and out.stdout.splitlines()[1].endswith("{'n': 2}"), out.stdout
    assert json.loads(cli("dead", "later", "--json", "--unpickle").stdout)[0]["payload"] == "{'n': 2}"
    assert cli("peek", "later", "--unpickle", "--serializer", "bytes").returncode == 2  # one or the other


class _Effect:
    """Unpickling it makes a directory: whether it was unpickled shows on disk."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


def test_signed_items_are_verified_before_anything_is_unpickled(
        cli: Run, queues: Callable[..., pressure.Queue[Any]], r: redis.Redis, prefix: str, tmp_path: Path) -> None:
    q = queues("signed", authkey=KEY)
    q.put({"ok": 1})
    base = QueueKeys.build(prefix, "signed").base
    forged, unsigned, other = tmp_path / "forged", tmp_path / "unsigned", tmp_path / "other"
    body = pickle.dumps(_Effect(str(forged)))
    r.lpush(base, MAGIC + Signer([KEY.encode()], base).sign(b"")[len(MAGIC):][:40] + body)  # a tag of another body
    r.lpush(base, pickle.dumps(_Effect(str(unsigned))))
    r.lpush(base, SignedSerializer(PickleSerializer(), Signer([OTHER_KEY.encode()], base)).dumps(_Effect(str(other))))
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    for how in ({"PRESSURE_AUTHKEY": KEY}, {}):
        args = ("peek", "signed", "-n", "4", "--unpickle", *([] if how else ["--authkey-file", str(keyfile)]))
        out = cli(*args, **how)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "{'ok': 1}"
        assert "refused" in lines[1] and "does not match" in lines[1]
        assert "refused" in lines[2] and "not signed" in lines[2]
        assert "refused" in lines[3] and "key" in lines[3]
    assert not forged.exists() and not unsigned.exists() and not other.exists()
    out = cli("peek", "signed", "--unpickle")  # no key: nothing signed is read
    assert out.stdout.startswith("<signed, ") and "PRESSURE_AUTHKEY" in out.stdout
    one_line_error(cli("put", "signed", "1", "--serializer", "pickle"), "signed pickle", "PRESSURE_AUTHKEY")
    assert cli("put", "signed", "{\"b\": 2}", "--serializer", "pickle", PRESSURE_AUTHKEY=KEY).returncode == 0
    assert cli("get", "signed", "--unpickle", PRESSURE_AUTHKEY=KEY).stdout == "{'ok': 1}\n"
    out = cli("get", "signed", "--unpickle", PRESSURE_AUTHKEY=KEY)
    warning, error = out.stderr.splitlines()  # the warning of --unpickle, then the error
    assert out.returncode == 1 and out.stdout == "" and warning.startswith("warning: --unpickle")
    assert "put back" in error and "does not match" in error
    assert q.qsize() == 4  # the forged one is back, with the others
    assert not forged.exists() and not unsigned.exists() and not other.exists()


def test_a_bad_authkey_file_is_one_line(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                        tmp_path: Path) -> None:
    queues("q").put(1)
    one_line_error(cli("peek", "q", "--authkey-file", str(tmp_path / "missing")), "--authkey-file")
    (tmp_path / "empty").write_text("\n")
    one_line_error(cli("peek", "q", "--authkey-file", str(tmp_path / "empty")), "holds no key")
    (tmp_path / "short").write_text("short\n")
    one_line_error(cli("peek", "q", "--authkey-file", str(tmp_path / "short")), "16 bytes")


# -- 2. a queue with a key of the wrong type ----------------------------------------------------


def _malformed(r: redis.Redis, prefix: str) -> None:
    r.set(f"{prefix}:weird", "x")
    r.set(f"{prefix}:weird:bound", "0")


def test_ls_and_watch_flag_a_malformed_queue_and_show_the_rest(
        cli: Run, queues: Callable[..., pressure.Queue[Any]], r: redis.Redis, prefix: str) -> None:
    queues("jobs", 4).put_many([1, 2])
    _malformed(r, prefix)
    out = cli("ls")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split() == ["jobs", "fifo", "2", "0", "4", "no", "0", "0", "0"]
    assert lines[2].split()[:9] == ["weird", "fifo", *["?"] * 7] and "! WRONGTYPE" in lines[2]
    assert len(lines) == 3
    rows = json.loads(cli("ls", "--json").stdout)
    assert rows[0]["error"] is None and rows[0]["size"] == 2
    assert rows[1]["name"] == "weird" and "WRONGTYPE" in rows[1]["error"] and rows[1]["size"] is None
    out = cli("watch", "--count", "1")
    assert out.returncode == 0, out.stderr
    assert "jobs" in out.stdout and "! WRONGTYPE" in out.stdout
    one_line_error(cli("stat", "weird", "--interval", "0"), "WRONGTYPE")


def test_the_exporter_keeps_the_other_queues_and_warns_of_the_malformed_one(
        cli: Run, queues: Callable[..., pressure.Queue[Any]], r: redis.Redis, prefix: str) -> None:
    pytest.importorskip("prometheus_client")
    queues("jobs", 4).put_many([1, 2])
    _malformed(r, prefix)
    out = cli("serve-metrics", "--once")
    assert out.returncode == 0, out.stderr
    samples = {line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
               for line in out.stdout.splitlines() if line and not line.startswith("#")}
    assert samples[f'pressure_up{{prefix="{prefix}"}}'] == 1
    assert samples[f'pressure_queue_size{{kind="fifo",prefix="{prefix}",queue="jobs"}}'] == 2
    assert samples[f'pressure_queue_error{{kind="fifo",prefix="{prefix}",queue="jobs"}}'] == 0
    assert samples[f'pressure_queue_error{{kind="fifo",prefix="{prefix}",queue="weird"}}'] == 1
    assert not any('queue="weird"' in key for key in samples if not key.startswith("pressure_queue_error"))
    (warning,) = out.stderr.splitlines()  # logged (the last-resort handler: no logging configured)
    assert "'weird'" in warning and "WRONGTYPE" in warning


def test_a_served_exporter_logs_the_malformed_queue_at_each_scrape_within_the_rate_limit(
        url: str, prefix: str, queues: Callable[..., pressure.Queue[Any]], r: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest

    from pressure import _log
    from pressure.cli.metrics import Collector

    queues("jobs").put(1)
    _malformed(r, prefix)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(url=url, prefix=prefix))
    limiter, _log.limiter = _log.limiter, _log.RateLimiter(burst=2)
    try:
        with caplog.at_level("WARNING", logger="pressure.metrics"):
            for _ in range(4):
                assert b'queue="jobs"} 1.0' in generate_latest(registry)
    finally:
        _log.limiter = limiter
    records = [rec for rec in caplog.records if getattr(rec, "event", None) == "metrics_unreadable"]
    assert len(records) == 2 and all(rec.queue == "weird" for rec in records)  # type: ignore[attr-defined]


# -- 3. watch, dead, repair, peek and a port that is not Redis's --------------------------------


def test_watch_of_a_queue_that_does_not_exist_fails_as_stat_does(
        cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    queues("traffic")
    out = cli("watch", "traffic", "nope", "--count", "1")
    one_line_error(out, "queue 'nope' does not exist")
    assert out.stderr.split(" (under")[0] == cli("stat", "nope").stderr.split(" (under")[0]
    one_line_error(cli("watch", "traffic:closed", "--count", "1"), "would share keys")


def test_watch_shows_no_rate_until_it_has_two_readings_and_the_delayed_items(
        cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("traffic", 10)
    q.put_many([1, 2])
    q.put(3, delay=600)
    out = cli("watch", "traffic", "--count", "2", "--interval", "0.1")
    assert out.returncode == 0, out.stderr
    frames = [frame for frame in out.stdout.split("pressure  ")[1:]]
    header, first = frames[0].splitlines()[2:4]
    assert header.split()[:4] == ["NAME", "KIND", "SIZE", "DELAYED"]
    cells = first.split()
    assert cells[:5] == ["traffic", "fifo", "2", "1", "10"]  # statistics(): size 2, delayed 1
    stats = q.statistics()
    assert (stats.size, stats.delayed) == (2, 1)
    assert cells[6:8] == ["-", "-"]
    cells = frames[1].splitlines()[3].split()
    assert cells[6:8] == ["0.0", "0.0"]
    ls = cli("ls").stdout.splitlines()
    assert ls[0].split()[:4] == ["NAME", "KIND", "SIZE", "DELAYED"] and ls[1].split()[2:4] == ["2", "1"]


def test_watch_shows_a_named_queue_deleted_meanwhile(url: str, prefix: str,
                                                     queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("traffic")
    queues("other")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "watch", "traffic",
                           "--interval", "0.2", "--count", "400"], stdout=subprocess.PIPE, text=True,
                          env=env, cwd=REPO_ROOT) as proc:
        try:
            assert proc.stdout is not None
            seen: list[str] = []
            while not any("traffic" in line for line in seen):
                seen.append(proc.stdout.readline())
            q.delete()
            line = ""
            while "! deleted" not in line:
                line = proc.stdout.readline()
                assert line, "watch ended without showing the queue deleted"
            assert line.split()[:2] == ["traffic", "fifo"]
        finally:
            proc.kill()


def test_dead_shows_the_reason_and_the_task_id(cli: Run, queues: Callable[..., pressure.Queue[Any]]) -> None:
    q = queues("jobs", reliable=True, max_deliveries=1, serializer="json")
    q.put_many(["a", "b"])
    q.receive().release()  # delivered the most times
    q.receive().bury()
    letters = q.dead_letters()
    out = cli("dead", "jobs")
    assert out.returncode == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    assert header.split() == ["ID", "REASON", "TASK", "ID", "DELIVERIES", "AGE", "ITEM"]
    assert [line.split()[1:3] for line in lines] == [[d.reason, d.task_id] for d in letters]
    assert [line.split()[1] for line in lines] == ["deliveries", "buried"]
    rows = json.loads(cli("dead", "jobs", "--json").stdout)
    assert [(row["reason"], row["task_id"]) for row in rows] == [(d.reason, d.task_id) for d in letters]


def test_repair_says_what_it_did_in_one_line(cli: Run, queues: Callable[..., pressure.Queue[Any]],
                                             r: redis.Redis, url: str, prefix: str) -> None:
    q = queues("jobs")
    r.delete(q.keys.producer_free)  # a lost token
    out = cli("repair", "jobs")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout == "queue 'jobs' repaired: reset producer_free (it held 0)\n"
    # a consumer of this host whose process is gone, holding an item
    code = ("import os, pressure; q = pressure.Queue('jobs', url=%r, prefix=%r, reliable=True); q.put(1); "
            "q.get(); os._exit(0)" % (url, prefix))
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    out = cli("repair", "jobs")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (line,) = out.stdout.splitlines()
    assert line.startswith("queue 'jobs' repaired: took back the 1 item(s) dead consumer ") and "{}" not in line
    assert q.qsize() == 1


def test_peek_bytes_shows_what_its_help_says(cli: Run, queues: Callable[..., pressure.Queue[Any]], url: str,
                                             prefix: str) -> None:
    queues("raw", serializer="bytes").put_many([b"caf\xc3\xa9", b"\x80bin", b"two\tcells"])
    help_text = " ".join(cli("peek", "--help").stdout.split())
    assert "UTF-8 as it is, other bytes escaped" in help_text
    out = cli("peek", "raw", "-n", "3", "--serializer", "bytes")
    assert out.stdout.splitlines() == ["caf\u00e9", "\\x80bin", "two\tcells"]
    get_help = " ".join(cli("get", "--help").stdout.split())
    assert "its bytes exactly, as stored" in get_help
    out = subprocess.run([sys.executable, "-m", "pressure", "--url", url, "--prefix", prefix, "get", "raw",
                          "--serializer", "bytes"], capture_output=True, timeout=60, cwd=REPO_ROOT,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 0 and out.stdout == b"caf\xc3\xa9"


@contextlib.contextmanager
def _http_server() -> Iterator[int]:
    """A tiny HTTP server on a free port of this host."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_that_is_not_redis_gets_the_library_hint() -> None:
    with _http_server() as port:
        for command in (["ls"], ["stat", "q"], ["peek", "q"], ["watch", "--count", "1"]):
            out = _run([sys.executable, "-m", "pressure", "--url", f"redis://127.0.0.1:{port}/0", *command])
            one_line_error(out, "is it a Redis server?", f"127.0.0.1:{port}")
