#!/usr/bin/env bash
# Store failures (issue 12, part 4): the collector's store fills up or goes
# read-only while agents stream. Ingest answers 503 with the reason (one log
# line for the outage, not one per failed write, and a gauge in /metrics),
# the agents keep their batches in the spool and retry, and once space
# returns (or the file system is repaired and the collector restarted) the
# store holds exactly what the agents sent: nothing lost, nothing doubled.
#   1. SQLite on a small tmpfs that fills mid-stream (a file fills it), freed
#   2. SQLite on a loop-mounted ext4 (errors=remount-ro) that goes read-only
#      after an error; a collector started on it read-only refuses in one
#      line; after e2fsck the store is mounted again and a collector started
#   3. ClickHouse with its data on a small tmpfs that fills, freed
# Every mount is made in a private mount namespace of this test (gone with
# it) and unmounted at exit; every process is stopped by PID.
# EP_STORE_FAILURES_CASES="ro" (any of full ro ch) runs only those cases: the
# read-only case's loss was one run in four, so it is run alone in a loop.
if [ "${EP_STORE_FAILURES_NS:-}" != 1 ]; then
	if [ "$(id -u)" -ne 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
		echo "ok - # SKIP store failures need root and a private mount namespace (unshare -m)"
		exit 0
	fi
	EP_STORE_FAILURES_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"
source "$(dirname "$0")/clickhouse.sh"

mounts=()
cleanup_all() {
	for p in "${_pids[@]:-}"; do [ -n "$p" ] && stop_pid "$p"; done
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null; done
	_cleanup
}
trap cleanup_all EXIT

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
"$EDGEPROF" import "$perf" --binary "$bin" -o "$TEST_TMP/local.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format json >"$TEST_TMP/local.json"
edge_table <"$TEST_TMP/local.json" >"$TEST_TMP/local.edges"
range_table <"$TEST_TMP/local.json" >"$TEST_TMP/local.ranges"
local_samples=$(jq '[.profiles[].samples] | add' "$TEST_TMP/local.json")

# wait_for CMD...: until CMD succeeds, at most ~120 s (a bound, not a timing)
wait_for() {
	for _ in $(seq 1 1200); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
m() { metric "$url" "$1"; }
ge() { [ "$(($(m "$1") + 0))" -ge "$2" ]; }
# fill DIR: a file takes every free block of DIR's file system
fill() { dd if=/dev/zero of="$1/filler" bs=64k 2>/dev/null; sync -f "$1" 2>/dev/null; true; }

# start_agent NAME: replays the recording in ~94 batches of 40 samples,
# retrying every 300 ms at most, waiting as long as it takes at exit
start_agent() {
	"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 40 --collector "$url" \
		--spool "$TEST_TMP/spool.$1" --retry-max-ms 300 --flush-timeout 100000 \
		>"$TEST_TMP/agent.$1.log" 2>&1 &
	agent=$!
	track_pid "$agent"
}
replayed() { grep -q "samples replayed" "$TEST_TMP/agent.$1.log"; }

# outage_checks NAME REASON LOG: what must hold while the store fails
outage_checks() {
	local name=$1 reason=$2 log=$3 spooled
	check "$name: ingest answers 503 with the reason ($reason)" \
		grep -q "HTTP 503: store: .*$reason" "$TEST_TMP/agent.$name.log"
	spooled=$(find "$TEST_TMP/spool.$name" -type f | wc -l)
	check "$name: the agent keeps the batches not stored in its spool ($spooled)" \
		test "$spooled" -gt 0
	check "$name: /metrics says the store fails (edgeprof_store_write_failing $(m edgeprof_store_write_failing))" \
		test "$(m edgeprof_store_write_failing)" = 1
	local fails lines
	fails=$(m 'edgeprof_ingest_batches_total{result="store_error"}')
	lines=$(grep -c "store write of .* failed" "$log")
	check "$name: one log line for $fails batches answered 503 ($lines lines)" test "$lines" -eq 1
}

# totals_checks NAME TIMES: the store holds TIMES the local import exactly
totals_checks() {
	local name=$1 times=$2
	curl -sf "$url/v1/profile?format=json" >"$TEST_TMP/$name.json"
	edge_table <"$TEST_TMP/$name.json" >"$TEST_TMP/$name.edges"
	range_table <"$TEST_TMP/$name.json" >"$TEST_TMP/$name.ranges"
	scale="{ \$NF = \$NF * $times; print }"
	# a range's count, cycles and cycled instructions (range_table's last three) all add up
	range_scale="{ for (i = NF - 2; i <= NF; i++) \$i = \$i * $times; print }"
	check "$name: stored edge counts equal $times x the local import exactly ($(wc -l <"$TEST_TMP/$name.edges") edges)" \
		cmp -s <(awk "$scale" "$TEST_TMP/local.edges") "$TEST_TMP/$name.edges"
	check "$name: stored range counts equal $times x the local import exactly" \
		cmp -s <(awk "$range_scale" "$TEST_TMP/local.ranges") "$TEST_TMP/$name.ranges"
	stored=$(jq '[.profiles[].samples] | add' "$TEST_TMP/$name.json")
	check "$name: stored samples ($stored) equal $times x $local_samples" \
		test "$stored" = "$((local_samples * times))"
}

# want CASE: whether EP_STORE_FAILURES_CASES names it (all of them by default)
want() { [[ " ${EP_STORE_FAILURES_CASES:-full ro ch} " == *" $1 "* ]]; }

# --- 1. SQLite, disk full mid-stream -------------------------------------
mkdir -p "$TEST_TMP/tmpfs"
if ! want full; then
	echo "# full: not in EP_STORE_FAILURES_CASES"
elif mount -t tmpfs -o size=16m tmpfs "$TEST_TMP/tmpfs"; then
	mounts+=("$TEST_TMP/tmpfs")
	# the ASan+UBSan build: the failing writes' paths leak nothing
	COLLECTOR_BIN=$EDGEPROF_ASAN ASAN_OPTIONS=detect_leaks=1 start_collector full \
		--store "sqlite:$TEST_TMP/tmpfs/store.db" --listen 127.0.0.1:0 || exit 1
	url="http://127.0.0.1:$COLLECTOR_PORT"
	# the first agent's counts fit; then a file takes what is left and the
	# second agent's batches cannot be stored
	start_agent full0
	wait "$agent"
	check "full: a first agent streams while there is space" test "$?" -eq 0
	fill "$TEST_TMP/tmpfs"
	start_agent full
	wait_for bash -c "grep -q 'samples replayed' '$TEST_TMP/agent.full.log'" &&
		wait_for ge 'edgeprof_ingest_batches_total{result="store_error"}' 5
	check "full: batches are refused while the disk is full ($(m 'edgeprof_ingest_batches_total{result="store_error"}') answered 503)" \
		ge 'edgeprof_ingest_batches_total{result="store_error"}' 5
	outage_checks full "database or disk is full" "$TEST_TMP/full.log"
	rm -f "$TEST_TMP/tmpfs/filler"
	wait "$agent"
	check "full: once space returns the same agent gets every batch stored and exits 0" \
		test "$?" -eq 0
	check "full: its spool is empty" test -z "$(ls -A "$TEST_TMP/spool.full")"
	check "full: one log line when the store writes again" \
		grep -q "store: writing again after [0-9]* failed writes" "$TEST_TMP/full.log"
	check "full: edgeprof_store_write_failing back to 0" test "$(m edgeprof_store_write_failing)" = 0
	totals_checks full 2
	stop_pid "$COLLECTOR_PID"
	check "full: the collector (ASan) stopped with no sanitizer report" \
		bash -c "! grep -q 'Sanitizer\|runtime error' '$TEST_TMP/full.log'"
else
	not_ok "a tmpfs can be mounted in the test's mount namespace"
fi

# --- 2. SQLite, the file system goes read-only after an error -------------
img=$TEST_TMP/ext4.img
dev=
if want ro && truncate -s 32M "$img" && mkfs.ext4 -q -F "$img" 2>/dev/null && mkdir -p "$TEST_TMP/ext4" &&
	mount -o loop,errors=remount-ro "$img" "$TEST_TMP/ext4" 2>/dev/null; then
	mounts+=("$TEST_TMP/ext4")
	dev=$(basename "$(findmnt -no SOURCE "$TEST_TMP/ext4")")
fi
if ! want ro; then
	echo "# ro: not in EP_STORE_FAILURES_CASES"
elif [ -z "$dev" ] || [ ! -w "/sys/fs/ext4/$dev/trigger_fs_error" ]; then
	echo "ok - # SKIP read-only store: no loop-mounted ext4 with trigger_fs_error here"
else
	start_collector ro --store "sqlite:$TEST_TMP/ext4/store.db" --listen 127.0.0.1:0 || exit 1
	port=$COLLECTOR_PORT
	url="http://127.0.0.1:$port"
	start_agent ro
	wait_for ge 'edgeprof_ingest_batches_total{result="stored"}' 5
	# what ext4 does on an I/O error with errors=remount-ro
	echo 1 >"/sys/fs/ext4/$dev/trigger_fs_error"
	wait_for bash -c "grep -q 'samples replayed' '$TEST_TMP/agent.ro.log'" &&
		wait_for ge 'edgeprof_ingest_batches_total{result="store_error"}' 5
	outage_checks ro "Read-only file system" "$TEST_TMP/ro.log"
	stop_pid "$COLLECTOR_PID"
	umount "$TEST_TMP/ext4"
	e2fsck -fy "$img" >"$TEST_TMP/fsck.log" 2>&1
	mount -o loop "$img" "$TEST_TMP/ext4" && mount -o remount,ro "$TEST_TMP/ext4"
	"$EDGEPROF" collector --store "sqlite:$TEST_TMP/ext4/store.db" --listen 127.0.0.1:0 \
		>"$TEST_TMP/ro-start.log" 2>&1
	rc=$?
	check "ro: a collector started on a read-only store exits 1 ($rc) saying why in one line" \
		bash -c "[ $rc -eq 1 ] && [ \$(wc -l <'$TEST_TMP/ro-start.log') -eq 1 ] &&
			grep -q 'store.db: .*read-only' '$TEST_TMP/ro-start.log'"
	sed 's/^/# /' "$TEST_TMP/ro-start.log"
	mount -o remount,rw "$TEST_TMP/ext4"
	start_collector ro2 --store "sqlite:$TEST_TMP/ext4/store.db" --listen "127.0.0.1:$port" ||
		exit 1
	wait "$agent"
	check "ro: after the repair the same agent gets every batch stored and exits 0" \
		test "$?" -eq 0
	check "ro: its spool is empty" test -z "$(ls -A "$TEST_TMP/spool.ro")"
	totals_checks ro 1
	grep -h "streamed\|already" "$TEST_TMP/agent.ro.log" | sed 's/^/# agent: /'
	grep -h "error\|warn" "$TEST_TMP"/ro*.log | sort | uniq -c | head -8 | sed 's/^/# collector: /'
	stop_pid "$COLLECTOR_PID"
fi

# --- 3. ClickHouse, disk full ---------------------------------------------
want ch || finish
if [ ! -x /usr/sbin/clickhouse-server ]; then
	not_ok "clickhouse-server is installed (scripts/setup-deps.sh installs it)"
	finish
fi
mkdir -p "$TEST_TMP/clickhouse/data"
mount -t tmpfs -o size=256m tmpfs "$TEST_TMP/clickhouse/data" || {
	not_ok "a tmpfs for ClickHouse's data"
	finish
}
mounts+=("$TEST_TMP/clickhouse/data")
clickhouse_start || {
	not_ok "clickhouse-server starts on loopback"
	finish
}
start_collector ch --store "clickhouse:$CLICKHOUSE_URL/?database=full_$$" \
	--listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
start_agent ch0
wait "$agent"
check "ch: a first agent streams while there is space" test "$?" -eq 0
fill "$TEST_TMP/clickhouse/data"
start_agent ch
wait_for bash -c "grep -q 'samples replayed' '$TEST_TMP/agent.ch.log'" &&
	wait_for ge 'edgeprof_ingest_batches_total{result="store_error"}' 5
check "ch: batches are refused while ClickHouse's disk is full ($(m 'edgeprof_ingest_batches_total{result="store_error"}') answered 503)" \
	ge 'edgeprof_ingest_batches_total{result="store_error"}' 5
outage_checks ch "clickhouse" "$TEST_TMP/ch.log"
rm -f "$TEST_TMP/clickhouse/data/filler"
wait "$agent"
check "ch: once space returns the same agent gets every batch stored and exits 0" \
	test "$?" -eq 0
check "ch: its spool is empty" test -z "$(ls -A "$TEST_TMP/spool.ch")"
check "ch: edgeprof_store_write_failing back to 0" test "$(m edgeprof_store_write_failing)" = 0
totals_checks ch 2
stop_pid "$COLLECTOR_PID"
clickhouse_stop
finish
