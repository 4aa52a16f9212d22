"""Secure by default (issue 32): no handle unpickles unsigned items from a Redis server that is
not on this host unless asked to.

"This host" is what ``PRESSURE_LOCAL_HOSTS`` lists (default: the loopback addresses and
``localhost``; unix sockets always). These tests never send anything to another address:
they set ``PRESSURE_LOCAL_HOSTS=none``, so that the private loopback server of the test
session counts as another host, and every refusal is checked to come before any round trip
(against a loopback port nothing listens on, the refusal is UnsignedPickle, not a
connection error).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
import pressure._log
import pressure.aio
import pressure.signing
import pressure.multiprocessing as pmp
from pressure.connection import ConnectionConfig
from pressure.executor.worker import WorkerPool
from pressure.signing import is_local, refuse_unsigned_pickle, resolve_authkey
from pressure.spark._options import SourceOptions

KEY = "k" * 32
#: nothing listens on port 1 of loopback: a handle that sent anything would fail to connect
DEAD = "redis://:s3cret-pw@127.0.0.1:1/0"


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every TCP server counts as another host; no key and no opt-out in the environment."""
    monkeypatch.setenv("PRESSURE_LOCAL_HOSTS", "none")
    monkeypatch.setattr(pressure.signing, "_warned", set())  # (the opt-out warns once per server)
    monkeypatch.setattr(pressure._log, "limiter", pressure._log.RateLimiter())  # (and is rate-limited)
    for var in ("PRESSURE_AUTHKEY", "PRESSURE_INSECURE_PICKLE", "PRESSURE_REQUIRE_AUTHKEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(("url", "local"), [
    ("redis://127.0.0.1:6390/0", True),
    ("redis://127.8.9.10:6390/0", True),
    ("redis://localhost:6390/0", True),
    ("redis://[::1]:6390/0", True),
    ("unix:///tmp/x.sock", True),
    ("redis://10.9.8.7:6390/0", False),
    ("redis://db.example:6390/0", False),
    ("redis+cluster://127.0.0.1:7000,127.0.0.2:7001", True),
    ("redis+cluster://127.0.0.1:7000,10.0.0.2:7001", False),
    ("redis+sentinel://127.0.0.1:26379,localhost:26380/mymaster", True),
    ("redis+sentinel://127.0.0.1:26379,sentinel.example:26380/mymaster", False),
])
def test_this_host_is_loopback_and_unix_sockets_by_default(monkeypatch: pytest.MonkeyPatch, url: str,
                                                           local: bool) -> None:
    monkeypatch.delenv("PRESSURE_LOCAL_HOSTS", raising=False)
    assert is_local(ConnectionConfig.from_url(url)) is local


def test_a_fakeredis_server_is_in_this_process(elsewhere: None) -> None:
    fakeredis = pytest.importorskip("fakeredis")
    q: pressure.Queue[Any] = pressure.Queue("q", connection=fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    q.put({"a": 1})
    assert q.get_nowait() == {"a": 1}


def test_local_hosts_lists_names_addresses_and_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRESSURE_LOCAL_HOSTS", "10.1.0.0/16, DB.example ,172.17.0.1")
    judged = {u: is_local(ConnectionConfig.from_url(f"redis://{u}:6379/0"))
              for u in ("10.1.2.3", "db.example", "172.17.0.1", "172.17.0.2", "127.0.0.1", "localhost")}
    assert judged == {"10.1.2.3": True, "db.example": True, "172.17.0.1": True, "172.17.0.2": False,
                      "127.0.0.1": False, "localhost": False}  # loopback only when listed
    monkeypatch.setenv("PRESSURE_LOCAL_HOSTS", "loopback,10.1.2.3")
    assert is_local(ConnectionConfig.from_url("redis://127.0.0.1:6379/0"))
    monkeypatch.setenv("PRESSURE_LOCAL_HOSTS", "none")
    assert not is_local(ConnectionConfig.from_url("redis://127.0.0.1:6379/0"))
    assert is_local(ConnectionConfig.from_url("unix:///tmp/x.sock"))


#: every entry point that unpickles items, built on ``url``
_HANDLES: dict[str, Callable[[str, str], Any]] = {
    "Queue": lambda url, p: pressure.Queue("q", url=url, prefix=p),
    "LifoQueue": lambda url, p: pressure.LifoQueue("q", url=url, prefix=p),
    "PriorityQueue": lambda url, p: pressure.PriorityQueue("q", url=url, prefix=p),
    "SimpleQueue": lambda url, p: pressure.SimpleQueue("q", url=url, prefix=p),
    "ShardedQueue": lambda url, p: pressure.ShardedQueue("q", shards=2, url=url, prefix=p),
    "multiprocessing.Queue": lambda url, p: pmp.Queue(name="q", url=url, prefix=p),
    "multiprocessing.JoinableQueue": lambda url, p: pmp.JoinableQueue(name="q", url=url, prefix=p),
    "multiprocessing.SimpleQueue": lambda url, p: pmp.SimpleQueue(name="q", url=url, prefix=p),
    "get_context().Queue": lambda url, p: pmp.get_context("spawn").Queue(name="q", url=url, prefix=p),
    "aio.AsyncQueue": lambda url, p: pressure.aio.AsyncQueue("q", url=url, prefix=p),
    "Executor": lambda url, p: pressure.Executor("ex", url=url, prefix=p, max_workers=1),
    "WorkerPool": lambda url, p: WorkerPool("ex", url=url, prefix=p, processes=1),
    "Spark source": lambda url, p: SourceOptions.parse({"name": "q", "url": url, "prefix": p}),
}


@pytest.mark.parametrize("entry", sorted(_HANDLES))
def test_each_entry_point_refuses_unsigned_pickle_from_another_host_before_any_round_trip(
        elsewhere: None, entry: str) -> None:
    with pytest.raises(pressure.UnsignedPickle) as info:
        _HANDLES[entry](DEAD, "tref")
    message = str(info.value)
    assert "\n" not in message and "s3cret-pw" not in message
    for remedy in ("PRESSURE_AUTHKEY", "authkey=", "keygen", "insecure_pickle=True", "PRESSURE_INSECURE_PICKLE=1"):
        assert remedy in message
    assert "127.0.0.1:1" in message
    assert isinstance(info.value, ValueError)  # a configuration error, as the stdlib would raise


@pytest.mark.parametrize("how", ["PRESSURE_AUTHKEY", "PRESSURE_INSECURE_PICKLE"])
@pytest.mark.parametrize("entry", sorted(_HANDLES))
def test_each_entry_point_builds_with_a_key_or_the_opt_out(elsewhere: None, monkeypatch: pytest.MonkeyPatch,
                                                           url: str, prefix: str, entry: str, how: str) -> None:
    monkeypatch.setenv(how, KEY if how == "PRESSURE_AUTHKEY" else "1")
    made = _HANDLES[entry](url, prefix)
    for close in ("shutdown", "disconnect"):
        if callable(getattr(made, close, None)) and not isinstance(made, pressure.aio.AsyncQueue):
            getattr(made, close)(**({"wait": True} if isinstance(made, pressure.Executor) else {}))
            break


def test_a_queue_refused_leaves_the_server_untouched(elsewhere: None, url: str, prefix: str,
                                                     r: redis.Redis) -> None:
    before = r.info("commandstats")
    with pytest.raises(pressure.UnsignedPickle):
        pressure.Queue("q", url=url, prefix=prefix)
    after = r.info("commandstats")
    ran = {k: v["calls"] - before.get(k, {}).get("calls", 0) for k, v in after.items()}
    assert {k: n for k, n in ran.items() if n and k != "cmdstat_info"} == {}
    assert r.keys(f"{prefix}*") == []


@pytest.mark.parametrize("how", ["authkey=", "PRESSURE_AUTHKEY", "insecure_pickle=True", "PRESSURE_INSECURE_PICKLE",
                                 "json"])
def test_a_key_a_data_only_serializer_or_the_opt_out_lets_a_queue_work(
        elsewhere: None, monkeypatch: pytest.MonkeyPatch, url: str, prefix: str, how: str,
        caplog: pytest.LogCaptureFixture) -> None:
    kw: dict[str, Any] = {}
    if how == "authkey=":
        kw["authkey"] = KEY
    elif how == "PRESSURE_AUTHKEY":
        monkeypatch.setenv("PRESSURE_AUTHKEY", KEY)
    elif how == "insecure_pickle=True":
        kw["insecure_pickle"] = True
    elif how == "PRESSURE_INSECURE_PICKLE":
        monkeypatch.setenv("PRESSURE_INSECURE_PICKLE", "1")
    else:
        kw["serializer"] = "json"
    with caplog.at_level(logging.WARNING, logger="pressure"):
        q: pressure.Queue[Any] = pressure.Queue("q", url=url, prefix=prefix, **kw)
        q.put({"a": 1})
        assert q.get(timeout=5) == {"a": 1}
        if how != "authkey=":  # (a key is never pickled: the other side reads its own)
            again = pickle.loads(pickle.dumps(q))  # what a handle carries elsewhere: its opt-out too
            again.put([2])
            assert again.get(timeout=5) == [2]
            again.disconnect()
    opted_out = how in ("insecure_pickle=True", "PRESSURE_INSECURE_PICKLE")
    assert ("insecure_pickle" in caplog.text) is opted_out  # the warning stays for an opt-out
    q.delete()


def test_the_opt_out_warns_once_per_server_and_never_shows_the_password(
        elsewhere: None, caplog: pytest.LogCaptureFixture) -> None:
    remote = ConnectionConfig.from_url("redis://:pw-not-shown@127.0.0.1:6391/0")
    with caplog.at_level(logging.WARNING, logger="pressure"):
        refuse_unsigned_pickle(remote, True, "queue 'x'")
        refuse_unsigned_pickle(remote, True, "queue 'y'")
    assert caplog.text.count("without an authkey") == 1
    assert "127.0.0.1:6391" in caplog.text and "pw-not-shown" not in caplog.text


def test_an_async_queue_works_with_the_opt_out_or_a_key(elsewhere: None, url: str, prefix: str) -> None:
    async def main() -> None:
        for kw in ({"insecure_pickle": True}, {"authkey": KEY}):
            q: pressure.aio.AsyncQueue[Any] = pressure.aio.AsyncQueue(f"a{len(kw)}{sorted(kw)[0]}", url=url,
                                                                      prefix=prefix, **kw)
            await q.put((1, "x"))
            assert await q.get(timeout=5) == (1, "x")
            await q.disconnect()

    asyncio.run(main())


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("kw", [{"insecure_pickle": True}, {"authkey": KEY}], ids=["opt-out", "authkey"])
def test_an_executor_and_its_local_workers_work_with_the_opt_out_or_a_key(
        elsewhere: None, url: str, prefix: str, kw: dict[str, Any]) -> None:
    """The opt-out reaches the executor's local worker processes (which check for themselves)."""
    with pressure.Executor(url=url, prefix=prefix, max_workers=1, **kw) as ex:
        assert ex.submit(_square, 7).result(timeout=60) == 49


def test_the_worker_command_refuses_in_one_line_and_runs_with_the_flag(elsewhere: None, url: str,
                                                                        prefix: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "pressure", "worker", "ex", "--url", url, "--prefix", prefix,
                           "--processes", "1"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "UnsignedPickle" not in done.stderr, done.stderr
    assert done.stderr.startswith("pressure worker: workers of executor 'ex' on ")
    assert "insecure_pickle=True" in done.stderr
    # with the flag it starts and works for an executor that signs nothing
    with pressure.Executor("ex", url=url, prefix=prefix, local_workers=False, insecure_pickle=True) as ex:
        worker = subprocess.Popen([sys.executable, "-m", "pressure", "worker", "ex", "--url", url, "--prefix",
                                   prefix, "--processes", "1", "--insecure-pickle"], env=env,
                                  stderr=subprocess.PIPE, text=True)
        try:
            assert ex.submit(_square, 5).result(timeout=60) == 25
        finally:
            worker.terminate()
            worker.communicate(timeout=60)


def test_the_spark_source_takes_the_opt_out_as_an_option(elsewhere: None, url: str) -> None:
    assert SourceOptions.parse({"name": "q", "url": url, "insecurePickle": "true"}).insecure_pickle
    assert not SourceOptions.parse({"name": "q", "url": url, "serializer": "json"}).insecure_pickle
    with pytest.raises(ValueError, match="insecurePickle"):
        SourceOptions.parse({"name": "q", "url": url, "insecurePickle": "maybe"})


class _Boom:
    """Unpickling this creates a file: the code an attacker's pickle would run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path(self.path).touch, ())


def test_a_forged_pickle_pushed_by_an_attacker_never_runs(elsewhere: None, monkeypatch: pytest.MonkeyPatch,
                                                          url: str, prefix: str, r: redis.Redis,
                                                          tmp_path: Path) -> None:
    """With the key the default now asks for, an LPUSH of a pickle into the protocol's list is
    dead-lettered, never loaded."""
    monkeypatch.setenv("PRESSURE_AUTHKEY", KEY)
    q: pressure.Queue[Any] = pressure.Queue("q", url=url, prefix=prefix)
    marker = tmp_path / "ran"
    r.lpush(q.keys.base, pickle.dumps(_Boom(str(marker))))
    q.put("signed")
    assert q.get(timeout=5) == "signed"
    assert not marker.exists()
    assert len(q.dead_letters()) == 1
    q.delete()


def test_the_cli_makes_keys(elsewhere: None) -> None:
    from click.testing import CliRunner

    from pressure.cli import cli
    first, second = (CliRunner().invoke(cli, ["keygen"]) for _ in range(2))
    assert first.exit_code == 0 and second.exit_code == 0
    key = first.output.strip()
    assert len(key) == 64 and int(key, 16) >= 0 and key != second.output.strip()
    assert resolve_authkey(key) == (key.encode(),)  # a key a handle accepts
