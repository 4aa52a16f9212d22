"""The calls the hot paths pack once and send many times (a put's all but its payload, a
backlog's get whole) are, byte for byte, the calls packed afresh from their arguments."""

from __future__ import annotations

from typing import Any

import pytest

from pressure._packing import PackedScript


@pytest.mark.parametrize("payload", [b"", b"x", b"\r\n$3\r\n*1\r\n", bytes(range(256)) * 20])
@pytest.mark.parametrize("negative,took", [(False, "0"), (True, "0"), (False, "1")])
@pytest.mark.parametrize("client_id", [None, "my-id"])
def test_a_put_packed_around_its_payload_is_the_put_packed_afresh(
        make_queue: Any, payload: bytes, negative: bool, took: str, client_id: str | None) -> None:
    q = make_queue(client_id=client_id)
    producer = q._producer
    for _ in range(2):  # made, then taken from the cache
        assert producer.packed(payload, negative, took) == [
            producer.command.pack(producer.args(payload, b"", negative, took))]


@pytest.mark.parametrize("native", [False, True])
def test_a_native_put_packed_around_its_count_is_the_put_packed_afresh(make_queue: Any, native: bool) -> None:
    producer = make_queue()._producer
    flag = ("M", "m") if native else ("1", "0")
    for argument in (b"1:4096", b"100:1048576"):
        for f in flag:
            tail = producer.args(argument, b"", False, "1")
            tail[2] = f
            assert producer._around(argument, f, "1") == producer.command.pack(tail)


def test_split_cuts_a_call_where_its_arguments_go() -> None:
    command = PackedScript("put", ["{q}"], 0, 4)
    parts = command.split(["a", b"payload", 7, "z"], 1, 2)
    assert parts[0] + b"$7\r\npayload\r\n" + parts[1] + b"$1\r\n7\r\n" + parts[2] == \
        command.pack(["a", b"payload", 7, "z"])
    assert b"".join(command.split(["a", b"", 7, "z"])) == command.pack(["a", b"", 7, "z"])
    with pytest.raises(TypeError, match="takes 4 more arguments"):
        command.split(["a", b"payload"], 1)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_packed_once_is_the_get_packed_afresh(make_queue: Any, reliable: bool) -> None:
    q = make_queue(reliable=reliable)
    consumer = q._consumer
    cid = consumer.id()
    for mode, flag in [("nowait", "n"), ("nowait", "N"), ("block", "0")]:
        for _ in range(2):
            assert consumer.packed_get(cid, mode, flag) == [consumer.get_command.pack(consumer._tail(cid, mode, flag))]


def test_a_native_drop_packed_once_is_the_drop_packed_afresh(make_queue: Any) -> None:
    consumer = make_queue()._consumer
    cid = consumer.id()
    for seq, size in [("1", 4096), ("123456", 0), ("7", 1 << 30)]:
        assert consumer.packed_drop(cid, seq, size) == consumer.get_many_command.pack(
            [*consumer._tail(cid, "drop", seq), size])
