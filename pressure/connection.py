"""Where the queue's Redis is, and one process's connection to it.

``ConnectionConfig`` (pressure/config.py, importable from here too) is a
picklable description of the server (so a queue handle can cross to another
process or host); ``Backend`` turns it into connections once per process (and
thread) and turns redis-py errors into pressure's typed errors (its base ``Wire``,
pressure/_wire.py), and runs the Lua scripts with EVALSHA, loading them on NOSCRIPT
(their text and encoding: pressure/_packing.py). Every name of those modules is
importable from here.

Our own clients never retry a command by themselves: redis-py 8 retries on
timeouts by default, and re-sending a script whose reply was lost would
push an item twice. A client passed in as ``connection`` keeps its own
settings; give it ``retry=Retry(NoBackoff(), 0)`` for the same guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis

# commands encoded in RESP: their own module, every name importable from here as before
from ._packing import _LARGE as _LARGE
from ._packing import PackedScript as PackedScript
from ._packing import _bulk as _bulk
from ._packing import _bulk_name as _bulk_name
from ._packing import _script_sha as _script_sha
from ._packing import _script_source as _script_source
from ._packing import pack_command as pack_command
from ._packing import pack_moves as pack_moves
from ._packing import pack_get_moves as pack_get_moves
from ._packing import NATIVE_BYTES as NATIVE_BYTES
from ._packing import NEVER_WAIT as NEVER_WAIT
from .durability import Durability

_MULTI = pack_command("MULTI")
_EXEC = pack_command("EXEC")
# where the server is: its own module, every name importable from here as before
from .config import PASSWORD_ENV as PASSWORD_ENV
from .config import SOCKET_CONNECT_TIMEOUT as SOCKET_CONNECT_TIMEOUT
from .config import SOCKET_TIMEOUT as SOCKET_TIMEOUT
from .config import ConnectionConfig as ConnectionConfig
from .config import without_password as without_password
# the connections, sending and reading, error translation: Backend's base, names importable here too
from ._wire import _FIRST_PAUSE as _FIRST_PAUSE
from ._wire import _FOR_NOW as _FOR_NOW
from ._wire import _LAST_PAUSE as _LAST_PAUSE
from ._wire import _MSG_MORE as _MSG_MORE
from ._wire import BLOCK_SLICE as BLOCK_SLICE
from ._wire import Wire as Wire
from ._wire import _dropped_with as _dropped_with
from ._wire import _new_connection as _new_connection
from ._wire import _pending as _pending
from ._wire import _RetryLater as _RetryLater
from ._wire import _ThreadState as _ThreadState
from ._wire import _tls_hint as _tls_hint
from ._wire import refused_for_now as refused_for_now
from .errors import BackendError, ItemTooLarge, NotReplicated, PressureError, ProtocolError

__all__ = ["ConnectionConfig", "Backend", "PackedScript", "refused_for_now"]

def _load_command(name: str) -> bytes:
    """``SCRIPT LOAD`` of script ``name``, encoded (once: _bulk_name caches the text's)."""
    return pack_command("SCRIPT", "LOAD", _script_source(name))


_R = TypeVar("_R")


class _NotTransacted(Exception):
    """``script_moving``'s transaction was refused at queueing: the ACL refuses a command of it
    (changed since ``transactions()`` asked). Nothing ran; ``transactions()`` is False from now
    on, and the caller does the same without moving payloads natively."""

#: Redis's default ``proto-max-bulk-len``, assumed where CONFIG GET is refused.
DEFAULT_BULK_LIMIT = 512 * 1024 * 1024
#: The smallest ``proto-max-bulk-len`` Redis accepts: a shorter argument never needs the check.
SMALLEST_BULK_LIMIT = 1024 * 1024


class Backend(Wire):
    """Runs pressure's Lua scripts on one server, over the connections of ``Wire``: EVALSHA,
    loading a script on NOSCRIPT; a script alone, with a WAIT behind it, several in one
    pipeline, or followed by a BLMOVE (the blocking get), each in one round trip; and the
    checks of an argument's size against the server's ``proto-max-bulk-len``."""

    def run(self, name: str, keys: tuple[str, ...] | list[str], args: tuple[Any, ...] | list[Any],
            *, mutating: bool = True, patient: bool = True) -> Any:
        """Run one script with EVALSHA (loaded on NOSCRIPT) on a connection of the client's
        pool (not this thread's: a finalizer may run this between a send and its read on
        it), translating errors. Sent again while the server refuses it for now (a restart,
        a failover: up to ``refused_for`` seconds), unless not ``patient`` (a finalizer's
        call, which must never wait longer than one command)."""
        what = f"script {name}"

        def attempt_on(conn: redis.connection.AbstractConnection) -> Any:
            data = conn.pack_command("EVALSHA", _script_sha(name), len(keys), *keys, *args)
            return self._call_script(conn, name, data, what, mutating)

        return self._until_served(what, lambda: self._on_pool_connection(what, attempt_on), patient=patient)

    def _on_pool_connection(self, what: str, use: Callable[[redis.connection.AbstractConnection], _R]) -> _R:
        """``use`` a connection of the client's pool, given back after (disconnected first if
        ``use`` was interrupted between a send and its read)."""
        pool = self.client().connection_pool
        conn = self._pool_connection(pool, what)
        try:
            return use(conn)
        except BaseException as exc:
            if not isinstance(exc, (PressureError, _RetryLater)):
                conn.disconnect()  # e.g. interrupted between the send and the read
            raise
        finally:
            pool.release(conn)

    def _call_script(self, conn: redis.connection.AbstractConnection, name: str, data: list[bytes],
                     what: str, mutating: bool, ahead: bytes = b"") -> Any:
        """Send a script call and read its reply, loading the script on NOSCRIPT. ``ahead``: a
        command sent in front of it in the same write, as ``post`` sends one (its reply read
        and dropped first; not sent again with a reload)."""
        if ahead:
            self._send(conn, [ahead + data[0], *data[1:]], what)
            self._posted(None)
        else:
            self._send(conn, data, what)
        reply = self._read(conn, what, mutating)
        if isinstance(reply, redis.exceptions.NoScriptError):
            self._load_on(conn, name)
            self._send(conn, data, what)
            reply = self._read(conn, what, mutating)
        elif not isinstance(reply, redis.RedisError):
            self._loaded.add(name)  # it ran: loaded there already (by another client, say)
        return self._check(reply, what, mutating)

    def script(self, command: PackedScript, tail: Sequence[bytes | str | int], *,
               mutating: bool = True, items: Sequence[bytes] = (),
               durability: Durability | None = None) -> Any:
        """Run a packed script on this thread's connection (one round trip), loading it on
        NOSCRIPT. ``items``: more arguments after the usual ones (PackedScript.pack_items).
        With ``durability``, a WAIT goes in the same send: NotReplicated if too few replicas
        confirmed the script's writes in time."""
        data = command.pack_items(tail, items) if items else [command.pack(tail)]
        if durability is not None:
            what = f"script {command.name}"
            data.append(pack_command("WAIT", durability.replicas, durability.timeout_ms))
            # the connection is taken for each attempt: on a cluster, a MOVED may point it elsewhere
            return self._until_served(
                what, lambda: self._call_durable(self.thread_connection(), command.name, data, what, durability))
        return self.packed_script(command.name, data, mutating=mutating)

    def packed_script(self, name: str, data: list[bytes], *, mutating: bool = True, ahead: bytes = b"") -> Any:
        """``script`` of a call already packed (``data``: the chunks of script ``name``'s
        EVALSHA, as ``PackedScript`` makes them): for a caller that packs the same call once
        and sends it many times (``_ConsumerState.packed_get``). ``ahead``: a command (packed)
        that nothing waits on, sent in front of the call in the same write, as ``post`` would
        send it but without a write of its own (a bounded put's wait for room)."""
        what = f"script {name}"
        # the connection is taken for each attempt: on a cluster, a MOVED may point it elsewhere
        return self._until_served(
            what, lambda: self._call_script(self.thread_connection(), name, data, what, mutating, ahead))

    #: whether the server runs MULTI/EXEC, and the commands that move payloads, for this user
    #: (``transactions``); None: not asked yet
    _transactions: bool | None = None

    def transactions(self, gate: str) -> bool:
        """Whether the server runs MULTI/EXEC, and in it the commands that move payloads
        (``pack_moves``, ``pack_get_moves``), for this user: asked once per backend, in one round
        trip, with those commands on ``gate``, a key that exists only inside such a transaction
        (on a missing key each does nothing). Where MULTI is refused (an ACL without it, a
        proxy), the commands sent behind it would run one by one; where the ACL refuses one of
        them, the transaction is refused: ``script_moving`` must not be used."""
        if self._transactions is None:
            probe_commands = [pack_command("LSET", gate, "0", ""), pack_command("LPUSHX", gate, ""),
                              pack_command("BLMOVE", gate, gate, "RIGHT", "RIGHT", NEVER_WAIT),
                              pack_command("RENAME", gate, gate)]

            def probe() -> bool:
                conn = self.thread_connection()
                self._send(conn, [_MULTI + b"".join(probe_commands) + _EXEC], "MULTI")
                head = [self._read(conn, "MULTI", False) for _ in range(1 + len(probe_commands))]
                if any(refused_for_now(reply) or _dropped_with(reply) for reply in head):
                    raise _RetryLater(next(r for r in head if refused_for_now(r) or _dropped_with(r)))
                self._read(conn, "EXEC", False)
                return not any(isinstance(reply, redis.RedisError) for reply in head)

            self._transactions = self._until_served("MULTI", probe)
        return self._transactions

    def script_moving(self, command: PackedScript, tail: Sequence[bytes | str | int], moves: list[bytes],
                      count: int, *, durability: Durability | None = None, all_replies: bool = False,
                      packed: bytes = b"") -> Any:
        """Run a packed script and, behind it in one MULTI/EXEC, ``count`` plain commands sent as
        the chunks ``moves`` (``pack_moves``: a native put's, lua/put.lua ARGV[3] 'm'), in one
        round trip on this thread's connection (only where ``transactions()``; _NotTransacted
        where the ACL refuses one of the commands). Returns the script's reply, or raises its
        error; the commands' replies are not looked at (they fail, harmlessly, where the script
        refused or never ran). The script is loaded in the same round trip where it is not
        known to be loaded; a transaction whose script answered NOSCRIPT (nothing moved) is sent
        again once it is loaded. With ``durability``, a WAIT goes behind the EXEC (NotReplicated
        as ``script`` raises it). ``all_replies``: the script's and then the commands' replies
        (a native get's: get.lua flag 'N'). ``packed``: the script's call packed already
        (``tail`` is then not looked at)."""
        what = f"script {command.name}"
        data = [_MULTI + (packed or command.pack(tail)) + moves[0], *moves[1:]]
        data[-1] += _EXEC if durability is None else _EXEC + pack_command(
            "WAIT", durability.replicas, durability.timeout_ms)

        def attempt() -> list[Any]:
            conn = self.thread_connection()
            loads = [] if command.name in self._loaded else [command.name]
            for _ in range(2):
                self._send(conn, [b"".join(map(_load_command, loads)) + data[0], *data[1:]], what)
                replies = self._transaction_replies(conn, what, loads, 1 + count, int(durability is not None))
                if not isinstance(replies[0], redis.exceptions.NoScriptError):
                    break
                # a restarted or flushed server, or a load refused: nothing moved. Loaded on its
                # own (raising why it cannot be), then sent again.
                self._loaded.discard(command.name)
                self._load_on(conn, command.name)
                loads = []
            if (isinstance(replies[0], redis.exceptions.NoPermissionError) and count
                    and all(reply is replies[0] for reply in replies[1:1 + count])):
                # a command refused at queueing (an ACL that predates it): none ran, and none will
                self._transactions = False
                raise _NotTransacted(replies[0])
            self._check(replies[0], what, True)  # refused for now: sent again (nothing moved)
            return replies

        replies = self._until_served(what, attempt)
        if durability is not None:
            self.check_replicated(what, replies[-1], durability)
        return replies if all_replies else replies[0]

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
        self.check_replicated(what, confirmed, durability)
        return result

    def check_replicated(self, what: str, confirmed: Any, durability: Durability) -> None:
        """NotReplicated unless ``confirmed``, the reply of the WAIT sent behind ``what`` (a
        script that ran), counts as many replicas as ``durability`` asks. (The sync handles'
        and pressure.aio's.)"""
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

    def pipeline(self, calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]], *,
                 pooled: bool = False, after: Sequence[bytes] = (), load: Sequence[str] = (),
                 atomic: int = 0) -> list[Any]:
        """Run several packed scripts in one round trip on this thread's connection, in order
        (``pooled``: on a connection of the client's pool, as ``run``: for a thread that sends
        once, which then opens no connection of its own). ``after``: plain commands
        (``pack_command``) sent behind the calls in the same write, their replies after the
        calls' (they are sent again with the calls only if the server refused everything for
        now: they must be harmless to repeat).

        Returns one reply per call; a script's error reply is returned as the exception
        object (the others still ran). Scripts not known to be loaded on the server are
        loaded first, in the same round trip (a SCRIPT LOAD ahead of the calls, so a call
        never finds its script missing, and the calls keep their order), and calls refused
        with NOSCRIPT (they did not run: a restarted or flushed server, or a load that
        failed) are sent again once their scripts are loaded; so are all the calls when the
        server refused every one for now (see ``refused_for_now``). A reply lost with a
        connection that redis-py dropped on an earlier error reply is a ConnectionError:
        that call may or may not have run. ``load``: more scripts to load in the same round
        trip, for calls to come (not known to be loaded here: see ``is_loaded``). ``atomic``:
        the first ``atomic`` calls run as one transaction (MULTI/EXEC): all or none of them,
        whatever happens to the connection or the server meanwhile.
        """
        what = "pipelined scripts " + ", ".join(command.name for command, _ in calls)

        def attempt() -> list[Any]:
            if not pooled:
                return attempt_on(self.thread_connection())
            return self._on_pool_connection(what, attempt_on)

        def attempt_on(conn: redis.connection.AbstractConnection) -> list[Any]:
            names = [*(command.name for command, _ in calls), *load]
            loads = list(dict.fromkeys(name for name in names if name not in self._loaded))
            replies = self._pipeline_once(conn, calls, what, loads, after, atomic)
            if replies and all(map(refused_for_now, replies)):
                raise _RetryLater(replies[0])
            replies, tail = replies[:len(calls)], replies[len(calls):]
            missing = [i for i, reply in enumerate(replies)
                       if isinstance(reply, redis.exceptions.NoScriptError)]
            if missing:
                self._loaded.clear()
                for name in {calls[i][0].name for i in missing}:
                    self._load_on(conn, name)
                again = self._pipeline_once(conn, [calls[i] for i in missing], what,
                                            atomic=sum(i < atomic for i in missing))
                for i, reply in zip(missing, again):
                    replies[i] = reply
            return replies + tail

        return self._until_served(what, attempt)

    def _pipeline_once(self, conn: redis.connection.AbstractConnection,
                       calls: Sequence[tuple[PackedScript, Sequence[bytes | str | int]]], what: str,
                       loads: Sequence[str] = (), after: Sequence[bytes] = (), atomic: int = 0) -> list[Any]:
        """Send ``calls`` in one write, behind a SCRIPT LOAD of each script in ``loads`` and
        ahead of the plain commands ``after``, the first ``atomic`` calls in one MULTI/EXEC;
        the replies of the calls and then of ``after`` (a load's reply only tells whether its
        script is loaded now: if it failed, the calls of that script answer NOSCRIPT, or ran
        if it was there already)."""
        packed = [command.pack(tail) for command, tail in calls]
        if atomic:
            packed[:atomic] = [_MULTI, *packed[:atomic], _EXEC]
        self._send(conn, [b"".join([*map(_load_command, loads), *packed, *after])], what)
        if atomic:
            return self._transaction_replies(conn, what, loads, atomic, len(calls) - atomic + len(after))
        replies: list[Any] = []
        for _ in range(len(loads) + len(calls) + len(after)):
            if replies and refused_for_now(replies[-1]) and _dropped_with(replies[-1]):
                replies.append(replies[-1])  # READONLY: the calls behind it met the same replica
            elif replies and _dropped_with(replies[-1]):
                replies.append(redis.ConnectionError(
                    f"reply lost: the connection was dropped on the error reply before it ({replies[-1]})"))
            else:
                replies.append(self._read(conn, what, True))
        for name, reply in zip(loads, replies):
            self._script_loaded(name, reply)
        return replies[len(loads):]

    def _transaction_replies(self, conn: redis.connection.AbstractConnection, what: str,
                             loads: Sequence[str], atomic: int, rest: int) -> list[Any]:
        """The replies of ``_pipeline_once``'s write with a transaction: the loads', then the
        transaction's ``atomic`` calls' (each an error if it was refused or aborted: none ran),
        then the ``rest``'s (after the first lost reply, each a ConnectionError)."""
        head: list[Any] = []
        for _ in range(len(loads) + 1 + atomic):  # the loads', MULTI's, the QUEUEDs
            head.append(self._read(conn, what, True))
            if _dropped_with(head[-1]):
                # the connection went with the replies behind (READONLY through Sentinel,
                # LOADING, a 'Protocol error' the server closed it after) before the EXEC: the
                # transaction is discarded, and a refused load or MULTI leaves none to run. None
                # ran; all may be sent again where the refusal is for now.
                lost = redis.ConnectionError(f"reply lost: the connection was dropped on {head[-1]}")
                return [head[-1]] * atomic + [lost] * rest
        for name, reply in zip(loads, head):
            self._script_loaded(name, reply)
        executed = self._read(conn, what, True)
        if isinstance(executed, list) and len(executed) == atomic:
            replies: list[Any] = list(executed)
        else:  # refused at queueing (EXECABORT) or not run: every call answers why
            error = next((r for r in head[len(loads):] if isinstance(r, redis.RedisError)),
                         executed if isinstance(executed, redis.RedisError)
                         else redis.ResponseError(f"EXEC answered {executed!r}"))
            replies = [error] * atomic
        for _ in range(rest):
            if replies and _dropped_with(replies[-1]):
                replies.append(redis.ConnectionError(
                    f"reply lost: the connection was dropped on the error reply before it ({replies[-1]})"))
            else:
                replies.append(self._read(conn, what, True))
        return replies

    def script_then_blmove(self, command: PackedScript, tail: Sequence[bytes | str | int],
                           source: str, destination: str, timeout: float,
                           then: Sequence[bytes | str | int] | None = None,
                           moves: bytes = b"", count: int = 0) -> tuple[Any, Any, Any]:
        """Send a script, ``BLMOVE source destination RIGHT LEFT timeout`` and, with
        ``then``, the same script again with the tail ``then``, in one pipeline (one
        round trip) on this thread's connection: the second call runs as soon as the
        BLMOVE returns.

        Returns ``(script result, BLMOVE reply, second script result or None)``; a script
        error reply is returned as the exception object, after the others have answered. A
        script not known to be loaded is loaded in the same round trip (a SCRIPT LOAD in
        front); if that load fails, its error stands for a call refused with NOSCRIPT.
        The script must leave something in ``source`` unless the caller is meant to wait
        there, or the BLMOVE waits ``timeout``. Used for the blocking get. A BLMOVE the
        server refused for now, or whose reply was lost with a connection redis-py dropped
        on the script's error reply (LOADING), gives None (and so does a second script
        call lost that way): the caller must then take back what the BLMOVE may have
        moved (get.lua 'cancel') before it gets again. With ``moves`` (``count`` commands),
        each script call goes in a MULTI/EXEC with them behind it (a native get, get.lua flag
        'N'): its result is then the EXEC's replies (the call's, then the commands'), or an
        error (a refusal at queueing, or the EXEC's).
        """
        def call(call_tail: Sequence[bytes | str | int]) -> bytes:
            packed = command.pack(call_tail)
            return _MULTI + packed + moves + _EXEC if moves else packed

        data = [call(tail) + b"*6\r\n$6\r\nBLMOVE\r\n" + _bulk(source) + _bulk(destination)
                + b"$5\r\nRIGHT\r\n$4\r\nLEFT\r\n" + _bulk(repr(timeout)) + (b"" if then is None else call(then))]
        what = f"script {command.name} and BLMOVE"

        def send() -> tuple[redis.connection.AbstractConnection, bool]:
            conn = self.thread_connection()
            # loaded first, in the same send: a NOSCRIPT here would cost a whole BLMOVE wait
            load = command.name not in self._loaded
            # on a cluster, a master not reached is asked for again
            self._send(conn, [_load_command(command.name), *data] if load else data, what)
            return conn, load

        def read_call() -> Any:
            if not moves:
                return self._read(conn, what, True)
            replies = self._transaction_replies(conn, what, (), 1 + count, 0)
            return replies[0] if isinstance(replies[0], redis.RedisError) else replies

        conn, load = self._until_served(what, send)
        loaded = self._read(conn, what, True) if load else None
        if load and _dropped_with(loaded):  # (LOADING) the replies behind it went with the connection
            return loaded, None, None
        first = read_call()
        if load:
            self._script_loaded(command.name, loaded)
            if isinstance(first, redis.exceptions.NoScriptError) and isinstance(loaded, redis.RedisError):
                first = loaded  # why it is not loaded (refused for now, or for good)
        # a reply redis-py dropped the connection on (LOADING) loses the replies behind it
        second = None if _dropped_with(first) else self._read(conn, what, True)
        third = None
        if then is not None and not _dropped_with(first) and not _dropped_with(second):
            third = read_call()
        if isinstance(first, redis.exceptions.NoScriptError):
            self._loaded.discard(command.name)
        if refused_for_now(second):
            second = None
        elif isinstance(second, redis.RedisError):  # the BLMOVE itself failed (a wrong type)
            self.raise_error(second, f"BLMOVE after script {command.name}", True)
        return first, second, third

    def pop_wait(self, key: str, timeout: float) -> bool:
        """``BRPOP key timeout`` on this thread's connection, packed here (a producer waiting
        for room pops ``:not_full``, a wake-up): whether it popped one. Not "mutating": a reply
        lost with the connection costs a wake-up, never an item or a token (BackendError)."""
        data = [pack_command("BRPOP", key, repr(timeout))]

        def attempt() -> bool:
            conn = self.thread_connection()
            self._send(conn, data, "BRPOP :not_full")
            return self._check(self._read(conn, "BRPOP :not_full", False), "BRPOP :not_full", False) is not None

        return self._until_served("BRPOP :not_full", attempt)

    def is_loaded(self, name: str) -> bool:
        """Whether script ``name`` is known to be loaded on the server: this backend loaded it,
        or a call of it ran (a restarted server answers NOSCRIPT, and it is loaded again)."""
        return name in self._loaded

    def forget_loaded(self, name: str) -> None:
        """Script ``name`` answered NOSCRIPT to a posted call: not loaded (no I/O here)."""
        self._loaded.discard(name)

    def _script_loaded(self, name: str, reply: Any) -> None:
        """Note script ``name`` as loaded if ``reply``, a SCRIPT LOAD's, says so (an error, or a
        different hash, leaves its calls to answer NOSCRIPT: then ``_load_on`` says why)."""
        if reply in (_script_sha(name), _script_sha(name).encode()):
            self._loaded.add(name)

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
