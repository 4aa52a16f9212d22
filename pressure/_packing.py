"""Commands encoded in RESP, ready to send: the text and SHA1 of each Lua script (the
definitions of lib.lua and of the kind's item functions that it uses, then the script: see
``_script_source``), ``pack_command`` for a plain command, and ``PackedScript``, a script
call whose constant part is encoded once.

``pressure.connection`` sends them (and re-exports every name here).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
from collections.abc import Sequence

__all__ = ["Call", "NATIVE_BYTES", "PackedScript", "pack_command", "pack_get_moves", "pack_moves",
           "script_library"]


@functools.cache
def _script_source(name: str) -> str:
    """The text of script ``<script>`` (a FIFO queue's) or ``<script>@lifo`` /
    ``<script>@priority``: its library (``script_library``), then the script itself (a
    script with a line that starts ``_LIBRARY_HERE`` has them there instead). Each kind is a
    script of its own (its own SHA1), so no script asks at run time what kind of queue it
    serves."""
    script = name.partition("@")[0]
    body = (importlib.resources.files("pressure") / "lua" / f"{script}.lua").read_text("utf-8")
    library = script_library(name)
    prologue, marker, rest = body.partition(_LIBRARY_HERE)
    if not marker:
        return "\n".join((*library, body))
    return "\n".join((prologue, *library, marker + rest))


@functools.cache
def script_library(name: str) -> tuple[str, ...]:
    """The definitions script ``name`` (as ``_script_source`` names it) carries: the shared
    functions of lua/lib.lua and the item functions for the queue's kind (lua/items_list.lua
    or lua/items_zset.lua) that it uses (``_used``), in order, each with its comment. Lua
    makes each function a closure again on every call of the script."""
    script, _, kind = name.partition("@")
    folder = importlib.resources.files("pressure") / "lua"
    if kind in ("", "fifo"):
        items = (folder / "items_list.lua").read_text("utf-8")
    elif kind in ("lifo", "priority"):
        items = f"local LIFO = {'true' if kind == 'lifo' else 'false'}\n" + (
            folder / "items_zset.lua").read_text("utf-8")
    else:
        raise ValueError(f"no such kind of queue: {kind!r}")
    body = (folder / f"{script}.lua").read_text("utf-8")
    return tuple(_used((folder / "lib.lua").read_text("utf-8") + "\n" + items, body))


#: A line of a script's own that its library's definitions go after (else before the script):
#: what comes before it (fast exits) runs without making the closures they are.
_LIBRARY_HERE = "-- (the library's definitions"


#: The start of a definition at the top of a library: a local function, or a local value.
_DEFINITION = re.compile(r"local (?:function (\w+)\(|(\w+) = )")
_WORD = re.compile(r"\w+")
#: A quoted string (a name in one is no use of it), else a comment to the end of its line.
_NOT_CODE = re.compile(r"""'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|--[^\n]*""")


def _code_words(text: str) -> set[str]:
    """The names ``text`` mentions in its code: outside its strings and comments."""
    return set(_WORD.findall(_NOT_CODE.sub(" ", text)))


def _used(library: str, script: str) -> list[str]:
    """The definitions of ``library`` that ``script`` uses, directly or through one another,
    in the library's order, each with the comment above it. Every definition left out would
    make a closure or a value on each call of the script, for nothing (a function's
    definition ends at the first 'end' at the start of a line: the libraries' layout)."""
    blocks: list[tuple[str, str]] = []
    lines: list[str] = []
    name = ""
    for line in library.splitlines(keepends=True):
        if not name and (start := _DEFINITION.match(line)):
            name = start.group(1) or start.group(2)
            if start.group(2):  # one line
                blocks.append((name, "".join((*lines, line))))
                lines, name = [], ""
                continue
        lines.append(line)
        if name and line.rstrip() == "end":
            blocks.append((name, "".join(lines)))
            lines, name = [], ""
    if name:
        raise ValueError(f"library definition {name!r} has no 'end' at the start of a line")
    mentions = {n: _code_words(text) for n, text in blocks}
    wanted = _code_words(script) & mentions.keys()
    todo = list(wanted)
    while todo:
        for other in mentions[todo.pop()] & mentions.keys() - wanted:
            wanted.add(other)
            todo.append(other)
    return [text for n, text in blocks if n in wanted]


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

    def split(self, tail: Sequence[bytes | str | int], *indexes: int) -> list[bytes]:
        """The whole command packed but for the arguments ``tail[i]`` of ``indexes`` (in
        order): the parts around them, for a caller that sends the same call with only those
        changing. ``pack`` of ``tail`` is the first part, then each of those arguments as a
        bulk string (``$<length>\\r\\n<bytes>\\r\\n``) followed by the next part."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        bounds = [-1, *indexes, len(tail)]
        parts = [b"".join(map(_bulk, tail[start + 1:end])) for start, end in zip(bounds, bounds[1:])]
        parts[0] = self._head + parts[0]
        return parts

    def pack_items(self, tail: Sequence[bytes | str | int], items: Sequence[bytes]) -> list[bytes]:
        """The whole command with the usual arguments and then ``items`` (put_many's), as
        chunks to send one after the other: small items are joined, a large one is a chunk
        of its own, never copied."""
        if len(tail) != self._tail_len:
            raise TypeError(f"script {self.name} takes {self._tail_len} more arguments, not {len(tail)}")
        chunks: list[bytes] = []
        small = [b"*%d\r\n" % (self._count + len(tail) + len(items)), self._parts, *map(_bulk, tail)]
        chunks.append(b"".join(_add_payloads(chunks, small, items)))
        return chunks


def _add_payload(chunks: list[bytes], small: list[bytes], payload: bytes) -> list[bytes]:
    """Encode ``payload`` as the next bulk string after the parts in ``small``: appended there
    if it is short; if large, ``small`` joined and ``payload`` itself go to ``chunks`` (sent one
    after the other, the payload never copied). Returns the parts that follow."""
    if len(payload) < _LARGE:
        small.append(b"$%d\r\n%b\r\n" % (len(payload), payload))
        return small
    small.append(b"$%d\r\n" % len(payload))
    chunks += (b"".join(small), payload)
    return [b"\r\n"]


def _add_payloads(chunks: list[bytes], small: list[bytes], payloads: Sequence[bytes]) -> list[bytes]:
    """``_add_payload`` of each of ``payloads`` in turn (put_many's): the same bytes, but inline,
    with each length's header formatted once per call and the payload not copied into a bulk
    string of its own before the join (at 100 B about 100 ns an item here, not 160-190)."""
    heads: dict[int, bytes] = {}
    for payload in payloads:
        size = len(payload)
        if size >= _LARGE:
            small = _add_payload(chunks, small, payload)
            continue
        head = heads.get(size)
        if head is None:
            head = heads[size] = b"$%d\r\n" % size
        small += (head, payload, b"\r\n")
    return small


#: From this many payload bytes, a payload moves natively: by LSET/LPUSHX (a put) or BLMOVE (a
#: get) in one MULTI/EXEC with the script that decides and accounts, never entering Lua (which
#: copies an argument or a reply into a Lua string, about 4 ns a byte). Below it, the script
#: takes or returns the payload itself: one command costs the server less than a transaction's
#: four or five when the copies are short (``python -m pressure bench --payload`` measures both).
NATIVE_BYTES = 4096


def pack_get_moves(gate: str, base: str, held: str, count: int = 1) -> bytes:
    """The commands behind a native get's script in its MULTI (lua/get.lua flag 'N'): ``count``
    times ``BLMOVE gate held RIGHT RIGHT`` (an item each, as many as the script took: in a
    transaction BLMOVE never blocks; the least ACL rule has it, not LMOVE), then
    ``RENAME gate base``."""
    return pack_command("BLMOVE", gate, held, "RIGHT", "RIGHT", NEVER_WAIT) * count + pack_command(
        "RENAME", gate, base)


#: The timeout of a BLMOVE that must never wait: inside a transaction none does, and should the
#: server run it outside one (a MULTI refused since ``Backend.transactions`` asked), 0 would wait
#: forever where this waits a millisecond.
NEVER_WAIT = "0.001"


def pack_moves(gate: str, base: str, payloads: Sequence[bytes]) -> tuple[list[bytes], int]:
    """The commands behind a native put's script in its MULTI (lua/put.lua ARGV[3] 'm'):
    ``LSET gate 0 <first>``, for more ``LPUSHX gate <the rest>``, ``RENAME gate base``; as
    chunks to send one after the other (a large payload is a chunk of its own, never copied),
    and how many commands they are."""
    chunks: list[bytes] = []
    small = [b"*4\r\n$4\r\nLSET\r\n", _bulk_name(gate), b"$1\r\n0\r\n"]
    small = _add_payload(chunks, small, payloads[0])
    if len(payloads) > 1:
        small += (b"*%d\r\n$6\r\nLPUSHX\r\n" % (len(payloads) + 1), _bulk_name(gate))
        small = _add_payloads(chunks, small, payloads[1:])
    small.append(pack_command("RENAME", gate, base))
    chunks.append(b"".join(small))
    return chunks, 3 if len(payloads) > 1 else 2


#: A script call: a packed script and the keys and arguments after its fixed ones
#: (``Backend.pipeline``, ``Internal.pipeline``).
Call = tuple[PackedScript, Sequence[bytes | str | int]]


#: What goes behind posted commands to read their replies in one round trip (a flush): the
#: docs' ACL rule (security.md) allows it (``+ping``).
PING = pack_command("PING")
