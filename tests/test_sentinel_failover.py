"""Through Sentinel failovers: a demoted master's writes fail loudly, ``durability=`` turns
the silent loss of an acknowledged put into an error, and a producer and a consumer keep
going after a bounded stall. Each test starts its own master + replica + 3 sentinels."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import pressure
from pressure.testing import SentinelTopology

pytestmark = pytest.mark.slow


@pytest.fixture
def topology() -> Iterator[SentinelTopology]:
    with SentinelTopology() as topo:
        yield topo


@pytest.fixture
def prefix() -> str:
    return f"f{uuid.uuid4().hex[:12]}"


def test_durability_turns_the_silent_loss_into_an_error(topology: SentinelTopology, prefix: str) -> None:
    client = topology.master_for()
    plain: pressure.Queue[Any] = pressure.Queue("q", connection=client, prefix=prefix)
    durable: pressure.Queue[Any] = pressure.Queue(
        "q", connection=client, prefix=prefix, durability=pressure.Durability(replicas=1, timeout=0.3))
    durable.put("replicated")  # a replica confirmed it
    replica = topology.replicas()[0]
    topology.pause_replication(replica)
    plain.put("acked")  # returns: asynchronous replication
    started = time.monotonic()
    with pytest.raises(pressure.NotReplicated) as info:
        durable.put("refused")  # never returns as if it were safe
    assert 0.3 <= time.monotonic() - started < 3
    assert (info.value.confirmed, info.value.wanted) == (0, 1)
    assert isinstance(info.value, pressure.OutcomeUnknown)
    promoted = topology.kill_master()
    assert promoted is replica
    # the promoted replica lacks what its link did not carry: the plain put was lost silently
    assert [plain.get(timeout=5)] == ["replicated"]
    with pytest.raises(pressure.Empty):
        plain.get(timeout=0.2)
    plain.disconnect()
    durable.disconnect()
    client.close()


def test_a_demoted_master_refuses_loudly_on_a_direct_url(topology: SentinelTopology, prefix: str) -> None:
    old = topology.master()
    q: pressure.Queue[Any] = pressure.Queue("q", url=old.url, prefix=prefix)
    q.put(1)
    new = topology.failover()
    deadline = time.monotonic() + 30
    probe = redis.Redis(port=old.port)
    while probe.info("replication")["role"] != "slave":  # the sentinels demote it (~10 s)
        assert time.monotonic() < deadline
        time.sleep(0.1)
    probe.close()
    with pytest.raises(pressure.BackendError, match="read only replica") as info:
        q.put(2)  # a replica now: refused for the socket timeout, then "did not run"
    assert not isinstance(info.value, pressure.OutcomeUnknown)
    assert "did not run" in str(info.value)
    assert new is not old
    q.disconnect()


# A SIGKILLed master: the sentinels promote the replica with the most data, so one replica's
# confirmation suffices, and the second replica confirms writes to the new master. SENTINEL
# FAILOVER: the old master keeps taking writes for ~10 s after the promotion, and the replica
# not promoted confirms them until it is moved to the new master (then they are lost with it):
# only a confirmation by every replica (2 of 2) rules that out; the new master then has one
# replica until the old one rejoins as a replica, so durable writes stall until it does.
# "kill, large": the same with 5,000-byte payloads, which move natively (a MULTI/EXEC around the
# script, a WAIT behind it).
@pytest.mark.parametrize("event,replicas,pad", [("failover", 2, 0), ("kill", 1, 0), ("kill", 1, 5000)],
                         ids=["failover", "kill", "kill-large"])
def test_producer_and_consumer_keep_going_through_a_failover(
        event: str, replicas: int, pad: int, prefix: str, chaos_figures: list[str]) -> None:
    from tests.chaos_helpers import PaddedSerializer
    from tests.sentinel_traffic import run

    with SentinelTopology(replicas=2) as topo:
        def make() -> pressure.Queue[Any]:
            return pressure.Queue("q", connection=topo.master_for(), prefix=prefix, reliable=True,
                                  visibility_timeout=2.0, serializer=PaddedSerializer(pad),
                                  durability=pressure.Durability(replicas=replicas, timeout=0.5))

        def happen() -> None:
            if event == "kill":
                topo.kill_master()
                return
            old = topo.master()
            topo.failover()
            probe = redis.Redis(port=old.port)
            deadline = time.monotonic() + 30
            while probe.info("replication")["role"] != "slave" and time.monotonic() < deadline:
                time.sleep(0.1)  # the window where the old master still takes writes
            probe.close()

        traffic = run(make, happen, producer_pause=0.001, consumer_pause=0.002)
    payloads = f", {pad}-byte payloads" if pad else ""
    chaos_figures.append(f"sentinel {event}{payloads}, durability {replicas} of 2 replicas: {traffic.summary()}")
    assert traffic.acked and not traffic.lost(), traffic.summary()
    # a duplicate only where a put or an ack raised (the caller was told it was unsure)
    assert len(traffic.duplicated()) <= len(traffic.unsure) + traffic.unsure_acks, traffic.summary()
    assert traffic.put_stall < 25 and traffic.get_stall < 25, traffic.summary()
