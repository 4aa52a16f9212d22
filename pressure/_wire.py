"""The wire to one server: one process's connections (a redis-py client for occasional
commands, one connection per thread for the hot paths), sending a command and reading its
reply, commands posted without waiting for their replies, the retry of a command the server
refused for now, and redis-py's errors turned into pressure's typed errors. On a Redis
Cluster, which master it talks to is ``Routing``'s (pressure/_routing.py, a base class).

``pressure.connection.Backend`` runs the scripts over it (and re-exports every name here).
"""

from __future__ import annotations

import collections
import logging
import os
import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import redis
import redis.cluster

from . import _log, identity
from ._packing import PING
from ._routing import Routing
from .config import SOCKET_TIMEOUT, ConnectionConfig
from .errors import (
    AuthenticationError,
    BackendError,
    OutcomeUnknown,
    PermissionDenied,
    ProtocolError,
    TLSError,
)

__all__ = ["Wire", "refused_for_now", "BLOCK_SLICE"]

_R = TypeVar("_R")

#: The longest single server-side wait; blocking calls loop over such waits,
#: re-checking their deadline, so no wait is ever "0 = forever".
BLOCK_SLICE = 1.0
#: The pauses between sends of a command the server refused for now (LOADING, BUSY...).
_FIRST_PAUSE, _LAST_PAUSE = 0.01, 0.25

#: send() flag that holds a small command in the kernel until the next one (Linux)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)


def _readable(sock: socket.socket | int) -> bool:
    """Whether the kernel holds data, or an end of file, to read on ``sock`` (a socket or its
    file descriptor): a zero-timeout poll, nothing is read. Raises OSError or ValueError if
    the socket is gone."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _peek(sock: socket.socket) -> bytes | None:
    """What waits to be read on ``sock``, without reading it: None if nothing, b"" if the peer
    closed it (a pending EOF) or the socket failed, else the first byte of what waits. A
    zero-timeout poll first (a socket with a timeout would otherwise wait that long inside
    recv), then a peek."""
    try:
        if not _readable(sock):
            return None
        return bytes(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return None
    except (OSError, ValueError):
        return b""


def _pending(conn: redis.connection.AbstractConnection) -> bytes | None:
    """What waits to be read on this connection's socket, without reading it (``_peek``): None
    if nothing (or no socket, or an in-process fake), b"" if the server has closed it, else the
    first byte of a reply not read yet. A healthy idle connection has nothing to read."""
    sock = getattr(conn, "_sock", None)
    if not isinstance(sock, socket.socket):
        return None
    return _peek(sock)


#: What a posted command's check is called with when its reply can never be read: the
#: connection went (or the command could not be sent) before it. It may or may not have run.
LOST = object()


class _ThreadState(threading.local):
    pid = -1
    connection: redis.connection.AbstractConnection | None = None
    client_id: str | None = None
    #: replies of commands sent by ``Backend.post`` still to read on ``connection``
    unread = 0
    #: the socket ``Backend.post`` last found a TCP one it may send with MSG_MORE
    corkable: socket.socket | None = None

    def __init__(self) -> None:
        #: for each unread reply, oldest first: what to call with it (None: nothing)
        self.checks: collections.deque[Callable[[Any], None] | None] = collections.deque()
        #: the process the checks belong to (a forked child never calls its parent's)
        self.checks_pid = os.getpid()


#: The error codes of replies that refuse a command for now (see refused_for_now).
_FOR_NOW = ("LOADING ", "BUSY ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN ", "NOREPLICAS ", "READONLY ")


#: A wire's "process" while its client is built for a forked child (Wire.for_child).
_FOR_CHILD = -2


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
    script refused so wrote nothing), or a cluster node that does not serve the slot (MOVED,
    ASK). The command did not run, and may run if sent again (through Sentinel, on the
    master the sentinels name then; on a cluster, on the slot's owner)."""
    if isinstance(error, (redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError,
                          redis.exceptions.ClusterDownError, redis.exceptions.ReadOnlyError,
                          redis.exceptions.AskError)):  # and MOVED: a slot served elsewhere
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


def _unreachable(error: object) -> bool:
    """Whether ``error`` is a failure to connect (so nothing was sent)."""
    text = str(error).lower()
    return isinstance(error, redis.ConnectionError) and "connect" in text and (
        "refused" in text or "connecting to" in text)


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


#: What a connection closed by the other side during the handshake probably means (no TLS).
_NOT_REDIS_HINT = (" (the server closed the connection at once: is it a Redis server? If that port "
                   "speaks TLS, use a rediss:// URL)")
#: What a first reply that is not RESP means (hiredis says so where redis-py's own parser
#: reads on to the close: an HTTP server's page starts with '<').
_NOT_RESP_HINT = (" (the server's first reply is not in Redis's protocol: is it a Redis server? If "
                  "that port speaks TLS, use a rediss:// URL)")


def _closed_at_once(text: str) -> bool:
    return "reset by peer" in text or "closed by server" in text


def _not_redis_hint(text: str) -> str:
    """The hint for a failure of redis-py's handshake (no TLS) whose text is ``text``: the
    server closed the connection at once, or answered in another protocol; else ''."""
    if _closed_at_once(text):
        return _NOT_REDIS_HINT
    if "Protocol error, got" in text or "Protocol Error:" in text:  # hiredis's, redis-py's parser's
        return _NOT_RESP_HINT
    return ""


def _while_connecting(exc: BaseException) -> bool:
    """Whether redis-py raised ``exc`` while it was making a connection (its connect and the
    handshake commands it sends then), not on a connection that served commands before."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in ("connect", "connect_check_health", "on_connect", "on_connect_check_health") and \
                "redis" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _protocol_error(error: object) -> bool:
    """Whether ``error`` is the server's 'Protocol error' reply (an argument longer than its
    proto-max-bulk-len, say), after which it closes the connection: ``Wire._read`` drops it."""
    return isinstance(error, redis.ResponseError) and str(error).startswith("Protocol error")


def _dropped_with(error: object) -> bool:
    """Whether the connection was dropped on reading the error reply ``error``, losing any
    replies pipelined after it: redis-py drops it for the replies it maps to a ConnectionError,
    ``Wire._read`` for a 'Protocol error' (``_protocol_error``)."""
    return isinstance(error, redis.ConnectionError) or _protocol_error(error)


class Wire(Routing):
    """One process's connections to one server: a redis-py client (and its pool) for
    occasional commands, and one connection per thread for the hot paths (no pool lock).

    A forked child notices the pid change and builds its own, so no socket is
    ever shared across processes. A client passed in by the user is used as is
    (its settings also make the per-thread connections) and never closed.

    A command the server refuses for now (``refused_for_now``: it did not run) is
    sent again, with backoff, for up to ``refused_for`` seconds (the socket timeout:
    as long as a server that does not answer is given), and then raises BackendError.
    """

    def __init__(self, config: ConnectionConfig,
                 client: redis.Redis | redis.cluster.RedisCluster | None = None, *,
                 loaded: Iterable[str] = ()) -> None:
        self.config = config
        #: scripts another process of ours just loaded on the server (a forked worker's parent):
        #: known loaded on the first connection only (a later one may meet a restarted server)
        self._assumed = frozenset(loaded)
        # on a cluster, pressure makes its own connections to the slot's owner (with the
        # cluster client's settings): a RedisCluster's own are never used
        self._given = client if isinstance(client, redis.Redis) and config.cluster is None else None
        #: on a cluster: the slot of every key this wire touches (see route), and its master
        self._slot: int | None = None
        self._owner: tuple[str, int] | None = None
        #: on a cluster: wires like this one routed to other slots (see for_slot)
        self._siblings: dict[int, Any] = {}
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
            if self._client is not None and self._pid in (pid, _FOR_CHILD):
                self._pid = pid  # (built for a forked child, never used: now this process's)
                return self._client
            if self.config.cluster is not None:
                if self._owner is None or pid != self._pid:
                    self._owner = self._owner_of_slot()
                client = self.config.node_client(self._owner)
            elif self._given is not None and pid == self._given_pid:
                client = self._given
            else:
                client = self.config.new_client()
            self._use(client, pid)
            return client

    def _use(self, client: redis.Redis, pid: int) -> None:
        """Make ``client`` this wire's, for process ``pid`` (_FOR_CHILD: see for_child)."""
        timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        # a blocking command must end on the server before the socket gives up,
        # or its reply (maybe a popped token or item) is lost
        self.slice = BLOCK_SLICE if not timeout else min(BLOCK_SLICE, float(timeout) / 2)
        self.refused_for = float(timeout) if timeout else SOCKET_TIMEOUT
        self._loaded, self._assumed = set(self._assumed), frozenset()
        self._client, self._pid = client, pid

    def for_child(self) -> None:
        """Build this (unused) wire's client now, for the next process forked from this one,
        which then takes it as its own instead of building one (in a child just forked that
        costs about 1 ms: every page it touches first is copied). Its pool never connected
        here, so the child shares no connection; the first process to use it owns it. Not on
        a cluster (its client is built for the master of the slot, asked for first)."""
        with self._lock:
            if self._client is None and self.config.cluster is None and self._given is None:
                self._use(self.config.new_client(), _FOR_CHILD)

    def _until_served(self, what: str, attempt: Callable[[], _R], *, patient: bool = True) -> _R:
        """``attempt()``, again after a pause each time the server refuses it for now, for up
        to ``refused_for`` seconds; then BackendError saying it did not run. Not ``patient``:
        ``attempt()`` once, and that BackendError at its first refusal (nothing logged)."""
        deadline = None
        pause = _FIRST_PAUSE
        while True:
            try:
                return attempt()
            except _RetryLater as later:
                if not patient:
                    raise BackendError(f"{what} on {self.config.url} did not run: the server refused "
                                       f"it: {later.error}") from later.error
                if self.config.sentinel is not None:
                    self._rediscover()
                if self.config.cluster is not None:
                    self._reroute(later.error)
                elif isinstance(later.error, redis.exceptions.AskError):
                    self.raise_error(later.error, what, False)  # a cluster node, not named as one
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.refused_for
                    _log.event(_log.CONNECTION, logging.WARNING, "retry", "%s on %s refused for now (%s): "
                               "sent again for up to %g s", what, self.config.url, later.error,
                               self.refused_for,
                               server=self.config.url, command=what, error=str(later.error))
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
            if refused_for_now(reply) or (self.config.cluster is not None and _unreachable(reply)):
                raise _RetryLater(reply)  # on a cluster, a master not reached: ask who serves now
            self.raise_error(reply, what, mutating)
        return reply

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
        elif self._owner is not None and (getattr(conn, "host", None), getattr(conn, "port", None)) != self._owner:
            conn.disconnect()  # the slot moved: this thread's next command goes to its new master
            self._forget_unread(conn)
            conn.host, conn.port = self._owner  # type: ignore[attr-defined]
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
        """A command that could not be sent: it did not run (a hint if the handshake failed).
        On a cluster, a master that cannot be reached may have been replaced: _RetryLater."""
        if self.config.cluster is not None and isinstance(exc, redis.ConnectionError):
            raise _RetryLater(exc)
        text = str(exc)
        tls = issubclass(self.config.connection_class, redis.SSLConnection)
        if connecting and not tls:
            text += _not_redis_hint(text)
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
            self._lose_unread()

    def _lose_unread(self) -> None:
        """The replies of posted commands will never be read: tell their checks (``LOST``)."""
        state = self._thread
        state.unread = 0
        checks, state.checks = state.checks, collections.deque()
        if state.checks_pid != os.getpid():
            return  # a forked child's copy: the parent's to tell
        for check in checks:
            if check is not None:
                check(LOST)

    def _drop_unread(self, conn: redis.connection.AbstractConnection) -> None:
        """Read and drop the replies of commands ``post`` sent on ``conn``. If the connection
        fails meanwhile, raise ConnectionError: a command sent behind them lost its reply."""
        if not self._unread_on(conn):
            return
        state = self._thread
        while state.unread:
            state.unread -= 1
            check = state.checks.popleft() if state.checks else None
            try:
                reply = conn.read_response()
            except redis.ResponseError as exc:
                reply = exc
            except redis.RedisError as exc:  # redis-py dropped the connection
                if check is not None:
                    check(LOST)
                self._lose_unread()
                raise redis.ConnectionError(f"connection lost reading a posted command's reply: {exc}") from exc
            if check is not None:
                check(reply)

    def flush(self) -> None:
        """Read the replies of the commands this thread posted (their checks see them): one
        round trip (a PING behind them) if any are unread, else nothing. If the connection
        fails, their checks are told ``LOST``."""
        state = self._thread
        conn = state.connection
        if not state.unread or conn is None or state.pid != os.getpid():
            return
        try:
            self._send(conn, [PING], "PING")
            self._read(conn, "PING", False)
        except (BackendError, _RetryLater):
            self._forget_unread(conn)

    def post(self, command: bytes, check: Callable[[Any], None] | None = None) -> bool:
        """Send ``command`` (packed, see ``pack_command``) on this thread's connection without
        waiting for its reply (it is read behind the next command's, or by ``flush``): no round
        trip, for a command nothing waits on. If it cannot be sent, it did not run; that is
        not an error here: ``check(LOST)``, and False is returned. ``check`` is called with
        its reply (an error reply as the exception) when that is read, or with ``LOST`` if it
        never will be; it must not touch the connection (it runs in the middle of another
        command).

        On TCP it goes with MSG_MORE: the kernel holds it until this connection's next
        command (one packet and one wake-up of the server for both), for at most 200 ms, or
        until the socket closes - also when the process is killed, if no reply waits unread
        on the connection then (a socket closed with data unread is reset, and what the
        kernel held is dropped)."""
        conn = self.thread_connection()
        sock = self._corkable(conn)
        if sock is None:
            try:
                self._send(conn, [command], "a posted command")
            except (BackendError, _RetryLater):  # it did not run: the next get drops the lists
                if check is not None:
                    check(LOST)
                return False
            self._posted(check)
            return True
        try:
            sent = sock.send(command, _MSG_MORE)
            if sent < len(command):
                sock.sendall(command[sent:])
        except OSError:
            conn.disconnect()  # it did not run (or half of it went: the connection is useless)
            self._lose_unread()
            if check is not None:
                check(LOST)
            return False
        self._posted(check)
        return True

    def _corkable(self, conn: redis.connection.AbstractConnection) -> socket.socket | None:
        """``conn``'s socket if ``post`` may send on it with MSG_MORE (plain TCP, where the flag
        exists), else None. Asked once per socket: its family is a property that costs about
        as much as the send."""
        sock = getattr(conn, "_sock", None)
        state = self._thread
        if sock is not None and sock is state.corkable:
            return sock
        if (not _MSG_MORE or not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket)
                or sock.family not in (socket.AF_INET, socket.AF_INET6)):
            return None
        state.corkable = sock
        return sock

    def _posted(self, check: Callable[[Any], None] | None) -> None:
        state = self._thread
        if state.checks_pid != os.getpid():  # forked: the inherited checks are the parent's
            state.checks, state.checks_pid = collections.deque(), os.getpid()
        state.unread += 1
        state.checks.append(check)

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
        if _protocol_error(reply):
            conn.disconnect()  # the server closes the connection after it
        return reply

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
        if isinstance(exc, redis.exceptions.AskError) and self.config.cluster is None:
            raise BackendError(
                f"{what} on {where} did not run: that server is a Redis Cluster node, and hash slot "
                f"{exc.slot_id} is served by {exc.host}:{exc.port} ({text}): connect to the cluster "
                f"(a redis+cluster://host:port URL, or connection=redis.cluster.RedisCluster(...))") from exc
        if refused_for_now(exc):
            raise BackendError(f"{what} on {where} did not run: the server refused it for now: {text}") from exc
        if isinstance(exc, redis.ResponseError):
            if "invalid bulk length" in text:
                self._bulk_limit = None  # read it again: it may have been lowered
                raise BackendError(f"{what} on {where}: the server refused the command as larger than "
                                   f"it accepts (its proto-max-bulk-len): {text}") from exc
            # (Redis up to 7.0; Redis 7.2+, 8 and Valkey say "ACL failure in script: ...")
            if text.startswith(("The user executing the script can't", "ACL failure in script")):
                raise PermissionDenied(f"{what} on {where}: the server's ACL refused a command of the "
                                       f"script (what it did before that stays done): {text}") from exc
            if "WRONGTYPE" in text or text.startswith("PRESSURE") or "PRESSURE " in text:
                raise ProtocolError(f"{what} on {where}: {text}") from exc
            raise BackendError(f"{what} on {where} failed: {text}") from exc
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            self._loaded.clear()  # a restarted or failed-over server has no scripts loaded
        if (isinstance(exc, (redis.ConnectionError, redis.exceptions.InvalidResponse)) and _while_connecting(exc)
                and not issubclass(self.config.connection_class, redis.SSLConnection)):
            text += _not_redis_hint(text)  # (a command redis-py sends for us: the one asked for was never sent)
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
            siblings, self._siblings = list(self._siblings.values()), {}
        for sibling in siblings:
            sibling.disconnect()
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
