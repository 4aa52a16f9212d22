"""The options of the ``pressure`` Spark data source, parsed and checked on the driver.

Spark hands options over as strings (case-insensitive names); ``SourceOptions.parse``
turns them into typed values, or raises ``ValueError`` naming the option, what it
holds and what it takes, before any job starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..connection import ConnectionConfig, without_password
from ..keys import KINDS, resolve_prefix
from ..signing import refuse_unsigned_pickle, resolve_authkey

__all__ = ["OPTIONS", "SourceOptions"]

#: Every option, with what it means (the error for an unknown option lists them).
OPTIONS: dict[str, str] = {
    "name": "the queue's name (or pass it to load()/save() as the path)",
    "url": "redis://, rediss:// or unix:// URL (default: REDIS_URL, else REDIS_SERVER/PORT/DB)",
    "prefix": "key prefix (default: PRESSURE_PREFIX, else __pressure__)",
    "kind": "fifo (default), lifo or priority",
    "serializer": "pickle (default), json or bytes: how items are encoded in the queue",
    "maxsize": "write: the bound when the write creates the queue (default unbounded)",
    "batchSize": "batch read and write: items per round trip (default 500, at most 1000; "
                 "a stream read moves and reads 1000 per round trip)",
    "timeout": "write: seconds a put may wait on a full queue (default: no limit); "
               "batch read: seconds a partition waits for a first item (default 0)",
    "maxRows": "batch read: at most this many items in all (default: all queued)",
    "numPartitions": "read: partitions reading in parallel; a batch read's each drain the queue, "
                     "a stream splits each micro-batch among them (default 1)",
    "group": "stream read: the consumer group whose log holds the query's items (default spark)",
    "maxRowsPerBatch": "stream read: at most this many items per micro-batch (default 10000)",
    "visibilityTimeout": "read: seconds an item taken by a dead reader stays invisible (default 30)",
    "badItems": "read: fail (default: the read fails, the queue stays as it was) or deadLetter "
                "(an item that does not decode or fit the schema goes to the queue's dead-letter "
                "list, and the read goes on)",
    "includeMetadata": "read: add columns _seq, _deliveries and _producer (default false)",
    "insecurePickle": "true: read unsigned pickled items from a Redis server not on this host all "
                      "the same (default false: refused unless PRESSURE_AUTHKEY is set, or "
                      "PRESSURE_INSECURE_PICKLE=1)",
}
_LOWER = {name.lower(): name for name in OPTIONS}
#: Options that Spark itself reads and passes along to every source and sink.
_SPARKS_OWN = frozenset({"checkpointlocation", "queryname"})


def _int(name: str, raw: str, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise ValueError(f"option {name!r} must be at least {minimum}{upper}, not {value}")
    return value


def _seconds(name: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be a number of seconds, not {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"option {name!r} must be a non-negative number of seconds, not {raw!r}")
    return value


def _bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name!r} must be true or false, not {raw!r}")


@dataclass(frozen=True)
class SourceOptions:
    """The data source's options, typed. Picklable: readers and writers carry it."""

    name: str
    config: ConnectionConfig
    prefix: str
    kind: str
    serializer: str
    maxsize: int | None
    batch_size: int
    timeout: float | None
    max_rows: int | None
    num_partitions: int
    group: str
    max_rows_per_batch: int
    visibility_timeout: float
    include_metadata: bool
    dead_letter: bool
    insecure_pickle: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SourceOptions:
        given: dict[str, str] = {}
        for key, value in options.items():
            canonical = _LOWER.get(str(key).lower())
            if canonical is None and str(key).lower() == "path":
                canonical = "name"
            if canonical is None and str(key).lower() in _SPARKS_OWN:
                continue
            if canonical is None:
                known = ", ".join(sorted(OPTIONS, key=str.lower))
                raise ValueError(f"unknown option {key!r} for the pressure data source; "
                                 f"the options are: {known}")
            if canonical in given and given[canonical] != str(value):
                raise ValueError(f"the queue name is given twice: {given[canonical]!r} and {value!r}")
            given[canonical] = str(value)
        name = given.get("name", "")
        if not name:
            raise ValueError("the pressure data source needs the queue's name: "
                             ".option('name', ...) or load(name) / save(name)")
        url = given.get("url")
        try:
            config = ConnectionConfig.resolve(url or None, None)
        except ValueError as exc:
            shown = without_password(url or "")  # never a password
            raise ValueError(f"option 'url' is not a Redis URL: {shown!r} ({exc})") from None
        prefix = given.get("prefix")
        if prefix is not None and not prefix:
            raise ValueError("option 'prefix' must not be empty")
        # resolved here, on the driver: executors may not share its environment
        prefix = resolve_prefix(prefix)
        kind = given.get("kind", "fifo").lower()
        if kind not in KINDS:
            raise ValueError(f"option 'kind' must be one of {', '.join(KINDS)}, not {given['kind']!r}")
        serializer = given.get("serializer", "pickle").lower()
        if serializer not in ("pickle", "json", "bytes"):
            raise ValueError(f"option 'serializer' must be pickle, json or bytes, not {given['serializer']!r}")
        maxsize = _int("maxsize", given["maxsize"], 0) if "maxsize" in given else None
        timeout = _seconds("timeout", given["timeout"]) if "timeout" in given else None
        bad_items = given.get("badItems", "fail").lower()
        if bad_items not in ("fail", "deadletter"):
            raise ValueError(f"option 'badItems' must be fail or deadLetter, not {given['badItems']!r}")
        group = given.get("group", "spark")
        if not group:
            raise ValueError("option 'group' must not be empty")
        insecure_pickle = _bool("insecurePickle", given.get("insecurePickle", "false"))
        if serializer == "pickle" and not resolve_authkey(None):  # here, before any job starts
            refuse_unsigned_pickle(config, insecure_pickle, f"the pressure data source's queue {name!r}")
        return cls(
            name=name,
            config=config,
            prefix=prefix,
            kind=kind,
            serializer=serializer,
            maxsize=maxsize or None,
            batch_size=_int("batchSize", given.get("batchSize", "500"), 1, 1000),
            timeout=timeout,
            max_rows=_int("maxRows", given["maxRows"], 0) if "maxRows" in given else None,
            num_partitions=_int("numPartitions", given.get("numPartitions", "1"), 1, 10_000),
            group=group,
            max_rows_per_batch=_int("maxRowsPerBatch", given.get("maxRowsPerBatch", "10000"), 1),
            visibility_timeout=_seconds("visibilityTimeout", given.get("visibilityTimeout", "30")),
            include_metadata=_bool("includeMetadata", given.get("includeMetadata", "false")),
            dead_letter=bad_items == "deadletter",
            insecure_pickle=insecure_pickle,
        )
