#!/usr/bin/env bash
# Nothing lost, nothing doubled: an agent replays propeller_sample_1 into a
# collector that is SIGKILLed and restarted twice while batches arrive; the
# collector's counts then equal a local `edgeprof import` of the same file
# exactly, edge for edge and range for range.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
"$EDGEPROF" import "$perf" --binary "$bin" -o "$TEST_TMP/local.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format json >"$TEST_TMP/local.json"

# any store: $EDGEPROF_TEST_STORE (test_store_clickhouse.sh runs this with ClickHouse)
store=${EDGEPROF_TEST_STORE:-sqlite:$TEST_TMP/store.db}
start_collector c1 --store "$store" --listen 127.0.0.1:0 --commit-ms 100 || exit 1
port=$COLLECTOR_PORT
url="http://127.0.0.1:$port"

# 40 samples a batch: ~94 batches, each acknowledged after its group commit,
# so the stream lasts several seconds and the kills land in the middle
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 40 --collector "$url" \
	--spool "$TEST_TMP/spool" --retry-max-ms 400 --flush-timeout 120 \
	>"$TEST_TMP/agent.log" 2>&1 &
agent=$!
track_pid "$agent"

killed=0
for round in 1 2; do
	# wait until some batches of this round are stored, then kill mid-stream
	before=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
	for _ in $(seq 1 50); do
		now=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
		[ "${now:-0}" -ge "$((${before:-0} + 5))" ] && break
		sleep 0.1
	done
	kill -9 "$COLLECTOR_PID" && killed=$((killed + 1))
	wait "$COLLECTOR_PID" 2>/dev/null
	sleep 0.5
	start_collector "c$((round + 1))" --store "$store" --listen "127.0.0.1:$port" --commit-ms 100 ||
		exit 1
done
check "the collector was SIGKILLed twice mid-stream" test "$killed" -eq 2

wait "$agent"
rc=$?
check "the agent got every batch acknowledged and exited 0" test "$rc" -eq 0
sed 's/^/# agent: /' "$TEST_TMP/agent.log" | grep -v "no file for" | tail -4
check "the agent saw the outages (failed sends retried)" \
	grep -Eq "[1-9][0-9]* send attempts failed" "$TEST_TMP/agent.log"
check "the spool is empty afterwards" test -z "$(ls -A "$TEST_TMP/spool")"

curl -sf "$url/v1/profile?format=json" >"$TEST_TMP/collector.json"
edge_table <"$TEST_TMP/local.json" >"$TEST_TMP/local.edges"
edge_table <"$TEST_TMP/collector.json" >"$TEST_TMP/collector.edges"
range_table <"$TEST_TMP/local.json" >"$TEST_TMP/local.ranges"
range_table <"$TEST_TMP/collector.json" >"$TEST_TMP/collector.ranges"
n=$(wc -l <"$TEST_TMP/local.edges")
echo "# $n edges, $(wc -l <"$TEST_TMP/local.ranges") ranges in the local import"
check "collector edge counts equal the local import exactly ($n edges)" \
	bash -c "[ $n -gt 0 ] && cmp -s '$TEST_TMP/local.edges' '$TEST_TMP/collector.edges'"
check "collector range counts equal the local import exactly" \
	cmp -s "$TEST_TMP/local.ranges" "$TEST_TMP/collector.ranges"
check "sample counts agree" test "$(jq '[.profiles[].samples] | add' "$TEST_TMP/local.json")" = \
	"$(jq '[.profiles[].samples] | add' "$TEST_TMP/collector.json")"

# the same profile through the CLI and the other formats
"$EDGEPROF" report --collector "$url" >"$TEST_TMP/report.txt" 2>&1
check "edgeprof report --collector prints the hottest functions" \
	grep -q "hottest functions" "$TEST_TMP/report.txt"
"$EDGEPROF" export --collector "$url" --format fdata --infer off -o "$TEST_TMP/c.fdata" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/local.prof" --format fdata --infer off -o "$TEST_TMP/l.fdata" 2>/dev/null
check "edgeprof export --collector --format fdata equals the local export" \
	cmp -s "$TEST_TMP/c.fdata" "$TEST_TMP/l.fdata"
stop_pid "$COLLECTOR_PID"
finish
