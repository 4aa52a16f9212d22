"""Signed payloads (pressure/signing.py, issue 15 item 1): the attacks, without Redis."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import pressure
from pressure.serializers import JsonSerializer, PickleSerializer, loads
from pressure.signing import MAGIC, SignedSerializer, Signer, resolve_authkey

KEY = b"k" * 32
OLD = b"o" * 32


class _Boom:
    """A pickle that creates a file when it is loaded: the harmless stand-in for an exploit."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.path}",))


def _signed(keys: tuple[bytes, ...] = (KEY,), context: str = "p:jobs") -> SignedSerializer:
    return SignedSerializer(PickleSerializer(), Signer(keys, context))


def test_a_signed_item_round_trips_and_says_which_key_signed_it() -> None:
    s = _signed()
    data = s.dumps({"n": 1})
    assert data.startswith(MAGIC) and s.loads(data) == {"n": 1}


def test_a_forged_pickle_never_reaches_pickle_loads(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    crafted = pickle.dumps(_Boom(marker))
    with pytest.raises(pressure.IntegrityError, match="it is not signed") as info:
        loads(_signed(), crafted)
    assert not marker.exists()
    assert info.value.payload == crafted
    assert isinstance(info.value, pressure.DeserializationError)


def test_an_item_replayed_to_another_queue_is_refused(tmp_path: Path) -> None:
    data = _signed(context="p:jobs").dumps("x")
    with pytest.raises(pressure.IntegrityError, match="does not match"):
        _signed(context="p:other").loads(data)


@pytest.mark.parametrize("cut", [1, 20, 32, 40])
def test_a_truncated_signature_is_refused(cut: int) -> None:
    data = _signed().dumps("x")
    head = len(MAGIC) + 8 + 32
    with pytest.raises(pressure.IntegrityError):
        _signed().loads(data[:head - cut] if cut < head else data[:4])


def test_a_forged_tag_over_a_crafted_body_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    genuine = _signed().dumps("x")
    forged = genuine[:len(MAGIC) + 8 + 32] + pickle.dumps(_Boom(marker))
    with pytest.raises(pressure.IntegrityError, match="does not match"):
        _signed().loads(forged)
    assert not marker.exists()


def test_a_wrong_key_is_refused_and_rotation_accepts_the_old_one() -> None:
    old_item = _signed((OLD,)).dumps("before rotation")
    with pytest.raises(pressure.IntegrityError, match="key this handle does not hold"):
        _signed((KEY,)).loads(old_item)
    rotated = _signed((KEY, OLD))
    assert rotated.loads(old_item) == "before rotation"
    assert _signed((KEY,)).loads(rotated.dumps("new")) == "new"  # signs with the first


def test_a_body_altered_after_signing_is_refused() -> None:
    data = bytearray(_signed().dumps("xyz"))
    data[-3] ^= 1
    with pytest.raises(pressure.IntegrityError, match="does not match"):
        _signed().loads(bytes(data))


def test_other_serializers_are_signed_the_same_way() -> None:
    s = SignedSerializer(JsonSerializer(), Signer((KEY,), "p:jobs"))
    assert s.loads(s.dumps([1, "a"])) == [1, "a"]
    with pytest.raises(pressure.IntegrityError):
        s.loads(b'[1, "a"]')


def test_keys_are_never_pickled() -> None:
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(_signed())
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(Signer((KEY,), "p:jobs"))


def test_no_message_shows_a_key() -> None:
    for bad in (b"x" * 40, _signed((OLD,)).dumps("x"), _signed().dumps("x")[:30]):
        try:
            _signed().loads(bad)
        except pressure.IntegrityError as exc:
            assert KEY.decode() not in str(exc) and OLD.decode() not in str(exc)


def test_resolve_authkey(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESSURE_AUTHKEY", raising=False)
    monkeypatch.delenv("PRESSURE_REQUIRE_AUTHKEY", raising=False)
    assert resolve_authkey(None) == ()
    assert resolve_authkey(KEY) == (KEY,)
    assert resolve_authkey("s" * 16) == (b"s" * 16,)
    assert resolve_authkey([KEY, OLD]) == (KEY, OLD)
    monkeypatch.setenv("PRESSURE_AUTHKEY", f"{KEY.decode()}, {OLD.decode()}")
    assert resolve_authkey(None) == (KEY, OLD)
    monkeypatch.setenv("PRESSURE_AUTHKEY", "")
    monkeypatch.setenv("PRESSURE_REQUIRE_AUTHKEY", "1")
    with pytest.raises(ValueError, match="PRESSURE_REQUIRE_AUTHKEY is set"):
        resolve_authkey(None)
    assert resolve_authkey(KEY) == (KEY,)


@pytest.mark.parametrize("bad, error", [(b"short", ValueError), ([], ValueError), (12, TypeError),
                                        ([KEY, 3], TypeError)])
def test_bad_authkeys_are_refused(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        resolve_authkey(bad)  # type: ignore[arg-type]


# -- on a real server: Queue(authkey=...) ------------------------------------------------------

import logging  # noqa: E402
import multiprocessing  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402


def _signed_queue(url: str, prefix: str, name: str = "signed", **kw: Any) -> pressure.Queue[Any]:
    return pressure.Queue(name, url=url, prefix=prefix, authkey=KEY, **kw)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_forged_item_in_a_signed_queue_is_dead_lettered_and_the_consumer_goes_on(
        url: str, prefix: str, r: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        reliable: bool) -> None:
    """The issue's attack: a plain LPUSH of a crafted pickle. It never reaches pickle.loads;
    get() logs it (naming the queue), dead-letters it and returns the next genuine item."""
    marker = tmp_path / "pwned"
    q = _signed_queue(url, prefix, reliable=reliable)
    assert r.lpush(q.keys.base, pickle.dumps(_Boom(marker)))  # what an attacker can do
    q.put("genuine")
    with caplog.at_level(logging.WARNING, logger="pressure"):
        assert q.get(timeout=5) == "genuine"
    assert not marker.exists()
    assert "queue 'signed'" in caplog.text and "it is not signed" in caplog.text
    assert len(q.dead_letters()) == 1
    if reliable:
        q.task_done()
    q.delete()


def test_get_many_leaves_a_forged_item_out(url: str, prefix: str, r: redis.Redis, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    q = _signed_queue(url, prefix)
    q.put("a")
    r.lpush(q.keys.base, pickle.dumps(_Boom(marker)))
    q.put("b")
    assert q.get_many(10) == ["a", "b"]
    assert not marker.exists() and len(q.dead_letters()) == 1
    q.delete()


def test_an_item_signed_for_another_queue_is_refused(url: str, prefix: str, r: redis.Redis) -> None:
    a, b = _signed_queue(url, prefix, "a"), _signed_queue(url, prefix, "b")
    a.put("for a only")
    r.lmove(a.keys.base, b.keys.base, "RIGHT", "LEFT")  # replayed into b
    with pytest.raises(pressure.Empty):
        b.get(timeout=0.5)
    assert len(b.dead_letters()) == 1
    a.delete()
    b.delete()


def test_a_signed_queue_stores_signed_payloads_and_an_unsigned_handle_cannot_read_them(
        url: str, prefix: str, r: redis.Redis) -> None:
    q = _signed_queue(url, prefix, serializer="bytes")
    q.put(b"payload")
    stored: Any = r.lindex(q.keys.base, 0)
    assert isinstance(stored, bytes) and stored.startswith(MAGIC) and stored.endswith(b"payload")
    plain: pressure.Queue[bytes] = pressure.Queue("signed", url=url, prefix=prefix, serializer="bytes")
    assert plain.get_nowait() == stored  # a handle without the key sees the signed bytes
    q.delete()


def test_a_pickled_handle_never_carries_its_key(url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESSURE_AUTHKEY", raising=False)
    q = _signed_queue(url, prefix)
    data = pickle.dumps(q)
    assert KEY not in data
    with pytest.raises(ValueError, match="set PRESSURE_AUTHKEY"):
        pickle.loads(data)
    monkeypatch.setenv("PRESSURE_AUTHKEY", KEY.decode())
    copy = pickle.loads(data)
    q.put("x")
    assert copy.get(timeout=5) == "x"
    q.delete()


def _child_get(q: pressure.Queue[Any], out: Any) -> None:
    out.put(q.get(timeout=10))


def test_a_child_process_gets_the_key_as_multiprocessing_passes_its_authkey(
        url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRESSURE_AUTHKEY", raising=False)
    ctx = multiprocessing.get_context("spawn")
    q = _signed_queue(url, prefix)
    q.put("to the child")
    out = ctx.Queue()
    p = ctx.Process(target=_child_get, args=(q, out))
    p.start()
    assert out.get(timeout=60) == "to the child"
    p.join(30)
    q.delete()


# -- the Spark source's pieces (PRESSURE_AUTHKEY on the executors) -----------------------------


def test_the_spark_log_takes_only_signed_items_and_its_reader_verifies_them(
        url: str, prefix: str, r: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QueueLog (the stream source's log) reads PRESSURE_AUTHKEY: a forged item pushed into the
    queue never enters the log, and the stream's decoder verifies each log entry before it loads
    it (an entry written into the log stream directly is refused too)."""
    pytest.importorskip("pyspark")
    from pyspark.sql.types import StringType, StructField, StructType

    from pressure.spark._batch import payload_signer
    from pressure.spark._options import SourceOptions
    from pressure.spark._rows import Decoder
    from pressure.spark.log import QueueLog

    monkeypatch.setenv("PRESSURE_AUTHKEY", KEY.decode())
    marker = tmp_path / "pwned"
    q: pressure.Queue[Any] = pressure.Queue("streamed", url=url, prefix=prefix, serializer="json")
    q.put({"n": 1})
    r.lpush(q.keys.base, pickle.dumps(_Boom(marker)))
    q.put({"n": 2})
    log = QueueLog("streamed", "g", url=url, prefix=prefix)
    assert log.take(10) == 2
    assert len(q.dead_letters()) == 1
    opts = SourceOptions.parse({"url": url, "name": "streamed", "prefix": prefix, "serializer": "json"})
    decode = Decoder(StructType([StructField("value", StringType())]), "json", payload_signer(opts))
    assert [decode(e.payload, e.number, {})[0] for e in log.read(0, 2)] == ['{"n": 1}', '{"n": 2}']
    with pytest.raises(pressure.IntegrityError):
        decode(pickle.dumps(_Boom(marker)), 3, {})
    assert not marker.exists()
    q.delete()


def test_a_signed_log_take_goes_on_past_a_round_trip_of_forged_items(
        url: str, prefix: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    """A take whose round trip got only forged items (dead-lettered) goes on to the signed
    ones queued behind them: it stopped there, taking none while they were queued."""
    from pressure.spark.log import QueueLog

    monkeypatch.setenv("PRESSURE_AUTHKEY", KEY.decode())
    q: pressure.Queue[Any] = pressure.Queue("forged-first", url=url, prefix=prefix, serializer="json")
    r.lpush(q.keys.base, b'"forged 1"', b'"forged 2"')  # ahead of what is put next
    q.put({"n": 1})
    q.put({"n": 2})
    log = QueueLog("forged-first", "g", url=url, prefix=prefix)
    assert log.take(2) == 2
    # the log keeps each item as stored (signed), the signature ahead of its JSON
    assert [(e.number, e.payload[-7:]) for e in log.read(0, 2)] == [(1, b'{"n":1}'), (2, b'{"n":2}')]
    assert sorted(d.payload for d in q.dead_letters()) == [b'"forged 1"', b'"forged 2"']
    assert q.qsize() == 0
    assert log.take(2) == 2  # nothing queued: the tail, as before
    q.delete()
