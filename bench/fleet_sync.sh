#!/usr/bin/env bash
# What keeping collector replicas in step costs at fleet scale (issue 16):
# every collector on a ClickHouse store reads all nodes (and the unfinished
# sessions) from it every second. With FLEET_NODES (10,000) nodes, each put
# FLEET_VERSIONS (6) times as replicas do (a minute of 10 s batches, before
# ClickHouse merges them), prints "name: value" lines: ClickHouse's time for
# the nodes' read (best of 5) and its size, and an idle collector's CPU per
# second over FLEET_WINDOW_S (20) seconds.
# usage: bench/fleet_sync.sh [BUILD]
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
nodes=${FLEET_NODES:-10000}
versions=${FLEET_VERSIONS:-6}
window=${FLEET_WINDOW_S:-20}
case $build in /*) ;; *) build=$PWD/$build ;; esac
EDGEPROF=$build/edgeprof
source tests/integration/lib.sh
source tests/integration/clickhouse.sh
source tests/integration/collector.sh
clickhouse_start >&2 || exit 1
store="clickhouse:$CLICKHOUSE_URL/?database=fleet_sync"
# a collector creates the schema
start_collector schema --store "$store" --listen 127.0.0.1:0 >&2 || exit 1
stop_pid "$COLLECTOR_PID"
# the nodes as collectors write them: serialised Node records, hex
python3 - "$CLICKHOUSE_URL" "$nodes" "$versions" <<'EOF'
import struct, sys, time, urllib.parse, urllib.request
url, nodes, versions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def insert(sql, rows):
    q = url + '/?database=fleet_sync&query=' + urllib.parse.quote(sql)
    urllib.request.urlopen(urllib.request.Request(q, data=''.join(rows).encode())).read()
def varint(n):
    out = b''
    while True:
        b, n = n & 0x7f, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])
def text(field, v):
    v = v.encode()
    return varint(field << 3 | 2) + varint(len(v)) + v
now = int(time.time() * 1e9)
week = now // 10**9 // 604800
for v in range(versions):
    seen = now + v * 10 * 10**9
    recs = []
    for i in range(nodes):
        name = f'node-{i:05d}.cluster.example'
        rec = (text(1, name) + text(2, '%032x' % (i * 7919 + v)) + text(3, '0.1.0') +
               varint(4 << 3) + varint(1) + text(5, 'cpu-clock') + varint(6 << 3) + varint(seen) +
               varint(7 << 3 | 1) + struct.pack('<d', 1523.7))
        recs.append(f'{name}\t{seen}\t{rec.hex()}\n')
    insert('INSERT INTO nodes (name, seen_ns, record) FORMAT TabSeparated', recs)
    insert('INSERT INTO node_stats (name, week, samples, samples_with_branches, lost) '
           'FORMAT TabSeparated',
           [f'node-{i:05d}.cluster.example\t{week}\t15237\t15237\t0\n' for i in range(nodes)])
EOF
# the read each collector makes every second (store_clickhouse.c, ch_nodes_get)
read_sql="SELECT n.name, n.seen_ns, n.record, st.samples, st.swb, st.lost FROM (SELECT name, seen_ns, record FROM nodes FINAL) AS n ANY LEFT JOIN (SELECT name, sum(samples) AS samples, sum(samples_with_branches) AS swb, sum(lost) AS lost FROM node_stats GROUP BY name) AS st USING name FORMAT TabSeparated"
best=
for _ in 1 2 3 4 5; do
	ms=$(curl -s -o "$TEST_TMP/nodes.tsv" -w '%{time_total}' --data-binary "$read_sql" \
		"$CLICKHOUSE_URL/?database=fleet_sync" | awk '{printf "%d", $1 * 1000}')
	if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
done
echo "fleet_sync_nodes: $nodes"
echo "fleet_sync_nodes_read_ms: $best"
echo "fleet_sync_nodes_read_bytes: $(wc -c <"$TEST_TMP/nodes.tsv")"
start_collector idle --store "$store" --listen 127.0.0.1:0 >&2 || exit 1
listed=$(curl -s "http://127.0.0.1:$COLLECTOR_PORT/v1/nodes" | jq '.nodes | length')
[ "$listed" = "$nodes" ] || { echo "bench: the collector lists $listed nodes, not $nodes" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$COLLECTOR_PID/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
sleep "$window" # a measuring window, not a wait for a condition
t1=$(ticks)
echo "fleet_sync_collector_cpu_ms_per_s: $(((t1 - t0) * 1000 / hz / window))"
stop_pid "$COLLECTOR_PID"
clickhouse_stop
