"""How the command shows a queue's stored items, and makes the items it puts.

A queue records the serializer it was created with (``<base>:pressure:serializer``:
'pickle', 'json', 'signed pickle'...; nothing for a spec client's queue). ``put`` writes
JSON (or, with ``--serializer``, the given bytes or a pickle of the JSON value), signed
when an authkey is given (``PRESSURE_AUTHKEY``, ``--authkey-file``), and refuses a queue
whose record says its items are stored otherwise.

``peek``, ``get`` and ``dead`` read items as they are stored: a signed item is verified
with the authkey first (a forged one is refused, never loaded); a pickle is shown only with
``--unpickle`` (unpickling runs whatever code the item names), as the ``repr`` of what it
holds; JSON is shown as JSON; ``--serializer bytes`` shows the stored bytes (``get``: exactly;
``peek``, ``dead``: as text, the bytes that are not UTF-8 escaped).
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from typing import Any

from .. import serializers
from ..errors import IntegrityError
from ..signing import MAGIC, Signer, resolve_authkey

__all__ = ["Shown", "Reader", "Writer", "authkeys", "pickled", "written_name", "refusal", "make_item",
           "UNPICKLE_WARNING", "UNPICKLE_WARNING_SIGNED"]

#: The first byte of a pickle of protocol 2 or later (pickle.HIGHEST_PROTOCOL is what the
#: library writes); no JSON text and no UTF-8 text starts with it.
_PICKLE = 0x80

UNPICKLE_WARNING = ("warning: --unpickle runs whatever code a pickled item names: use it only on "
                    "queues that only trusted clients write (with an authkey, PRESSURE_AUTHKEY or "
                    "--authkey-file, only items whose signature verifies are unpickled)")
UNPICKLE_WARNING_SIGNED = ("warning: --unpickle runs whatever code a pickled item names: only items "
                           "signed with the authkey are unpickled")


def pickled(body: bytes) -> bool:
    """Whether ``body`` is (by its first byte) a pickle as the library writes one."""
    return bool(body) and body[0] == _PICKLE


def authkeys(path: str | None, *, needed: bool = False) -> tuple[bytes, ...]:
    """The keys to sign and verify with: those of ``path`` (``--authkey-file``: one a line, the
    first signs), else ``PRESSURE_AUTHKEY``'s. ``needed`` (items are pickled or unpickled):
    ``PRESSURE_REQUIRE_AUTHKEY`` then refuses to go on without one, as a handle would."""
    if path is not None:
        try:
            with open(path, "rb") as f:
                lines = [line.strip() for line in f.read().splitlines() if line.strip()]
        except OSError as exc:
            raise ValueError(f"cannot read --authkey-file {path}: {exc.strerror or exc}") from None
        if not lines:
            raise ValueError(f"--authkey-file {path} holds no key")
        return resolve_authkey(lines)
    if needed or os.environ.get("PRESSURE_AUTHKEY", "").strip():
        return resolve_authkey(None)
    return ()


@dataclass(frozen=True, slots=True)
class Shown:
    """One stored item as the command shows it."""

    #: one line: the item (JSON, or the repr of what a pickle holds), or why it is not shown
    #: (``problem`` between angle brackets)
    text: str
    #: why the item is not shown (None if ``text`` is the item): a pickle without --unpickle, a
    #: signature that does not verify...
    problem: str | None = None


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


def _preview(data: bytes) -> str:
    return f"{data[:60]!r}{'...' if len(data) > 60 else ''}"


class Reader:
    """Shows the items of one queue: ``context`` its base key (what signatures are made for),
    ``serializer`` 'json' or 'bytes', ``unpickle`` whether pickles are loaded, ``keys`` the
    authkey (verifies signed items), ``recorded`` the queue's recorded serializer (None:
    unknown)."""

    def __init__(self, *, context: str, serializer: str, unpickle: bool = False,
                 keys: tuple[bytes, ...] = (), recorded: str | None = None) -> None:
        self.serializer = serializer
        self.unpickle = unpickle
        self.signer = Signer(keys, context) if keys else None
        self.recorded = recorded

    def show(self, payload: bytes) -> Shown:
        """``payload`` (an item as stored) as a line."""
        if self.serializer == "bytes":
            return Shown(payload.decode("utf-8", "backslashreplace"))
        size = len(payload)
        body = payload
        if payload.startswith(MAGIC):
            if self.signer is None:
                return self._problem(f"signed, {size} bytes: set PRESSURE_AUTHKEY or pass --authkey-file "
                                     f"to verify and read it")
            try:
                body = self.signer.verify(payload)
            except IntegrityError as exc:
                return self._problem(str(exc))
        if pickled(body):
            if not self.unpickle:
                return self._problem(f"not JSON, a pickle of {size} bytes: pass --unpickle to show it "
                                     f"(unpickling runs code)")
            if self.signer is not None and body is payload:
                # with an authkey a pickle must be signed, as a handle with that key requires
                return self._problem(f"refused a {size}-byte pickle: it is not signed")
            try:
                return Shown(_one_line(repr(pickle.loads(body))))
            except Exception as exc:  # noqa: BLE001 - whatever the pickle raised, said in one line
                return self._problem(f"a pickle, {size} bytes, that does not unpickle here: "
                                     f"{type(exc).__name__}: {_one_line(str(exc))}")
        try:
            return Shown(json.dumps(json.loads(body), ensure_ascii=False))
        except ValueError:
            stored = f" (the queue's serializer is {self.recorded})" if self.recorded else ""
            return self._problem(f"not JSON{stored}, {size} bytes: {_preview(body)}")

    @staticmethod
    def _problem(why: str) -> Shown:
        return Shown(f"<{why}>", why)


class Writer:
    """The serializer ``put`` writes with: ``serializer`` ('json', 'bytes', 'pickle'), signed
    with ``keys`` for ``context`` (the queue's base key) if there are any; named as a queue
    records what it writes (so that one ``put --create`` makes records it). The handle is
    given the value itself: a priority queue orders by the value, not by its bytes."""

    def __init__(self, serializer: str, keys: tuple[bytes, ...], context: str) -> None:
        self.name = written_name(serializer, keys)
        self._inner = serializers.resolve(serializer)
        self._signer = Signer(keys, context) if keys else None

    def dumps(self, obj: Any) -> bytes:
        body = serializers.dumps(self._inner, obj)
        return self._signer.sign(body) if self._signer is not None else body

    def loads(self, data: bytes) -> Any:
        return data  # (put reads nothing)


def written_name(serializer: str, keys: tuple[bytes, ...]) -> str:
    """The name of what ``put`` writes with ``serializer`` and ``keys``, as a queue records it."""
    return f"signed {serializer}" if keys else serializer


def _family(name: str) -> str:
    """Names of serializers that read each other's items alike ('orjson' writes what 'json' does)."""
    inner = name.removeprefix("signed ")
    return ("signed " if name.startswith("signed ") else "") + ("json" if inner == "orjson" else inner)


def refusal(name: str, recorded: str | None, writes: str) -> str | None:
    """Why ``put`` must not write ``writes`` items into queue ``name`` whose recorded serializer
    is ``recorded`` (None: unknown, anything goes); None if it may."""
    if recorded is None or _family(recorded) == _family(writes):
        return None
    inner = recorded.removeprefix("signed ")
    if recorded.startswith("signed ") and not writes.startswith("signed "):
        how = "set PRESSURE_AUTHKEY or pass --authkey-file (its items are signed)"
    elif writes.startswith("signed ") and not recorded.startswith("signed "):
        how = "unset PRESSURE_AUTHKEY and drop --authkey-file (its items are not signed)"
    elif inner in ("json", "orjson", "bytes", "pickle"):
        how = f"pass --serializer {'json' if inner == 'orjson' else inner}"
    else:
        how = "this command cannot write such items"
    return (f"queue {name!r} was created with the {recorded} serializer, and this would put a "
            f"{writes} item its consumers cannot read: nothing was put; {how}")


def make_item(text: bytes, serializer: str) -> Any:
    """The value ``put`` stores for ITEM ``text``: its JSON value ('json', 'pickle'), or the bytes."""
    if serializer == "bytes":
        return text
    return json.loads(text)
