"""A private Redis Sentinel deployment: a master, its replicas and three sentinels.

``SentinelTopology`` starts them all on free loopback ports (each a ``RedisServer`` in its own
temporary directory; the sentinels are ``redis-server --sentinel``), waits until the sentinels
agree on the master and know its replicas and each other, and stops them again. Tests use it
to kill or demote the master (``kill_master``, ``failover``) and to cut a replica off
(``pause_replication``).

The sentinels are tuned to act fast (``down_after_ms``, 1 s by default): a SIGKILLed master
is replaced within a few seconds.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import Any, TypeVar

import redis
import redis.sentinel

from ._server import PortTaken, RedisServer, ServerUnavailable, free_ports

__all__ = ["SentinelServer", "SentinelTopology"]


class SentinelServer(RedisServer):
    """One ``redis-server --sentinel`` watching ``service`` (first at ``master_port``)."""

    def __init__(self, service: str, master_port: int, *, quorum: int = 2, down_after_ms: int = 1000,
                 failover_timeout_ms: int = 10000, binary: str | None = None) -> None:
        super().__init__(binary=binary)
        self.service = service
        self.master_port = master_port
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms

    def _command(self) -> list[str]:
        # a sentinel rewrites its configuration file, so each has its own, in its own directory
        conf = os.path.join(self.dir, "sentinel.conf")
        s = self.service
        with open(conf, "w", encoding="ascii") as f:
            f.write(
                f"port {self.port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.dir}\n"
                f"logfile {os.path.join(self.dir, 'redis.log')}\n"
                f"sentinel monitor {s} 127.0.0.1 {self.master_port} {self.quorum}\n"
                f"sentinel down-after-milliseconds {s} {self.down_after_ms}\n"
                f"sentinel failover-timeout {s} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {s} 1\n")
        return [self.binary, conf, "--sentinel"]


_S = TypeVar("_S", bound=RedisServer)


def _unique(server: _S, taken: set[int]) -> _S:
    """``server``, on a port none of ``taken`` (the ports of the servers made before it, none
    listening yet), added to it."""
    while server.port in taken:
        server.port = free_ports()
    taken.add(server.port)
    return server


def _answering_pid(port: int) -> int | None:
    """The process id of the server answering on ``port`` (None: none answers)."""
    client = redis.Redis(port=port, socket_timeout=2.0)
    try:
        return int(client.info("server")["process_id"])
    except (redis.RedisError, KeyError, ValueError):
        return None
    finally:
        client.close()


class SentinelTopology:
    """A master, ``replicas`` replicas and ``sentinels`` sentinels on 127.0.0.1 and free ports.

    ``url`` is its ``redis+sentinel://`` URL; ``master_for()`` a redis-py client of the master
    through the sentinels; ``master()``/``replicas()`` the servers in their current roles.
    """

    def __init__(self, *, service: str = "pressure", replicas: int = 1, sentinels: int = 3,
                 down_after_ms: int = 1000, binary: str | None = None) -> None:
        self.service = service
        self.binary = binary
        self._shape = (replicas, sentinels, down_after_ms)
        self._build()

    def _build(self) -> None:
        """Make the servers (none listening yet), each on its own free port."""
        replicas, sentinels, down_after_ms = self._shape
        binary = self.binary
        # a full sync starts at once, not after Redis 7's 5 s wait for more replicas
        fast = ("--repl-diskless-sync-delay", "0")
        # every port is picked before any server listens: each avoids the earlier picks (two
        # sentinels once drew one port; the second exited, and the first answered its PING)
        taken: set[int] = set()
        self.servers = [_unique(RedisServer(binary=binary, extra_args=fast), taken)]
        master_port = self.servers[0].port
        for _ in range(replicas):
            self.servers.append(_unique(RedisServer(binary=binary, extra_args=(
                *fast, "--replicaof", "127.0.0.1", str(master_port))), taken))
        self.sentinels = [_unique(SentinelServer(self.service, master_port, quorum=min(2, sentinels),
                                                 down_after_ms=down_after_ms, binary=binary), taken)
                          for _ in range(sentinels)]

    # -- addresses ----------------------------------------------------------------------

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", s.port) for s in self.sentinels]

    @property
    def url(self) -> str:
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinel_addresses)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def sentinel(self, **kwargs: Any) -> redis.sentinel.Sentinel:
        """A redis-py ``Sentinel`` of these sentinels (``kwargs``: its connection options)."""
        kwargs.setdefault("socket_timeout", 2.0)
        make: Any = redis.sentinel.Sentinel  # untyped in redis-py
        sentinel: redis.sentinel.Sentinel = make(self.sentinel_addresses, **kwargs)
        return sentinel

    def master_for(self, **kwargs: Any) -> redis.Redis:
        """A client of the master through the sentinels, as a user would build it."""
        sentinel: Any = self.sentinel()
        client: redis.Redis = sentinel.master_for(self.service, **kwargs)
        return client

    def master_address(self) -> tuple[str, int]:
        """The master the sentinels name now."""
        sentinel: Any = self.sentinel()
        host, port = sentinel.discover_master(self.service)
        return str(host), int(port)

    def master(self) -> RedisServer:
        port = self.master_address()[1]
        return next(server for server in self.servers if server.port == port)

    def replicas(self) -> list[RedisServer]:
        port = self.master_address()[1]
        return [server for server in self.servers if server.port != port]

    # -- start and stop -------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> SentinelTopology:
        try:
            for attempt in range(3):
                try:
                    for server in [*self.servers, *self.sentinels]:
                        server.start()
                    break
                except PortTaken:
                    # another process took a port between its pick and the server's bind: the
                    # servers refer to each other's ports, so all of them move to new ones
                    if attempt == 2:
                        raise
                    self.cleanup()
                    self._build()
            self.wait_replicated(timeout)
            self.wait_settled(timeout)
        except BaseException:
            self.cleanup()
            raise
        return self

    def wait_replicated(self, timeout: float = 20.0) -> None:
        """Wait until every replica's link to the master is up."""
        deadline = time.monotonic() + timeout
        for server in self.servers:
            client = redis.Redis(port=server.port, socket_timeout=2.0)
            try:
                while True:
                    info = client.info("replication")
                    if info.get("role") == "master" or info.get("master_link_status") == "up":
                        break
                    if time.monotonic() > deadline:
                        raise ServerUnavailable(f"replica on port {server.port} never synced: {info}")
                    time.sleep(0.05)
            finally:
                client.close()

    def wait_settled(self, timeout: float = 20.0, *, master_port: int | None = None) -> None:
        """Wait until every sentinel names the same master (``master_port`` if given), sees it
        up, knows all its running replicas and the other sentinels."""
        deadline = time.monotonic() + timeout
        running = [s for s in self.servers if s.process is not None and s.process.poll() is None]
        while True:
            for sentinel in self.sentinels:  # one that exited never settles: say why at once
                if sentinel.process is None or sentinel.process.poll() is not None:
                    code = None if sentinel.process is None else sentinel.process.returncode
                    raise ServerUnavailable(f"the sentinel on port {sentinel.port} exited with {code}: "
                                            f"{sentinel._log_tail()}")
            states: list[Any] = []
            for sentinel in self.sentinels:
                client = redis.Redis(port=sentinel.port, socket_timeout=2.0)
                try:
                    states.append(client.sentinel_master(self.service))
                except redis.RedisError:
                    states.append(None)
                finally:
                    client.close()
            ports = {state["port"] for state in states if state}
            if (all(states) and len(ports) == 1 and (master_port is None or ports == {master_port})
                    and all(state["is_master"] and not state["is_sdown"] and not state["is_odown"]
                            and state["num-slaves"] >= len(running) - 1
                            and state["num-other-sentinels"] >= len(self.sentinels) - 1
                            for state in states if state)):
                return
            if time.monotonic() > deadline:
                seen = {f"{s.port} (pid {s.process.pid if s.process else None}, answered by pid "
                        f"{_answering_pid(s.port)})": state for s, state in zip(self.sentinels, states)}
                raise ServerUnavailable(f"the sentinels did not settle: {seen}")
            time.sleep(0.1)

    def failover(self, timeout: float = 30.0) -> RedisServer:
        """``SENTINEL FAILOVER``: promote a replica; return it once every sentinel names it and
        it serves as master (the old master may still believe it is one for a while)."""
        old = self.master()
        client = redis.Redis(port=self.sentinels[0].port, socket_timeout=5.0)
        try:
            command: Any = client.execute_command
            command("SENTINEL", "FAILOVER", self.service)
        finally:
            client.close()
        return self.wait_new_master(old, timeout)

    def kill_master(self, timeout: float = 30.0) -> RedisServer:
        """SIGKILL the master; return the replica the sentinels promote."""
        old = self.master()
        old.kill()
        return self.wait_new_master(old, timeout)

    def wait_new_master(self, old: RedisServer, timeout: float = 30.0) -> RedisServer:
        deadline = time.monotonic() + timeout
        while True:
            try:
                new = self.master()
                if new is not old:
                    client = redis.Redis(port=new.port, socket_timeout=2.0)
                    try:
                        if client.info("replication").get("role") == "master":
                            return new
                    finally:
                        client.close()
            except (redis.RedisError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise ServerUnavailable("the sentinels promoted no replica")
            time.sleep(0.05)

    def pause_replication(self, replica: RedisServer, timeout: float = 10.0) -> None:
        """Cut ``replica``'s link to its master and keep it cut (the replica keeps serving
        and stays eligible for promotion): it authenticates to the master as a user that does
        not exist, and the master drops its replica connections. Writes made meanwhile reach
        no replica."""
        client = redis.Redis(port=replica.port, socket_timeout=2.0)
        master = redis.Redis(port=self.master().port, socket_timeout=2.0)
        try:
            client.config_set("masteruser", "pressure-cut-off")
            client.config_set("masterauth", "pressure-cut-off")
            master.client_kill_filter(_type="replica")
            deadline = time.monotonic() + timeout
            while client.info("replication").get("master_link_status") != "down":
                if time.monotonic() > deadline:
                    raise ServerUnavailable(f"replica on port {replica.port} kept its link")
                time.sleep(0.01)
        finally:
            client.close()
            master.close()

    def resume_replication(self, replica: RedisServer) -> None:
        """Undo ``pause_replication``: the replica connects to its master again."""
        client = redis.Redis(port=replica.port, socket_timeout=2.0)
        try:
            client.config_set("masterauth", "")
            client.config_set("masteruser", "")
        finally:
            client.close()

    def cleanup(self) -> None:
        for server in [*self.sentinels, *self.servers]:
            server.cleanup()

    def __enter__(self) -> SentinelTopology:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()
