#!/usr/bin/env bash
# Cycles per block against perf script's brstackinsn (an oracle we did not
# write) on propeller_sample_1 (Skylake, cycles in every entry): with whole
# gaps as ranges and every entry counted (--ranges gap --chop 0), each
# block's occurrences, cycles and instructions (so its IPC) equal perf's,
# block for block (brstack_cycles_oracle.py says what is left out and why).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/collector.sh"

fx=$FIXTURES
recorded=/build/work/11ef31a2a8be9640fa8d4c917e76f0db3923/google3/blaze-out/k8-opt/genfiles/devtools/crosstool/autofdo/testdata/propeller_sample_1.bin.gen
mkdir -p "$TEST_TMP/symfs$(dirname "$recorded")"
cp "$fx/propeller_sample_1.bin" "$TEST_TMP/symfs$recorded"

perf script -i "$fx/propeller_sample_1.perfdata1" -F ip,sym,brstackinsn \
	--symfs "$TEST_TMP/symfs" >"$TEST_TMP/perf.txt" 2>"$TEST_TMP/perf.err"
check "perf script prints cycles per block" grep -q 'cycles \[[0-9]*\] [0-9.]* IPC' "$TEST_TMP/perf.txt"
"$EDGEPROF" dump "$fx/propeller_sample_1.perfdata1" >"$TEST_TMP/dump.txt"
"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$fx/propeller_sample_1.bin" \
	--chop 0 --ranges gap -o "$TEST_TMP/gap.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/gap.prof" --format json -o "$TEST_TMP/gap.json"
python3 "$(dirname "$0")/brstack_cycles_oracle.py" "$TEST_TMP/perf.txt" "$TEST_TMP/gap.json" \
	"$fx/propeller_sample_1.bin" "$TEST_TMP/dump.txt" "$TEST_TMP/perf.blocks" \
	>"$TEST_TMP/oracle.txt"
check "per-block cycles and IPC equal perf's, block for block" test $? -eq 0
cat "$TEST_TMP/oracle.txt"
# report --cpi ranks the same blocks perf's counts do, with perf's IPC
"$EDGEPROF" report "$TEST_TMP/gap.prof" --cpi --top 8 >"$TEST_TMP/cpi.txt"
sed -n '/^blocks by cycles:/,/^blocks by CPI/p' "$TEST_TMP/cpi.txt" |
	awk '$1 ~ /^0x/ {print $1, $2, $6}' >"$TEST_TMP/report.blocks"
check "report --cpi: the 8 blocks with most cycles, their cycles and IPC, as perf counts them" \
	cmp -s <(head -8 "$TEST_TMP/perf.blocks") "$TEST_TMP/report.blocks"
head -3 "$TEST_TMP/report.blocks" | sed 's/^/# report --cpi: /'
"$EDGEPROF" report "$TEST_TMP/gap.prof" --cpi --insn-mix 2>"$TEST_TMP/both.err"
check "report --cpi --insn-mix: refused, exit 2" test $? -eq 2

# Split ranges (the default) attribute the same cycles by the SPEC's rule:
# an entry's cycles to the range ending at its source, with the whole gap's
# instructions as cycled_instructions. Counting every entry (--chop 0), the
# sums per closing branch equal the whole-gap ones above exactly; under the
# default chop they are a part of them.
by_end='[.profiles[] | select(.path | endswith("propeller_sample_1.bin.gen")) | .ranges[] |
	{e: .end, c: .cycles, i: .cycled_instructions} | select(.c > 0)] | group_by(.e) |
	map({(.[0].e): [(map(.c) | add), (map(.i) | add)]}) | add'
jq "$by_end" "$TEST_TMP/gap.json" >"$TEST_TMP/gap.ends"
for chop in 0 32; do
	"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$fx/propeller_sample_1.bin" \
		--chop $chop -o "$TEST_TMP/split$chop.prof" 2>/dev/null
	"$EDGEPROF" export "$TEST_TMP/split$chop.prof" --format json | jq "$by_end" \
		>"$TEST_TMP/split$chop.ends"
done
check "split ranges, --chop 0: cycles and cycled instructions per closing branch equal whole gaps'" \
	python3 -c "
import json, sys
s = json.load(open('$TEST_TMP/split0.ends')); g = json.load(open('$TEST_TMP/gap.ends'))
sys.exit(not (s == g and sum(v[0] for v in s.values()) > 0))"
check "split ranges, chop 32: cycles per closing branch within the whole-stack ones, not 0" \
	python3 -c "
import json, sys
s = json.load(open('$TEST_TMP/split32.ends')); g = json.load(open('$TEST_TMP/gap.ends'))
sys.exit(not (sum(v[0] for v in s.values()) > 0 and
              all(v[0] <= g[k][0] and v[1] <= g[k][1] for k, v in s.items())))"
# The same recording streamed to a collector (agent --replay, which sends
# the binary's code too): the web UI's function page gives each block the
# cycles and instructions of the ranges ending in it, summing to the
# function's in the collector's JSON export, and names the unit
start_collector c --store "sqlite:$TEST_TMP/c.db" --listen 127.0.0.1:0 --commit-ms 100 || finish
url="http://127.0.0.1:$COLLECTOR_PORT"
"$EDGEPROF" agent --replay "$fx/propeller_sample_1.perfdata1" --binary "$fx/propeller_sample_1.bin" \
	--collector "$url" --spool "$TEST_TMP/spool" --flush-timeout 60 >"$TEST_TMP/replay.log" 2>&1
check "agent --replay streams the recording to the collector" test $? -eq 0
curl -sf "$url/v1/profile?format=json" >"$TEST_TMP/c.json"
id=$(jq -r '[.profiles[] | select(.cpi.cycles > 0)][0].build_id' "$TEST_TMP/c.json")
read -r fn start fcycles finsns < <(jq -r --arg id "$id" '.profiles[] | select(.build_id == $id) |
	[.cpi.functions[] | select(.name != "")] | max_by(.cycles) |
	"\(.name) \(.start) \(.cycles) \(.cycled_instructions)"' "$TEST_TMP/c.json")
for _ in $(seq 100); do # the binary's code arrives beside the batches
	curl -sf "$url/v1/images/$id" >/dev/null && break
	sleep 0.1
done
curl -sf "$url/function?build_id=$id&addr=$start" >"$TEST_TMP/fn.html"
page=$(sed -n 's/.*<tr class="blockhead[^"]*" id="b[0-9a-f]*" data-count="[0-9]*" data-cycles="\([0-9]*\)" data-cycled-insns="\([0-9]*\)".*/\1 \2/p' \
	"$TEST_TMP/fn.html" | awk '{c += $1; i += $2} END {print c + 0, i + 0}')
echo "# $fn: $fcycles cycles over $finsns instructions in the export; the page's blocks: $page"
check "the function page's blocks hold $fn's cycles and instructions ($fcycles $finsns)" \
	test "$page" = "$fcycles $finsns" -a "${fcycles:-0}" -gt 0
check "  and say their CPI in cycles" grep -q 'cycles per instruction (' "$TEST_TMP/fn.html"
stop_pid "$COLLECTOR_PID"
finish
