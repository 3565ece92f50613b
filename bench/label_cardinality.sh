#!/usr/bin/env bash
# Label cardinality (issue 32, item 5): one binary with BENCH_LABEL_SETS
# (1,000,000) label sets, as a cluster's pod churn leaves them: each lives
# BENCH_LABEL_SPAN (30-60) consecutive minute buckets, BENCH_LABEL_CONCURRENT
# (3,000) alive in any minute, so 1 M of them span ~10 days and ~45 M sample
# rows (BENCH_LABEL_SPAN=1: all in one bucket, the bench's first form).
# Posted as agents do (zstd-compressed Batch protobuf, a batch per minute, by
# tests/integration/label_sets_gen.py --span) to a collector on
# BENCH_LABEL_STORE: sqlite (default), clickhouse (a clickhouse-server
# started here, tests/integration/clickhouse.sh) or clickhouse:URL. The
# collector is then restarted before each read, whose first answer is cold
# and whose next BENCH_LABEL_RUNS (5) are warm:
#   label_sets_stored, _rows, _buckets   what was posted (rows: label sets'
#                                     minutes, the store's sample rows)
#   label_sets_load_seconds           posting them all
#   label_sets_open_seconds           a restart until it listens (SQLite: a
#                                     migration when BENCH_LABEL_FROM is older)
#   label_sets_open_peak_rss_kib      the collector's peak RSS by then
#   label_sets_<read>_cold_ms         the first answer after a restart (wall)
#   label_sets_<read>_cold_cpu_ms     its CPU (collector; + clickhouse-server)
#   label_sets_<read>_ms, _cpu_ms     the median warm answer (wall, CPU: /proc,
#                                     steadier than wall on a busy machine)
#   label_sets_<read>_bytes           the answer's size
#   label_sets_load_peak_rss_kib      the collector's peak RSS while loading
#   label_sets_collector_peak_rss_kib its peak RSS over the reads
# reads: binaries (/v1/binaries), index (the UI's /: all time), index_week
# (/?window=604800, the UI's "last week"), index_hour (/?window=3600) and
# binaries_filtered (/v1/binaries?namespace=ns-1: a seventh of them).
# The goal: /v1/binaries and / under 1 s with 1 M label sets stored.
# BENCH_LABEL_KEEP=DIR keeps the SQLite file there; BENCH_LABEL_FROM=FILE
# starts from a copy of one instead of posting (a file an older collector
# wrote: its open is the migration).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
case $build in /*) ;; *) build=$PWD/$build ;; esac
edgeprof=$build/edgeprof
sets=${BENCH_LABEL_SETS:-1000000}
span=${BENCH_LABEL_SPAN:-30-60}
concurrent=${BENCH_LABEL_CONCURRENT:-3000}
runs=${BENCH_LABEL_RUNS:-5}
store=${BENCH_LABEL_STORE:-sqlite}
from=${BENCH_LABEL_FROM:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-labelbench.XXXXXX")
TEST_TMP=$tmp
pid=
track_pid() { :; }
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	if [ "$store" = clickhouse ]; then clickhouse_stop; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

case $store in
sqlite) spec="sqlite:$tmp/c.db" ;;
clickhouse)
	# shellcheck source=../tests/integration/clickhouse.sh
	source tests/integration/clickhouse.sh
	clickhouse_start >&2 || { echo "bench: clickhouse-server did not start" >&2; exit 1; }
	spec="clickhouse:$CLICKHOUSE_URL/?database=labelbench"
	;;
clickhouse:*) spec=$store ;;
*) echo "bench: BENCH_LABEL_STORE: sqlite, clickhouse or clickhouse:URL" >&2; exit 1 ;;
esac
echo "label_sets_store: ${spec%%:*}"

rss_max=0
stop_collector() {
	local hwm
	hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
	[ "$hwm" -gt "$rss_max" ] && rss_max=$hwm
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}
start_collector() {
	rm -f "$tmp/port"
	"$edgeprof" collector --store "$spec" --listen 127.0.0.1:0 --port-file "$tmp/port" \
		--retention-days 0 >>"$tmp/collector.log" 2>&1 &
	pid=$!
	while [ ! -s "$tmp/port" ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/collector.log" >&2; exit 1; }
		sleep 0.05
	done
	url=http://127.0.0.1:$(cat "$tmp/port")
}

if [ -n "$from" ]; then
	cp "$from" "$tmp/c.db"
	echo "label_sets_stored: $sets"
else
	start_collector
	t0=$(date +%s.%N)
	if [ "$span" = 1 ]; then
		python3 tests/integration/label_sets_gen.py "$url" --label-sets "$sets" \
			--per-batch 10000 --agent-id bench >"$tmp/gen.out"
	else
		python3 tests/integration/label_sets_gen.py "$url" --label-sets "$sets" \
			--per-batch 10000 --agent-id bench --span "$span" \
			--concurrent "$concurrent" >"$tmp/gen.out"
	fi
	echo "label_sets_stored: $sets"
	echo "label_sets_rows: $(awk '/^rows:/ {print $2}' "$tmp/gen.out")"
	echo "label_sets_buckets: $(awk '/^buckets:/ {print $2}' "$tmp/gen.out")"
	printf 'label_sets_load_seconds: %.1f\n' "$(echo "$(date +%s.%N) - $t0" | bc -l)"
	echo "label_sets_load_peak_rss_kib: $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
	stop_collector
	rss_max=0
fi
if [ -n "${BENCH_LABEL_KEEP:-}" ] && [ "$store" = sqlite ]; then
	cp "$tmp/c.db" "$BENCH_LABEL_KEEP/"
fi

t0=$(date +%s.%N)
start_collector
printf 'label_sets_open_seconds: %.1f\n' "$(echo "$(date +%s.%N) - $t0" | bc -l)"
echo "label_sets_open_peak_rss_kib: $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
stop_collector
rss_max=0

cpu_ms() { # the collector's CPU, and clickhouse-server's when it is ours (100 ticks a second)
	local p
	for p in "$pid" ${CLICKHOUSE_PID:-}; do awk '{print ($14 + $15) * 10}' "/proc/$p/stat"; done |
		awk '{s += $1} END {print s}'
}
median() { sort -n | sed -n "$(((runs + 1) / 2))p"; }
one() { # NAME PATH: "wall_ms cpu_ms"
	local a b ms
	a=$(cpu_ms)
	ms=$(curl -s -o "$tmp/$1.out" -w '%{time_total}' "$url$2" | awk '{printf "%.0f", $1 * 1000}')
	b=$(cpu_ms)
	echo "$ms $((b - a))"
}
read_one() { # NAME PATH
	local ms=() cpu=() i w c
	[ -n "$pid" ] || start_collector
	read -r w c < <(one "$1" "$2")
	echo "label_sets_$1_cold_ms: $w"
	echo "label_sets_$1_cold_cpu_ms: $c"
	for ((i = 0; i < runs; i++)); do
		read -r w c < <(one "$1" "$2")
		ms+=("$w")
		cpu+=("$c")
	done
	echo "label_sets_$1_ms: $(printf '%s\n' "${ms[@]}" | median)"
	echo "label_sets_$1_cpu_ms: $(printf '%s\n' "${cpu[@]}" | median)"
	echo "label_sets_$1_bytes: $(stat -c %s "$tmp/$1.out")"
	stop_collector
}
read_one binaries /v1/binaries
got=$(jq '.binaries[0].label_sets' "$tmp/binaries.out")
[ "$got" = "$sets" ] || { echo "bench: /v1/binaries says $got label sets, not $sets" >&2; exit 1; }
read_one index /
read_one index_week "/?window=604800"
read_one index_hour "/?window=3600"
read_one binaries_filtered "/v1/binaries?namespace=ns-1"
echo "label_sets_collector_peak_rss_kib: $rss_max"
