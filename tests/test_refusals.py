"""Commands the server refuses: they did not run, so they are never OutcomeUnknown.

Refused for now (the server is loading its data, busy running a script, a replica cut off
from its master): sent again until served, for up to the socket timeout, then BackendError
saying the command did not run. Refused for good (credentials, ACL, TLS mismatch): a typed
BackendError at once, which says nothing ran and never shows the password. Each test runs
its own private redis-server configured for the case.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import pressure
from pressure.connection import ConnectionConfig
from pressure._internal import attach, internal
from pressure.testing import RedisServer, ServerUnavailable
from pressure.testing._server import _free_port

from .helpers import assert_invariants

PASSWORD = "s3cret-pw"
WRONG = "wrong-pw-0"


def _dump_all(r: redis.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under the prefix, as DUMP gives it (type, value and encoding)."""
    return {key: r.dump(key) for key in sorted(r.scan_iter(match=f"{prefix}:*"))}


def _refused(err: BaseException, secrets: tuple[str, ...] = ()) -> None:
    """A refusal: a BackendError that is not OutcomeUnknown, says the command did not run,
    and shows no secret (not in its message, its cause or anything chained to it)."""
    assert isinstance(err, pressure.BackendError)
    assert not isinstance(err, pressure.OutcomeUnknown), f"refused, yet reported as unknown: {err}"
    assert "did not run" in str(err), str(err)
    chained: BaseException | None = err
    while chained is not None:
        for secret in secrets:
            assert secret not in str(chained) and secret not in repr(chained), f"{secret!r} shown: {chained!r}"
        chained = chained.__cause__ or chained.__context__


def _info(r: redis.Redis, section: str) -> dict[str, Any]:
    return dict(r.info(section))


# -- credentials ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_server() -> Iterator[RedisServer]:
    with RedisServer(extra_args=("--requirepass", PASSWORD)) as server:
        yield server


def test_missing_or_wrong_password_is_an_authentication_error(auth_server: RedisServer, prefix: str) -> None:
    port = auth_server.port
    r = redis.Redis(port=port, password=PASSWORD)
    good: pressure.Queue[str] = pressure.Queue("auth", 3, url=f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
                                               prefix=prefix)
    good.put("kept")
    before = _dump_all(r, prefix)
    for url in (f"redis://127.0.0.1:{port}/0", f"redis://:{WRONG}@127.0.0.1:{port}/0",
                f"redis://nobody:{WRONG}@127.0.0.1:{port}/0"):
        with pytest.raises(pressure.AuthenticationError) as info:
            pressure.Queue("auth", url=url, prefix=prefix)  # create-or-attach is refused
        _refused(info.value, (PASSWORD, WRONG))
        q = attach(pressure.Queue, "auth", ConnectionConfig.from_url(url), prefix=prefix, create=False)
        for op in (lambda: q.put("x"), q.get_nowait, lambda: q.get(timeout=1), q.qsize, q.task_done,
                   q.close):
            with pytest.raises(pressure.AuthenticationError) as info:
                op()
            _refused(info.value, (PASSWORD, WRONG))
        assert WRONG not in repr(q) and WRONG not in repr(q._backend.config)
        q.disconnect()
    assert _dump_all(r, prefix) == before
    assert good.get_nowait() == "kept"
    assert_invariants(r, good)
    good.disconnect()
    r.close()


def test_acl_refusal_is_permission_denied(auth_server: RedisServer, prefix: str) -> None:
    port = auth_server.port
    r = redis.Redis(port=port, password=PASSWORD)
    r.acl_setuser("no-evalsha", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], channels=["*"],
                  commands=["+@all", "-evalsha"])
    r.acl_setuser("no-blmove", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], channels=["*"],
                  commands=["+@all", "-blmove"])
    good: pressure.Queue[str] = pressure.Queue("acl", url=f"redis://:{PASSWORD}@127.0.0.1:{port}/0",
                                               prefix=prefix)
    good.put("kept")
    before = _dump_all(r, prefix)
    q = attach(pressure.Queue,
        "acl", ConnectionConfig.from_url(f"redis://no-evalsha:{PASSWORD}@127.0.0.1:{port}/0"),
        prefix=prefix, create=False)
    for op in (lambda: q.put("x"), q.get_nowait, q.qsize):
        with pytest.raises(pressure.PermissionDenied) as info:
            op()
        _refused(info.value, (PASSWORD,))
        assert isinstance(info.value.__cause__, redis.exceptions.NoPermissionError)
    assert _dump_all(r, prefix) == before
    q.disconnect()
    # the waiting get's script runs, its BLMOVE is refused: the wait is undone
    waiter: pressure.Queue[str] = pressure.Queue("acl-wait", url=f"redis://no-blmove:{PASSWORD}@127.0.0.1:{port}/0",
                                                 prefix=prefix)
    with pytest.raises(pressure.PermissionDenied) as info:
        waiter.get(timeout=5)
    _refused(info.value, (PASSWORD,))
    assert_invariants(r, waiter)  # the consumer role went back
    assert r.get(waiter.keys.waiter) is None
    waiter.disconnect()
    good.disconnect()
    r.close()


# -- TLS ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, int, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a self-signed certificate")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "key.pem",
                    "-out", d / "cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    tls_port = _free_port()
    server = RedisServer(extra_args=("--tls-port", str(tls_port), "--tls-cert-file", str(d / "cert.pem"),
                                     "--tls-key-file", str(d / "key.pem"), "--tls-ca-cert-file",
                                     str(d / "cert.pem"), "--tls-auth-clients", "no"))
    try:
        server.start()
    except ServerUnavailable as exc:
        pytest.skip(f"this redis-server has no TLS support: {exc}")
    yield server, tls_port, d / "cert.pem"
    server.cleanup()


def test_tls_mismatches_say_nothing_ran(tls_server: tuple[RedisServer, int, Path], prefix: str) -> None:
    server, tls_port, cert = tls_server
    fast = "socket_timeout=1&socket_connect_timeout=1"
    ok: pressure.Queue[str] = pressure.Queue(
        "tls", url=f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}&{fast}", prefix=prefix)
    ok.put("over TLS")  # the server's TLS works
    assert ok.get_nowait() == "over TLS"
    cases = {
        "plain redis:// to the TLS port": f"redis://127.0.0.1:{tls_port}/0?{fast}",
        "rediss:// to the plain port": f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=none&{fast}",
        "an unverifiable certificate": f"rediss://127.0.0.1:{tls_port}/0?{fast}",
    }
    for case, url in cases.items():
        with pytest.raises(pressure.BackendError) as info:
            pressure.Queue("tls", url=url, prefix=prefix)
        _refused(info.value)
        print(f"{case}: {info.value}")
    with pytest.raises(pressure.BackendError, match="rediss://"):  # the hint
        pressure.Queue("tls", url=cases["plain redis:// to the TLS port"], prefix=prefix)
    ok.disconnect()


# -- refused for now: LOADING, BUSY, MASTERDOWN -----------------------------------------------


def _loading_answers_often(r: redis.Redis) -> bool:
    """Whether the server can be told to answer clients every 1 kB of its file while it loads
    (Redis 7+, Valkey). Redis 6.2 does not expose the setting: it answered after the first
    2 MB, then about every 8 MB."""
    return bool(r.config_get("loading-process-events-interval-bytes"))


def _slow_loading(server: RedisServer, r: redis.Redis) -> None:
    """Give the server filler keys and save them: restarted with ``key-load-delay``, it
    answers -LOADING for about a second (Redis 6.2: two), answering at all while it loads."""
    pipe = r.pipeline(transaction=False)
    if _loading_answers_often(r):
        for i in range(1000):  # 1 ms a key
            pipe.set(f"filler:{i}", "x" * 64)
        server.extra_args = ("--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")
    else:
        for i in range(200):  # 10 ms a key; incompressible, so the file passes 2 MB early
            pipe.set(f"filler:{i}", os.urandom(64 * 1024))
        server.extra_args = ("--key-load-delay", "10000")
    pipe.execute()


def _restart_loading(server: RedisServer, r: redis.Redis) -> None:
    r.save()
    server.restart(wait_loaded=False)
    assert _info(r, "persistence")["loading"] == 1, "the server loaded too fast for the test"


def test_loading_server_is_waited_for(prefix: str) -> None:
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        q: pressure.Queue[str] = pressure.Queue("loading", 5, url=server.url, prefix=prefix, reliable=True)
        q.put("a")
        _slow_loading(server, r)
        _restart_loading(server, r)
        assert q.get(timeout=30) == "a"  # a blocking get: its script and BLMOVE were refused, then served
        assert _info(r, "errorstats").get("errorstat_LOADING", {}).get("count", 0) >= 1
        q.task_done()
        _restart_loading(server, r)
        q.put("b")  # refused while loading, then put, once
        assert _info(r, "errorstats").get("errorstat_LOADING", {}).get("count", 0) >= 1
        assert q.get_nowait() == "b"
        q.task_done()
        with pytest.raises(pressure.Empty):
            q.get_nowait()
        assert q.unfinished_tasks == 0
        assert_invariants(r, q)
        q.disconnect()
        r.close()


def test_loading_longer_than_the_socket_timeout_is_a_backend_error(prefix: str) -> None:
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        if not _loading_answers_often(r):
            r.close()
            pytest.skip("Redis 6.2 answers while loading only every few MB of its file: a loading "
                        "that outlasts a short socket timeout, answering within it, needs ~100 MB")
        q: pressure.Queue[str] = pressure.Queue("loading-long", 5, url=server.url + "?socket_timeout=0.3",
                                                prefix=prefix)
        q.put("a")
        _slow_loading(server, r)
        before = _dump_all(r, prefix)
        _restart_loading(server, r)
        with pytest.raises(pressure.BackendError) as info:
            q.put("b")
        _refused(info.value)
        assert isinstance(info.value.__cause__, redis.exceptions.BusyLoadingError)
        while _info(r, "persistence")["loading"]:
            time.sleep(0.05)
        assert _dump_all(r, prefix) == before  # "b" never went in
        q.disconnect()
        r.close()


class _BusyScript:
    """Keep the server busy running a script (other clients get -BUSY) until killed."""

    def __init__(self, server: RedisServer) -> None:
        self.url = server.url
        self.r = redis.Redis.from_url(server.url)
        self.thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        with redis.Redis.from_url(self.url) as spinner:
            try:
                spinner.eval("while true do end", 0)
            except redis.ResponseError:
                pass  # killed

    def __enter__(self) -> _BusyScript:
        self.thread.start()
        deadline = time.monotonic() + 10
        while True:  # until the server answers BUSY
            try:
                self.r.ping()
            except redis.ResponseError as exc:
                if str(exc).startswith("BUSY"):
                    return self
                raise
            assert time.monotonic() < deadline, "the server never got busy"
            time.sleep(0.01)

    def kill(self) -> None:
        while self.thread.is_alive():
            try:
                self.r.script_kill()
            except redis.ResponseError:
                pass  # not running yet, or already over
            self.thread.join(0.1)

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.r.close()


@pytest.fixture
def busy_server() -> Iterator[RedisServer]:
    # lua-time-limit: busy-reply-threshold's older name, the one Redis 6.2 knows too
    with RedisServer(extra_args=("--lua-time-limit", "50")) as server:
        yield server


def test_busy_server_is_waited_for(busy_server: RedisServer, prefix: str) -> None:
    r = redis.Redis.from_url(busy_server.url)
    q: pressure.Queue[str] = pressure.Queue("busy", 5, url=busy_server.url, prefix=prefix)
    q.put("a")
    for call, expected in ((lambda: q.get(timeout=30), "a"), (lambda: q.put("b"), None),
                           (lambda: q.statistics().size, 1), (lambda: q.qsize(), 1),
                           (lambda: q.get_nowait(), "b")):
        with _BusyScript(busy_server) as busy:
            threading.Timer(0.3, busy.kill).start()  # refused until then (no timing is asserted)
            assert call() == expected
    # a pipeline refused whole is sent again whole, in order
    with _BusyScript(busy_server) as busy:
        threading.Timer(0.3, busy.kill).start()
        replies = internal(q).pipeline([internal(q).put_call("c"), internal(q).put_call("d")])
    assert all(isinstance(reply, int) and reply >= 0 for reply in replies), replies
    assert [q.get_nowait(), q.get_nowait()] == ["c", "d"]
    assert_invariants(r, q)
    q.disconnect()
    r.close()


def test_busy_longer_than_the_socket_timeout_is_a_backend_error(busy_server: RedisServer, prefix: str) -> None:
    r = redis.Redis.from_url(busy_server.url)
    q: pressure.Queue[str] = pressure.Queue("busy-long", 5, url=busy_server.url + "?socket_timeout=0.3",
                                            prefix=prefix)
    q.put("a")
    before = _dump_all(r, prefix)
    with _BusyScript(busy_server):
        for op in (lambda: q.put("b"), q.get_nowait, lambda: q.get(timeout=5), q.qsize):
            with pytest.raises(pressure.BackendError) as info:
                op()
            _refused(info.value)
            assert str(info.value.__cause__).startswith("BUSY")
    assert _dump_all(r, prefix) == before
    assert q.get_nowait() == "a"
    assert_invariants(r, q)
    q.disconnect()
    r.close()


def test_replica_cut_off_from_its_master_is_a_backend_error(prefix: str) -> None:
    dead_master = _free_port()
    with RedisServer(extra_args=("--replicaof", "127.0.0.1", str(dead_master),
                                 "--replica-serve-stale-data", "no")) as replica:
        with pytest.raises(pressure.BackendError) as info:
            pressure.Queue("stale", url=replica.url + "?socket_timeout=0.3", prefix=prefix)
        _refused(info.value)
        assert isinstance(info.value.__cause__, redis.exceptions.MasterDownError)
