#!/bin/sh
# Two worker groups that play two hosts on this machine, and executor_after.py using them.
#
# On real hosts, run one `python -m pressure worker primes ...` line on each (with the same
# Redis, the same PRESSURE_AUTHKEY, and this repository's examples/ importable there) and drop
# PRESSURE_HOSTNAME: export PRESSURE_AUTHKEY=$(python -m pressure keygen) once, and that value on
# every host (tasks and results are signed; without a key, workers and executor refuse a Redis
# that is not on this host).
# PRESSURE_HOSTNAME makes a group look like another host: its dead workers' tasks are then
# redelivered after --visibility-timeout instead of at once.
#
#   REDIS_URL=redis://127.0.0.1:6379/0 sh examples/executor_two_hosts.sh
#
# The interpreter: $PYTHON if set, else the active virtualenv's, else this project's .venv
# (made by the README's setup command; it need not be activated), else python3.
set -eu
cd "$(dirname "$0")/.."
has_pressure() { "$1" -c 'import pressure' >/dev/null 2>&1; }
if [ -z "${PYTHON:-}" ]; then
    if [ -n "${VIRTUAL_ENV:-}" ] && has_pressure "$VIRTUAL_ENV/bin/python"; then
        PYTHON=$VIRTUAL_ENV/bin/python
    elif has_pressure "$PWD/.venv/bin/python"; then
        PYTHON=$PWD/.venv/bin/python
    else
        PYTHON=python3
    fi
fi
if ! has_pressure "$PYTHON"; then
    echo "$0: $PYTHON cannot import pressure. Run the README's setup here" \
         "(python3 -m venv .venv && .venv/bin/python -m pip install -e .)," \
         "or set PYTHON=/path/to/a/python/with/pressure" >&2
    exit 1
fi
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export PYTHONPATH=examples  # workers import the task functions from executor_after.py

# --create: the workers start before the executor, so they make its task queue and wait for it
# (without it, a worker for an executor that does not exist yet says so and exits)
PRESSURE_HOSTNAME=host-a "$PYTHON" -m pressure worker primes --create --processes 2 --visibility-timeout 10 &
a=$!
PRESSURE_HOSTNAME=host-b "$PYTHON" -m pressure worker primes --create --processes 2 --visibility-timeout 10 &
b=$!
trap 'kill -TERM $a $b; wait $a $b' EXIT  # each group lets its tasks finish, then exits
sleep 2  # not needed for correctness (tasks wait in Redis), only so both groups get some

EXECUTOR_NAME=primes "$PYTHON" examples/executor_after.py
