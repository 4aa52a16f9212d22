"""Executor(serializer="cloudpickle") (issue 17 item 5): lambdas, closures and functions of
__main__ reach workers, which load tasks with plain pickle."""

from __future__ import annotations

import pickle

import pytest
import redis

import pressure


def test_cloudpickle_runs_a_lambda_and_a_closure(url: str, prefix: str) -> None:
    base = 40
    with pressure.Executor("cp", url=url, prefix=prefix, max_workers=1, serializer="cloudpickle") as ex:
        assert ex.submit(lambda x: x * 2, 21).result(timeout=60) == 42
        assert list(ex.map(lambda x: base + x, [1, 2])) == [41, 42]


def test_plain_pickle_fails_a_lambdas_future_as_process_pool_executor_does(url: str, prefix: str) -> None:
    with pressure.Executor("p", url=url, prefix=prefix, max_workers=1) as ex:
        with pytest.raises((pickle.PicklingError, AttributeError)):
            ex.submit(lambda x: x, 1).result(timeout=60)


@pytest.mark.parametrize("bad, error", [("yaml", ValueError), (3, TypeError)])
def test_an_unknown_serializer_is_refused_before_anything_is_made(url: str, prefix: str, r: redis.Redis,
                                                                   bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="serializer must be 'pickle' or 'cloudpickle'"):
        pressure.Executor("bad", url=url, prefix=prefix, serializer=bad)  # type: ignore[arg-type]
    assert r.keys(f"{prefix}:*") == []
