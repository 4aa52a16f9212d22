"""Where the queue's Redis is, and one process's connection to it.

``ConnectionConfig`` (pressure/config.py, importable from here too) is a
picklable description of the server (so a queue handle can cross to another
process or host); ``Backend`` turns it into
connections once per process (and thread), runs the Lua scripts with EVALSHA
(loading them on NOSCRIPT), and turns redis-py errors into pressure's typed
errors.

Our own clients never retry a command by themselves: redis-py 8 retries on
timeouts by default, and re-sending a script whose reply was lost would
push an item twice. A client passed in as ``connection`` keeps its own
settings; give it ``retry=Retry(NoBackoff(), 0)`` for the same guarantee.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import redis

from . import identity
# commands encoded in RESP: their own module, every name importable from here as before
from ._packing import _LARGE as _LARGE
from ._packing import PackedScript as PackedScript
from ._packing import _bulk as _bulk
from ._packing import _bulk_name as _bulk_name
from ._packing import _script_sha as _script_sha
from ._packing import _script_source as _script_source
from ._packing import pack_command as pack_command
from .durability import Durability
# where the server is: its own module, every name importable from here as before
from .config import PASSWORD_ENV as PASSWORD_ENV
from .config import SOCKET_CONNECT_TIMEOUT as SOCKET_CONNECT_TIMEOUT
from .config import SOCKET_TIMEOUT as SOCKET_TIMEOUT
from .config import ConnectionConfig as ConnectionConfig
from .config import without_password as without_password
from .errors import (
    AuthenticationError,
    BackendError,
    ItemTooLarge,
    NotReplicated,
    OutcomeUnknown,
    PermissionDenied,
    PressureError,
    ProtocolError,
    TLSError,
)

__all__ = ["ConnectionConfig", "Backend", "PackedScript", "refused_for_now"]

_R = TypeVar("_R")

#: The longest single server-side wait; blocking calls loop over such waits,
#: re-checking their deadline, so no wait is ever "0 = forever".
BLOCK_SLICE = 1.0
#: The pauses between sends of a command the server refused for now (LOADING, BUSY...).
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 0.25
#: Redis's default ``proto-max-bulk-len``, assumed where CONFIG GET is refused.
DEFAULT_BULK_LIMIT = 512 * 1024 * 1024
#: The smallest ``proto-max-bulk-len`` Redis accepts: a shorter argument never needs the check.
SMALLEST_BULK_LIMIT = 1024 * 1024

#: send() flag that holds a small command in the kernel until the next one (Linux)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)


def _pending(conn: redis.connection.AbstractConnection) -> bytes | None:
    """What waits to be read on this connection's socket, without reading it: None if
    nothing (or no socket, or an in-process fake), b"" if the server has closed it (a
    pending EOF), else the first byte of a reply not read yet.

    A zero-timeout poll first (a socket with a timeout would otherwise wait that long
    inside recv), then a peek: nothing is read, and a healthy idle connection has
    nothing to read.
    """
    sock = getattr(conn, "_sock", None)
    if not isinstance(sock, socket.socket):
        return None
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return None
        return bytes(sock.recv(1, socket.MSG_PEEK))
    except OSError:
        return b""


class _ThreadState(threading.local):
    pid = -1
    connection: redis.connection.AbstractConnection | None = None
    client_id: str | None = None
    #: replies of commands sent by ``Backend.post`` still to read on ``connection``
    unread = 0


#: The error codes of replies that refuse a command for now (see refused_for_now).
_FOR_NOW = ("LOADING ", "BUSY ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN ", "NOREPLICAS ", "READONLY ")


class _RetryLater(Exception):
    """A command the server refused for now (see ``refused_for_now``): it did not run."""

    def __init__(self, error: redis.RedisError) -> None:
        super().__init__(error)
        self.error = error


def refused_for_now(error: object) -> bool:
    """Whether ``error`` is a reply refusing a command for now: the server is loading its data
    (LOADING), running a long script (BUSY), a replica cut off from its master (MASTERDOWN),
    a cluster in flux (TRYAGAIN, CLUSTERDOWN), short of replicas (NOREPLICAS) or a replica
    now, e.g. a master demoted by a failover (READONLY: a replica accepts no write, so a
    script refused so wrote nothing). The command did not run, and may run if sent again
    (through Sentinel, on the master the sentinels name then)."""
    if isinstance(error, (redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError,
                          redis.exceptions.ClusterDownError, redis.exceptions.ReadOnlyError)):
        return True
    if isinstance(error, redis.ConnectionError) and isinstance(error.__context__, redis.exceptions.ReadOnlyError):
        return True  # a Sentinel-managed connection's READONLY: it dropped the connection
    if not isinstance(error, redis.ResponseError):
        return False
    text = str(error)
    # redis-py prefixes a pipeline's error with the command's number; EXECABORT names the reason
    for prefix in ("caused error: ", "because of: "):
        text = text.rpartition(prefix)[2]
    return text.startswith(_FOR_NOW)



def _new_connection(pool: redis.ConnectionPool) -> redis.connection.AbstractConnection:
    """A new connection made as ``pool`` makes its own (its class, with its options: for a
    Sentinel pool, a connection that asks the sentinels for the master as it connects), but
    not counted against the pool's ``max_connections``: it is never handed back to the pool."""
    return pool.connection_class(**pool.connection_kwargs)  # type: ignore[no-any-return]


def _tls_hint(text: str) -> str | None:
    """What a failed TLS handshake's error means, or None if it is not one."""
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return ("this client does not trust the server's certificate (is ssl_ca_certs the CA that signed "
                "it, and does it name the URL's host?)")
    if "CERTIFICATE_REQUIRED" in text or "EOF occurred in violation of protocol" in text or "UNKNOWN_CA" in text:
        return ("the server refused this client: it requires a client certificate signed by a CA it trusts "
                "(ssl_certfile and ssl_keyfile in the URL)")
    if "SSL" in text or "TLS" in text:
        return "see the error"
    return None


def _dropped_with(error: object) -> bool:
    """Whether redis-py dropped the connection on reading the error reply ``error`` (it does so
    for the replies it maps to a ConnectionError), losing any replies pipelined after it."""
    return isinstance(error, redis.ConnectionError)


class Backend:
    """One process's connections to one server: a redis-py client (and its pool) for
    occasional commands, and one connection per thread for the hot paths (no pool lock).

    A forked child notices the pid change and builds its own, so no socket is
    ever shared across processes. A client passed in by the user is used as is
    (its settings also make the per-thread connections) and never closed.

    A command the server refuses for now (``refused_for_now``: it did not run) is
    sent again, with backoff, for up to ``refused_for`` seconds (the socket timeout:
    as long as a server that does not answer is given), and then raises BackendError.
    """

    def __init__(self, config: ConnectionConfig, client: redis.Redis | None = None) -> None:
        self.config = config
        self._given = client
        self._given_pid = os.getpid()
        self._lock = threading.Lock()
        self._pid = -1
        self._client: redis.Redis | None = None
        self._loaded: set[str] = set()
        self._thread = _ThreadState()
        self._thread_connections: weakref.WeakSet[redis.connection.AbstractConnection] = weakref.WeakSet()
        self.slice = BLOCK_SLICE
        self.refused_for = SOCKET_TIMEOUT
        self._bulk_limit: int | None = None

    def client(self) -> redis.Redis:
        """The client for this process (built on first use, and again after a fork)."""
        client = self._client
        if client is None or self._pid != os.getpid():
            client = self._connect()
        return client

    def _connect(self) -> redis.Redis:
        with self._lock:
            pid = os.getpid()
            if self._client is not None and self._pid == pid:
                return self._client
            if self._given is not None and pid == self._given_pid:
                client = self._given
            else:
                client = self.config.new_client()
            timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
            # a blocking command must end on the server before the socket gives up,
            # or its reply (maybe a popped token or item) is lost
            self.slice = BLOCK_SLICE if not timeout else min(BLOCK_SLICE, float(timeout) / 2)
            self.refused_for = float(timeout) if timeout else SOCKET_TIMEOUT
            self._loaded = set()
            self._client, self._pid = client, pid
            return client

    def _until_served(self, what: str, attempt: Callable[[], _R]) -> _R:
        """``attempt()``, again after a pause each time the server refuses it for now, for up
        to ``refused_for`` seconds; then BackendError saying it did not run."""
        deadline = None
        pause = _FIRST_PAUSE
        while True:
            try:
                return attempt()
            except _RetryLater as later:
                if self.config.sentinel is not None:
                    self._rediscover()
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.refused_for
                if now >= deadline:
                    raise BackendError(f"{what} on {self.config.url} did not run: the server refused it "
                                       f"for {self.refused_for:g} s: {later.error}") from later.error
                time.sleep(min(pause, deadline - now))
                pause = min(2 * pause, _LAST_PAUSE)

    def _rediscover(self) -> None:
        """Through Sentinel, a refusal may come from a server that is no master any more: the
        next command asks the sentinels again, on fresh connections."""
        conn = self._thread.connection
        if conn is not None and self._thread.pid == os.getpid():
            conn.disconnect()
            self._forget_unread(conn)
        client = self._client
        if client is not None and self._pid == os.getpid():
            client.connection_pool.disconnect(inuse_connections=False)

    def _check(self, reply: Any, what: str, mutating: bool) -> Any:
        """A reply, or its error raised as pressure's (_RetryLater if refused for now)."""
        if isinstance(reply, redis.RedisError):
            if refused_for_now(reply):
                raise _RetryLater(reply)
            self.raise_error(reply, what, mutating)
        return reply

    def run(self, name: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
            *, mutating: bool = True) -> Any:
        """Run one script with EVALSHA (loaded on NOSCRIPT) on a connection of the client's
        pool (not this thread's: a finalizer may run this between a send and its read on
        it), translating errors."""
        what = f"script {name}"

        def attempt() -> Any:
            pool = self.client().connection_pool
            conn = self._pool_connection(pool, what)
            try:
                data = conn.pack_command("EVALSHA", _script_sha(name), len(keys), *keys, *args)
                return self._call_script(conn, name, data, what, mutating)
            except BaseException as exc:
                if not isinstance(exc, (PressureError, _RetryLater)):
                    conn.disconnect()  # e.g. interrupted between the send and the read
                raise
            finally:
                pool.release(conn)

        return self._until_served(what, attempt)

    def _pool_connection(self, pool: redis.ConnectionPool, what: str) -> Any:
        """A connected connection of ``pool``: a failure here is before anything was sent."""
        try:
            try:
                return pool.get_connection()
            except TypeError:  # redis-py < 5.3 wants a command name
                return pool.get_connection("EVALSHA")
        except (redis.exceptions.AuthenticationError, redis.exceptions.BusyLoadingError) as exc:
            self._check(exc, what, False)  # refused while connecting (AUTH, HELLO...)
            raise  # not reached
        except redis.RedisError as exc:
            self._raise_unsent(exc, what, True)

    def thread_connection(self) -> redis.connection.AbstractConnection:
        """This thread's own connection: the hot path takes no pool lock."""
        state = self._thread
        conn = state.connection
        if conn is None or state.pid != os.getpid():
            conn = _new_connection(self.client().connection_pool)
            self._thread_connections.add(conn)
            state.connection, state.pid = conn, os.getpid()
        return conn

    def thread_client_id(self) -> str:
        """The default client identifier of the calling thread (cached per thread and process)."""
        state = self._thread
        if state.client_id is None or state.pid != os.getpid():
            self.thread_connection()
            state.client_id = identity.client_id()
        return state.client_id

    def _send(self, conn: redis.connection.AbstractConnection, data: list[bytes], what: str) -> None:
        """Send a whole command. If sending fails, the server never got all of it, so it never
        ran: on a stale connection (a restarted server, a killed connection) try once more on
        a fresh one; any failure is a BackendError, never OutcomeUnknown."""
        pending = _pending(conn)
        if pending and self._unread_on(conn):  # replies of posted commands: read them now,
            try:                               # so that a close behind them is seen
                self._drop_unread(conn)
            except redis.ConnectionError:
                pass  # redis-py dropped the connection: the send below connects again
            pending = _pending(conn)
        if pending == b"":
            conn.disconnect()  # e.g. the server restarted: reconnect rather than send into it
            self._loaded.clear()  # and a restarted server has no scripts loaded
        for last in (False, True):
            connecting = getattr(conn, "_sock", None) is None
            if connecting:
                self._forget_unread(conn)  # a new connection: replies not read went with the old one
            try:
                if connecting:
                    # connect() as redis-py's own client does: send_packed_command would connect
                    # to the connection's host and port, skipping what a subclass does there
                    # (a Sentinel-managed connection asks the sentinels for the master's address)
                    conn.connect()
                conn.send_packed_command(data, check_health=False)
                break
            except (redis.exceptions.AuthenticationError, redis.exceptions.BusyLoadingError) as exc:
                self._forget_unread(conn)
                self._check(exc, what, False)  # refused while connecting (AUTH, HELLO...)
            except redis.ConnectionError as exc:
                self._forget_unread(conn)  # redis-py closed it: the next send connects again
                if last:
                    self._raise_unsent(exc, what, connecting)
            except redis.RedisError as exc:  # a timeout writing to an unresponsive server
                self._forget_unread(conn)
                self._raise_unsent(exc, what, connecting)

    def _raise_unsent(self, exc: redis.RedisError, what: str, connecting: bool) -> NoReturn:
        """A command that could not be sent: it did not run (a hint if the handshake failed)."""
        text = str(exc)
        tls = issubclass(self.config.connection_class, redis.SSLConnection)
        if connecting and not tls and ("reset by peer" in text or "closed by server" in text):
            text += (" (the server closed the connection at once: is it a Redis server? If that port "
                     "speaks TLS, use a rediss:// URL)")
        if connecting and self.config.origin:
            text += f" (this server was chosen by {self.config.origin})"
        if connecting and tls:
            hint = _tls_hint(text)
            if hint:
                raise TLSError(f"{what} on {self.config.url} did not run: the TLS handshake failed: {hint}: "
                               f"{text}") from exc
        raise BackendError(f"{what} on {self.config.url} did not run: could not send it: {text}") from exc

    def _unread_on(self, conn: redis.connection.AbstractConnection) -> int:
        """How many replies of posted commands wait on ``conn``: only this thread's own
        connection carries posted commands (a pool connection, as ``run`` uses, never does)."""
        state = self._thread
        return state.unread if conn is state.connection else 0

    def _forget_unread(self, conn: redis.connection.AbstractConnection) -> None:
        """``conn`` was (re)connected or failed: the replies of posted commands went with it."""
        if conn is self._thread.connection:
            self._thread.unread = 0

    def _drop_unread(self, conn: redis.connection.AbstractConnection) -> None:
        """Read and drop the replies of commands ``post`` sent on ``conn``. If the connection
        fails meanwhile, raise ConnectionError: a command sent behind them lost its reply."""
        if not self._unread_on(conn):
            return
        state = self._thread
        while state.unread:
            state.unread -= 1
            try:
                conn.read_response()
            except redis.ResponseError:
                pass
            except redis.RedisError as exc:  # redis-py dropped the connection
                state.unread = 0
                raise redis.ConnectionError(f"connection lost reading a posted command's reply: {exc}") from exc

    def post(self, command: bytes) -> None:
        """Send ``command`` (packed, see ``pack_command``) on this thread's connection without
        waiting for its reply (it is read, and dropped, behind the next command's): no round
        trip, for a command nothing waits on. If it cannot be sent, it did not run; that is
        not an error here.

        On TCP it goes with MSG_MORE: the kernel holds it until this connection's next
        command (one packet and one wake-up of the server for both), for at most 200 ms, or
        until the socket closes - also when the process is killed."""
        conn = self.thread_connection()
        sock = getattr(conn, "_sock", None)
        if (not _MSG_MORE or not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket)
                or sock.family not in (socket.AF_INET, socket.AF_INET6)):
            try:
                self._send(conn, [command], "a posted command")
            except (BackendError, _RetryLater):  # it did not run: the next get drops the lists
                return
            self._thread.unread += 1
            return
        try:
            sent = sock.send(command, _MSG_MORE)
            if sent < len(command):
                sock.sendall(command[sent:])
        except OSError:
            conn.disconnect()  # it did not run (or half of it went: the connection is useless)
            self._thread.unread = 0
            return
        self._thread.unread += 1

    def _read(self, conn: redis.connection.AbstractConnection, what: str, mutating: bool) -> Any:
        """Read one reply; an error reply is returned as the exception, not raised. A failure
        to read raises (OutcomeUnknown if ``mutating``)."""
        try:
            self._drop_unread(conn)  # posted earlier: their replies come before this command's
            reply = conn.read_response()
        except (redis.ResponseError, redis.exceptions.AuthenticationError,
                redis.exceptions.BusyLoadingError) as exc:
            # an error reply (redis-py raises these, and drops the connection on the last two)
            reply = exc
        except redis.RedisError as exc:
            if not refused_for_now(exc):
                self.raise_error(exc, what, mutating)
            reply = exc  # a Sentinel-managed connection's READONLY: it did not run
        if isinstance(reply, redis.ResponseError) and str(reply).startswith("Protocol error"):
            conn.disconnect()  # the server closes the connection after it
        return reply

    def _call_script(self, conn: redis.connection.AbstractConnection, name: str, data: list[bytes],
                     what: str, mutating: bool) -> Any:
        """Send a script call and read its reply, loading the script on NOSCRIPT."""
        self._send(conn, data, what)
        reply = self._read(conn, what, mutating)
        if isinstance(reply, redis.exceptions.NoScriptError):
            self._load_on(conn, name)
            self._send(conn, data, what)
            reply = self._read(conn, what, mutating)
        return self._check(reply, what, mutating)

    def script(self, command: PackedScript, tail: Sequence[bytes | str | int], *,
               mutating: bool = True, items: Sequence[bytes] = (),
               durability: Durability | None = None) -> Any:
        """Run a packed script on this thread's connection (one round trip), loading it on
        NOSCRIPT. ``items``: more arguments after the usual ones (PackedScript.pack_items).
        With ``durability``, a WAIT goes in the same send: NotReplicated if too few replicas
        confirmed the script's writes in time."""
        conn = self.thread_connection()
        data = command.pack_items(tail, items) if items else [command.pack(tail)]
        what = f"script {command.name}"
        if durability is not None:
            data.append(pack_command("WAIT", durability.replicas, durability.timeout_ms))
            return self._until_served(
                what, lambda: self._call_durable(conn, command.name, data, what, durability))
        return self._until_served(what, lambda: self._call_script(conn, command.name, data, what, mutating))

    def _call_durable(self, conn: redis.connection.AbstractConnection, name: str, data: list[bytes],
                      what: str, durability: Durability) -> Any:
        """Send a script call and a WAIT behind it; read both (loading the script on NOSCRIPT).
        The script's error is raised as ``_call_script`` would; then NotReplicated if the WAIT
        counted fewer replicas than ``durability`` asks."""
        def once() -> tuple[Any, Any]:
            self._send(conn, data, what)
            reply = self._read(conn, what, True)
            if _dropped_with(reply):  # READONLY through Sentinel: the WAIT's reply went with it
                return reply, None
            return reply, self._read(conn, f"WAIT after {what}", True)

        reply, confirmed = once()
        if isinstance(reply, redis.exceptions.NoScriptError):
            self._load_on(conn, name)
            reply, confirmed = once()
        result = self._check(reply, what, True)
        if isinstance(confirmed, redis.RedisError):  # e.g. WAIT refused by a proxy
            raise NotReplicated(f"{what} on {self.config.url} ran, but WAIT failed: {confirmed}",
                                0, durability.replicas) from confirmed
        if not isinstance(confirmed, int) or confirmed < durability.replicas:
            if self.config.sentinel is not None:
                self._rediscover()  # a master cut off by a failover: the next call asks again
            raise NotReplicated(
                f"{what} on {self.config.url} ran, but {confirmed} replica(s) of the "
                f"{durability.replicas} asked confirmed it within {durability.timeout:g} s: it is "
                f"lost if the master fails before a replica has it", int(confirmed or 0),
                durability.replicas)
        return result

    def pipeline(self, calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]]) -> list[Any]:
        """Run several packed scripts in one round trip on this thread's connection, in order.

        Returns one reply per call; a script's error reply is returned as the exception
        object (the others still ran). Scripts not loaded on the server are loaded first,
        and calls refused with NOSCRIPT (they did not run: a restarted or flushed server)
        are sent again once their scripts are loaded; so are all the calls when the server
        refused every one for now (see ``refused_for_now``). A reply lost with a connection
        that redis-py dropped on an earlier error reply is a ConnectionError: that call may
        or may not have run.
        """
        conn = self.thread_connection()
        what = "pipelined scripts " + ", ".join(command.name for command, _ in calls)

        def attempt() -> list[Any]:
            for command, _ in calls:
                if command.name not in self._loaded:
                    self._load_on(conn, command.name)
            replies = self._pipeline_once(conn, calls, what)
            if replies and all(map(refused_for_now, replies)):
                raise _RetryLater(replies[0])
            missing = [i for i, reply in enumerate(replies)
                       if isinstance(reply, redis.exceptions.NoScriptError)]
            if missing:
                self._loaded.clear()
                for name in {calls[i][0].name for i in missing}:
                    self._load_on(conn, name)
                again = self._pipeline_once(conn, [calls[i] for i in missing], what)
                for i, reply in zip(missing, again):
                    replies[i] = reply
            return replies

        return self._until_served(what, attempt)

    def _pipeline_once(self, conn: redis.connection.AbstractConnection,
                       calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]], what: str) -> list[Any]:
        self._send(conn, [b"".join(command.pack(tail) for command, tail in calls)], what)
        replies: list[Any] = []
        for _ in calls:
            if replies and refused_for_now(replies[-1]) and _dropped_with(replies[-1]):
                replies.append(replies[-1])  # READONLY: the calls behind it met the same replica
            elif replies and _dropped_with(replies[-1]):
                replies.append(redis.ConnectionError(
                    f"reply lost: the connection was dropped on the error reply before it ({replies[-1]})"))
            else:
                replies.append(self._read(conn, what, True))
        return replies

    def script_then_blmove(self, command: PackedScript, tail: Sequence[bytes | str | int],
                           source: str, destination: str, timeout: float,
                           then: Sequence[bytes | str | int] | None = None) -> tuple[Any, Any, Any]:
        """Send a script, ``BLMOVE source destination RIGHT LEFT timeout`` and, with
        ``then``, the same script again with the tail ``then``, in one pipeline (one
        round trip) on this thread's connection: the second call runs as soon as the
        BLMOVE returns.

        Returns ``(script result, BLMOVE reply, second script result or None)``; a script
        error reply is returned as the exception object, after the others have answered.
        The script must leave something in ``source`` unless the caller is meant to wait
        there, or the BLMOVE waits ``timeout``. Used for the blocking get. A BLMOVE the
        server refused for now, or whose reply was lost with a connection redis-py dropped
        on the script's error reply (LOADING), gives None (and so does a second script
        call lost that way): the caller must then take back what the BLMOVE may have
        moved (get.lua 'cancel') before it gets again.
        """
        conn = self.thread_connection()
        data = [command.pack(tail) + b"*6\r\n$6\r\nBLMOVE\r\n" + _bulk(source) + _bulk(destination)
                + b"$5\r\nRIGHT\r\n$4\r\nLEFT\r\n" + _bulk(repr(timeout))
                + (b"" if then is None else command.pack(then))]
        what = f"script {command.name} and BLMOVE"

        def load() -> None:
            if command.name not in self._loaded:  # a NOSCRIPT here would cost a whole BLMOVE wait
                self._load_on(conn, command.name)

        self._until_served(what, load)
        self._send(conn, data, what)
        first = self._read(conn, what, True)
        # a reply redis-py dropped the connection on (LOADING) loses the replies behind it
        second = None if _dropped_with(first) else self._read(conn, what, True)
        third = None
        if then is not None and not _dropped_with(first) and not _dropped_with(second):
            third = self._read(conn, what, True)
        if isinstance(first, redis.exceptions.NoScriptError):
            self._loaded.discard(command.name)
        if refused_for_now(second):
            second = None
        elif isinstance(second, redis.RedisError):  # the BLMOVE itself failed (a wrong type)
            self.raise_error(second, f"BLMOVE after script {command.name}", True)
        return first, second, third

    def _load_on(self, conn: redis.connection.AbstractConnection, name: str) -> None:
        what = f"SCRIPT LOAD {name}"
        self._send(conn, [b"".join(conn.pack_command("SCRIPT", "LOAD", _script_source(name)))], what)
        if self._check(self._read(conn, what, False), what, False) not in (_script_sha(name),
                                                                         _script_sha(name).encode()):
            raise ProtocolError(f"the server hashed script {name} differently")
        self._loaded.add(name)

    def call(self, what: str, fn: Any, *args: Any, mutating: bool = False, **kwargs: Any) -> Any:
        """Call a redis-py method, translating errors (sent again while refused for now)."""
        pipe: Any = getattr(fn, "__self__", None)
        # a pipeline empties its command stack whatever happens: keep it for a second send
        stack = list(pipe.command_stack) if isinstance(pipe, redis.client.Pipeline) else None

        def attempt() -> Any:
            if stack is not None:
                pipe.command_stack = list(stack)
            try:
                return fn(*args, **kwargs)
            except redis.RedisError as exc:
                self._check(exc, what, mutating)
                raise  # not reached: _check raises

        return self._until_served(what, attempt)

    def bulk_limit(self) -> int:
        """The longest argument the server accepts (its ``proto-max-bulk-len``), read with
        CONFIG GET once per backend, on first need; 512 MiB if CONFIG is refused."""
        limit = self._bulk_limit
        if limit is None:
            try:
                reply = dict(self.call("CONFIG GET proto-max-bulk-len", self.client().config_get,
                                       "proto-max-bulk-len"))
                value: Any = reply.get("proto-max-bulk-len", reply.get(b"proto-max-bulk-len"))
                limit = int(value)
            except BackendError as exc:
                if not isinstance(exc.__cause__, redis.ResponseError) or refused_for_now(exc.__cause__):
                    raise  # unreachable or not serving: the command that needed it would fail too
                limit = DEFAULT_BULK_LIMIT  # CONFIG refused (ACL, renamed, a proxy...)
            except (TypeError, ValueError):
                limit = DEFAULT_BULK_LIMIT
            self._bulk_limit = limit
        return limit

    def check_sizes(self, payloads: Sequence[bytes]) -> None:
        """Raise ItemTooLarge, before anything is sent, for an item longer than the server
        accepts as one argument (its proto-max-bulk-len: read only for an item of 1 MiB or
        more, which no server refuses)."""
        if max(map(len, payloads), default=0) < SMALLEST_BULK_LIMIT:
            return
        limit = self.bulk_limit()
        for i, payload in enumerate(payloads):
            if len(payload) > limit:
                which = "the item" if len(payloads) == 1 else f"item {i} of the batch"
                raise ItemTooLarge(
                    f"{which} is {len(payload)} bytes serialized, more than the {limit} the server "
                    f"accepts (its proto-max-bulk-len): nothing was put", len(payload), limit)

    def batch_count(self, payloads: Sequence[bytes], most: int) -> int:
        """How many of ``payloads``, from the first, one command takes: at most ``most``, and
        no more bytes in all than the server accepts for one item (at least one)."""
        count = min(len(payloads), most)
        if sum(map(len, payloads[:count])) < SMALLEST_BULK_LIMIT:
            return count
        budget = self.bulk_limit()
        for i in range(count):
            budget -= len(payloads[i])
            if budget < 0:
                return max(i, 1)
        return count

    def raise_error(self, exc: redis.RedisError, what: str, mutating: bool) -> NoReturn:
        where = self.config.url
        text = str(exc)
        if isinstance(exc, redis.exceptions.AuthenticationError):
            raise AuthenticationError(
                f"{what} on {where} did not run: authentication failed: the server refused the "
                f"connection's credentials (a password it requires is missing or wrong, or the user "
                f"is unknown or disabled): {text}"
            ) from exc
        if isinstance(exc, redis.exceptions.NoPermissionError):
            raise PermissionDenied(f"{what} on {where} did not run: the server's ACL refused it: {text}") from exc
        if refused_for_now(exc):
            raise BackendError(f"{what} on {where} did not run: the server refused it for now: {text}") from exc
        if isinstance(exc, redis.ResponseError):
            if "invalid bulk length" in text:
                self._bulk_limit = None  # read it again: it may have been lowered
                raise BackendError(f"{what} on {where}: the server refused the command as larger than "
                                   f"it accepts (its proto-max-bulk-len): {text}") from exc
            if text.startswith("The user executing the script can't"):
                raise PermissionDenied(f"{what} on {where}: the server's ACL refused a command of the "
                                       f"script (what it did before that stays done): {text}") from exc
            if "WRONGTYPE" in text or text.startswith("PRESSURE") or "PRESSURE " in text:
                raise ProtocolError(f"{what} on {where}: {text}") from exc
            raise BackendError(f"{what} on {where} failed: {text}") from exc
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            self._loaded.clear()  # a restarted or failed-over server has no scripts loaded
        never_sent = "connecting to" in text or "connect" in text.lower() and "refused" in text.lower()
        if mutating and not never_sent and isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            raise OutcomeUnknown(
                f"{what} on {where}: the connection failed after the command was sent, "
                f"so it may or may not have run ({text})"
            ) from exc
        raise BackendError(f"{what} on {where} failed: {text}") from exc

    def disconnect(self) -> None:
        """Close the connections this backend opened (never a client passed in)."""
        with self._lock:
            client, self._client, self._pid = self._client, None, -1
            connections = list(self._thread_connections)
            self._thread_connections = weakref.WeakSet()
            self._thread = _ThreadState()
        for conn in connections:
            conn.disconnect()
        if client is not None and client is not self._given:
            client.connection_pool.disconnect()
            manager = getattr(client.connection_pool, "sentinel_manager", None)
            for sentinel in getattr(manager, "sentinels", ()):
                sentinel.close()
