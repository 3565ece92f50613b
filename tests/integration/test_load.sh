#!/usr/bin/env bash
# The load test, short (issue 12, part 2; `make bench-load` is the long one):
# 50 agents (each a node of its own, with its own containers and build-ids)
# post real batches to one collector on loopback for 20 s, SQLite then
# ClickHouse. Every batch is acknowledged, none is answered with an error,
# the collector stores each once (its count of new batches equals the
# acknowledgements) and the store's totals per build-id (samples, edge,
# range and IP counts) equal the sums of what was sent exactly. No timing
# is asserted.
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"
build=$(dirname "$EDGEPROF")
if [ ! -x "$build/bench-load/load_gen" ]; then
	not_ok "the load generator is built ($build/bench-load/load_gen: make $build/bench-load/load_gen)"
	finish
fi
stores="sqlite"
[ -x /usr/sbin/clickhouse-server ] && stores="sqlite clickhouse"
out=$TEST_TMP/load.txt
TMPDIR=$TEST_TMP LOAD_AGENTS=${LOAD_AGENTS:-50} LOAD_S=${LOAD_S:-20} LOAD_INTERVAL_MS=1000 \
	LOAD_STORES=$stores FIXTURES=$FIXTURES bash "$(dirname "$0")/../../bench/load/run.sh" \
	"$build" >"$out" 2>"$TEST_TMP/load.err"
rc=$?
sed 's/^/# /' "$out" "$TEST_TMP/load.err" | grep -v "_rss_kib_per_min"
v() { awk -v k="$1:" '$1 == k {print $2}' "$out"; }
check "the load run exits 0 ($rc)" test "$rc" -eq 0
for s in $stores; do
	p=load_$s
	check "$s: batches acknowledged ($(v ${p}_batches_acked))" test "$(($(v ${p}_batches_acked) + 0))" -gt 0
	check "$s: no errors, no batch left unacknowledged ($(v ${p}_errors))" test "$(v ${p}_errors)" = 0
	check "$s: no batch lost ($(v ${p}_batches_lost))" test "$(v ${p}_batches_lost)" = 0
	check "$s: no batch doubled ($(v ${p}_batches_doubled))" test "$(v ${p}_batches_doubled)" = 0
	check "$s: stored totals equal what was sent exactly ($(v ${p}_samples_stored) samples, $(v ${p}_edge_count_stored) edge counts)" \
		test "$(v ${p}_totals_match)" = 1 -a "$(v ${p}_samples_stored)" = "$(v ${p}_samples_sent)"
	check "$s: the collector logged no error" test "$(v ${p}_collector_log_errors)" = 0
done
finish
