#!/usr/bin/env bash
# The ClickHouse store: Debian's clickhouse-server on loopback passes the
# same storage suite as SQLite (tests/unit/test_store.c); a commit cut short
# before its batch row is invisible and its resend is counted once; batches
# resent through a collector are answered as duplicates (the committer asks
# ClickHouse once per group) and counted once; and the collector's
# kill-and-restart test holds with ClickHouse behind it. The storage suite
# runs again on a cluster of two shards (cluster=).
# tests/run.sh: group heavy (ClickHouse servers, or a load run: one such suite at a time)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse.sh"
source "$(dirname "$0")/collector.sh"

if [ ! -x /usr/sbin/clickhouse-server ]; then
	not_ok "clickhouse-server is installed (scripts/setup-deps.sh installs it)"
	finish
fi
clickhouse_start || { not_ok "clickhouse-server starts on loopback"; finish; }
ok "clickhouse-server starts on loopback ($CLICKHOUSE_URL)"
build=$(dirname "$EDGEPROF")

# suites SPEC WHAT: the storage suite and the images suite, both builds, on
# the ClickHouse store SPEC
suites() {
	local flavour rc passed
	for flavour in rel asan; do
		EDGEPROF_TEST_STORE=$1 ASAN_OPTIONS=detect_leaks=1 \
			"$build/$flavour/tests/test_store" >"$TEST_TMP/suite.$flavour" 2>&1
		rc=$?
		passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$TEST_TMP/suite.$flavour")
		check "the shared storage suite passes on $2 ($flavour: ${passed:-0} tests)" \
			test "$rc" -eq 0 -a "${passed:-0}" -ge 4
		[ "$rc" -eq 0 ] || sed 's/^/# /' "$TEST_TMP/suite.$flavour"
		# binaries' images (the UI's code) kept in ClickHouse as in SQLite
		EDGEPROF_TEST_STORE=$1 ASAN_OPTIONS=detect_leaks=1 \
			"$build/$flavour/tests/test_binaries" >"$TEST_TMP/images.$flavour" 2>&1
		rc=$?
		check "binaries' images on $2 ($flavour)" test "$rc" -eq 0
		[ "$rc" -eq 0 ] || sed 's/^/# /' "$TEST_TMP/images.$flavour"
	done
}
suites "clickhouse:$CLICKHOUSE_URL" ClickHouse

# the same streaming guarantees end to end, ClickHouse behind the collector
EDGEPROF_TEST_STORE="clickhouse:$CLICKHOUSE_URL/?database=restart_$$" \
	bash "$(dirname "$0")/test_stream_restart.sh" >"$TEST_TMP/restart.log" 2>&1
sed 's/^/# restart: /' "$TEST_TMP/restart.log" | grep -v "^# restart: ok"
check "kill-and-restart test with ClickHouse: $(grep -c '^ok' "$TEST_TMP/restart.log") checks pass" \
	bash -c "! grep -q '^not ok' '$TEST_TMP/restart.log' && grep -q 'equal the local import exactly' '$TEST_TMP/restart.log'"

# a commit cut short: its count rows are there, its batch row is not (the
# last column: session_id, "" for the continuous profile)
q() { curl -s --data-binary "$1" "$CLICKHOUSE_URL/?database=restart_$$"; }
id=$(q "SELECT build_id FROM edges LIMIT 1")
before=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
printf '%s\t60\t\t\t\t\t\t4096\t4160\t1\t1\t1000000\t0\tcut-agent\t1\t\n' "$id" |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20edges%20FORMAT%20TabSeparated"
after=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
check "rows of a commit without its batch row are not counted ($before = $after)" \
	test -n "$before" -a "$before" = "$after"
# its resend completes it: the same rows again plus the batch row, counted once
printf '%s\t60\t\t\t\t\t\t4096\t4160\t1\t1\t1000000\t0\tcut-agent\t1\t\n' "$id" |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20edges%20FORMAT%20TabSeparated"
printf 'cut-agent\t1\tnode\t1700000000\n' |
	curl -s --data-binary @- "$CLICKHOUSE_URL/?database=restart_$$&query=INSERT%20INTO%20batches%20FORMAT%20TabSeparated"
resent=$(q "SELECT sum(count) FROM edges FINAL WHERE (agent_id, sequence) IN (SELECT agent_id, sequence FROM batches)")
check "its resend is counted once ($resent = $before + 1000000)" test "$resent" = "$((before + 1000000))"

# --- resends through the collector: one at a time, then all at once (one
# group commit holding both new and stored batches)
"$EDGEPROF" agent --replay "$FIXTURES/propeller_sample_1.perfdata1" \
	--binary "$FIXTURES/propeller_sample_1.bin" --batch-samples 500 \
	--collector http://127.0.0.1:1 --spool "$TEST_TMP/spool-dup" --flush-timeout 1 \
	>"$TEST_TMP/agent-dup.log" 2>&1
mapfile -t batches < <(ls "$TEST_TMP/spool-dup"/*.batch)
start_collector dup --store "clickhouse:$CLICKHOUSE_URL/?database=dup_$$" \
	--listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
post() { curl -s -o /dev/null -w '%{http_code}\n' -X POST -H "Content-Encoding: zstd" \
	--data-binary "@$1" "$url/v1/ingest"; }
first=$(post "${batches[0]}")
again=$(post "${batches[0]}")
check "a batch and its resend are both acknowledged ($first $again)" test "$first $again" = "200 200"
codes=$(for b in "${batches[@]}"; do post "$b" & done | sort | uniq -c | xargs)
check "all ${#batches[@]} batches at once, one stored before: all 200 ($codes)" \
	test "$codes" = "${#batches[@]} 200"
stored=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
dup=$(metric "$url" 'edgeprof_ingest_batches_total{result="duplicate"}')
check "stored $stored + duplicates $dup: each batch stored once, the two resends duplicates" \
	test "$stored $dup" = "${#batches[@]} 2"
samples=$(curl -sf "$url/v1/profile?format=json" | jq '[.profiles[].samples] | add')
check "the stored samples ($samples) are the fixture's, once" test "$samples" = 3733
stop_pid "$COLLECTOR_PID"
clickhouse_stop

# --- the same storage suite on a cluster of two shards: every table
# sharded, read through the Distributed tables
clickhouse_start_cluster 2 || { not_ok "two clickhouse-servers start as one cluster"; finish; }
suites "clickhouse:$CLICKHOUSE_URL/?cluster=$CLICKHOUSE_CLUSTER" "a two-shard cluster"
# both shards took rows: the suite's build-ids spread over them
rows=$(for k in 1 2; do curl -sf "$(clickhouse_shard_url $k)/" --data-binary \
	"SELECT count() FROM system.parts WHERE database LIKE 'edgeprof_test_%' AND table = 'edges' AND active"; done | xargs)
check "the suite's edges were written to both shards (parts: $rows)" \
	bash -c 'set -- $1; [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ]' _ "$rows"
clickhouse_stop
finish
