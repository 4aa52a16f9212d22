"""A queue records the name of the serializer it was created with (``<base>:pressure:serializer``,
written by lua/create.lua only), so that tools (the ``pressure`` command) know how its items
are stored. A queue a spec client created records nothing: a missing record means unknown."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest
import redis

import pressure
from pressure.aio import AsyncQueue
from pressure.keys import QueueKeys
from pressure.signing import recorded_name
from pressure.testing.spec_client import SpecClient

KEY = "k" * 32


def record(r: redis.Redis, prefix: str, name: str, kind: str = "fifo") -> bytes | None:
    value: bytes | None = r.get(QueueKeys.build(prefix, name, kind).serializer)
    return value


class Named:
    name = "my-format"

    def dumps(self, obj: Any) -> bytes:
        return repr(obj).encode()

    def loads(self, data: bytes) -> Any:
        return data.decode()


class Nameless:
    def dumps(self, obj: Any) -> bytes:
        return repr(obj).encode()

    def loads(self, data: bytes) -> Any:
        return data.decode()


SERIALIZERS = ["pickle", "json", "bytes"] + [name for name in ("orjson", "msgpack")
                                              if importlib.util.find_spec(name) is not None]


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_a_queue_records_its_serializer_when_created(r: redis.Redis, prefix: str, make_queue: Any,
                                                     serializer: str) -> None:
    make_queue("q", serializer=serializer)
    assert record(r, prefix, "q") == serializer.encode()


def test_signed_queues_record_signed_and_custom_serializers_their_name(r: redis.Redis, prefix: str,
                                                                      make_queue: Any) -> None:
    make_queue("signed", authkey=KEY)
    make_queue("signed-json", serializer="json", authkey=KEY)
    make_queue("named", serializer=Named())
    make_queue("nameless", serializer=Nameless())
    assert record(r, prefix, "signed") == b"signed pickle"
    assert record(r, prefix, "signed-json") == b"signed json"
    assert record(r, prefix, "named") == b"my-format"
    assert record(r, prefix, "nameless") is None  # unknown: nothing recorded


@pytest.mark.parametrize("name", ["", "x" * 65, "two\nlines", 42])
def test_a_name_that_is_not_a_short_line_is_not_recorded(name: Any) -> None:
    serializer = Named()
    serializer.name = name  # type: ignore[misc]
    assert recorded_name(serializer) == ""


def test_the_record_is_made_at_create_only_and_never_changed(r: redis.Redis, prefix: str,
                                                            make_queue: Any) -> None:
    q = make_queue("q", serializer="json")
    other = make_queue("q", serializer="bytes")  # attaches: the record stays the creator's
    other.put(b'"x"')
    assert q.get() == "x"
    assert record(r, prefix, "q") == b"json"


@pytest.mark.parametrize("cls,kind", [(pressure.LifoQueue, "lifo"), (pressure.PriorityQueue, "priority")])
def test_ordered_queues_record_theirs_beside_their_base(r: redis.Redis, url: str, prefix: str,
                                                       cls: Any, kind: str) -> None:
    q = cls("{tag}q", url=url, prefix=prefix, serializer="json")
    key = QueueKeys.build(prefix, "{tag}q", kind).serializer
    assert key.startswith(q.keys.base + ":") and r.get(key) == b"json"  # the base's hash tag: one slot
    q.delete()
    assert r.keys(f"{prefix}*") == []
    q.disconnect()


def test_an_async_queue_records_its_serializer(r: redis.Redis, url: str, prefix: str) -> None:
    async def main() -> None:
        q: AsyncQueue[Any] = await AsyncQueue("aq", url=url, prefix=prefix, serializer="json").open()
        await q.disconnect()

    asyncio.run(main())
    assert record(r, prefix, "aq") == b"json"


def test_delete_takes_the_record_with_the_queue(r: redis.Redis, prefix: str, make_queue: Any) -> None:
    q = make_queue("q")
    q.put(1)
    q.delete()
    assert r.keys(f"{prefix}*") == []


def test_a_spec_client_queue_records_nothing_and_pressure_attaching_adds_nothing(
        r: redis.Redis, prefix: str, make_queue: Any) -> None:
    spec = SpecClient(r, "s", prefix=prefix)
    spec.create(0)
    q = make_queue("s", serializer="bytes")
    q.put(b"x")
    assert q.get() == b"x"
    assert record(r, prefix, "s") is None


def test_a_queue_created_again_after_a_spec_delete_records_its_own(r: redis.Redis, prefix: str,
                                                                  make_queue: Any) -> None:
    make_queue("q", serializer="bytes")
    SpecClient(r, "q", prefix=prefix).delete()  # a spec Delete leaves pressure's own keys
    make_queue("q", serializer="json")
    assert record(r, prefix, "q") == b"json"
