"""Commands encoded in RESP, ready to send: the text and SHA1 of each Lua script (lib.lua,
the kind's item functions, then the script: see ``_script_source``), ``pack_command`` for a
plain command, and ``PackedScript``, a script call whose constant part is encoded once.

``pressure.connection`` sends them (and re-exports every name here).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
from collections.abc import Sequence

__all__ = ["Call", "PackedScript", "pack_command"]


@functools.cache
def _script_source(name: str) -> str:
    """The text of script ``<script>`` (a FIFO queue's) or ``<script>@lifo`` /
    ``<script>@priority``: the shared functions of lua/lib.lua, the item
    functions for the queue's kind (lua/items_list.lua or lua/items_zset.lua),
    then the script itself. Each kind is a script of its own (its own SHA1),
    so no script asks at run time what kind of queue it serves."""
    script, _, kind = name.partition("@")
    folder = importlib.resources.files("pressure") / "lua"
    if kind in ("", "fifo"):
        items = (folder / "items_list.lua").read_text("utf-8")
    elif kind in ("lifo", "priority"):
        items = f"local LIFO = {'true' if kind == 'lifo' else 'false'}\n" + (
            folder / "items_zset.lua").read_text("utf-8")
    else:
        raise ValueError(f"no such kind of queue: {kind!r}")
    return "\n".join(((folder / "lib.lua").read_text("utf-8"), items,
                       (folder / f"{script}.lua").read_text("utf-8")))


@functools.cache
def _script_sha(name: str) -> str:
    return hashlib.sha1(_script_source(name).encode()).hexdigest()


#: An argument at least this long is sent as it is, not copied into the command's buffer.
_LARGE = 16384


def pack_command(*args: bytes | str | int) -> bytes:
    """One command in RESP, for ``Backend.post``."""
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


def _bulk(value: bytes | str | int) -> bytes:
    if isinstance(value, (str, int)):
        return _bulk_name(value)
    return b"$%d\r\n%b\r\n" % (len(value), value)  # a payload: never cached


@functools.lru_cache(maxsize=1024)
def _bulk_name(value: str | int) -> bytes:
    """A key, identifier, mode or number, encoded once: the same few recur on every call."""
    data = value.encode() if isinstance(value, str) else b"%d" % value
    return b"$%d\r\n%b\r\n" % (len(data), data)


class PackedScript:
    """A script call whose constant part is encoded once: the RESP array header,
    EVALSHA, the script's SHA1, the key count and the queue's fixed keys. Each
    call appends only what varies (per-thread keys and ARGV)."""

    __slots__ = ("name", "_head", "_tail_len", "_parts", "_count")

    def __init__(self, name: str, fixed_keys: Sequence[str], extra_keys: int, args: int) -> None:
        self.name = name
        parts = [b"EVALSHA", _script_sha(name).encode(), b"%d" % (len(fixed_keys) + extra_keys),
                 *(key.encode() for key in fixed_keys)]
        self._tail_len = extra_keys + args
        self._count = len(parts)
        self._parts = b"".join(map(_bulk, parts))
        self._head = b"*%d\r\n" % (self._count + self._tail_len) + self._parts

    def pack(self, tail: Sequence[bytes | str | int]) -> bytes:
        """The whole command, ``tail`` being the per-call keys and arguments."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        return self._head + b"".join(map(_bulk, tail))

    def pack_items(self, tail: Sequence[bytes | str | int], items: Sequence[bytes]) -> list[bytes]:
        """The whole command with the usual arguments and then ``items`` (put_many's), as
        chunks to send one after the other: small items are joined, a large one is a chunk
        of its own, never copied."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        chunks: list[bytes] = []
        small = [b"*%d\r\n" % (self._count + len(tail) + len(items)), self._parts, *map(_bulk, tail)]
        for item in items:
            if len(item) < _LARGE:
                small.append(b"$%d\r\n%b\r\n" % (len(item), item))
            else:
                small.append(b"$%d\r\n" % len(item))
                chunks += (b"".join(small), item)
                small = [b"\r\n"]
        chunks.append(b"".join(small))
        return chunks


#: A script call: a packed script and the keys and arguments after its fixed ones
#: (``Backend.pipeline``, ``Internal.pipeline``).
Call = tuple[PackedScript, Sequence[bytes | str | int]]
