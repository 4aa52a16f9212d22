"""A queue's name never reaches another queue's keys (issue 15, item 3).

``Queue("jobs:closed").put(...)`` used to shut queue ``jobs`` (its ``:closed`` key), and
``Queue("jobs:bound").delete()`` to delete ``jobs``'s bound and orphan its items. Names whose
keys would be another queue's are refused (pressure/keys.py ``check_name``) before anything is
sent; every other name is left alone, so spec clients keep sharing ordinary names."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis

import pressure
from pressure.keys import ExecutorKeys, QueueKeys, check_name

#: every word a key below a queue's base uses, plus ordinary ones
WORDS = ["jobs", "eu", "bound", "producer", "consumer", "producer_free", "consumer_free", "not_full",
         "closed", "stats", "produced_messages", "produced_bytes", "consumed_messages", "consumed_bytes",
         "pressure", "inbox", "inflight", "held", "logs", "kind", "dead", "executor", "claims", "tasks",
         "results"]


def _names(max_parts: int) -> list[str]:
    return [":".join(p) for n in range(1, max_parts + 1) for p in itertools.product(WORDS, repeat=n)]


def _valid(name: str, what: str = "queue") -> bool:
    try:
        check_name(name, what)
    except ValueError:
        return False
    return True


def _families(k: QueueKeys) -> tuple[str, ...]:
    """Key prefixes below which a queue keeps a key per consumer or per log group."""
    return (k.inbox_prefix, k.inflight_prefix, k.held_prefix, k.logs + ":")


def test_no_two_valid_names_share_a_key() -> None:
    """Every valid name of up to three parts (from every word pressure's and the protocol's keys
    use): no key of one is a key of another, nor lies in another's per-consumer key families;
    the same for Executors (their own keys and their two queues)."""
    owner: dict[str, str] = {}
    families: dict[str, str] = {}
    valid = [n for n in _names(3) if _valid(n)]
    for name in valid:
        k = QueueKeys.build("p", name)
        for key in k.all_keys():
            assert owner.setdefault(key, name) == name, f"{name!r} and {owner[key]!r} share {key!r}"
        for fam in _families(k):
            families[fam] = name
    for name in [n for n in _names(2) if _valid(n, "executor")]:
        e = ExecutorKeys.build("p", name)
        for key in e.all_keys():
            assert owner.setdefault(key, f"executor {name}") == f"executor {name}", (name, key, owner[key])
        for queue in (e.tasks, e.results_prefix + "x1"):
            assert _valid(queue), f"executor {name!r} would use a refused queue name {queue!r}"
    for key, name in owner.items():
        parts = key.split(":")
        for i in range(1, len(parts)):
            fam = ":".join(parts[:i]) + ":"
            if fam in families and families[fam] != name:
                raise AssertionError(f"{name!r}'s key {key!r} lies among {families[fam]!r}'s per-consumer keys")


@pytest.mark.parametrize("suffix", [s.removeprefix("p:jobs:") for s in QueueKeys.build("p", "jobs").all_keys()[1:]]
                         + ["pressure:inbox:c1", "pressure:inflight:c1", "pressure:held:c1", "pressure:logs:g",
                            "executor:claims"])
def test_every_key_suffix_is_refused(suffix: str) -> None:
    with pytest.raises(ValueError, match=r"^queue name 'jobs:.*' would share keys with queue 'jobs'"):
        check_name(f"jobs:{suffix}")


@pytest.mark.parametrize("name", ["jobs", "a:b", "jobs:consumer:eu", "consumer", "closed", "bound:x",
                                  "stats", "jobs:tasks", "jobs:results:e1", "{jobs}:eu", "lifo:jobs"])
def test_ordinary_names_are_left_alone(name: str) -> None:
    check_name(name)


@pytest.mark.parametrize("make", [
    lambda n, url, prefix: pressure.Queue(n, 3, url=url, prefix=prefix),
    lambda n, url, prefix: pressure.Queue(n, 3, url=url, prefix=prefix, reliable=True),
    lambda n, url, prefix: pressure.LifoQueue(n, 3, url=url, prefix=prefix),
    lambda n, url, prefix: pressure.PriorityQueue(n, 3, url=url, prefix=prefix),
], ids=["fifo", "reliable", "lifo", "priority"])
@pytest.mark.parametrize("suffix", ["closed", "bound", "not_full", "producer_free", "stats:produced_messages",
                                    "pressure:dead"])
def test_a_colliding_name_leaves_the_other_queue_exactly_as_it_was(url: str, prefix: str, r: redis.Redis,
                                                                   make: Any, suffix: str) -> None:
    """The attack from the issue, on a real server: the other queue's keys stay byte-identical."""
    jobs = make("jobs", url, prefix)
    jobs.put((1, "x"))
    before = {key: r.dump(key) for key in r.keys(f"{prefix}:*")}
    with pytest.raises(ValueError, match="would share keys with queue 'jobs'"):
        make(f"jobs:{suffix}", url, prefix)
    assert {key: r.dump(key) for key in r.keys(f"{prefix}:*")} == before
    assert jobs.get_nowait() == (1, "x")
    jobs.delete()


def test_an_executor_name_that_would_share_keys_is_refused(url: str, prefix: str, r: redis.Redis) -> None:
    with pytest.raises(ValueError, match="^executor name 'jobs:closed' would share keys with queue 'jobs'"):
        pressure.Executor("jobs:closed", url=url, prefix=prefix)
    assert r.keys(f"{prefix}:*") == []


@pytest.mark.parametrize("group", ["g:tail", "g:committed"])
def test_a_log_group_that_would_share_another_groups_keys_is_refused(url: str, prefix: str, r: redis.Redis,
                                                                     group: str) -> None:
    """A group's log is '<logs>:<group>', with '<logs>:<group>:tail' and ':committed' beside it."""
    from pressure.spark.log import QueueLog

    q: pressure.Queue[Any] = pressure.Queue("jobs", url=url, prefix=prefix)
    before = {key: r.dump(key) for key in r.keys(f"{prefix}:*")}
    with pytest.raises(ValueError, match=f"^group '{group}' would share keys with group 'g'"):
        QueueLog("jobs", group, url=url, prefix=prefix)
    assert {key: r.dump(key) for key in r.keys(f"{prefix}:*")} == before
    QueueLog("jobs", "g:eu", url=url, prefix=prefix)
    q.delete()
