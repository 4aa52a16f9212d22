"""A handle's password can stay out of its pickles (issue 15 item 4): a URL without a password
and ``PRESSURE_REDIS_PASSWORD`` in each process's environment."""

from __future__ import annotations

import pickle

import pytest

import pressure
from pressure.testing import RedisServer

from .test_refusals import PASSWORD, auth_server  # noqa: F401 - the fixture


def test_the_password_from_the_environment_never_travels_with_a_pickle(
        auth_server: RedisServer, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    url = f"redis://127.0.0.1:{auth_server.port}/0"
    monkeypatch.setenv("PRESSURE_REDIS_PASSWORD", PASSWORD)
    q: pressure.Queue[str] = pressure.Queue("secret", url=url, prefix=prefix)
    q.put("x")
    data = pickle.dumps(q)
    assert PASSWORD.encode() not in data
    assert PASSWORD not in repr(q) and PASSWORD not in q.url
    copy = pickle.loads(data)
    assert copy.get_nowait() == "x"
    copy.disconnect()
    monkeypatch.delenv("PRESSURE_REDIS_PASSWORD")
    elsewhere = pickle.loads(data)  # a process without it: refused, typed, nothing shown
    with pytest.raises(pressure.AuthenticationError) as info:
        elsewhere.qsize()
    assert PASSWORD not in str(info.value)
    elsewhere.disconnect()
    q.delete()


def test_a_password_in_the_url_does_travel_and_is_never_shown(auth_server: RedisServer,  # noqa: F811
                                                                prefix: str) -> None:
    q: pressure.Queue[str] = pressure.Queue(
        "secret", url=f"redis://:{PASSWORD}@127.0.0.1:{auth_server.port}/0", prefix=prefix)
    assert PASSWORD.encode() in pickle.dumps(q)  # documented: use PRESSURE_REDIS_PASSWORD to avoid it
    assert PASSWORD not in repr(q) and PASSWORD not in q.url
    q.delete()
