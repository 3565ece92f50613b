#!/usr/bin/env bash
# Measures the capacity model's inputs on this machine (docs/capacity.md,
# bench/capacity/model.py) and prints them as "name: value" lines, also written
# to OUT (default BUILD/capacity/inputs.txt), then the model computed from them.
#   bench/capacity/measure.sh [BUILD] [OUT]
# 1. wire_*: real recordings (the LBR fixtures, and python3 running
#    bench/capacity/workload.py under the LBR emulator) replayed through the
#    agent's streaming path (`agent --replay --batch-samples S`) into a
#    collector on ClickHouse: per workload and batch size S, the batches, the
#    samples, the compressed bytes the agent sent (its own count), the edge,
#    range and IP rows the collector received (its /metrics) and the binary
#    deltas (rows of ClickHouse's samples table);
# 2. clickhouse_* / sqlite_*: rows and bytes on disk those replays left in
#    each store (ClickHouse after OPTIMIZE FINAL), binaries' images apart;
# 3. *_idle_cpu_s_per_s: the collector and clickhouse-server with no agent;
# 4. calib_*, bulk_* and val<N>_*: bench/load/run.sh (both stores) at
#    CAP_CALIB (agents:interval_ms:binaries per batch, 30:2000:8), at CAP_BULK
#    (10:2000:64: batches 8 times larger, so that the collector's CPU per
#    batch and per row can be told apart), "group" (CAP_CALIB on ClickHouse
#    with --commit-ms CAP_COMMIT_MS, 1000: inserts of more batches each, for
#    clickhouse-server's CPU per commit and per row) and at CAP_VALIDATE
#    agents (100 300) at a real
#    agent's 10 s interval, CAP_LOAD_S (45) seconds each: the model takes its
#    costs from the two calibration runs and predicts the others.
# CPU is measured from /proc/PID/stat (user + system). Everything runs niced.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
case $build in /*) ;; *) build=$PWD/$build ;; esac
out=${2:-$build/capacity/inputs.txt}
edgeprof=$build/edgeprof
load_s=${CAP_LOAD_S:-45}
calib=${CAP_CALIB:-30:2000:8}
bulk=${CAP_BULK:-10:2000:64}
commit_ms=${CAP_COMMIT_MS:-1000}
validate=${CAP_VALIDATE:-100 300}
idle_s=${CAP_IDLE_S:-10}
sizes=${CAP_BATCH_SAMPLES:-100 1000 4000}
fx=${FIXTURES:-${EDGEPROF_FIXTURES:-$PWD/tests/data/lbr}}
note() { echo "capacity: $*" >&2; }
for f in "$edgeprof" "$build/bench-load/load_gen"; do
	[ -x "$f" ] || {
		note "$f is missing: make BUILD=$build all $build/bench-load/load_gen"
		exit 2
	}
done
[ -f "$fx/test.lbr" ] && [ -f "$fx/propeller_sample_1.perfdata1" ] || {
	note "the LBR fixtures are not in $fx (FIXTURES=DIR)"
	exit 2
}
[ -x /usr/sbin/clickhouse-server ] || {
	note "no /usr/sbin/clickhouse-server (scripts/setup-deps.sh installs it)"
	exit 2
}
mkdir -p "$(dirname "$out")" && : >"$out" || exit 2

# shellcheck source=../procs.sh
source bench/procs.sh capacity
EDGEPROF=$edgeprof
# shellcheck source=../../tests/integration/clickhouse.sh
source tests/integration/clickhouse.sh
# shellcheck source=../../tests/integration/collector.sh
source tests/integration/collector.sh

emit() { echo "$1: $2" | tee -a "$out"; }
cpu_s() {
	awk -v t="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); printf "%.3f\n", ($12 + $13) / t}' \
		"/proc/$1/stat"
}
ch() { curl -sS "$CLICKHOUSE_URL/" --data-binary "$1"; }
fail() {
	note "$*"
	exit 1
}

# the large-binary workload, recorded under the LBR emulator; a period of
# 10,007 branches gets a default batch's samples from a short run: a batch's
# distinct edges depend on how many samples it holds and on the code they
# land in, not on how far apart they were taken (the run is steady)
nice -n 10 "$edgeprof" record --emulate --period 10007 --perf-data "$TEST_TMP/python.data" \
	-o "$TEST_TMP/python.prof" -- /usr/bin/python3 bench/capacity/workload.py \
	>"$TEST_TMP/record.log" 2>&1 || {
	cat "$TEST_TMP/record.log" >&2
	fail "record --emulate of python3 failed"
}
workloads=(propeller testlbr python)
perf_of() {
	case $1 in
	propeller) echo "$fx/propeller_sample_1.perfdata1 --binary $fx/propeller_sample_1.bin" ;;
	testlbr) echo "$fx/test.lbr --binary $fx/test.binary" ;;
	python) echo "$TEST_TMP/python.data" ;;
	esac
}

# replay URL LOG S NAME [AGENT ARGS...]: sends one workload's recording in
# batches of S samples; prints "batches samples bytes" from the agent's summary
replay() {
	local url=$1 log=$2 s=$3 name=$4
	shift 4
	# shellcheck disable=SC2046 # perf_of gives the recording and its --binary
	nice -n 10 "$edgeprof" agent --replay $(perf_of "$name") --batch-samples "$s" \
		--collector "$url" --spool "$TEST_TMP/spool.$RANDOM$RANDOM" --flush-timeout 60 \
		"$@" >"$log" 2>&1
	sed -n 's/.*streamed \([0-9]*\) batches (\([0-9]*\) samples): \([0-9]*\) acknowledged.* \([0-9]*\) bytes sent.*/\1 \2 \3 \4/p' "$log"
}

# 1-3: ClickHouse
clickhouse_start >&2 || fail "clickhouse-server did not start"
start_collector ch --store "clickhouse:$CLICKHOUSE_URL/?database=cap" --listen 127.0.0.1:0 >&2 ||
	fail "the collector on ClickHouse did not start"
url=http://127.0.0.1:$COLLECTOR_PORT
c0=$(cpu_s "$COLLECTOR_PID") s0=$(cpu_s "$CLICKHOUSE_PID") t0=$(date +%s.%N)
sleep "$idle_s" # the measurement is of this window
c1=$(cpu_s "$COLLECTOR_PID") s1=$(cpu_s "$CLICKHOUSE_PID") t1=$(date +%s.%N)
emit collector_clickhouse_idle_cpu_s_per_s "$(echo "$c0 $c1 $t0 $t1" | awk '{printf "%.4f", ($2 - $1) / ($4 - $3)}')"
emit clickhouse_idle_cpu_s_per_s "$(echo "$s0 $s1 $t0 $t1" | awk '{printf "%.4f", ($2 - $1) / ($4 - $3)}')"

rows_in() { # edges ranges ips received so far
	local k
	for k in edges ranges ips; do
		printf '%s ' "$(metric "$url" "edgeprof_ingest_rows_total{kind=\"$k\"}")"
	done
}
for w in "${workloads[@]}"; do
	for s in $sizes; do
		read -r e0 r0 i0 < <(rows_in)
		d0=$(ch "SELECT count() FROM cap.samples")
		read -r nb ns na nbytes < <(replay "$url" "$TEST_TMP/replay.$w.$s.log" "$s" "$w")
		[ -n "${nb:-}" ] && [ "$na" = "$nb" ] && [ "$nb" -gt 0 ] || {
			tail -3 "$TEST_TMP/replay.$w.$s.log" >&2
			fail "replay of $w (batches of $s samples) was not all acknowledged"
		}
		read -r e1 r1 i1 < <(rows_in)
		p=wire_${w}_s$s
		emit "${p}_batches" "$nb"
		emit "${p}_samples" "$ns"
		emit "${p}_bytes" "$nbytes"
		emit "${p}_binary_deltas" "$(($(ch "SELECT count() FROM cap.samples") - d0))"
		emit "${p}_edges" "$((e1 - e0))"
		emit "${p}_ranges" "$((r1 - r0))"
		emit "${p}_ips" "$((i1 - i0))"
	done
done
stop_pid "$COLLECTOR_PID"
for t in samples edges ranges ips batches binary_images; do
	ch "OPTIMIZE TABLE cap.$t FINAL" || fail "OPTIMIZE TABLE cap.$t failed"
done
read -r rows bytes < <(ch "SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE
	database = 'cap' AND active AND table IN ('samples', 'edges', 'ranges', 'ips')")
emit clickhouse_store_rows "$rows"
emit clickhouse_store_bytes "$bytes"
read -r rows bytes < <(ch "SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE
	database = 'cap' AND active AND table = 'binary_images'")
emit clickhouse_images "$rows"
emit clickhouse_images_bytes "$bytes"
clickhouse_stop

# 2: SQLite, the same replays (no binaries' images: counts only)
start_collector sq --store "sqlite:$TEST_TMP/cap.db" --listen 127.0.0.1:0 >&2 ||
	fail "the collector on SQLite did not start"
url=http://127.0.0.1:$COLLECTOR_PORT
for w in "${workloads[@]}"; do
	for s in $sizes; do
		read -r nb _ na _ < <(replay "$url" "$TEST_TMP/sq.$w.$s.log" "$s" "$w" --upload-max-mib 0)
		[ -n "${nb:-}" ] && [ "$na" = "$nb" ] || fail "replay of $w into SQLite was not all acknowledged"
	done
done
stop_pid "$COLLECTOR_PID"
rows=0
for t in samples edges ranges ips; do
	rows=$((rows + $(sqlite3 "$TEST_TMP/cap.db" "SELECT count(*) FROM $t")))
done
emit sqlite_store_rows "$rows"
emit sqlite_store_bytes "$(cat "$TEST_TMP"/cap.db* | wc -c)"

# 4: the load runs
run_load() { # TAG AGENTS INTERVAL_MS BINARIES_PER_BATCH [STORES [COLLECTOR ARGS]]
	emit "${1}_interval_ms" "$3"
	emit "${1}_per_batch" "$4"
	emit "${1}_load_s" "$load_s"
	TMPDIR=$TEST_TMP LOAD_AGENTS=$2 LOAD_S=$load_s LOAD_INTERVAL_MS=$3 LOAD_PER_BATCH=$4 \
		LOAD_STORES=${5:-sqlite clickhouse} LOAD_COLLECTOR_ARGS=${6:-} FIXTURES=$fx \
		nice -n 10 bash bench/load/run.sh "$build" \
		>"$TEST_TMP/load.$1" 2>"$TEST_TMP/load.$1.err" || {
		cat "$TEST_TMP/load.$1" "$TEST_TMP/load.$1.err" >&2
		fail "the load run $1 ($2 agents) failed"
	}
	sed "s/^load_/${1}_/; s/ (.*//" "$TEST_TMP/load.$1" | tee -a "$out"
	# the edge updates apart from the ranges and IPs: "CPU per million edge updates"
	sed -n "s/^load_\([a-z]*\)_rows_received: .*(edges \([0-9]*\),.*/${1}_\1_rows_received_edges: \2/p" \
		"$TEST_TMP/load.$1" | tee -a "$out"
}
IFS=: read -r ca ci cp <<<"$calib"
run_load calib "$ca" "$ci" "$cp"
IFS=: read -r ba bi bp <<<"$bulk"
run_load bulk "$ba" "$bi" "$bp"
run_load group "$ca" "$ci" "$cp" clickhouse "--commit-ms $commit_ms"
for n in $validate; do
	run_load "val$n" "$n" 10000 8
done
note "inputs in $out"
python3 bench/capacity/model.py "$out"
