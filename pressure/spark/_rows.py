"""Items to rows and rows to items: the data source's schema rules.

Reading, an item becomes one row:

- a schema whose only value column is ``value`` takes the item itself: ``binary``
  takes bytes (a str item as UTF-8), ``string`` takes str (bytes as UTF-8, any
  other JSON-able item as its JSON text), other types take the item as it is;
- any other schema is a struct: a dict item fills the columns by name (missing
  keys are null), a tuple or list item of the same length by position;
- with ``includeMetadata``, ``_seq`` (the queue's delivery number, rising in the
  order items left the queue), ``_deliveries`` and ``_producer`` are appended.

Writing, a row becomes one item: a DataFrame whose only column is ``value`` puts
that value; any other puts each row as a dict (``Row.asDict(recursive=True)``).
The ``bytes`` serializer needs the one-column form with binary or string values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ..errors import DeserializationError, SerializationError
from ..serializers import resolve
from ..signing import Signer

__all__ = ["METADATA", "Decoder", "arrow_schema", "default_schema", "record_batch", "row_encoder",
           "with_metadata"]

#: The metadata columns, in order.
METADATA = (StructField("_seq", LongType(), False), StructField("_deliveries", IntegerType(), False),
            StructField("_producer", StringType(), True))
_METADATA_NAMES = frozenset(field.name for field in METADATA)


def default_schema(serializer: str, include_metadata: bool) -> StructType:
    """``value binary`` for the bytes serializer, else ``value string``; metadata if asked."""
    value = BinaryType() if serializer == "bytes" else StringType()
    return with_metadata(StructType([StructField("value", value, True)]), include_metadata)


def with_metadata(schema: StructType, include_metadata: bool) -> StructType:
    """The schema with the metadata columns appended (those it does not name already)."""
    if not include_metadata:
        return schema
    fields = list(schema.fields)
    fields += [field for field in METADATA if field.name not in schema.names]
    return StructType(fields)


#: The column types whose rows a reader hands Spark as Arrow batches (values a Decoder makes
#: for them always fit: Spark's own per-value conversion would change nothing).
_ARROW_TYPES = (BinaryType, StringType, LongType, IntegerType)


def arrow_schema(schema: StructType) -> pa.Schema | None:
    """Spark's Arrow schema for ``schema`` if its rows go to Spark as Arrow batches: a ``value``
    column of type binary or string, and metadata columns. None for any other schema."""
    names = [f.name for f in schema.fields if f.name not in _METADATA_NAMES]
    if names != ["value"] or not isinstance(schema["value"].dataType, (BinaryType, StringType)):
        return None
    if not all(isinstance(f.dataType, _ARROW_TYPES) for f in schema.fields):
        return None
    return cast("pa.Schema", to_arrow_schema(schema, timezone="UTC"))


def record_batch(schema: pa.Schema, columns: list[list[Any]]) -> pa.RecordBatch:
    """The rows of ``columns`` (in ``schema``'s order) as one Arrow batch."""
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, schema)], schema=schema)


def _as_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, (bytes, bytearray)):
        return bytes(item).decode("utf-8")
    return json.dumps(item)


def _as_binary(item: Any) -> bytes:
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, str):
        return item.encode("utf-8")
    raise TypeError(f"a binary column takes bytes or str, not {type(item).__name__}")


class Decoder:
    """Turns payloads into row tuples for ``schema`` (built where the rows are made)."""

    def __init__(self, schema: StructType, serializer: str, signer: Signer | None = None) -> None:
        self._serializer = resolve(serializer)
        #: verifies each payload before it is loaded (PRESSURE_AUTHKEY): IntegrityError if not signed
        self._signer = signer
        self._names = [f.name for f in schema.fields if f.name not in _METADATA_NAMES]
        self._metadata = [f.name for f in schema.fields if f.name in _METADATA_NAMES]
        self._order = [f.name for f in schema.fields]
        self._single: Callable[[Any], Any] | None = None
        if self._names == ["value"]:
            value_type = schema["value"].dataType
            if isinstance(value_type, BinaryType):
                self._single = _as_binary
            elif isinstance(value_type, StringType):
                self._single = _as_text
            else:
                self._single = _identity
        self._serializer_name = serializer

    @property
    def metadata(self) -> list[str]:
        """The metadata columns of the schema (``_seq``, ``_deliveries``, ``_producer``)."""
        return list(self._metadata)

    @property
    def wants_producer(self) -> bool:
        """Whether the schema has a ``_producer`` column (reading it costs a round trip)."""
        return "_producer" in self._metadata

    def __call__(self, payload: bytes, number: int, meta: Mapping[str, Any]) -> tuple[Any, ...]:
        """The row of one payload; ``number`` names it in errors (its position or log number)."""
        if self._signer is not None:
            payload = self._signer.verify(payload)  # IntegrityError: never reaches the serializer
        try:
            item = self._serializer.loads(payload)
        except Exception as exc:
            raise DeserializationError(
                f"item {number} of the queue cannot be read with serializer "
                f"{self._serializer_name!r}: {exc}", payload) from exc
        try:
            values = self._values(item)
        except (TypeError, ValueError) as exc:
            raise SerializationError(
                f"item {number} ({type(item).__name__}) does not fit the columns "
                f"{', '.join(self._names)}: {exc}") from exc
        if not self._metadata:
            return values
        row = dict(zip(self._names, values))
        row.update(meta)
        return tuple(row[name] for name in self._order)

    def columns(self, payloads: list[bytes], meta: Mapping[str, list[Any]]) -> list[list[Any]]:
        """The rows of many payloads as columns, in the schema's order (``meta``: a list per
        metadata column); raises on the first payload that does not make a row (then ``__call__``
        per payload says which, and how)."""
        if self._signer is not None:
            payloads = list(map(self._signer.verify, payloads))
        items = list(map(self._serializer.loads, payloads))
        if self._single is not None:
            values = [list(map(self._single, items))]
        else:
            rows = list(map(self._values, items))
            values = [list(column) for column in zip(*rows)] if rows else [[] for _ in self._names]
        by_name = dict(zip(self._names, values))
        by_name.update(meta)
        return [by_name[name] for name in self._order]

    def _values(self, item: Any) -> tuple[Any, ...]:
        if self._single is not None:
            return (self._single(item),)
        if self._serializer_name == "bytes":
            item = json.loads(item)
        if isinstance(item, Mapping):
            return tuple(item.get(name) for name in self._names)
        if isinstance(item, Sequence) and not isinstance(item, (str, bytes, bytearray)):
            if len(item) != len(self._names):
                raise ValueError(f"it has {len(item)} values for {len(self._names)} columns")
            return tuple(item)
        raise TypeError("a struct schema takes dict items (or tuples and lists of the same length)")


def _identity(item: Any) -> Any:
    return item


def row_encoder(schema: StructType, serializer: str) -> Callable[[Any], Any]:
    """A function from a Row to the item to put, for a DataFrame of ``schema``; raises
    ValueError (on the driver) for a DataFrame the serializer cannot put."""
    single = schema.names == ["value"]
    if serializer == "bytes":
        if not single or not isinstance(schema["value"].dataType, (BinaryType, StringType)):
            raise ValueError("serializer 'bytes' writes a DataFrame with one column, 'value', of "
                             f"type binary or string; this one has: {schema.simpleString()}")
        return lambda row: _as_binary(row[0])
    if single:
        return lambda row: row[0]
    return lambda row: row.asDict(recursive=True)
