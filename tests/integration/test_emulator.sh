#!/usr/bin/env bash
# The LBR emulator (QEMU plugin) and `edgeprof record --emulate`:
# - its exact edge counts equal callgrind's (an oracle we did not write) on
#   every conditional branch of each workload's binary;
# - the sampled, reconstructed, chopped profile matches those exact counts
#   (overlap of the conditional edges >= 0.95 with a few hundred to a few
#   thousand samples; the accuracy benchmark measures it at scale);
# - in call-graph mode (--mode calls) only call and return edges are
#   counted, and they match the exact counts;
# - they also equal BOLT instrumentation's counts (llvm-bolt -instrument);
# - the same seed gives the same profile, byte for byte;
# - a program that crashes, fails or does not exist gets a clear message,
#   and the profile of what ran is still written.
source "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
w=$TEST_TMP/w
mkdir -p "$w"
# workload and an argument that keeps its callgrind run short
for spec in hot_cold:2000000 interp:200000 recursion:20 random_branches:200000 \
	state_machine:300000 libc_calls:20 aliasing:200000; do
	name=${spec%%:*}
	arg=${spec#*:}
	cc -O1 -g -o "$w/$name" "$here/../workloads/$name.c"
	"$EDGEPROF" record --emulate --period 1009 --exact-out "$w/$name.exact.json" \
		-o "$w/$name.prof" -- "$w/$name" "$arg" >/dev/null 2>"$w/$name.err"
	if [ $? -ne 0 ]; then
		not_ok "$name: record --emulate"
		cat "$w/$name.err"
		continue
	fi
	valgrind --tool=callgrind --collect-jumps=yes --dump-instr=yes \
		--callgrind-out-file="$w/$name.cg" "$w/$name" "$arg" >/dev/null 2>&1
	check "$name: exact counts equal callgrind's on every conditional branch" \
		python3 "$here/callgrind_jumps.py" "$w/$name.cg" "$w/$name" "$w/$name.exact.json"
	"$EDGEPROF" export "$w/$name.prof" --format json -o "$w/$name.json"
	check_sampled_vs_exact "$w" "$name"
done

# --event taken: samples every ~P taken branches, so the chop counts taken
# branches, each with the not-taken ones before it (ep_chop_taken): every
# branch is then counted by the same number of sample points. The whole
# stack (--chop 0) counts the oldest entry's branch once more than the gaps'
# not-taken ones, a chop in branches reaches back over fewer taken branches
# where not-taken ones are dense: both are biased, and on state_machine
# (dense and sparse stretches) it shows.
for seed in 1 2; do
	for v in chopped whole; do
		opt=()
		[ $v = whole ] && opt=(--chop 0)
		"$EDGEPROF" record --emulate --event taken --period 151 --seed "$seed" "${opt[@]}" \
			-o "$w/taken.$v.prof" -- "$w/state_machine" 300000 >/dev/null 2>&1
		"$EDGEPROF" export "$w/taken.$v.prof" --format json -o "$w/taken.$v.json"
	done
	config=$(jq -r '"\(.config.chop_unit) \(.config.chop)"' "$w/taken.chopped.json")
	check "--event taken: the chop counts taken branches, N-1 of them ($config)" test "$config" = "taken 31"
	ovc=$(python3 "$here/overlap.py" "$w/taken.chopped.json" "$w/state_machine.exact.json" "$w/state_machine")
	ovw=$(python3 "$here/overlap.py" "$w/taken.whole.json" "$w/state_machine.exact.json" "$w/state_machine")
	echo "# --event taken, seed $seed: overlap $ovc chopped in taken branches, $ovw whole stacks ($(jq .stats.samples "$w/taken.chopped.json") samples)"
	check "--event taken, seed $seed: uniform (overlap $ovc >= 0.995), ahead of whole stacks ($ovw) by >= 0.002" \
		python3 -c "import sys; sys.exit(not ($ovc >= 0.995 and $ovc >= $ovw + 0.002))"
done

# Call-graph mode: the emulator's branch record keeps only calls and
# returns (like PERF_SAMPLE_BRANCH_ANY_CALL|ANY_RETURN), each entry is a
# taken edge, nothing between entries is walked. The profile then holds call
# and return edges only (an incoming edge from another binary has kind
# "unknown" on this side), no ranges, and its call edges match the exact
# counts.
calls_kinds=call,call_indirect,return
for spec in libc_calls:20 recursion:20; do
	name=${spec%%:*}
	arg=${spec#*:}
	"$EDGEPROF" record --emulate --mode calls --period 1009 \
		--exact-out "$w/$name.calls.exact.json" -o "$w/$name.calls.prof" \
		-- "$w/$name" "$arg" >/dev/null 2>"$w/$name.calls.err"
	check "$name --mode calls: record --emulate exits 0" test $? -eq 0
	"$EDGEPROF" export "$w/$name.calls.prof" --format json -o "$w/$name.calls.json"
	check "$name --mode calls: config.mode is calls" \
		test "$(jq -r .config.mode "$w/$name.calls.json")" = calls
	other=$(jq '[.profiles[].branches[] | select(((.kind | IN("call", "call_indirect", "return")) or (.kind == "unknown" and .from_external)) | not)] | length' "$w/$name.calls.json")
	calls=$(jq '[.profiles[].branches[] | select(.kind | IN("call", "call_indirect", "return"))] | length' "$w/$name.calls.json")
	ranges=$(jq '[.profiles[].ranges[]] | length' "$w/$name.calls.json")
	echo "# $name --mode calls: $calls call/return edges, $other others, $ranges ranges"
	check "$name --mode calls: only call and return edges ($calls), no other kind, no range" \
		test "$calls" -gt 10 -a "$other" -eq 0 -a "$ranges" -eq 0
	check "$name --mode calls: no gap walked, none inconsistent" \
		test "$(jq '.stats.gaps + .stats.gaps_inconsistent' "$w/$name.calls.json")" -eq 0
	ov=$(python3 "$here/overlap.py" "$w/$name.calls.json" "$w/$name.calls.exact.json" "$w/$name" $calls_kinds)
	echo "# $name --mode calls: overlap of call/return edges with the exact counts $ov ($(jq .stats.samples "$w/$name.calls.json") samples)"
	check "$name --mode calls: call edges overlap the exact counts >= 0.95" \
		python3 -c "import sys; sys.exit(float('$ov') < 0.95)"
done
"$EDGEPROF" export "$w/libc_calls.prof" --format json | jq -r .config.mode >"$w/mode.txt"
check "default mode: config.mode is edges" test "$(cat "$w/mode.txt")" = edges
"$EDGEPROF" record --emulate --mode branches -o "$w/bad.prof" -- "$w/libc_calls" 1 2>"$w/bad.err"
check "--mode branches: refused, exit 2, says edges or calls" \
	bash -c "[ $? -eq 2 ] && grep -q \"'branches' is not edges or calls\" '$w/bad.err'"

# a static binary: no ld.so, no shared libraries
cc -O1 -g -static -o "$w/static" "$here/../workloads/hot_cold.c"
"$EDGEPROF" record --emulate --period 1009 --exact-out "$w/static.exact.json" -o "$w/static.prof" \
	-- "$w/static" 1000000 >/dev/null 2>&1
valgrind --tool=callgrind --collect-jumps=yes --dump-instr=yes \
	--callgrind-out-file="$w/static.cg" "$w/static" 1000000 >/dev/null 2>&1
check "static binary: exact counts equal callgrind's in the program's functions" \
	python3 "$here/callgrind_jumps.py" "$w/static.cg" "$w/static" "$w/static.exact.json" \
	main,hot_loop,cold_loop

# BOLT instrumentation needs relocations kept in the binary
for spec in hot_cold:300000 state_machine:300000; do
	name=${spec%%:*}
	arg=${spec#*:}
	cc -O1 -g -no-pie -Wl,--emit-relocs -o "$w/b_$name" "$here/../workloads/$name.c"
	/usr/lib/llvm-16/bin/llvm-bolt "$w/b_$name" -instrument -o "$w/b_$name.inst" \
		-instrumentation-file="$w/b_$name.fdata" >/dev/null 2>&1
	"$w/b_$name.inst" "$arg" >/dev/null
	"$EDGEPROF" record --emulate --exact-out "$w/b_$name.exact.json" -o "$w/b_$name.prof" \
		-- "$w/b_$name" "$arg" >/dev/null 2>&1
	check "$name: exact counts equal BOLT instrumentation's" \
		python3 "$here/bolt_fdata_compare.py" "$w/b_$name.fdata" "$w/b_$name.exact.json" \
		"$w/b_$name"
done

"$EDGEPROF" record --emulate --seed 3 -o "$w/a.prof" -- "$w/random_branches" 300000 >/dev/null 2>&1
"$EDGEPROF" record --emulate --seed 3 -o "$w/b.prof" -- "$w/random_branches" 300000 >/dev/null 2>&1
check "same seed, same profile, byte for byte" cmp -s "$w/a.prof" "$w/b.prof"
"$EDGEPROF" record --emulate --seed 4 -o "$w/c.prof" -- "$w/random_branches" 300000 >/dev/null 2>&1
check "another seed, another profile" bash -c "! cmp -s '$w/a.prof' '$w/c.prof'"

cc -O1 -o "$w/exits" "$here/../workloads/exits.c"
"$EDGEPROF" record --emulate -o "$w/crash.prof" -- "$w/exits" crash 2>"$w/crash.err"
check "a crashing program: non-zero exit" test $? -eq 1
check "a crashing program: says it was killed by SIGSEGV" grep -q 'killed by signal 11' "$w/crash.err"
n=$("$EDGEPROF" export "$w/crash.prof" --format json | jq .stats.samples)
check "a crashing program: the profile of what ran is written (${n:-0} samples)" test "${n:-0}" -gt 100
"$EDGEPROF" record --emulate -o "$w/fail.prof" -- "$w/exits" fail 2>"$w/fail.err"
check "a failing program: non-zero exit, status named" grep -q 'exited with status 3' "$w/fail.err"
check "a failing program: profile written" test -s "$w/fail.prof"
"$EDGEPROF" record --emulate -o "$w/none.prof" -- "$w/no-such-program" 2>"$w/none.err"
check "a missing program: exit 2 and 'command not found'" \
	bash -c "[ $? -eq 2 ] && grep -q 'no-such-program: command not found' '$w/none.err'"
finish
