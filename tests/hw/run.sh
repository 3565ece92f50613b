#!/usr/bin/env bash
# For a machine with a branch-stack PMU (Intel LBR, AMD LbrExtV2, Arm BRBE):
# the live agent samples a workload, its records arrive with branch stacks,
# over 99% of their gaps reconstruct, and its edge profile agrees with the
# emulator's exact counts for the same workload (overlap >= 0.95); in
# call-graph mode (--mode calls) every counted edge is a call or a return and
# no gap is walked; at the default period (~1 M branches) a busy CPU gives
# ~0.5-4k samples/s at one overflow (interrupt) per sample.
# Elsewhere it says "skipped: no branch-stack PMU". Run as root after `make`.
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
ep=$EDGEPROF
tmp=$TEST_TMP

cc -O1 -g -o "$tmp/hot_cold" tests/workloads/hot_cold.c
"$tmp/hot_cold" 100000000000 >/dev/null &
pid=$!
track_pid "$pid"
"$ep" agent --pid "$pid" --duration 5 -o "$tmp/live.prof" --log-level info 2>"$tmp/agent.err"
rc=$?
kill "$pid" 2>/dev/null
if grep -q 'no branch-stack PMU' "$tmp/agent.err"; then
	echo "skipped: no branch-stack PMU ($(sed -n 's/.*no branch-stack PMU (\([^)]*\)).*/\1/p' "$tmp/agent.err"))"
	exit 0
fi
[ "$rc" -eq 0 ] && ok "agent ran on the PMU" || { not_ok "agent ran on the PMU"; cat "$tmp/agent.err"; }
cost=$(grep 'sampling cost:' "$tmp/agent.err")
echo "# ${cost:-no sampling cost line}"
rate=$(sed -n 's/.*sampling cost: \([0-9]*\) samples\/s per CPU.*/\1/p' <<<"$cost")
# the agent samples every CPU but only the workload's is busy: per CPU the
# rate is the busy one's divided by the CPUs; the check is on the busy one
busy_rate=$(( ${rate:-0} * $(nproc) ))
[ "$busy_rate" -ge 300 ] && [ "$busy_rate" -le 8000 ] && ok "default period: $busy_rate samples/s on the busy CPU (300-8000)" ||
	not_ok "default period: $busy_rate samples/s on the busy CPU (300-8000)"
"$ep" export "$tmp/live.prof" --format json -o "$tmp/live.json"
with=$(jq .stats.samples_with_branches "$tmp/live.json")
gaps=$(jq .stats.gaps "$tmp/live.json")
bad=$(jq '.stats.gaps_inconsistent + .stats.gaps_unknown_code' "$tmp/live.json")
echo "# $with samples with branch stacks, $gaps gaps, $bad cut"
[ "${with:-0}" -gt 100 ] && ok "records arrive with branch stacks" || not_ok "records arrive with branch stacks"
[ "${gaps:-0}" -gt 0 ] && [ $((bad * 100)) -lt "$gaps" ] && ok "over 99% of gaps reconstruct" ||
	not_ok "over 99% of gaps reconstruct"
# the same workload's exact counts, from the emulator
"$ep" record --emulate --exact-out "$tmp/exact.json" -o "$tmp/emu.prof" -- "$tmp/hot_cold" 20000000 \
	>/dev/null 2>&1
ov=$(python3 tests/integration/overlap.py "$tmp/live.json" "$tmp/exact.json" "$tmp/hot_cold")
echo "# overlap of the live profile with the exact counts: $ov"
python3 -c "import sys; sys.exit(float('$ov') < 0.95)" && ok "live profile agrees with the exact counts (>= 0.95)" ||
	not_ok "live profile agrees with the exact counts (>= 0.95)"

# Call-graph mode: the PMU's branch filter keeps calls and returns only
# (PERF_SAMPLE_BRANCH_ANY_CALL|ANY_RETURN), so every counted edge is one
cc -O1 -g -o "$tmp/libc_calls" tests/workloads/libc_calls.c
"$tmp/libc_calls" 1000000000 >/dev/null &
pid=$!
track_pid "$pid"
"$ep" agent --pid "$pid" --mode calls --duration 5 -o "$tmp/calls.prof" 2>"$tmp/calls.err"
rc=$?
kill "$pid" 2>/dev/null
[ "$rc" -eq 0 ] && ok "agent --mode calls ran on the PMU" || { not_ok "agent --mode calls ran on the PMU"; cat "$tmp/calls.err"; }
"$ep" export "$tmp/calls.prof" --format json -o "$tmp/calls.json"
calls=$(jq '[.profiles[].branches[] | select(.kind | IN("call", "call_indirect", "return"))] | length' "$tmp/calls.json")
other=$(jq '[.profiles[].branches[] | select(((.kind | IN("call", "call_indirect", "return")) or (.kind == "unknown" and .from_external)) | not)] | length' "$tmp/calls.json")
echo "# --mode calls: $calls call/return edges, $other others, config.mode $(jq -r .config.mode "$tmp/calls.json"), $(jq .stats.gaps "$tmp/calls.json") gaps"
[ "${calls:-0}" -gt 0 ] && [ "${other:-1}" -eq 0 ] && ok "--mode calls: every counted edge is a call or a return" ||
	not_ok "--mode calls: every counted edge is a call or a return"
[ "$(jq -r '"\(.config.mode) \(.stats.gaps) \(.stats.samples_with_branches > 100)"' "$tmp/calls.json")" = "calls 0 true" ] &&
	ok "--mode calls: stacks arrive, no gap walked, the profile says calls" ||
	not_ok "--mode calls: stacks arrive, no gap walked, the profile says calls"
finish
