#!/usr/bin/env bash
# agent --cycles streaming to a collector (needs root, as CI runs): on this
# PMU-less VM its time is cpu-clock nanoseconds kept per IP (no branch
# stacks, so no counted ranges); the collector (ASan+UBSan build) keeps them
# over several batches, says they are nanoseconds, and gives every function
# of the workload the same time as the agent's own -o profile, which holds
# the running totals of what it streamed, and so does its web page for the
# binary, naming the unit. test_store.c covers the stores'
# sums and the two units kept apart.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

require_root_live
build_workload hot_cold
start_busy hot_cold
a=$BUSY_PID

COLLECTOR_BIN=$EDGEPROF_ASAN ASAN_OPTIONS=detect_leaks=1 \
	start_collector cyc --store "sqlite:$TEST_TMP/cyc.db" --listen 127.0.0.1:0 --commit-ms 100 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
"$EDGEPROF" agent --pid "$a" --duration 3 --interval 1 --drain-ms 50 --cycles \
	--collector "$url" --spool "$TEST_TMP/spool" -o "$TEST_TMP/c.prof" 2>"$TEST_TMP/agent.err"
check "agent --cycles --collector exits 0 with every batch acknowledged" test $? -eq 0
if grep -q -- '--cycles: the cycles event' "$TEST_TMP/agent.err"; then
	echo "# this machine has a hardware cycles event: the unit checked below is ns"
fi
batches=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
check "several batches arrived (${batches:-0}), so their time is summed" test "${batches:-0}" -ge 2

"$EDGEPROF" export "$TEST_TMP/c.prof" --format json -o "$TEST_TMP/local.json"
curl -sf "$url/v1/profile?format=json" >"$TEST_TMP/collector.json"
# "function ns" of the workload's binary: IP time and range time together,
# a local named NAME/N as fdata and the web UI name it
per_function() {
	jq -r --arg p "$TEST_TMP/hot_cold" '.profiles[] | select(.path == $p or
		((.paths // []) | index($p))) | .cpi.functions[]? |
		"\(.name)\(if .local_index then "/\(.local_index)" else "" end) \((.ip_cycles // 0) + (.cycles // 0))"' | sort
}
per_function <"$TEST_TMP/local.json" >"$TEST_TMP/local.fn"
per_function <"$TEST_TMP/collector.json" >"$TEST_TMP/collector.fn"
sed 's/^/# local: /' "$TEST_TMP/local.fn"
sed 's/^/# collector: /' "$TEST_TMP/collector.fn"
check "the workload's hot function has time in the agent's own profile" \
	grep -Eq '^hot_loop(/1)? [1-9][0-9]{6,}$' "$TEST_TMP/local.fn"
check "the collector gives every function the same ns as the agent's -o profile" \
	cmp -s "$TEST_TMP/local.fn" "$TEST_TMP/collector.fn"
check "the collector's IP time equals the local one, IP by IP" \
	test "$(jq -c '[.profiles[] | .ips[]? | select(.cycles) | [.ip, .cycles]] | sort' \
		"$TEST_TMP/local.json")" = \
	"$(jq -c '[.profiles[] | .ips[]? | select(.cycles) | [.ip, .cycles]] | sort' \
		"$TEST_TMP/collector.json")"
check "the collector's profile says its cycles are cpu-clock nanoseconds" \
	test "$(jq -r '.config | "\(.cycles_source) \(.cycles_unit)"' "$TEST_TMP/collector.json")" = \
	"$(jq -r '.config | "\(.cycles_source) \(.cycles_unit)"' "$TEST_TMP/local.json")"
# the binary's web page: each function's time as the export gives it, and the
# unit in the column's name
id=$(jq -r --arg p "$TEST_TMP/hot_cold" '.profiles[] | select(.path == $p or
	((.paths // []) | index($p))) | .build_id' "$TEST_TMP/collector.json" | head -1)
curl -sf "$url/binary?build_id=$id" >"$TEST_TMP/binary.html"
sed -n 's/.*<tr class="function" data-name="\([^"]*\)"[^>]*data-time="\([0-9]*\)".*/\1 \2/p' \
	"$TEST_TMP/binary.html" | awk '$2 > 0' | sort >"$TEST_TMP/web.fn"
if cmp -s "$TEST_TMP/collector.fn" "$TEST_TMP/web.fn"; then
	ok "the web UI's binary page gives every function the export's time"
else
	not_ok "the web UI's binary page gives every function the export's time"
	sed 's/^/# web: /' "$TEST_TMP/web.fn"
	grep -o '<tr class="function"[^>]*>' "$TEST_TMP/binary.html" | head -5 | sed 's/^/# page: /'
fi
unit=$(jq -r .config.cycles_unit "$TEST_TMP/collector.json")
if [ "$unit" = ns ]; then column='CPU time (ns)'; else column='Cycles'; fi
check "the web UI names the time's unit ($unit: \"$column\")" \
	grep -qF "<th class=\"num\">$column</th>" "$TEST_TMP/binary.html"
stop_pid "$COLLECTOR_PID"
check "the collector (ASan+UBSan) reports no leak or error" \
	bash -c "! grep -q 'Sanitizer\|runtime error' '$TEST_TMP/cyc.log'"
finish
