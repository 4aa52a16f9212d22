"""A Prometheus exporter: ``pressure serve-metrics --port N`` (the ``metrics`` extra,
``prometheus_client``).

``Collector`` reads the queues and executors under a prefix at each scrape (a few
pipelined round trips whatever their number; nothing is cached between scrapes):

* per queue (labels ``prefix``, ``queue``, ``kind``): ``pressure_queue_size``,
  ``pressure_queue_bound`` (0 = unbounded), ``pressure_queue_closed``,
  ``pressure_queue_produced_total``, ``pressure_queue_consumed_total``,
  ``pressure_queue_in_flight``, ``pressure_queue_consumers``,
  ``pressure_queue_dead_letters``, ``pressure_queue_unfinished_tasks``,
  ``pressure_queue_delayed`` (delayed items not due yet: ``statistics().delayed``),
  ``pressure_queue_redelivered`` (items waiting in the queue with a state of their own: given
  back after a delivery, kicked, or put with a ttl, ttr or key; each of identical copies counts);
  in flight, consumers, dead letters and unfinished tasks are counted as
  ``Queue.statistics()`` counts them (``taken``, ``consumers``, ``dead_letters``,
  ``unfinished_tasks``: lua/stats.lua);
* per executor (labels ``prefix``, ``executor``): ``pressure_executor_tasks{state}``
  (queued, running), ``pressure_executor_tasks_finished_total{state}`` (done, failed,
  retried, lost) and ``pressure_executor_workers_alive``;
* ``pressure_queue_error`` (labels ``prefix``, ``queue``, ``kind``): 1 for a queue whose keys
  could not be read at this scrape (a key of the wrong type: WRONGTYPE), whose other metrics
  are then left out, 0 for every other queue; a WARNING (event ``metrics_unreadable``, on
  the ``pressure.metrics`` logger, rate-limited) names the queue and the error. The other
  queues are reported as usual. ``pressure_executor_error`` likewise, per executor;
* ``pressure_up``: 1 if Redis answered this scrape, else 0 (and nothing else is reported; a
  WARNING, event ``metrics_unreadable`` with the ``server``, says why).

Use it in a registry of your own: ``registry.register(Collector(url=..., prefix=...))``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as _Base

from .. import _log
from ..connection import Backend, ConnectionConfig
from ..errors import PressureError
from ..keys import resolve_prefix
from ._inventory import executor_rows, find_executors, find_queues, queue_rows

__all__ = ["Collector"]


class Collector(_Base):
    """The figures of every queue and executor under ``prefix`` (default: PRESSURE_PREFIX,
    else ``__pressure__``) on the server of ``url`` or ``connection`` (default: as for a
    queue), read at each scrape."""

    def __init__(self, *, url: str | None = None, connection: redis.Redis | None = None,
                 prefix: str | None = None) -> None:
        self._backend = Backend(ConnectionConfig.resolve(url, connection), connection)
        self._prefix = resolve_prefix(prefix)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("pressure_up", "Whether Redis answered this scrape", labels=["prefix"])
        try:
            queues = queue_rows(self._backend, self._prefix, find_queues(self._backend, self._prefix))
            executors = executor_rows(self._backend, self._prefix, find_executors(self._backend, self._prefix))
        except PressureError as exc:
            _log.event(_log.METRICS, logging.WARNING, "metrics_unreadable", "metrics of prefix %r on %s not read: %s",
                       self._prefix, self._backend.config.url, exc, prefix=self._prefix,
                       server=self._backend.config.url, error=str(exc))
            up.add_metric([self._prefix], 0)
            yield up
            return
        up.add_metric([self._prefix], 1)
        yield up
        labels = ["prefix", "queue", "kind"]

        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "size": gauge("pressure_queue_size", "Items in the queue"),
            "bound": gauge("pressure_queue_bound", "The queue's bound (0: unbounded)"),
            "closed": gauge("pressure_queue_closed", "1 if the queue is closed (shut down)"),
            "produced": CounterMetricFamily("pressure_queue_produced", "Items ever put", labels=labels),
            "consumed": CounterMetricFamily("pressure_queue_consumed", "Items ever got", labels=labels),
            "in_flight": gauge("pressure_queue_in_flight",
                               "Items consumers hold: delivered, not settled (statistics().taken)"),
            "consumers": gauge("pressure_queue_consumers",
                               "Consumers registered on the queue: not left, not found dead"),
            "unfinished": gauge("pressure_queue_unfinished_tasks",
                                "Tasks whose processing has not ended: what join() waits for"),
            "dead_letters": gauge("pressure_queue_dead_letters", "Items in the dead-letter list"),
            "delayed": gauge("pressure_queue_delayed", "Delayed items not due yet (statistics().delayed)"),
            "redelivered": gauge("pressure_queue_redelivered",
                                 "Items waiting with a state of their own (given back, kicked, or put with a "
                                 "ttl, ttr or key)"),
        }
        errors = gauge("pressure_queue_error",
                       "1 if the queue's keys could not be read at this scrape (its other metrics are left out)")
        for row in queues:
            values = [self._prefix, row.name, row.kind]
            errors.add_metric(values, 0.0 if row.error is None else 1.0)
            if row.error is not None:
                _log.event(_log.METRICS, logging.WARNING, "metrics_unreadable",
                           "%s queue %r under prefix %r left out of the metrics: its keys cannot be read: %s",
                           row.kind, row.name, self._prefix, row.error, queue=row.name, prefix=self._prefix,
                           error=row.error)
                continue
            for field, family in families.items():
                family.add_metric(values, float(getattr(row, field)))
        yield from families.values()
        yield errors
        labels = ["prefix", "executor", "state"]
        pending = GaugeMetricFamily("pressure_executor_tasks", "Tasks queued or running", labels=labels)
        finished = CounterMetricFamily("pressure_executor_tasks_finished",
                                       "Tasks done, failed, retried (started again) and lost", labels=labels)
        workers = GaugeMetricFamily("pressure_executor_workers_alive",
                                    "Workers heard from in the last few seconds", labels=labels[:2])
        broken = GaugeMetricFamily("pressure_executor_error",
                                   "1 if the executor's keys could not be read at this scrape (its other "
                                   "metrics are left out)", labels=labels[:2])
        for ex in executors:
            broken.add_metric([self._prefix, ex.name], 0.0 if ex.error is None else 1.0)
            if ex.error is not None:
                _log.event(_log.METRICS, logging.WARNING, "metrics_unreadable",
                           "executor %r under prefix %r left out of the metrics: its keys cannot be read: %s",
                           ex.name, self._prefix, ex.error, executor=ex.name, prefix=self._prefix, error=ex.error)
                continue
            pending.add_metric([self._prefix, ex.name, "queued"], ex.queued)
            pending.add_metric([self._prefix, ex.name, "running"], ex.running)
            for state in ("done", "failed", "retried", "lost"):
                finished.add_metric([self._prefix, ex.name, state], getattr(ex, state))
            workers.add_metric([self._prefix, ex.name], len(ex.workers))
        yield from (pending, finished, workers, broken)
