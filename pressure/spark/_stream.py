"""Streaming reads: micro-batches planned by offsets in a replayable log.

Offsets are numbers in the log of the query's consumer group (``pressure.spark.log``):
``latestOffset`` moves queued items into the log (at most the batch's read
limit) and returns the log's tail; ``read`` reads a range of the log on the
executors, as often as Spark asks; ``commit`` drops what Spark is done with.

A query killed at any point and restarted from its checkpoint therefore loses
nothing: a batch that was planned but not committed is still in the log, and
items taken into the log but never planned are planned next. Rows a sink wrote
before the kill and that the batch's replay writes again are the at-least-once
window; Spark's file sinks drop such replays by batch id, so with them the
output holds each row once. Spark commits a stream source one batch late, so the
log keeps the last batch of a run until the next run (or query) on that group,
with the next batch's items when they were taken ahead (``_Prefetch``).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .. import _log as _events
from ..errors import SerializationError
from .log import LogChunk, QueueLog
from ._options import SourceOptions
from ._batch import payload_signer
from ._rows import Decoder, arrow_schema, record_batch

__all__ = ["StreamReader"]

logger = logging.getLogger("pressure.spark")

#: The LogChunk column of each metadata column.
_METADATA = {"_seq": "seqs", "_deliveries": "deliveries", "_producer": "producers"}


def _log(opts: SourceOptions) -> QueueLog:
    return QueueLog._from_config(opts.name, opts.group, opts.config, prefix=opts.prefix,
                                 kind=opts.kind, visibility_timeout=opts.visibility_timeout)


class _Prefetch:
    """Takes the next micro-batch's items into the log in a thread of the planning process,
    while Spark runs the current one (its own connection). What it takes is in the log, so
    it is planned next however the query ends: the log's guarantee, not this class's."""

    def __init__(self, opts: SourceOptions) -> None:
        self._opts = opts
        self._log: QueueLog | None = None
        self._thread: threading.Thread | None = None

    def start(self, n: int) -> None:
        """Take up to ``n`` items into the log, in the background."""
        self.wait()
        if self._log is None:
            self._log = _log(self._opts)
        self._thread = threading.Thread(target=self._take, args=(self._log, n),
                                        name="pressure-spark-prefetch", daemon=True)
        self._thread.start()

    @staticmethod
    def _take(log: QueueLog, n: int) -> None:
        try:
            log.take(n)
        except Exception:  # noqa: BLE001 - the next latestOffset takes them itself, and raises
            logger.debug("taking the next micro-batch's items ahead failed", exc_info=True)

    def wait(self) -> None:
        """Until the prefetch under way (if any) is done."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.wait()
        if self._log is not None:
            self._log.disconnect()
            self._log = None


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self._opts = opts
        self._schema = schema
        self._target: int | None = None
        self._open: QueueLog | None = None
        self._prefetch = _Prefetch(opts)

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self._opts, "schema": self._schema, "target": self._target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._opts, self._schema, self._target = state["opts"], state["schema"], state["target"]
        self._open = None
        self._prefetch = _Prefetch(self._opts)

    def _queue_log(self) -> QueueLog:
        """The log, connected once in the long-lived process that plans the query."""
        if self._open is None:
            self._open = _log(self._opts)
        return self._open

    def initialOffset(self) -> dict[str, int]:
        # a new query (no checkpoint) starts with what the group's log still holds
        return {"offset": self._queue_log().committed()}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._opts.max_rows_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        log = self._queue_log()
        self._target = log.tail() + log.queue.qsize()

    def latestOffset(self, start: dict[str, int] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, int]:
        log = self._queue_log()
        self._prefetch.wait()
        begin = int(start["offset"]) if start else log.committed()
        end = math.inf
        if isinstance(limit, ReadMaxRows):
            end = begin + limit.max_rows
        elif not isinstance(limit, ReadAllAvailable):
            end = begin + self._opts.max_rows_per_batch
        if self._target is not None:
            end = min(end, max(self._target, begin))
        tail = log.tail()
        if end == math.inf:  # all available: what is queued now, not a race with producers
            end = tail + log.queue.qsize()
        if tail < end:
            tail = log.take(int(end - tail))
        planned = int(min(tail, end))
        if end != math.inf and tail >= end:
            # a full batch: take the next one while Spark runs this one (up to the target)
            ahead = planned + (planned - begin)
            if self._target is not None:
                ahead = min(ahead, self._target)
            if ahead > tail:
                self._prefetch.start(int(ahead - tail))
        return {"offset": planned}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, last = int(start["offset"]), int(end["offset"])
        if last <= first:
            return []
        size = math.ceil((last - first) / self._opts.num_partitions)
        return [InputPartition((lo, min(lo + size, last))) for lo in range(first, last, size)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        after, upto = partition.value
        log = _log(self._opts)
        decode = Decoder(self._schema, self._opts.serializer, payload_signer(self._opts))
        arrow = arrow_schema(self._schema)
        wanted = decode.metadata
        try:
            for chunk in log.read_chunks(after, upto):
                try:  # the metadata columns the schema has, only those parsed
                    columns = decode.columns(chunk.payloads, {
                        name: getattr(chunk, _METADATA[name]) for name in wanted})
                except Exception:  # noqa: BLE001 - the rows one by one say which, and how
                    columns = self._rows_one_by_one(log, decode, chunk)
                if arrow is not None:
                    yield record_batch(arrow, columns)
                else:
                    yield from zip(*columns)
        finally:
            log.disconnect()

    def _rows_one_by_one(self, log: QueueLog, decode: Decoder, chunk: LogChunk) -> list[list[Any]]:
        """The columns of ``chunk``'s rows, each made on its own: a row that cannot be made
        raises, or with ``deadLetter`` is copied to the dead-letter list and left out."""
        rows = []
        for entry in chunk.entries():
            try:
                rows.append(decode(entry.payload, entry.number, {
                    "_seq": entry.seq, "_deliveries": entry.deliveries, "_producer": entry.producer}))
            except SerializationError as exc:
                if not self._opts.dead_letter:
                    raise
                log.bury(entry.number)
                _events.event(logger, logging.WARNING, "dead_letter", "queue %r: %s (copied to the "
                           "dead-letter list)", self._opts.name, exc, queue=self._opts.name,
                           prefix=self._opts.prefix, count=1, reason="undecodable_row")
        return [list(column) for column in zip(*rows)] if rows else [[] for _ in self._schema.fields]

    def commit(self, end: dict[str, int]) -> None:
        self._queue_log().commit(int(end["offset"]))

    def stop(self) -> None:
        self._prefetch.close()
        if self._open is not None:
            self._open.disconnect()
