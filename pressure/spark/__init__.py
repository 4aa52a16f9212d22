"""pressure queues as a PySpark data source named ``pressure``: batch and streaming,
read and write (needs the ``spark`` extra: pyspark and pyarrow).

::

    import pressure.spark
    pressure.spark.register(spark)          # once per SparkSession

    df = spark.read.format("pressure").option("name", "jobs").load()        # drain a queue
    df.write.format("pressure").mode("append").option("name", "out").save()  # put rows
    stream = spark.readStream.format("pressure").option("name", "jobs").load()
    query = stream.writeStream.format("pressure").option("name", "out") \\
        .option("checkpointLocation", path).start()

See the docs' Spark page (docs/pages/spark.md) for options, schemas and delivery guarantees.
This package is the only part of pressure that imports pyspark.
"""

from __future__ import annotations

from typing import Any

try:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )
    from pyspark.sql.types import StructType
except ImportError as exc:  # no PySpark, or one older than 4.0 (no Python data sources)
    kind = ModuleNotFoundError if isinstance(exc, ModuleNotFoundError) else ImportError
    raise kind(f"pressure.spark needs PySpark 4.0 or newer and pyarrow, the 'spark' extra: "
               f"pip install 'pressure-queue[spark]' ({exc})", name=exc.name) from exc

from ._batch import (
    BatchReader,
    QueueWriter,
    StreamWriter,
    WriteError,
    check_exists,
    create_queue,
)
from ._options import OPTIONS, SourceOptions
from ._rows import default_schema
from ._stream import StreamReader

__all__ = ["OPTIONS", "PressureDataSource", "WriteError", "register"]


class PressureDataSource(DataSource):
    """The ``pressure`` data source. Options are checked when it is created, on the driver."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._opts = SourceOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return "pressure"

    def schema(self) -> StructType:
        return default_schema(self._opts.serializer, self._opts.include_metadata)

    def reader(self, schema: StructType) -> DataSourceReader:
        check_exists(self._opts)
        return BatchReader(self._opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        check_exists(self._opts)
        return StreamReader(self._opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        self._check_mode(overwrite)
        create_queue(self._opts)
        return QueueWriter(self._opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        self._check_mode(overwrite)
        create_queue(self._opts)
        return StreamWriter(self._opts, schema)

    @staticmethod
    def _check_mode(overwrite: bool) -> None:
        if overwrite:
            raise ValueError("a pressure queue is only appended to: use mode('append') "
                             "(outputMode('append') for a stream), not overwrite")


def register(spark: SparkSession | None = None) -> None:
    """Register the ``pressure`` data source with ``spark`` (default: the active session)."""
    session: Any = spark or SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("no active SparkSession: pass the session to register()")
    session.dataSource.register(PressureDataSource)
