"""The ``redis+sentinel://`` URL form: parsing, printing without the password, errors."""

from __future__ import annotations

import pickle

import pytest
import redis

from pressure.connection import ConnectionConfig, without_password


def test_parse_hosts_service_db_and_credentials() -> None:
    c = ConnectionConfig.from_url(
        "redis+sentinel://alice:s3cret@h1:26380,h2,[::1]:26381/my%20svc/3?socket_timeout=2.5")
    assert c.sentinel is not None
    assert c.sentinel.service == "my svc"
    assert c.sentinel.addresses == (("h1", 26380), ("h2", 26379), ("::1", 26381))
    kw = dict(c.kwargs)
    assert (kw["username"], kw["password"], kw["db"], kw["socket_timeout"]) == ("alice", "s3cret", 3, 2.5)
    assert "host" not in kw and "port" not in kw
    assert dict(c.sentinel.kwargs) == {"socket_timeout": 2.5}  # the servers' password is theirs
    assert c.connection_class is redis.sentinel.SentinelManagedConnection
    assert c.url == "redis+sentinel://alice@h1:26380,h2:26379,[::1]:26381/my%20svc/3"
    assert "s3cret" not in repr(c)
    assert pickle.loads(pickle.dumps(c)) == c


def test_tls_and_the_sentinels_own_credentials() -> None:
    c = ConnectionConfig.from_url(
        "rediss+sentinel://:pw@h1:1/svc?sentinel_password=spw&sentinel_username=sen&ssl_cert_reqs=none")
    assert c.sentinel is not None
    assert c.connection_class is redis.sentinel.SentinelManagedSSLConnection
    skw = dict(c.sentinel.kwargs)
    assert (skw["username"], skw["password"], skw["ssl"], skw["ssl_cert_reqs"]) == ("sen", "spw", True, "none")
    assert dict(c.kwargs)["db"] == 0
    assert c.url == "rediss+sentinel://h1:1/svc/0"
    assert "spw" not in repr(c) and "pw" not in repr(c).replace("password", "")


@pytest.mark.parametrize("url", [
    "redis+sentinel://h1:26379",
    "redis+sentinel://h1:26379/",
    "redis+sentinel://h1:x/svc",
    "redis+sentinel://h1:1/svc/notadb",
    "redis+sentinel://:topsecret@,h1/svc",
    "redis+sentinel://h1/svc/0/extra",
])
def test_bad_urls_say_why_without_the_password(url: str) -> None:
    with pytest.raises(ValueError) as info:
        ConnectionConfig.from_url(url)
    assert "topsecret" not in str(info.value)
    assert "Sentinel" in str(info.value) or "sentinel" in str(info.value)


def test_without_password_masks_sentinel_passwords() -> None:
    text = without_password("redis+sentinel://u:p1@h:1,h:2/s?sentinel_password=p2&x=1")
    assert "p1" not in text and "p2" not in text and "x=1" in text
