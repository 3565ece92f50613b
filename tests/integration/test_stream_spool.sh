#!/usr/bin/env bash
# The collector is unreachable for the whole run: the agent keeps batches in
# its spool up to the bound, drops the oldest with a counter and one log
# line, and disk use stays under the bound. The next agent on the same spool
# sends what is left once a collector is there.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

perf="$FIXTURES/propeller_sample_1.perfdata1"
bin="$FIXTURES/propeller_sample_1.bin"
# two samples per batch: ~1,900 batches, ~2 MiB, into a 1 MiB spool
"$EDGEPROF" agent --replay "$perf" --binary "$bin" --batch-samples 2 \
	--collector http://127.0.0.1:1 --spool "$TEST_TMP/spool" --spool-max-mib 1 \
	--flush-timeout 1 >"$TEST_TMP/agent.log" 2>&1
rc=$?
check "the agent says the collector is down and exits 1 (batches left unsent)" test "$rc" -eq 1
grep -v "no file for" "$TEST_TMP/agent.log" | sed 's/^/# agent: /' | tail -3
used=$(find "$TEST_TMP/spool" -type f -printf "%s\n" | awk "{s += \$1} END {print s + 0}")
echo "# spool: $used bytes on disk, $(ls "$TEST_TMP/spool" | wc -l) batches"
check "the batches on disk stay within the 1 MiB bound" test "$used" -le 1048576
check "the spool is used up to its bound (> 900 KB)" test "$used" -gt 900000
dropped=$(sed -n 's/.* \([0-9]*\) dropped from a full spool.*/\1/p' "$TEST_TMP/agent.log")
check "dropped batches are counted (${dropped:-none})" test "${dropped:-0}" -gt 0
check "and logged when the spool is full" grep -q "spool .*full (limit 1048576 bytes): dropped" \
	"$TEST_TMP/agent.log"
check "one warning for the outage, not one per retry" \
	test "$(grep -c 'batches stay in the spool and are retried' "$TEST_TMP/agent.log")" -eq 1

# the next agent finds the spool and a collector: what was kept arrives
left=$(ls "$TEST_TMP/spool" | wc -l)
start_collector c --store "sqlite:$TEST_TMP/store.db" --listen 127.0.0.1:0 || exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
# (ASan: the streamer and spool leak nothing over thousands of batches)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" agent --replay "$perf" \
	--binary "$bin" --batch-samples 100000 --collector "$url" --spool "$TEST_TMP/spool" \
	--flush-timeout 120 >"$TEST_TMP/agent2.log" 2>&1
check "the next agent (ASan) exits 0 with no sanitizer report" \
	bash -c "[ $? -eq 0 ] && ! grep -q 'Sanitizer\|runtime error' '$TEST_TMP/agent2.log'"
check "the next agent sends the $left batches left by the first" \
	grep -q "$left batches .* from an earlier run to send" "$TEST_TMP/agent2.log"
stored=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
check "all of them and its own are stored ($stored = $left + 1)" test "$stored" -eq $((left + 1))
check "the spool is empty" test -z "$(ls -A "$TEST_TMP/spool")"
stop_pid "$COLLECTOR_PID"
finish
