#!/usr/bin/env bash
# `make bench-load` (issue 12, part 2): LOAD_AGENTS (500) agents post real
# batches to one collector on loopback for LOAD_S (180) seconds, with each
# store in LOAD_STORES ("sqlite clickhouse"); prints the load generator's
# "name: value" lines (bench/load/load_gen.c), prefixed load_sqlite_ and
# load_clickhouse_, and the collector's error lines.
#   LOAD_INTERVAL_MS (10000): each agent's pause between batches, jittered
#     +-50% (a real agent's --interval; 1000 offers ten times a real fleet's rate)
#   LOAD_PER_BATCH (8) binaries per batch, LOAD_BUILDS (64) build-id variants
#   LOAD_COLLECTOR: the collector binary (default BUILD/edgeprof)
#   LOAD_COLLECTOR_ARGS: more collector options (e.g. --commit-ms 1000)
# Also printed: the compressed bytes posted, the rows received and written,
# clickhouse-server's CPU while the agents post, and the rows and bytes each
# store holds afterwards (bench/capacity/measure.sh's inputs).
# The batches are real: `edgeprof agent --replay` of the recordings in
# FIXTURES (propeller_sample_1, test.lbr) into spools with no collector.
# Exits 1 when a total differs, a batch stayed unacknowledged, or the
# collector logged an error.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
agents=${LOAD_AGENTS:-500}
seconds=${LOAD_S:-180}
interval=${LOAD_INTERVAL_MS:-10000}
per_batch=${LOAD_PER_BATCH:-8}
builds=${LOAD_BUILDS:-64}
stores=${LOAD_STORES:-sqlite clickhouse}
case $build in /*) ;; *) build=$PWD/$build ;; esac
edgeprof=$build/edgeprof
collector_bin=${LOAD_COLLECTOR:-$edgeprof}
gen=$build/bench-load/load_gen
fx=${FIXTURES:-${EDGEPROF_FIXTURES:-$PWD/tests/data/lbr}}
note() { echo "bench-load: $*" >&2; }
# store_stats STORE: rows and bytes the store holds on disk after the run (the
# capacity model's bytes per row, bench/capacity); ClickHouse merged first
# (OPTIMIZE FINAL), as its background merges would over time
store_stats() {
	local rows bytes
	case $1 in
	sqlite)
		rows=0
		for t in samples edges ranges ips; do
			rows=$((rows + $(sqlite3 "$TEST_TMP/load.db" "SELECT count(*) FROM $t")))
		done
		bytes=$(cat "$TEST_TMP"/load.db* | wc -c)
		;;
	clickhouse)
		for t in samples edges ranges ips batches; do
			curl -sS "$CLICKHOUSE_URL/" --data-binary "OPTIMIZE TABLE load.$t FINAL" >&2
		done
		read -r rows bytes < <(curl -sS "$CLICKHOUSE_URL/" --data-binary \
			"SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE database = 'load'
			 AND active AND table IN ('samples', 'edges', 'ranges', 'ips')")
		;;
	esac
	echo "load_${1}_store_rows: ${rows:-0}"
	echo "load_${1}_store_bytes: ${bytes:-0}"
}

for f in "$edgeprof" "$gen"; do
	[ -x "$f" ] || {
		note "$f is missing: make all $build/bench-load/load_gen"
		exit 2
	}
done

# the clickhouse.sh helpers want TEST_TMP and track_pid
# shellcheck source=../procs.sh
source bench/procs.sh load
# shellcheck source=../../tests/integration/clickhouse.sh
source tests/integration/clickhouse.sh

# real batches: two recordings replayed into spools (no collector there)
templates=()
replay() { # NAME PERF BINARY
	"$edgeprof" agent --replay "$2" --binary "$3" --batch-samples 100 \
		--collector http://127.0.0.1:1 --spool "$TEST_TMP/t.$1" --flush-timeout 1 \
		--retry-max-ms 1 >"$TEST_TMP/t.$1.log" 2>&1
	if [ -z "$(ls -A "$TEST_TMP/t.$1" 2>/dev/null)" ]; then
		note "no batches from $2:"
		tail -3 "$TEST_TMP/t.$1.log" >&2
		exit 2
	fi
	templates+=("$TEST_TMP/t.$1")
}
replay propeller "$fx/propeller_sample_1.perfdata1" "$fx/propeller_sample_1.bin"
[ -f "$fx/test.lbr" ] && replay testlbr "$fx/test.lbr" "$fx/test.binary"

umask 077
echo "load-$RANDOM$RANDOM" >"$TEST_TMP/token"
rc=0
for store in $stores; do
	case $store in
	sqlite) spec="sqlite:$TEST_TMP/load.db" ;;
	clickhouse)
		if [ ! -x /usr/sbin/clickhouse-server ]; then
			note "no clickhouse-server: ClickHouse skipped"
			continue
		fi
		clickhouse_start >&2 || {
			rc=1
			continue
		}
		spec="clickhouse:$CLICKHOUSE_URL/?database=load"
		;;
	*)
		note "LOAD_STORES: '$store' is neither sqlite nor clickhouse"
		exit 2
		;;
	esac
	rm -f "$TEST_TMP/port"
	"$collector_bin" collector --store "$spec" --listen 127.0.0.1:0 --port-file "$TEST_TMP/port" \
		--token-file "$TEST_TMP/token" ${LOAD_COLLECTOR_ARGS:-} >"$TEST_TMP/collector.$store.log" 2>&1 &
	cpid=$!
	track_pid "$cpid"
	for _ in $(seq 1 600); do
		[ -s "$TEST_TMP/port" ] && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -s "$TEST_TMP/port" ]; then
		note "collector ($store) did not start:"
		cat "$TEST_TMP/collector.$store.log" >&2
		exit 2
	fi
	store_pid=()
	[ "$store" = clickhouse ] && store_pid=(--store-pid "$CLICKHOUSE_PID")
	"$gen" --collector "http://127.0.0.1:$(cat "$TEST_TMP/port")" --token-file "$TEST_TMP/token" \
		--agents "$agents" --seconds "$seconds" --interval-ms "$interval" \
		--binaries-per-batch "$per_batch" --builds "$builds" --collector-pid "$cpid" "${store_pid[@]}" \
		--prefix "load_$store" "${templates[@]}" || rc=1
	kill "$cpid"
	for _ in $(seq 1 600); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
	wait "$cpid" 2>/dev/null
	errors=$(grep -c "error" "$TEST_TMP/collector.$store.log")
	echo "load_${store}_collector_log_errors: $errors"
	if [ "$errors" -ne 0 ]; then
		grep "error" "$TEST_TMP/collector.$store.log" | head -5 >&2
		rc=1
	fi
	store_stats "$store"
	[ "$store" = clickhouse ] && clickhouse_stop
done
exit "$rc"
