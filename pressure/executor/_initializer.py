"""A worker's initializer: passed in by its pool, or stored in Redis by the executor for
workers that join from elsewhere (signed, with an authkey); a failure breaks the executor."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import redis

from .. import _log
from ..connection import Backend, pack_command
from ..keys import ExecutorKeys
from ..outage import Complaint, pause
from ..signing import Signer, key_id
from ._fatal import REFUSED_FOR_GOOD

if TYPE_CHECKING:
    from ._handles import WorkerConfig

__all__ = ["initialize", "no_initializer", "setup_commands"]

logger = _log.WORKER

#: How often a worker asks again for its executor's configuration while Redis cannot be reached.
RETRY = 0.5


def no_initializer() -> None:
    """The initializer of local workers whose executor has none: known to be none, so they
    start without reading the executor's configuration from Redis (a connection and a
    round trip before their first task)."""


def setup_commands(keys: ExecutorKeys, authkey: tuple[bytes, ...], initializer: Callable[..., Any] | None,
                   initargs: tuple[Any, ...]) -> tuple[list[bytes], list[str]]:
    """What an executor's constructor sends with its creates (packed commands, harmless
    to repeat) for the workers ``initialize`` starts: a failure of an earlier run is not
    theirs; the id of the key tasks are signed with (not a secret); the initializer, for
    workers that join from elsewhere (signed with an authkey), if it pickles. And the keys
    those commands write, to delete again if the executor cannot be made."""
    setup = [pack_command("DEL", keys.broken)]
    written: list[str] = []
    if authkey:  # workers that join from elsewhere check they hold the key
        setup.append(pack_command("SET", keys.signed, key_id(authkey[0]).hex()))
        written.append(keys.signed)
    if initializer is not None:
        try:
            blob = pickle.dumps((initializer, initargs))
            if authkey:  # workers elsewhere load it: signed as the tasks are
                blob = Signer(authkey, keys.config).sign(blob)
        except Exception:  # noqa: BLE001 - whatever pickling raises (an mp Queue: RuntimeError)
            return setup, written  # local workers get it directly; workers elsewhere cannot
        setup.append(pack_command("SET", keys.config, blob))
        written.append(keys.config)
    return setup, written


def initialize(where: WorkerConfig, initializer: Callable[..., Any] | None,
                initargs: tuple[Any, ...], stop: Callable[[], bool], backend: Backend) -> bool | None:
    """Run the executor's initializer (passed in, or stored in Redis by the executor for
    workers that join from elsewhere). If it fails, the executor is broken: say why in
    Redis, where executors look, and return False. None: told to stop while Redis could
    not be reached to read it. A wrong password or an ACL that refuses is raised
    (AuthenticationError, PermissionDenied): no retry mends it."""
    keys = ExecutorKeys.build(where.prefix, where.name)
    client = backend.route(keys.claims, f"executor {where.name!r}").client()
    complaint = Complaint(logger, "worker: cannot read the executor's configuration yet")
    stored: Any = None
    while initializer is None:
        if stop():
            return None
        try:
            stored, signed = cast("list[Any]", client.mget(keys.config, keys.signed))
            complaint.succeeded()
            if signed is not None and bytes.fromhex(signed.decode()) not in {key_id(k) for k in where.authkey}:
                _log.event(logger, logging.ERROR, "authkey_mismatch", "executor %r signs its tasks with "
                           "a key this worker does not hold: start workers with --authkey-file or "
                           "PRESSURE_AUTHKEY (this worker stops)", where.name, executor=where.name)
                return None
            break
        except redis.RedisError as exc:  # Redis restarting: not the initializer's failure
            if isinstance(exc, REFUSED_FOR_GOOD):  # a wrong password, an ACL that refuses: raised
                backend.raise_error(exc, f"read the configuration of executor {where.name!r}", False)
            complaint.failed(exc)
            pause(RETRY, stop)
    try:
        if stored is not None:
            if where.authkey:  # never unpickled unless the executor signed it
                stored = Signer(where.authkey, keys.config).verify(stored)
            initializer, initargs = pickle.loads(stored)
        if initializer is not None:
            initializer(*initargs)
        return True
    except BaseException as exc:  # noqa: BLE001
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        _log.event(logger, logging.ERROR, "initializer_failed", "worker initializer failed:\n%s", text,
                   executor=where.name, prefix=where.prefix, error=repr(exc))
        client.set(keys.broken, f"A worker's initializer failed: {exc!r}")
        return False
