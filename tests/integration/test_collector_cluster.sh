#!/usr/bin/env bash
# Three collectors on a sharded ClickHouse cluster (issue 16): two shards,
# each a clickhouse-server on its own loopback address; the replicas test
# (test_collector_replicas.sh) with shard 2 restarted mid-stream as well,
# and each binary's rows checked to be on the one shard its build-id picks.
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
EP_REPLICAS_SHARDS=2 exec bash "$(dirname "$0")/test_collector_replicas.sh"
