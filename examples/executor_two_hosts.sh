#!/bin/sh
# Two worker groups that play two hosts on this machine, and executor_after.py using them.
#
# On real hosts, run one `python -m pressure worker primes ...` line on each (with the same
# Redis, and this repository's examples/ importable there) and drop PRESSURE_HOSTNAME.
# PRESSURE_HOSTNAME makes a group look like another host: its dead workers' tasks are then
# redelivered after --visibility-timeout instead of at once.
#
#   REDIS_URL=redis://127.0.0.1:6379/0 sh examples/executor_two_hosts.sh
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export PYTHONPATH=examples  # workers import the task functions from executor_after.py

PRESSURE_HOSTNAME=host-a "$PYTHON" -m pressure worker primes --processes 2 --visibility-timeout 10 &
a=$!
PRESSURE_HOSTNAME=host-b "$PYTHON" -m pressure worker primes --processes 2 --visibility-timeout 10 &
b=$!
trap 'kill -TERM $a $b; wait $a $b' EXIT  # each group lets its tasks finish, then exits
sleep 2  # not needed for correctness (tasks wait in Redis), only so both groups get some

EXECUTOR_NAME=primes "$PYTHON" examples/executor_after.py
