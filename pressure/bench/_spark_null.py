"""A Python stream source that reads nothing: the Spark section's ceiling for any stream reader.

``spark.readStream.format("pressure-bench-null")`` makes ``rows`` rows in memory (the same
18-byte strings the other paths move, as Arrow batches of 2,000, ``value string``), at most
``batch`` per micro-batch, in ``partitions`` partitions, with ``trigger(availableNow=True)``.
It talks to no server and keeps no state, so its time is what Spark itself spends on a
Python stream source's micro-batches: the query's start and stop, its checkpoint and
planning steps, the Python workers and the Arrow hand-over. No Redis stream reader can run
faster than it on the same machine. Loaded only by ``pressure.bench.spark`` (it imports
PySpark); its classes are module-level so that Spark's workers unpickle them by reference.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

__all__ = ["NAME", "NullSource"]

#: The format name the bench registers the source under.
NAME = "pressure-bench-null"
#: Rows per Arrow batch a task hands Spark (what the pressure reader hands it per round trip).
_CHUNK = 2_000


class NullSource(DataSource):
    """Options: ``rows``, ``batch`` (rows per micro-batch), ``partitions``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _NullReader(int(self.options["rows"]), int(self.options["batch"]),
                           int(self.options.get("partitions", "1")))


class _NullReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int, batch: int, partitions: int) -> None:
        self._rows, self._batch, self._partitions = rows, batch, partitions

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._batch)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, int]:
        begin = int(start["offset"]) if start else 0
        return {"offset": min(begin + self._batch, self._rows)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, last = int(start["offset"]), int(end["offset"])
        if last <= first:
            return []
        size = -(-(last - first) // self._partitions)
        return [InputPartition((lo, min(lo + size, last))) for lo in range(first, last, size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        first, last = partition.value
        schema = pa.schema([pa.field("value", pa.string())])
        for lo in range(first, last, _CHUNK):
            values = [f"row-{i:012d}" for i in range(lo, min(lo + _CHUNK, last))]
            yield pa.RecordBatch.from_arrays([pa.array(values, type=pa.string())], schema=schema)

    def commit(self, end: dict[str, int]) -> None:
        pass
