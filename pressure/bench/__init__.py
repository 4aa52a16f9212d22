"""``python -m pressure bench``: pressure.Queue and pressure.Executor against their baselines.

Queues, executors and payload sizes by default, on one machine and one Redis server:
``--no-executor`` runs only the queues, ``--executor`` only the executors, ``--payload``
only the payload sizes, ``--batch`` only the batches, ``--spark`` only the Spark data
source, ``--server-cost`` only the Redis CPU per message, ``--sharded`` only the sharded
queues (on a cluster of its own), ``--pool`` only the pools.

**Queues.** For each transport the benchmark starts one producer process and one consumer
process (multiprocessing, start method ``spawn``) and moves the same raw-bytes
payloads through it, in two phases:

* **throughput** - ``--count`` messages as fast as the producer can put them;
  the rate is ``count / (last get - start)``, where both processes leave a
  common start barrier together (after a short warm-up that opens the
  connections and loads the Lua scripts); with ``--repeat R`` the transports
  take turns for R rounds and each one's best round is reported;
* **latency** - ``--latency-count`` messages paced at ``--rate`` per second;
  each payload starts with the producer's ``time.monotonic_ns()`` (CLOCK_MONOTONIC,
  which every process on a Linux host shares), so the consumer measures
  put-to-get latency directly. p50 and p99 are reported.

The transports:

1. ``pressure.Queue`` unbounded (``maxsize=0``), ``serializer="bytes"``;
2. ``pressure.Queue`` with ``maxsize=--maxsize``;
3. ``pressure.Queue(reliable=True)``, each get followed by its ``task_done()``;
4. raw redis-py ``LPUSH`` / ``BRPOP`` on a plain list - the baseline;
5. ``multiprocessing.Queue``;
6. "spec literal": the protocol's reference command sequence, one Redis
   command per round trip, as ``pressure.testing.spec_client`` runs it (the
   literal client the compatibility kit tests against; only the errata that
   make a literal client unusable are fixed) - 12 round trips per put and 11
   per get (with a bound of 0, Get re-arms ``:not_full`` without an ``LLEN``);
7. ``pressure.aio.AsyncQueue(reliable=True)``, each get and its ``task_done()``
   awaited one at a time on the process's event loop;
8. raw ``redis.asyncio`` ``LPUSH`` / ``BRPOP``, awaited the same way - the
   asyncio baseline.

Results come back to the parent over ``multiprocessing`` pipes, never through
the transport being measured.

**Executors** (``pressure.bench.executor``): ``pressure.Executor`` against
``concurrent.futures.ProcessPoolExecutor``, no-op tasks/s and CPU-bound wall time.

**Payload sizes** (``pressure.bench.payload``, in the default run, or alone with
``--payload``): for each of ``--payload-sizes``, one producer and one consumer process move
up to ``--count`` items (at most 64 MiB, at least 256 items) through raw redis-py
LPUSH/BRPOP, the floor of keeping each item until received (raw LPUSH; DEL of the held list
and BLMOVE into it per get), ``pressure.Queue`` unbounded, bounded and reliable, raw
LPUSH/RPOP batches of 100 and 500 against ``put_many``/``get_many``, and
``multiprocessing.Queue``; msgs/s, MB/s and the Redis main thread's CPU per message, the
median and range of ``--repeat`` (3) rounds, the ratios to raw (pressure default's to the
floor too), and the goals.

**Batches** (``pressure.bench.batch``, opt-in with ``--batch``, which runs only it: it takes
about a minute per round): ``put_many``/``get_many`` against raw redis-py batches and
``multiprocessing.Queue``, for several batch and payload sizes, 1x1 and 2x2 processes; plus
single-item throughput and latency against raw LPUSH/BRPOP and Redis memory per queued item.

**Server cost** (``pressure.bench.server_cost``, opt-in with ``--server-cost``, which runs only
it): Redis CPU (``INFO cpu`` of the main thread) and commands (``commandstats``) per message for
single items (unbounded, bounded), acknowledged gets and batches of 100 and 500, against the
same work done with plain commands on a plain list; prints the ratios and issue 16's goals,
and beside single items and batches the floor (``_floor``: the protocol's Put and Get, and
keeping what is taken until the client has it, in one-key scripts doing nothing more).
``--server-cost-instructions`` counts instead the instructions a private server run under
valgrind's callgrind executes per message (``_callgrind``): repeatable on a busy machine; and
then where a put's and a get's script call spend theirs (``script_cost``): the call itself, the
library's definitions Lua makes again on every call, and the rest; and the instructions the
clients execute per put and per get (``client_cost``: pressure's, raw redis-py's and the script
floor's, each client a Python process under callgrind).

**Sharded queues** (``pressure.bench.sharded``, opt-in with ``--sharded``, which runs only it):
``pressure.ShardedQueue`` with 1, 2, 3 and 6 shards (``--sharded-shards``) on a local 3-master
Redis Cluster the section starts, ``--sharded-procs`` producer and consumer processes,
single items and batches (``--sharded-batch``), against raw redis-py LPUSH/BRPOP on one node;
msgs/s, ratios to 1 shard and to raw, and each master's Redis CPU.

**Spark** (``pressure.bench.spark``, opt-in with ``--spark``, which runs only it; needs the
``spark`` extra and Java): the ``pressure`` data source's writer and readers against raw
redis-py LPUSH/RPOP batches run from Spark tasks, rows/s in one local SparkSession.

Nothing is flushed: every queue, list and executor has a unique (uuid) name
and its keys are deleted afterwards. Without ``--url`` the benchmark uses
``REDIS_URL`` if it answers, else starts a private ``redis-server``
(``pressure.testing.RedisServer``) and stops it at the end.

The exit status is 0 whether or not the goals are met: this is a report.
"""

from __future__ import annotations

from ._cli import config_from_args as config_from_args
from ._cli import main as main
from ._cli import parse_args as parse_args
from ._cli import run as run
from ._harness import BenchConfig as BenchConfig
from ._harness import PhaseResult as PhaseResult

__all__ = ["BenchConfig", "PhaseResult", "config_from_args", "main", "parse_args", "run"]

# The subpackage (the command's --help text is bench_command's docstring, in _cli):
#   __init__   this map and the public names
#   _cli       the command (bench_command, its options, parse_args), config_from_args and main,
#              which runs the sections
#   _harness   what every section shares: BenchConfig, the constants, the producer/consumer
#              phase runner and its Transport, the server choice, the report helpers;
#              it imports no section
#   queues     the queue section: the eight transports, their table and goals
#   batch      --batch: put_many/get_many cells, single items (queues' transports), memory
#   payload    --payload (and the default run): queues' and batch's transports per payload size,
#              with the server's CPU per message
#   executor   --executor: pressure.Executor against ProcessPoolExecutor
#   spark      --spark: the Spark data source against raw redis-py from Spark tasks
#   server_cost --server-cost: Redis CPU and commands per message against raw redis-py
#   _callgrind  --server-cost-instructions: a private redis-server under callgrind
#   script_cost --server-cost-instructions: a put's and a get's script call, in parts
#   client_cost --server-cost-instructions: the clients' instructions per put and per get
#   sharded    --sharded: ShardedQueue on a local 3-master cluster, 1..N shards, against raw
#   __main__   python -m pressure.bench
# Sections import _harness (batch imports queues, payload queues and batch, client_cost the
# transports of queues and _floor), never the package
# nor _cli nor each other's private names; _cli imports queues and loads the other sections
# when they run.
