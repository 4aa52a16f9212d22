"""Batch reads and writes, and the writer that streaming queries share.

Reading: each partition takes items with reliable gets (in flight, under this
reader's consumer id) and acknowledges all of them in one step once Spark has
pulled every row of the partition from it; a partition that fails (or that Spark
closes before the end) gives them all back to the head of the queue, and a
reader process that dies leaves them to be requeued (at once when its host sees
the pid gone, else after ``visibilityTimeout``). So rows are delivered at least
once. A batch read is a consumption: Spark's Python worker pulls a partition's
rows in Arrow batches of up to 10,000 before the action sees them, so an action
that uses fewer rows (``limit``, ``show``, ``take``) still consumes what was
pulled. Read N items with ``maxRows``, and cache a DataFrame that is used twice.

Writing: each partition puts its rows with ``put_many`` in batches; on a bounded
queue a put waits for room (``timeout`` bounds each wait), so Spark's executors
slow down to the consumers' pace instead of overfilling the queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .. import _log
from .._internal import attach, internal
from ..errors import Empty, PressureError, QueueDoesNotExist, SerializationError, ShutDown
from ..ordered import queue_class
from ..keys import QueueKeys
from ..queue import Queue
from ..signing import Signer, resolve_authkey
from ._options import SourceOptions
from ._rows import Decoder, row_encoder

__all__ = ["BatchReader", "QueueWriter", "StreamWriter", "WriteError", "open_queue"]

logger = logging.getLogger("pressure.spark")

#: How long a draining partition keeps asking while items are queued but another
#: consumer holds the role (a blocked get being handed an item).
_BUSY_PATIENCE = 1.0


class WriteError(PressureError):
    """A write to a queue failed; the message says which partitions put how many rows."""


def open_queue(opts: SourceOptions, *, reliable: bool, serializer: str) -> Queue[Any]:
    """A handle on the queue of ``opts`` (which must exist), built where it is used."""
    return attach(
        queue_class(opts.kind), opts.name, opts.config, prefix=opts.prefix, serializer=serializer, create=False,
        reliable=reliable, visibility_timeout=opts.visibility_timeout, authkey=resolve_authkey(None),
        insecure_pickle=opts.insecure_pickle)


def payload_signer(opts: SourceOptions) -> Signer | None:
    """What verifies the queue's payloads where they are read raw (the stream's log), if this
    process has keys (``PRESSURE_AUTHKEY``: set it on Spark's executors too)."""
    keys = resolve_authkey(None)
    return Signer(keys, QueueKeys.build(opts.prefix, opts.name, opts.kind).base) if keys else None


def check_exists(opts: SourceOptions) -> None:
    """On the driver: a clear error now rather than in every task later."""
    q = open_queue(opts, reliable=False, serializer="bytes")
    try:
        if not q.exists:
            raise ValueError(f"queue {opts.name!r} does not exist on {opts.config.url} "
                             f"(prefix {opts.prefix!r}, kind {opts.kind})")
    finally:
        q.disconnect()


def create_queue(opts: SourceOptions) -> None:
    """On the driver: create the queue (bound ``maxsize``) or check the stored bound."""
    q = open_queue(opts, reliable=False, serializer="bytes")
    try:
        internal(q).create(opts.maxsize)
    finally:
        q.disconnect()


class BatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self._opts = opts
        self._schema = schema

    def partitions(self) -> list[InputPartition]:
        n, total = self._opts.num_partitions, self._opts.max_rows
        if total is None:
            return [InputPartition((i, None)) for i in range(n)]
        caps = [total // n + (1 if i < total % n else 0) for i in range(n)]
        return [InputPartition((i, cap)) for i, cap in enumerate(caps) if cap > 0] or [
            InputPartition((0, 0))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        _, cap = partition.value
        opts = self._opts
        q = open_queue(opts, reliable=True, serializer="bytes")
        decode = Decoder(self._schema, opts.serializer)
        link = internal(q)
        cid = link.consumer_id()
        touch_every = max(opts.visibility_timeout / 3, 0.1)
        last_touch = time.monotonic()
        busy_since: float | None = None
        taken = 0
        settled = False
        try:
            while cap is None or taken < cap:
                want = opts.batch_size if cap is None else min(opts.batch_size, cap - taken)
                got = link.receive_many(want, track=False)  # all settled at once at the end
                if not got and taken == 0 and opts.timeout:
                    try:
                        got = [q.receive(timeout=opts.timeout)]
                    except QueueDoesNotExist:
                        raise
                    except (Empty, ShutDown):
                        break
                if not got:
                    if q.qsize() == 0:
                        break
                    # items wait, but a blocked consumer is being handed one: ask again
                    busy_since = busy_since or time.monotonic()
                    if time.monotonic() - busy_since > _BUSY_PATIENCE:
                        break
                    time.sleep(0.01)
                    continue
                busy_since = None
                producer = link.read(q.keys.producer) if decode.wants_producer else None
                for d in got:
                    taken += 1
                    seq = int(d.id)
                    try:
                        row = decode(d.item, seq, {"_seq": seq, "_deliveries": d.deliveries,
                                                   "_producer": producer})
                    except SerializationError as exc:
                        if not opts.dead_letter:
                            raise
                        link.bury(d)
                        _log.event(logger, logging.WARNING, "dead_letter", "queue %r: %s (moved to the "
                                   "dead-letter list)", opts.name, exc, queue=opts.name, prefix=opts.prefix,
                                   count=1, reason="undecodable_row")
                        continue
                    yield row
                if time.monotonic() - last_touch > touch_every:
                    link.touch_all(cid)
                    last_touch = time.monotonic()
            link.settle_all(cid, ack=True)
            settled = True
        finally:
            if not settled:
                try:
                    link.settle_all(cid, ack=False)
                except PressureError as exc:  # they are still in flight: requeued later
                    logger.warning("queue %r: could not give back %d items at once: %s",
                                   opts.name, taken, exc)
            q.disconnect()


@dataclass
class PartitionWritten(WriterCommitMessage):
    """What one partition put."""

    partition: int
    rows: int


def _summary(name: str, messages: list[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, PartitionWritten)]
    parts = ", ".join(f"partition {m.partition}: {m.rows} rows" for m in done) or "none"
    failed = len(messages) - len(done)
    return (f"write to queue {name!r} failed; finished partitions put {sum(m.rows for m in done)} "
            f"rows ({parts}); {failed} partition(s) failed or never ran, and each failure names "
            f"the rows its partition put before it")


class QueueWriter(DataSourceWriter):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self._opts = opts
        self._encode = row_encoder(schema, opts.serializer)  # raises on the driver

    def write(self, iterator: Iterator[Any]) -> PartitionWritten:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else -1
        opts = self._opts
        q = open_queue(opts, reliable=False, serializer=opts.serializer)
        encode = self._encode
        put = 0
        try:
            chunk: list[Any] = []
            for row in iterator:
                chunk.append(encode(row))
                if len(chunk) >= opts.batch_size:
                    put += self._put(q, chunk)
                    chunk = []
            if chunk:
                put += self._put(q, chunk)
        except Exception as exc:
            cause = exc
            if isinstance(exc, _Partial):
                put, cause = put + exc.items_put, exc.error
            raise WriteError(f"partition {partition} put {put} rows into queue {opts.name!r}, "
                             f"then failed: {type(cause).__name__}: {cause}") from cause
        finally:
            q.disconnect()
        return PartitionWritten(partition, put)

    def _put(self, q: Queue[Any], items: list[Any]) -> int:
        try:
            q.put_many(items, timeout=self._opts.timeout)
        except PressureError as exc:
            raise _Partial(exc.items_put or 0, exc) from exc
        return len(items)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PartitionWritten))
        logger.info("wrote %d rows into queue %r from %d partitions", rows, self._opts.name,
                    len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        raise WriteError(_summary(self._opts.name, messages))


class _Partial(Exception):
    """A put_many that put ``items_put`` items and then failed with ``error``."""

    def __init__(self, items_put: int, error: Exception) -> None:
        super().__init__(f"{error} (after putting {items_put} of its rows)")
        self.items_put = items_put
        self.error = error


class StreamWriter(DataSourceStreamWriter):
    """Each micro-batch's partitions put their rows as a batch write does (at least once:
    a micro-batch that Spark runs again after a failure puts its rows again)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self._writer = QueueWriter(opts, schema)

    def write(self, iterator: Iterator[Any]) -> PartitionWritten:
        return self._writer.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._writer.commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        raise WriteError(f"micro-batch {batchId}: " + _summary(self._writer._opts.name, messages))
