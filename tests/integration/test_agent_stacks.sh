#!/usr/bin/env bash
# agent --stacks on this PMU-less VM (needs root, as CI runs): IP samples
# carry their user call stack, by frame pointers. A workload of a known
# chain (tests/workloads/call_chain.c, main -> outer -> inner spinning)
# built with frame pointers gives inner <- outer <- main in most samples'
# stacks; built without them, its stacks are flagged
# (stack_samples_no_frame_pointer), not drawn as trees; without --stacks
# the profile has none.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

require_root_live
src=$(dirname "$0")/../workloads/call_chain.c
cc -O1 -g -fno-omit-frame-pointer -o "$TEST_TMP/chain_fp" "$src"
cc -O1 -g -fomit-frame-pointer -o "$TEST_TMP/chain_nofp" "$src"
"$TEST_TMP/chain_fp" 100000000000 >/dev/null &
fp=$!
track_pid "$fp"
"$TEST_TMP/chain_nofp" 100000000000 >/dev/null &
nofp=$!
track_pid "$nofp"

# stacks NAME.json: "SAMPLES FLAGGED CHAIN_SAMPLES" of the workload's
# binary, CHAIN_SAMPLES those whose stacks begin inner, outer, main
stacks() {
	jq -r --arg p "$2" '.profiles[] | select(.path == $p) |
		"\(.samples) \(.stack_samples_no_frame_pointer // 0) \([.stacks[]? |
		select([.frames[0:3][].function] == ["inner", "outer", "main"]) | .count] | add // 0)"' "$1"
}

"$EDGEPROF" agent --pid "$fp" --stacks --duration 3 -o "$TEST_TMP/fp.prof" 2>"$TEST_TMP/fp.err"
check "agent --stacks runs and exits 0" test $? -eq 0
"$EDGEPROF" export "$TEST_TMP/fp.prof" --format json -o "$TEST_TMP/fp.json"
read -r samples flagged chain < <(stacks "$TEST_TMP/fp.json" "$TEST_TMP/chain_fp")
echo "# frame pointers: $samples samples, $chain with inner <- outer <- main, $flagged flagged"
check "samples arrive (${samples:-0} in 3 s)" test "${samples:-0}" -gt 200
check "most stacks read inner <- outer <- main (${chain:-0} of ${samples:-0})" \
	test $((${chain:-0} * 10)) -ge $((${samples:-1} * 9))
# (a rare sample in tick(), a leaf with no frame, is rightly flagged)
check "with frame pointers (almost) none is flagged (${flagged:-?})" \
	test $((${flagged:-1} * 100)) -le "${samples:-0}"
check "no stack dropped" test "$(jq .stats.stacks_dropped "$TEST_TMP/fp.json")" = 0
"$EDGEPROF" report "$TEST_TMP/fp.prof" >"$TEST_TMP/fp.report"
top_stack=$(awk '/hottest call stacks/ {getline; getline; $1 = $2 = ""; print; exit}' "$TEST_TMP/fp.report")
check "report: the hottest call stack is inner <- outer <- main ($top_stack)" \
	bash -c '[[ "$1" == *" inner <- outer <- main"* ]]' _ "$top_stack"

"$EDGEPROF" agent --pid "$nofp" --stacks --duration 2 -o "$TEST_TMP/nofp.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/nofp.prof" --format json -o "$TEST_TMP/nofp.json"
read -r samples flagged chain < <(stacks "$TEST_TMP/nofp.json" "$TEST_TMP/chain_nofp")
echo "# no frame pointers: $samples samples, $chain with the chain, $flagged flagged"
check "without frame pointers the stacks are flagged (${flagged:-0} of ${samples:-0})" \
	test "${samples:-0}" -gt 100 -a $((${flagged:-0} * 10)) -ge $((${samples:-1} * 9))
check "without frame pointers no stack claims the chain (${chain:-?})" test "${chain:-1}" -eq 0
check "report: without frame pointers the stacks are not drawn, and it says why" \
	grep -q "call stacks not shown: .* without frame pointers" \
	<("$EDGEPROF" report "$TEST_TMP/nofp.prof")

"$EDGEPROF" agent --pid "$fp" --duration 1 -o "$TEST_TMP/none.prof" 2>/dev/null
check "without --stacks the profile holds no stacks" \
	test "$("$EDGEPROF" export "$TEST_TMP/none.prof" --format json | jq '[.profiles[].stacks // empty] | length')" = 0

# pprof (a reader we did not write): the stacks as multi-frame samples
if command -v go >/dev/null && go tool pprof -h >/dev/null 2>&1; then
	export PPROF_TMPDIR=$TEST_TMP/pprof HOME=$TEST_TMP
	ASAN_OPTIONS=detect_leaks=1 "$EDGEPROF_ASAN" export "$TEST_TMP/fp.prof" --format pprof \
		-o "$TEST_TMP/fp.pb.gz"
	check "export --format pprof of the stacks (ASan build): clean" test $? -eq 0
	go tool pprof -symbolize=none -traces "$TEST_TMP/fp.pb.gz" >"$TEST_TMP/fp.traces" 2>/dev/null
	# the samples of traces whose first three frames are inner, outer, main
	traced=$(awk '/^-+\+/ {if (n) t += (f == "inner outer main") * n; n = 0; f = ""; k = 0; next}
		NF == 2 && $1 ~ /^[0-9]+$/ {n = $1; f = $2; k = 1; next}
		NF == 1 && k && k < 3 {f = f " " $1; k++}
		END {print t + 0}' "$TEST_TMP/fp.traces")
	total=$(jq '[.profiles[].samples] | add' "$TEST_TMP/fp.json")
	echo "# pprof -traces: $traced of $total samples inner <- outer <- main"
	check "pprof -traces shows inner <- outer <- main in most samples ($traced of $total)" \
		test $((traced * 10)) -ge $((total * 9))
	go tool pprof -symbolize=none -top -cum -nodecount=100000 "$TEST_TMP/fp.pb.gz" \
		>"$TEST_TMP/fp.top" 2>/dev/null
	read -r all main_cum < <(awk '/accounting for/ {gsub(",", ""); a = $NF - 0; t = $(NF-1)}
		$NF == "main" {m = $4} END {print t, m}' "$TEST_TMP/fp.top")
	check "pprof -top -cum: the total is the profile's samples, each once ($all, $total)" \
		test "$all" = "$total"
	check "pprof -top -cum: main holds most samples cumulatively ($main_cum of $total)" \
		test $((main_cum * 10)) -ge $((total * 9))
else
	echo "# pprof checks skipped: no go (golang-go)"
fi

# Streaming: batches carry the stacks (test_stacks: a delta holds them;
# test_batch_split: a split interval keeps them once); the collector (ASan
# build) takes them (it stores no stacks yet), refuses none, and keeps the
# IP samples.
COLLECTOR_BIN=$EDGEPROF_ASAN ASAN_OPTIONS=detect_leaks=1 \
	start_collector stk --store "sqlite:$TEST_TMP/stk.db" --listen 127.0.0.1:0 --commit-ms 100 ||
	exit 1
url="http://127.0.0.1:$COLLECTOR_PORT"
"$EDGEPROF" agent --pid "$fp" --stacks --duration 3 --interval 1 --upload-max-mib 0 \
	--collector "$url" --spool "$TEST_TMP/spool" -o "$TEST_TMP/st.prof" 2>"$TEST_TMP/st.err"
check "agent --stacks --collector exits 0" test $? -eq 0
stored=$(metric "$url" 'edgeprof_ingest_batches_total{result="stored"}')
refused=$(metric "$url" 'edgeprof_ingest_batches_total{result="bad_request"}')
id=$(readelf -n "$TEST_TMP/chain_fp" | awk '/Build ID/ {print $3}')
got=$(curl -sf "$url/v1/profile?format=json&build_id=$id" | jq '[.profiles[] | (.ips // [])[] | .count] | add // 0')
check "the collector stored the batches (${stored:-0}), refused none (${refused:-0}), has the IPs (${got:-0})" \
	test "${stored:-0}" -gt 0 -a "${refused:-0}" = 0 -a "${got:-0}" -gt 100
stop_pid "$COLLECTOR_PID"
check "the ASan collector: no sanitizer report" \
	bash -c "! grep -qE 'Sanitizer|runtime error' '$TEST_TMP/stk.log'"

# the agent runs for months: no leak, no undefined behaviour (ASan+UBSan)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" agent --pid "$fp" --stacks \
	--duration 1 -o "$TEST_TMP/asan.prof" 2>"$TEST_TMP/asan.err"
check "ASan+UBSan agent --stacks: clean exit, no sanitizer report" \
	bash -c "[ $? -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' '$TEST_TMP/asan.err'"
finish
