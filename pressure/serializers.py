"""Item serializers: how Python objects become the bytes stored in Redis.

``"pickle"`` (default, highest protocol) round-trips any picklable object;
``"json"`` stores UTF-8 JSON; ``"orjson"`` (the ``orjson`` extra) stores the same JSON,
made and read by orjson (faster); ``"msgpack"`` (the ``msgpack`` extra) stores
MessagePack; ``"bytes"`` stores bytes untouched, which is what lets a client in
another language read the items. Any object with ``dumps(obj) -> bytes`` and
``loads(bytes) -> obj`` works too.

``json``, ``orjson``, ``msgpack`` and ``bytes`` are data-only: loading an item never runs
code, whoever wrote it. ``pickle`` runs whatever a payload says, so a queue
that others can write to should sign its items (``authkey=``, pressure/signing.py)
or use a data-only serializer.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .errors import DeserializationError, SerializationError

__all__ = ["Serializer", "PickleSerializer", "JsonSerializer", "OrjsonSerializer", "MsgpackSerializer",
           "BytesSerializer", "resolve"]


@runtime_checkable
class Serializer(Protocol):
    """Anything with ``dumps`` and ``loads``."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class PickleSerializer:
    """Pickle with the highest protocol."""

    name = "pickle"

    def dumps(self, obj: Any) -> bytes:
        return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)


#: The C scanner ``json.loads`` parses with (a default decoder's), called directly by
#: ``JsonSerializer.loads`` where it gives what ``json.loads`` gives.
_json_scan: Callable[[str, int], tuple[Any, int]] = getattr(json.JSONDecoder(), "scan_once")
#: The first bytes of a JSON text with no leading whitespace, none of them a NUL or the first
#: byte of a byte-order mark: ``json.loads`` reads such bytes (unless the second is a NUL) as
#: UTF-8 with 'surrogatepass', as ``JsonSerializer.loads`` then does.
_JSON_START = frozenset(b'"{[tfn-0123456789')


class JsonSerializer:
    """Compact UTF-8 JSON."""

    name = "json"

    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def loads(self, data: bytes) -> Any:
        """``json.loads(data)``, about five times faster for a small item: a UTF-8 text that
        starts with its value and ends with it goes to the scanner ``json.loads`` ends in,
        without the steps that find the encoding and skip whitespace; anything else (another
        encoding, whitespace around the value, an error) goes to ``json.loads`` itself."""
        if type(data) is bytes and data and data[0] in _JSON_START and (len(data) < 2 or data[1]):
            try:
                text = data.decode("utf-8", "surrogatepass")
                obj, end = _json_scan(text, 0)
            except Exception:  # noqa: BLE001 - json.loads says what, as it always did
                return json.loads(data)
            if end == len(text):
                return obj
        return json.loads(data)


class OrjsonSerializer:
    """JSON by orjson (``pip install 'pressure-queue[orjson]'``): UTF-8 JSON, as ``"json"``
    stores it (each reads the other's items), made and parsed faster. Data only. Keys that
    are not strings become strings (as with ``json``); orjson also writes dataclasses,
    ``datetime`` and ``uuid`` values (they come back as dicts and strings)."""

    name = "orjson"

    def __init__(self) -> None:
        try:
            import orjson
        except ImportError:
            raise ImportError("the 'orjson' serializer needs the orjson package: "
                              "pip install 'pressure-queue[orjson]'") from None
        self._dumps = orjson.dumps
        self._loads = orjson.loads
        self._options = orjson.OPT_NON_STR_KEYS

    def dumps(self, obj: Any) -> bytes:
        return self._dumps(obj, option=self._options)

    def loads(self, data: bytes) -> Any:
        return self._loads(data)


class MsgpackSerializer:
    """MessagePack (the ``msgpack`` package: ``pip install 'pressure-queue[msgpack]'``). Data
    only; tuples come back as lists, as with JSON, and bytes stay bytes."""

    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack
        except ImportError:
            raise ImportError("the 'msgpack' serializer needs the msgpack package: "
                              "pip install 'pressure-queue[msgpack]'") from None
        self._packb = msgpack.packb
        self._unpackb = msgpack.unpackb

    def dumps(self, obj: Any) -> bytes:
        data: bytes = self._packb(obj, use_bin_type=True)
        return data

    def loads(self, data: bytes) -> Any:
        return self._unpackb(data, raw=False, strict_map_key=False)


class BytesSerializer:
    """Bytes in, bytes out, untouched."""

    name = "bytes"

    def dumps(self, obj: Any) -> bytes:
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise TypeError(f"the 'bytes' serializer takes bytes-like items, not {type(obj).__name__}")

    def loads(self, data: bytes) -> Any:
        return data


_BY_NAME: dict[str, Serializer] = {
    "pickle": PickleSerializer(),
    "json": JsonSerializer(),
    "bytes": BytesSerializer(),
}


#: The serializers of optional extras, made (and their package imported) on first use.
_OPTIONAL: dict[str, type[OrjsonSerializer] | type[MsgpackSerializer]] = {
    "orjson": OrjsonSerializer,
    "msgpack": MsgpackSerializer,
}


def resolve(spec: str | Serializer) -> Serializer:
    """Return the serializer named by ``spec``, or ``spec`` itself if it has dumps/loads."""
    if isinstance(spec, str):
        if spec in _OPTIONAL and spec not in _BY_NAME:
            _BY_NAME[spec] = _OPTIONAL[spec]()  # imported on first use: an optional extra
        try:
            return _BY_NAME[spec]
        except KeyError:
            raise ValueError(
                f"unknown serializer {spec!r}: use 'pickle', 'json', 'orjson', 'msgpack', "
                "'bytes' or an object with dumps() and loads()"
            ) from None
    if callable(getattr(spec, "dumps", None)) and callable(getattr(spec, "loads", None)):
        return spec
    raise TypeError("serializer must be 'pickle', 'json', 'orjson', 'msgpack', 'bytes' or an object "
                    "with dumps() and loads()")


def dumps(serializer: Serializer, obj: Any) -> bytes:
    """Serialize ``obj``; any failure becomes a SerializationError (the cause attached)."""
    try:
        data = serializer.dumps(obj)
    except Exception as exc:
        raise SerializationError(f"cannot serialize {type(obj).__name__} item: {exc}") from exc
    if not isinstance(data, bytes):
        if isinstance(data, (bytearray, memoryview)):
            return bytes(data)
        raise SerializationError(f"serializer returned {type(data).__name__}, not bytes")
    return data


def loads(serializer: Serializer, data: bytes) -> Any:
    """Deserialize ``data``; failure raises DeserializationError carrying the raw bytes."""
    try:
        return serializer.loads(data)
    except DeserializationError:
        raise  # already says what is wrong (IntegrityError: a signature that does not verify)
    except Exception as exc:
        raise DeserializationError(
            f"cannot deserialize a {len(data)}-byte payload: {exc}", data
        ) from exc
