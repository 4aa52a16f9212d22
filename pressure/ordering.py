"""Order keys: bytes that sort (memcmp) the way Python sorts the items.

``PriorityQueue`` keeps its items in a Redis sorted set whose scores are all
0, so Redis orders them by their bytes. Each item is stored behind an order
key built here, so that comparing keys gives what ``<`` gives on the items
themselves, as ``queue.PriorityQueue`` (a heap) would order them:

* numbers (``bool``, ``int``, ``float`` and any ``numbers.Real``) compare by
  value across types, exactly (``2**60 + 1`` sorts after ``2.0**60``);
* ``str`` by code point, ``bytes`` by byte;
* tuples and lists element by element, a prefix first (``(1,) < (1, 0)``);
* a dataclass with ``order=True`` as the tuple of its compared fields, which
  is how the dataclass itself compares (the ``PrioritizedItem`` pattern of
  the ``queue`` documentation).

Inside a tuple, the first element that cannot be ordered this way (``None``,
a dict, an object without these rules) ends the key: items equal up to there
come out first in, first out, where the stdlib would compare them further and
often raise ``TypeError`` (``(1, task_a) < (1, task_b)``). An item with
nothing orderable at all is refused with ``TypeError``. Across types the
stdlib raises, and keys order numbers before bytes before str before tuples.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import struct
from typing import Any

__all__ = ["order_key"]

_END = b"\x00"  # closes a tuple: a shorter tuple sorts first
_STOP = b"\x01"  # an element that cannot be ordered: the rest is first in, first out
_NUMBER = b"\x20"
_BYTES = b"\x28"
_STR = b"\x30"
_TUPLE = b"\x50"


class _Unorderable(Exception):
    pass


def order_key(item: Any) -> bytes:
    """The order key of a priority-queue item; TypeError if nothing in it can be ordered."""
    try:
        return _encode(item)
    except _Unorderable:
        raise TypeError(
            f"a PriorityQueue item must be ordered across processes by value: a number, str, "
            f"bytes, a tuple or list starting with one, or an order=True dataclass; "
            f"not {type(item).__name__}"
        ) from None


def _encode(value: Any) -> bytes:
    if isinstance(value, numbers.Real):
        return _NUMBER + _number(value)
    if isinstance(value, str):
        return _STR + _escaped(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _BYTES + _escaped(bytes(value))
    if isinstance(value, (tuple, list)):
        return _TUPLE + _elements(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        params = getattr(value, "__dataclass_params__", None)
        if params is not None and params.order:
            fields = tuple(getattr(value, f.name) for f in dataclasses.fields(value) if f.compare)
            return _TUPLE + _elements(fields)
    raise _Unorderable


def _elements(values: tuple[Any, ...] | list[Any]) -> bytes:
    parts = []
    for value in values:
        try:
            parts.append(_encode(value))
        except _Unorderable:
            if not parts:
                raise
            parts.append(_STOP)
            return b"".join(parts)
    parts.append(_END)
    return b"".join(parts)


def _escaped(raw: bytes) -> bytes:
    """Self-delimiting and order-preserving: 0x00 becomes 0x00 0xFF; the end is 0x00 0x00."""
    return raw.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


def _number(value: numbers.Real) -> bytes:
    """The float's bits, made to sort as numbers do, then the exact remainder
    (value - float(value), non-zero only for integers beyond 2**53)."""
    if isinstance(value, float):
        approx = value
    else:
        try:
            approx = float(value)
        except OverflowError:
            raise ValueError(f"{value!r} is too large to order in a PriorityQueue") from None
    if math.isnan(approx):
        raise ValueError("NaN cannot be ordered in a PriorityQueue")
    if approx == 0.0:
        approx = 0.0  # -0.0 == 0.0
    bits = struct.unpack(">Q", struct.pack(">d", approx))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
    remainder = 0
    if isinstance(value, numbers.Integral) and math.isfinite(approx):
        remainder = int(value) - int(approx)
    return struct.pack(">Q", bits) + _integer(remainder)


def _integer(n: int) -> bytes:
    """Any int, order-preserving: sign class, then length, then magnitude."""
    if n == 0:
        return b"\x01"
    magnitude = abs(n).to_bytes((abs(n).bit_length() + 7) // 8, "big")
    if n > 0:
        return b"\x02" + bytes([len(magnitude)]) + magnitude
    return b"\x00" + bytes([255 - len(magnitude)]) + bytes(255 - b for b in magnitude)
