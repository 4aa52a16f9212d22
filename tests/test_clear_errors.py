"""Errors that say what to do (issue 17 item 4): create=False for a name that must exist, a
connection refused names the setting that chose the server, a non-Redis service is suspected,
a refused password says "authentication failed"."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator

import pytest
import redis

import pressure
from pressure.testing import RedisServer
from pressure.testing._server import _free_port

from .test_refusals import PASSWORD, auth_server  # noqa: F401 - the fixture


def test_create_false_attaches_and_refuses_a_missing_queue_writing_nothing(url: str, prefix: str,
                                                                           r: redis.Redis) -> None:
    with pytest.raises(pressure.QueueDoesNotExist, match="'jbos' does not exist .create=False"):
        pressure.Queue("jbos", url=url, prefix=prefix, create=False)
    assert r.keys(f"{prefix}:*") == []
    made: pressure.Queue[int] = pressure.Queue("jobs", 3, url=url, prefix=prefix)
    made.put(1)
    attached: pressure.Queue[int] = pressure.Queue("jobs", url=url, prefix=prefix, create=False)
    assert attached.get_nowait() == 1
    with pytest.raises(pressure.QueueExistsError, match="maxsize=3, not 5"):
        pressure.Queue("jobs", 5, url=url, prefix=prefix, create=False)
    made.delete()


@pytest.mark.parametrize("how, origin", [
    ("url", "url="), ("REDIS_URL", "REDIS_URL"), ("REDIS_SERVER", "REDIS_SERVER, REDIS_PORT"),
])
def test_a_refused_connection_names_the_setting_that_chose_the_server(
        how: str, origin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()  # nothing listens there
    for var in ("REDIS_URL", "REDIS_SERVER", "REDIS_PORT", "REDIS_DB"):
        monkeypatch.delenv(var, raising=False)
    kw = {}
    if how == "url":
        kw["url"] = f"redis://127.0.0.1:{port}/0"
    elif how == "REDIS_URL":
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    else:
        monkeypatch.setenv("REDIS_SERVER", "127.0.0.1")
        monkeypatch.setenv("REDIS_PORT", str(port))
    with pytest.raises(pressure.BackendError, match=f"Connection refused.*chosen by {origin}"):
        pressure.Queue("x", **kw)  # type: ignore[arg-type]


class _Http(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = socketserver.TCPServer(("127.0.0.1", 0), _Http)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_service_that_is_not_redis_is_suspected(http_port: int) -> None:
    with pytest.raises(pressure.BackendError, match="is it a Redis server"):
        pressure.Queue("x", url=f"redis://127.0.0.1:{http_port}/0")


def test_a_refused_password_says_authentication_failed(auth_server: RedisServer,  # noqa: F811
                                                       prefix: str) -> None:
    with pytest.raises(pressure.AuthenticationError, match="authentication failed") as info:
        pressure.Queue("x", url=f"redis://:wrong-pw@127.0.0.1:{auth_server.port}/0", prefix=prefix)
    assert "may or may not" not in str(info.value) and "wrong-pw" not in str(info.value)
