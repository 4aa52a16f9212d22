"""Signed payloads: an HMAC on every item, checked before it is deserialized.

The default serializer is pickle, so anyone who can write a queue's keys could otherwise run
code in every process that reads them. With an authkey (``authkey=`` or ``PRESSURE_AUTHKEY``)
every payload pressure writes is ``MAGIC + key id + tag + body``:

* ``MAGIC``: the 4 bytes ``b"\\xffPS1"`` (no pickle, JSON or UTF-8 text starts with 0xff);
* key id: the first 8 bytes of ``SHA-256(b"pressure key id\\0" + key)``, which key signed it;
* tag: ``HMAC-SHA256(key, len(context) as 4 bytes big-endian + context + body)``, where the
  context is the queue's base key (``<prefix>:<name>``, ``<prefix>:lifo:<name>``...), so an
  item signed for one queue does not verify on another;
* body: what the serializer made.

A reader checks the tag (``hmac.compare_digest``) before the body reaches the serializer: an
unsigned, truncated or forged item, or one signed for another queue or with a key the reader
does not hold, raises ``IntegrityError`` and never reaches ``pickle.loads``. Keys rotate: a
handle signs with its first key and accepts any of them.

A foreign client produces a signed item by computing the same bytes (HMAC-SHA256 is in every
language's standard library); without an authkey the payload is the serializer's bytes
unchanged, which is what spec clients read and write.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, NoReturn

from . import _log
from .errors import IntegrityError, UnsignedPickle
from .serializers import PickleSerializer

__all__ = ["MAGIC", "MIN_KEY_BYTES", "Signer", "SignedSerializer", "resolve_authkey", "key_id",
           "is_local", "local_hosts", "insecure_pickle_allowed", "refuse_unsigned_pickle", "payload_serializer",
           "recorded_name"]

_warned: set[str] = set()
_warned_lock = threading.Lock()

MAGIC = b"\xffPS1"
#: The shortest key accepted (HMAC-SHA256 keys shorter than this are guessable).
MIN_KEY_BYTES = 16
_ID_BYTES = 8
_TAG_BYTES = 32
_HEAD = len(MAGIC) + _ID_BYTES + _TAG_BYTES

Authkey = bytes | str | Sequence[bytes | str]


def key_id(key: bytes) -> bytes:
    """The 8 bytes naming ``key`` in a signed payload (not a secret: a hash of it)."""
    return hashlib.sha256(b"pressure key id\0" + key).digest()[:_ID_BYTES]


def _key(value: object, where: str) -> bytes:
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{where} must be bytes or str, not {type(value).__name__}")
    if len(value) < MIN_KEY_BYTES:
        raise ValueError(f"{where} must be at least {MIN_KEY_BYTES} bytes long, not {len(value)} "
                         f"(e.g. os.urandom(32).hex())")
    return bytes(value)


def resolve_authkey(authkey: Authkey | None) -> tuple[bytes, ...]:
    """The keys to sign and verify with, first one signing: ``authkey`` (one key, or a list for
    rotation), else ``PRESSURE_AUTHKEY`` (keys separated by commas), else none. With
    ``PRESSURE_REQUIRE_AUTHKEY=1`` in the environment, having none raises ``ValueError``."""
    if authkey is None:
        env = os.environ.get("PRESSURE_AUTHKEY", "")
        keys = tuple(_key(k.strip(), "each key in PRESSURE_AUTHKEY") for k in env.split(",") if k.strip())
    elif isinstance(authkey, (bytes, bytearray, str)):
        keys = (_key(authkey, "authkey"),)
    elif isinstance(authkey, Sequence):
        keys = tuple(_key(k, "each authkey") for k in authkey)
        if not keys:
            raise ValueError("authkey must name at least one key")
    else:
        raise TypeError(f"authkey must be bytes, str or a list of them, not {type(authkey).__name__}")
    if not keys and os.environ.get("PRESSURE_REQUIRE_AUTHKEY", "") not in ("", "0"):
        raise ValueError("PRESSURE_REQUIRE_AUTHKEY is set, but no authkey was given "
                         "(pass authkey=, or set PRESSURE_AUTHKEY)")
    return keys


#: ``PRESSURE_LOCAL_HOSTS``'s word for the loopback addresses and ``localhost``, its default.
_LOOPBACK = "loopback"


def _local_host(host: str, entries: Sequence[str]) -> bool:
    """Whether ``host`` (a name or an address, as a URL gives it) is one of ``entries``: host
    names, addresses, networks (``10.1.2.0/24``) or ``loopback``."""
    host = host.strip("[]").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in entries:
        if entry == _LOOPBACK:
            if host == "localhost" or (address is not None and address.is_loopback):
                return True
            continue
        try:
            network = ipaddress.ip_network(entry.strip("[]"), strict=False)  # an address, or a network
        except ValueError:
            if host == entry:  # a host name
                return True
            continue
        if address is not None and address.version == network.version and address in network:
            return True
    return False


def local_hosts() -> tuple[str, ...]:
    """What counts as this host: ``PRESSURE_LOCAL_HOSTS`` (host names, addresses or networks,
    separated by commas; ``loopback`` for 127.0.0.0/8, ::1 and localhost; ``none`` for nothing
    but unix sockets), else ``loopback``."""
    raw = os.environ.get("PRESSURE_LOCAL_HOSTS")
    if raw is None:
        return (_LOOPBACK,)
    return tuple(e for e in (part.strip().lower() for part in raw.split(",")) if e and e != "none")


def is_local(config: Any) -> bool:
    """Whether every server ``config`` (a ConnectionConfig) names is on this host (see
    ``local_hosts``): a unix socket, or a host (the sentinels of a Sentinel URL, the nodes of a
    Cluster's) that counts as this one, or fakeredis's server in this process. Nothing is sent:
    only the names are looked at."""
    kwargs = dict(config.kwargs)
    if "path" in kwargs:
        return True  # a unix socket
    if config.connection_class.__module__.partition(".")[0] == "fakeredis":
        return True  # a server inside this process (its "host" is a random name)
    sentinel, cluster = getattr(config, "sentinel", None), getattr(config, "cluster", None)
    if sentinel is not None:
        hosts = [h for h, _ in sentinel.addresses] + ([sentinel.force_master_ip] if sentinel.force_master_ip else [])
    elif cluster is not None:
        hosts = [h for h, _ in cluster.addresses]
    else:
        hosts = [str(kwargs.get("host", "localhost"))]
    entries = local_hosts()
    return all(_local_host(h, entries) for h in hosts)


def insecure_pickle_allowed(insecure_pickle: bool) -> bool:
    """Whether unsigned pickle from another host is allowed: ``insecure_pickle=True``, or
    ``PRESSURE_INSECURE_PICKLE`` set (to anything but 0)."""
    return bool(insecure_pickle) or os.environ.get("PRESSURE_INSECURE_PICKLE", "") not in ("", "0")


def refuse_unsigned_pickle(config: Any, insecure_pickle: bool, what: str, *, data_only: bool = True) -> None:
    """For ``what`` (a handle about to unpickle items with no authkey): nothing if ``config``
    names servers on this host only (``is_local``); else ``UnsignedPickle`` (raised before
    anything is sent), unless allowed (``insecure_pickle_allowed``: then a WARNING once per
    server and process, as Celery warns of pickle). ``data_only``: the error offers a data-only
    serializer (a queue's choice, not an Executor's)."""
    if is_local(config):
        return
    if not insecure_pickle_allowed(insecure_pickle):
        serializer = ", choose a data-only serializer ('json', 'orjson', 'msgpack', 'bytes')" if data_only else ""
        raise UnsignedPickle(
            f"{what} on {config.url} would unpickle unsigned items from a server that is not on this "
            f"host, and whoever can write its keys could run code in this process: set PRESSURE_AUTHKEY "
            f"(or pass authkey=) to the same key on every host (python -m pressure keygen makes one)"
            f"{serializer}, or opt out with insecure_pickle=True or PRESSURE_INSECURE_PICKLE=1")
    with _warned_lock:
        if config.url in _warned:
            return
        _warned.add(config.url)
    _log.event(_log.SECURITY, logging.WARNING, "unsigned_pickle", "queues on %s use the pickle serializer "
               "without an authkey (insecure_pickle): whoever can write their keys can run code in this "
               "process. Set PRESSURE_AUTHKEY on every host, or use a data-only serializer ('json', "
               "'orjson', 'msgpack', 'bytes')", config.url, server=config.url)


def payload_serializer(serializer: Any, keys: tuple[bytes, ...], context: str, config: Any,
                       insecure_pickle: bool, what: str) -> Any:
    """The serializer a queue handle uses: ``serializer`` signed with ``keys`` for ``context``
    (its base key), or, with no keys, ``serializer`` itself once ``refuse_unsigned_pickle``
    lets a pickle one through."""
    if keys:  # every payload signed for this queue, and verified before it is loaded
        return SignedSerializer(serializer, Signer(keys, context))
    if isinstance(serializer, PickleSerializer):
        refuse_unsigned_pickle(config, insecure_pickle, what)
    return serializer


#: The longest serializer name a queue records (a custom serializer's ``name`` may be anything).
_MAX_NAME = 64


def recorded_name(serializer: Any) -> str:
    """The name a queue records for ``serializer`` when it creates the queue (lua/create.lua):
    its ``name`` attribute ('pickle', 'json', 'orjson', 'msgpack', 'bytes', a custom
    serializer's own), ``'signed '`` before it when payloads are signed; '' (nothing recorded:
    unknown) for a serializer without a name, or with one that is not a short line of text."""
    signed = isinstance(serializer, SignedSerializer)
    name = getattr(serializer.inner if signed else serializer, "name", None)
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME or not name.isprintable():
        return ""
    return f"signed {name}" if signed else name


class Signer:
    """Signs and verifies payloads for one context (a queue's base key) with ``keys``."""

    __slots__ = ("_keys", "_context", "_prefix", "_sign_head", "_sign_key")

    def __init__(self, keys: Sequence[bytes], context: str) -> None:
        if not keys:
            raise ValueError("a Signer needs at least one key")
        self._keys = {key_id(k): k for k in reversed(keys)}  # the first key wins an id clash
        self._context = context
        c = context.encode()
        self._prefix = len(c).to_bytes(4, "big") + c
        first = keys[0]
        self._sign_head = MAGIC + key_id(first)
        self._sign_key = first

    def _tag(self, key: bytes, body: bytes) -> bytes:
        h = hmac.new(key, self._prefix, hashlib.sha256)
        h.update(body)
        return h.digest()

    def sign(self, body: bytes) -> bytes:
        return self._sign_head + self._tag(self._sign_key, body) + body

    def verify(self, data: bytes) -> bytes:
        """The body of a payload signed for this context with one of the keys, else IntegrityError
        (carrying the payload)."""
        if not data.startswith(MAGIC):
            self._refuse("it is not signed", data)
        if len(data) < _HEAD:
            self._refuse(f"its signature is truncated ({len(data)} bytes)", data)
        key = self._keys.get(data[len(MAGIC):len(MAGIC) + _ID_BYTES])
        if key is None:
            self._refuse("it is signed with a key this handle does not hold", data)
        body = data[_HEAD:]
        if not hmac.compare_digest(data[len(MAGIC) + _ID_BYTES:_HEAD], self._tag(key, body)):
            self._refuse("its signature does not match (forged, altered, or signed for another queue)", data)
        return body

    def _refuse(self, why: str, data: bytes) -> NoReturn:
        raise IntegrityError(f"refused a {len(data)}-byte item of {self._context!r}: {why}", data)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Signer holds secret keys and is not pickled: the other side reads "
                        "its own (authkey=, PRESSURE_AUTHKEY)")


class SignedSerializer:
    """``inner`` with every payload signed by ``signer`` and verified before ``inner`` loads it."""

    __slots__ = ("inner", "signer")

    def __init__(self, inner: Any, signer: Signer) -> None:
        self.inner = inner
        self.signer = signer

    @property
    def name(self) -> str:
        return f"signed {getattr(self.inner, 'name', type(self.inner).__name__)}"

    def dumps(self, obj: Any) -> bytes:
        data = self.inner.dumps(obj)
        if not isinstance(data, bytes):
            data = bytes(data)
        return self.signer.sign(data)

    def loads(self, data: bytes) -> Any:
        return self.inner.loads(self.signer.verify(data))

    def __reduce__(self) -> NoReturn:
        self.signer.__reduce__()
