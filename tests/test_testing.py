"""pressure.testing: the pytest plugin works in a user's own test suite, as its docstring says."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pressure.testing import RedisServer, ServerUnavailable, find_redis_server

#: A user's suite: a conftest enabling the plugin and tests using each fixture.
_CONFTEST = 'pytest_plugins = ["pressure.testing.pytest_plugin"]\n'
_TESTS = '''
import json
import os

import redis

import pressure


def test_session_server(redis_server, redis_url):
    assert redis_url == redis_server.url
    q = pressure.Queue("plugin-q", 2, url=redis_url)
    q.put("a")
    assert q.get() == "a"
    q.delete()
    q.disconnect()


def test_factory_server_survives_a_restart_with_aof(redis_server, redis_server_factory):
    server = redis_server_factory(appendonly=True)
    assert server.port != redis_server.port
    client = redis.Redis.from_url(server.url)
    client.set("kept", "yes")
    server.restart()
    assert client.get("kept") == b"yes"
    client.close()
    with open(os.environ["PLUGIN_REPORT"], "w") as f:
        json.dump({"port": server.port, "dir": server.dir, "session_port": redis_server.port}, f)
'''


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def test_pytest_plugin_fixtures_in_a_users_suite(tmp_path: Path) -> None:
    """A suite enabling the plugin gets a session server and a factory; after the run every
    server the fixtures started is stopped and its directory removed."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "conftest.py").write_text(_CONFTEST)
    (suite / "test_user.py").write_text(textwrap.dedent(_TESTS))
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
                         cwd=suite, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PLUGIN_REPORT": str(report)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
    seen = json.loads(report.read_text())
    assert not Path(seen["dir"]).exists()
    assert not _answers(seen["port"]) and not _answers(seen["session_port"])


def test_pressure_redis_server_chooses_the_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$PRESSURE_REDIS_SERVER names the server binary the tests (and RedisServer) run: a path,
    or a name looked up on PATH; anything else is refused, saying so, never replaced."""
    fake = tmp_path / "valkey-server"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PRESSURE_REDIS_SERVER", str(fake))
    assert find_redis_server() == str(fake)
    server = RedisServer()
    assert server.binary == str(fake)
    with pytest.raises(ServerUnavailable, match="valkey-server exited with 1"):
        server.start()
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PRESSURE_REDIS_SERVER", "valkey-server")
    assert find_redis_server() == str(fake)
    for wrong in (str(tmp_path / "missing"), str(tmp_path), "no-such-server-binary"):
        monkeypatch.setenv("PRESSURE_REDIS_SERVER", wrong)
        with pytest.raises(ServerUnavailable, match="PRESSURE_REDIS_SERVER=.* is not an executable file"):
            find_redis_server()


def test_a_cluster_forms_though_a_meeting_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """ClusterTopology: a CLUSTER MEET whose handshake never completes (a loaded machine: the
    nodes do not try it again, and no one gossips about a node no one met) is sent again, so
    the cluster still forms. Before, the fixture waited out its 30 s and failed (a CI run)."""
    import pressure.testing._cluster as cluster_module
    from pressure.testing import ClusterTopology

    real_client = cluster_module._client
    lost: list[int] = []

    class _LosesOneMeeting:
        def __init__(self, server: RedisServer) -> None:
            self._client = real_client(server)

        def execute_command(self, *args: object) -> object:
            if args[0] == "CLUSTER MEET" and not lost:
                lost.append(int(str(args[2])))  # the first meeting never happens
                return True
            return self._client.execute_command(*args)

        def __getattr__(self, name: str) -> object:
            return getattr(self._client, name)

    monkeypatch.setattr(cluster_module, "_client", _LosesOneMeeting)
    monkeypatch.setattr(cluster_module, "MEET_AGAIN", 1.0)
    with ClusterTopology(masters=3, replicas=0) as topo:
        assert lost and lost[0] in [s.port for s in topo.servers]
        client = real_client(topo.servers[0])
        try:
            assert int(client.cluster("info")["cluster_known_nodes"]) == 3
        finally:
            client.close()


def test_no_cluster_node_is_given_another_nodes_port_or_bus_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """ClusterTopology picks every node's port before any node listens: a port free for one
    node (and its bus port, 10000 higher) could be picked again for another, or be another's
    bus port, and the second node to start failed with "Address already in use" (a CI run:
    node bus port 20238 taken by another node's port). Each pick now avoids the earlier ones."""
    import pressure.testing._cluster as cluster_module
    from pressure.testing import ClusterTopology

    picks = iter([10238, 20238, 10238, 10500, 20500, 11000, 12000, 13000])
    monkeypatch.setattr(cluster_module, "_cluster_port", lambda: next(picks))
    topo = ClusterTopology(masters=2, replicas=1)  # made, never started: nothing listens
    try:
        ports = [s.port for s in topo.servers]
        assert ports == [10238, 10500, 11000, 12000]
        assert len({*ports, *(p + 10000 for p in ports)}) == 2 * len(ports)
    finally:
        for server in topo.servers:
            server.cleanup()  # their directories


def test_no_sentinel_topology_server_is_given_another_ones_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """SentinelTopology picks every port before any server listens: two of them drew one port
    (a CI run: the second sentinel exited with "Address already in use", the first answered its
    PING, and the sentinels never saw three of them). Each pick now avoids the earlier ones."""
    import pressure.testing._sentinel as sentinel_module
    import pressure.testing._server as server_module
    from pressure.testing import SentinelTopology

    picks = iter([10100, 10200, 10100, 10200, 10300, 10100, 10400, 10500])
    monkeypatch.setattr(server_module, "_free_port", lambda: next(picks))
    monkeypatch.setattr(sentinel_module, "free_ports", lambda: next(picks), raising=False)
    topo = SentinelTopology(replicas=1, sentinels=3)  # made, never started: nothing listens
    try:
        ports = [s.port for s in [*topo.servers, *topo.sentinels]]
        assert len(set(ports)) == len(ports) == 5, ports
        assert all(s.master_port == topo.servers[0].port for s in topo.sentinels)
    finally:
        topo.cleanup()  # their directories


def test_a_server_whose_port_is_taken_meanwhile_does_not_pass_for_started() -> None:
    """A port is picked free, then bound when the server starts: another process can take it
    in between. The server then exits ("Address already in use") while the other process
    answers its PING; start() says so instead of returning a server that is not there."""
    with RedisServer() as other:
        server = RedisServer()
        server.port = other.port  # taken between the pick and the bind
        with pytest.raises(ServerUnavailable, match="Address already in use"):
            server.start()
        assert server.process is None and not os.path.exists(server.dir)  # cleaned up


def test_a_sentinel_topology_moves_off_a_port_taken_meanwhile() -> None:
    """SentinelTopology picks every port before any server listens: when another process
    takes a sentinel's port meanwhile, the topology starts on new ports, and every sentinel
    that settles is its own process (not the other one, answering in its place)."""
    import redis

    from pressure.testing import SentinelTopology

    topo = SentinelTopology()
    with RedisServer() as other:
        topo.sentinels[1].port = other.port  # taken between the pick and the bind
        with topo:
            ports = [s.port for s in [*topo.servers, *topo.sentinels]]
            assert other.port not in ports and len(set(ports)) == len(ports)
            for sentinel in topo.sentinels:
                assert sentinel.process is not None and sentinel.process.poll() is None
                client = redis.Redis(port=sentinel.port, socket_timeout=2.0)
                assert client.info("server")["process_id"] == sentinel.process.pid
                client.close()
