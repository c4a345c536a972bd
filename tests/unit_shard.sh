#!/usr/bin/env bash
# Runs shard K of N of the doctest unit tests: the test cases in a fixed shuffled order (doctest --order-by=rand
# with a fixed seed: the same order in every run and build), cut into N consecutive ranges; shard K runs the
# K-th (doctest --first/--last). Together the N shards run every test case once; a failure fails its shard.
#   usage: tests/unit_shard.sh UNIT_TEST_BINARY K N
set -euo pipefail
bin="$1" k="$2" n="$3"
total=$("$bin" --count | sed -n 's/.*test cases passing the current filters: \([0-9][0-9]*\).*/\1/p')
[ -n "$total" ] || { echo "unit_shard: could not count the test cases of $bin" >&2; exit 1; }
per=$(( (total + n - 1) / n ))
first=$(( (k - 1) * per + 1 ))
last=$(( k * per ))
[ "$first" -le "$total" ] || { echo "unit_shard: shard $k of $n is empty ($total test cases)"; exit 0; }
exec "$bin" --order-by=rand --rand-seed=20261123 --first="$first" --last="$last"
