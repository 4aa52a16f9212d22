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


def test_around_splits_a_call_where_its_argument_goes() -> None:
    command = PackedScript("put", ["{q}"], 0, 3)
    before, after = command.around(["a", b"payload", 7], 1)
    assert before + b"$7\r\npayload\r\n" + after == command.pack(["a", b"payload", 7])
    with pytest.raises(TypeError, match="takes 3 more arguments"):
        command.around(["a", b"payload"], 1)


@pytest.mark.parametrize("reliable", [False, True])
def test_a_get_packed_once_is_the_get_packed_afresh(make_queue: Any, reliable: bool) -> None:
    q = make_queue(reliable=reliable)
    consumer = q._consumer
    cid = consumer.id()
    for mode, flag in [("nowait", "n"), ("nowait", "N"), ("block", "0")]:
        for _ in range(2):
            assert consumer.packed_get(cid, mode, flag) == [consumer.get_command.pack(consumer._tail(cid, mode, flag))]
