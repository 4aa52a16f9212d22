"""A private Redis Cluster: masters (3 by default) each with its replicas, on free loopback ports.

``ClusterTopology`` starts every node (``redis-server --cluster-enabled yes``, each a
``RedisServer`` in its own temporary directory), spreads the 16384 slots over the masters,
introduces the nodes (CLUSTER MEET), attaches the replicas (CLUSTER REPLICATE) and waits until
every node says ``cluster_state:ok``; ``cleanup`` stops them. Tests use it to move a slot to
another master (``migrate_slot``: SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) and to
promote a replica (``failover``: CLUSTER FAILOVER on it) or kill a master (``kill_master``).

The nodes are tuned to act fast (``node_timeout_ms``, 1 s by default).
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import redis
import redis.cluster

from ..cluster import key_slot
from ._server import RedisServer, ServerUnavailable, free_ports

__all__ = ["ClusterTopology"]

SLOTS = 16384
#: Seconds to wait for the nodes to know one another before meeting them again.
MEET_AGAIN = 5.0


def _client(server: RedisServer) -> Any:  # redis-py's command methods are partly untyped
    return redis.Redis(port=server.port, socket_timeout=5.0, decode_responses=True)


def _cluster_port() -> int:
    """A free loopback port whose cluster bus port (10000 higher) is free too, both below the
    kernel's range for outgoing connections: a test restarts a killed node on its ports, and
    one of a client's connections once held the bus port by then ("Address already in use")."""
    return free_ports(10000)


def _node(binary: str | None, args: tuple[str, ...], taken: set[int]) -> RedisServer:
    """A node on a port that is not one of ``taken`` (the ports and bus ports of the nodes made
    before it, none of them listening yet: a node's port was once another's bus port, and the
    later of the two to start failed with "Address already in use"), added to it."""
    server = RedisServer(binary=binary, extra_args=args)
    port = _cluster_port()
    while {port, port + 10000} & taken:
        port = _cluster_port()
    taken.update((port, port + 10000))
    server.port = port
    return server


class ClusterTopology:
    """``masters`` masters with ``replicas`` replicas each, on 127.0.0.1 and free ports.

    ``url`` is its ``redis+cluster://`` URL; ``cluster_client()`` a redis-py ``RedisCluster``;
    ``master_of(key)`` the server serving a key's slot now.
    """

    def __init__(self, *, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000,
                 binary: str | None = None) -> None:
        args = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(node_timeout_ms), "--repl-diskless-sync-delay", "0",
                "--cluster-replica-validity-factor", "0")
        taken: set[int] = set()
        self.masters_at_start = [_node(binary, args, taken) for _ in range(masters)]
        self.replicas_at_start = [[_node(binary, args, taken) for _ in range(replicas)]
                                  for _ in range(masters)]
        self.servers = [*self.masters_at_start, *(r for group in self.replicas_at_start for r in group)]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.masters_at_start) + "/0"

    def cluster_client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A redis-py ``RedisCluster`` of these nodes, as a user would build it."""
        kwargs.setdefault("socket_timeout", 5.0)
        return redis.cluster.RedisCluster(host="127.0.0.1", port=self.masters_at_start[0].port, **kwargs)

    def running(self) -> list[RedisServer]:
        return [s for s in self.servers if s.process is not None and s.process.poll() is None]

    def node_id(self, server: RedisServer) -> str:
        client = _client(server)
        try:
            return str(client.execute_command("CLUSTER MYID"))
        finally:
            client.close()

    def master_of_slot(self, slot: int) -> RedisServer:
        """The server that serves ``slot`` now, as a running node sees it."""
        for server in self.running():
            client = _client(server)
            try:
                for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                    if int(start) <= slot <= int(end):
                        return next(s for s in self.servers if s.port == int(master[1]))
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise ServerUnavailable(f"no node names the master of slot {slot}")

    def master_of(self, key: str) -> RedisServer:
        return self.master_of_slot(key_slot(key))

    def replicas_of(self, master: RedisServer) -> list[RedisServer]:
        out = []
        for server in self.running():
            if server is master:
                continue
            client = _client(server)
            try:
                info = client.info("replication")
                if info.get("role") == "slave" and int(info.get("master_port", 0)) == master.port:
                    out.append(server)
            finally:
                client.close()
        return out

    # -- start and stop -------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> ClusterTopology:
        try:
            for server in self.servers:
                server.start()
            self._form(timeout)
        except BaseException:
            self.cleanup()
            raise
        return self

    def _form(self, timeout: float) -> None:
        masters = self.masters_at_start
        share = SLOTS // len(masters)
        for i, server in enumerate(masters):
            end = SLOTS - 1 if i == len(masters) - 1 else (i + 1) * share - 1
            client = _client(server)
            try:
                client.execute_command("CLUSTER ADDSLOTS", *range(i * share, end + 1))
            finally:
                client.close()
        deadline = time.monotonic() + timeout
        first = _client(masters[0])
        try:
            while True:
                for server in self.servers[1:]:
                    first.execute_command("CLUSTER MEET", "127.0.0.1", server.port)
                try:
                    self._wait(lambda c: int(c.cluster("info")["cluster_known_nodes"]) == len(self.servers),
                               min(deadline, time.monotonic() + MEET_AGAIN), "the nodes did not all meet")
                    break
                except ServerUnavailable:
                    # a handshake that timed out (a loaded machine) is never tried again by the
                    # nodes, and a node no one met is gossiped about by no one: meet them again
                    # (a node already met ignores it)
                    if time.monotonic() > deadline:
                        raise
        finally:
            first.close()
        for master, group in zip(masters, self.replicas_at_start):
            master_id = self.node_id(master)
            for replica in group:
                client = _client(replica)
                try:
                    while True:
                        try:
                            client.execute_command("CLUSTER REPLICATE", master_id)
                            break
                        except redis.ResponseError:  # it does not know that node yet
                            if time.monotonic() > deadline:
                                raise
                            time.sleep(0.05)
                finally:
                    client.close()
        self.wait_ok(deadline - time.monotonic())
        self.wait_replicated(deadline - time.monotonic())

    def _wait(self, ready: Any, deadline: float, what: str, servers: list[RedisServer] | None = None) -> None:
        for server in servers if servers is not None else self.running():
            client = _client(server)
            try:
                while True:
                    try:
                        if ready(client):
                            break
                    except redis.RedisError:
                        pass
                    if time.monotonic() > deadline:
                        raise ServerUnavailable(f"{what} (node on port {server.port})")
                    time.sleep(0.05)
            finally:
                client.close()

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every running node says ``cluster_state:ok`` and sees every slot served."""
        self._wait(lambda c: (c.cluster("info").get("cluster_state") == "ok"
                              and int(c.cluster("info").get("cluster_slots_ok", 0)) == SLOTS),
                   time.monotonic() + timeout, "the cluster did not become ok")

    def wait_replicated(self, timeout: float = 30.0) -> None:
        """Wait until every running replica's link to its master is up."""
        self._wait(lambda c: c.info("replication").get("role") == "master"
                   or c.info("replication").get("master_link_status") == "up",
                   time.monotonic() + timeout, "a replica did not sync")

    def wait_copied(self, master: RedisServer, timeout: float = 10.0) -> None:
        """Wait (WAIT) until every replica of ``master`` has acknowledged all of its writes, as
        before killing it in a test that needs them on the promoted replica (replication is
        asynchronous: a master killed at once may take its last writes with it)."""
        replicas = len(self.replicas_of(master))
        client = _client(master)
        try:
            copied = int(client.execute_command("WAIT", replicas, int(timeout * 1000)))
        finally:
            client.close()
        if copied < replicas:
            raise ServerUnavailable(f"{copied} of {replicas} replicas of {master.port} acknowledged its writes")

    # -- moving slots and masters ---------------------------------------------------------

    def migrate_slot(self, slot: int, target: RedisServer, *, pause: float = 0.0,
                     batch: int = 10) -> None:
        """Move ``slot`` (and its keys) to ``target``, as ``redis-cli --cluster reshard`` does:
        IMPORTING on the target, MIGRATING on the source, MIGRATE the keys ``batch`` at a
        time (sleeping ``pause`` between batches: a longer window for ASK), then SETSLOT
        NODE on every master."""
        source = self.master_of_slot(slot)
        if source is target:
            return
        src, dst = _client(source), _client(target)
        try:
            src_id, dst_id = self.node_id(source), self.node_id(target)
            dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
            src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
            while True:
                keys = src.execute_command("CLUSTER GETKEYSINSLOT", slot, batch)
                if not keys:
                    break
                src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
                if pause:
                    time.sleep(pause)
            for server in self.running():
                client = _client(server)
                try:
                    if client.info("replication").get("role") == "master":
                        client.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
                finally:
                    client.close()
        finally:
            src.close()
            dst.close()

    def failover(self, master: RedisServer, timeout: float = 30.0) -> RedisServer:
        """``CLUSTER FAILOVER`` on a replica of ``master``: return it once it serves as master."""
        replica = self.replicas_of(master)[0]
        client = _client(replica)
        try:
            client.execute_command("CLUSTER FAILOVER")
        finally:
            client.close()
        self._wait(lambda c: c.info("replication").get("role") == "master",
                   time.monotonic() + timeout, "the replica was not promoted", [replica])
        self.wait_ok(timeout)
        return replica

    def kill_master(self, master: RedisServer, timeout: float = 30.0) -> RedisServer:
        """SIGKILL ``master``; return the replica the cluster promotes."""
        replicas = self.replicas_of(master)
        master.kill()
        deadline = time.monotonic() + timeout
        while True:
            for replica in replicas:
                client = _client(replica)
                try:
                    if client.info("replication").get("role") == "master":
                        self.wait_ok(max(1.0, deadline - time.monotonic()))
                        return replica
                except redis.RedisError:
                    pass
                finally:
                    client.close()
            if time.monotonic() > deadline:
                raise ServerUnavailable("the cluster promoted no replica")
            time.sleep(0.05)

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()

    def __enter__(self) -> ClusterTopology:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()
