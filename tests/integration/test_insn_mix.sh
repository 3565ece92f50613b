#!/usr/bin/env bash
# The instruction mix (report --insn-mix, export --format json --insn-mix),
# against tools we did not write:
# - exact: the emulator's exact ranges (record --exact-profile) times the
#   types edgeprof decodes (capstone) equal callgrind's per-instruction
#   counts (--dump-instr=yes) times the types of objdump's text as the
#   oracle classifies it (insn_mix_oracle.py, its own rules), type by type,
#   in total and per function; and the exact ranges equal callgrind's counts
#   instruction by instruction;
# - sampled: the default method's mix (a seeded emulated recording) is
#   within 2% of the exact mix per type (insn_mix_sampled.py says how a
#   rare type is held);
# - --function, --range and bad input.
source "$(dirname "$0")/lib.sh"

here=$(dirname "$0")
w=$TEST_TMP/w
mkdir -p "$w"
# workload:argument:period. Periods give each binary thousands of samples:
# the sampled mix's error is the sampling's, ~1/sqrt(samples in the
# binary) for a type spread over phases of the run (libc_calls' main is
# 13% of its run: 40k samples, measured 0.3% error, against 4% at 10k).
for spec in hot_cold:2000000:211 interp:200000:211 recursion:23:101 \
	random_branches:400000:211 state_machine:300000:211 libc_calls:60:53 \
	aliasing:200000:211 insn_mix:200000:211; do
	IFS=: read -r name arg period <<<"$spec"
	# not PIE: see insn_mix_oracle.py; -O2 for insn_mix, whose loops
	# vectorize
	opt=-O1
	[ "$name" = insn_mix ] && opt=-O2
	cc $opt -g -no-pie -o "$w/$name" "$here/../workloads/$name.c"
	if ! "$EDGEPROF" record --emulate --exact-profile "$w/$name.exact.prof" \
		-o "$w/$name.unused.prof" -- "$w/$name" "$arg" >/dev/null 2>"$w/$name.err"; then
		not_ok "$name: record --emulate --exact-profile"
		cat "$w/$name.err"
		continue
	fi
	"$EDGEPROF" export "$w/$name.exact.prof" --format json --insn-mix -o "$w/$name.exact.json" \
		2>"$w/$name.err"
	valgrind --tool=callgrind --dump-instr=yes --skip-plt=no \
		--callgrind-out-file="$w/$name.cg" "$w/$name" "$arg" >/dev/null 2>&1
	python3 "$here/insn_mix_oracle.py" "$w/$name.cg" "$w/$name" "$w/$name.exact.json" \
		>"$w/$name.oracle.txt"
	check "$name: exact mix equals callgrind x objdump per type, per function, per instruction" \
		test $? -eq 0
	sed 's/^/    /' "$w/$name.oracle.txt"

	"$EDGEPROF" record --emulate --seed 1 --period "$period" -o "$w/$name.prof" \
		-- "$w/$name" "$arg" >/dev/null 2>&1
	"$EDGEPROF" export "$w/$name.prof" --format json --insn-mix -o "$w/$name.json" 2>/dev/null
	python3 "$here/insn_mix_sampled.py" "$w/$name.json" "$w/$name.exact.json" "$w/$name" 0.02 \
		>"$w/$name.sampled.txt"
	rc=$?
	echo "# $name: $(jq .stats.samples "$w/$name.json") samples: $(tail -1 "$w/$name.sampled.txt")"
	check "$name: sampled mix within 2% of the exact mix per type" test $rc -eq 0
done

# the workload meant to have every type has every type
for t in load store cond_branch jump indirect_jump call indirect_call return vector atomic \
	divide other; do
	n=$(jq ".profiles[] | select(.path == \"$w/insn_mix\") | .insn_mix.total.$t" \
		"$w/insn_mix.exact.json")
	check "insn_mix workload: $t executed ($n)" test "${n:-0}" -gt 0
done

# --function: only that function's instructions, in the report and the JSON
p=$w/insn_mix.exact.prof
"$EDGEPROF" report "$p" --insn-mix --function divides >"$w/fn.txt"
check "report --insn-mix --function: names the scope" grep -q 'function divides: ' "$w/fn.txt"
fn_json=$(jq ".profiles[] | select(.path == \"$w/insn_mix\") | .insn_mix.functions[] |
	select(.name == \"divides\") | .mix.divide" "$w/insn_mix.exact.json")
scoped=$("$EDGEPROF" export "$p" --format json --insn-mix --function divides |
	jq ".profiles[] | select(.path == \"$w/insn_mix\") | .insn_mix.total.divide")
check "--function divides: its divides, as in the whole mix's function line ($scoped)" \
	test -n "$scoped" -a "$scoped" = "$fn_json"
others=$("$EDGEPROF" export "$p" --format json --insn-mix --function divides |
	jq '[.profiles[] | select(.insn_mix.missing == null) | .insn_mix.functions[].name] | unique | join(",")')
check "--function divides: no other function counted ($others)" test "$others" = '"divides"'
# --range over that function's bytes gives the same counts
start=$(jq -r ".profiles[] | select(.path == \"$w/insn_mix\") | .functions[] |
	select(.name == \"divides\") | .start" "$w/insn_mix.exact.json")
size=$(jq -r ".profiles[] | select(.path == \"$w/insn_mix\") | .functions[] |
	select(.name == \"divides\") | .size" "$w/insn_mix.exact.json")
end=$(printf '0x%x' $((start + size)))
ranged=$("$EDGEPROF" export "$p" --format json --insn-mix --range "$start-$end" \
	--build-id "$(jq -r ".profiles[] | select(.path == \"$w/insn_mix\") | .build_id" \
		"$w/insn_mix.exact.json")" | jq '.profiles[0].insn_mix.total')
byfn=$("$EDGEPROF" export "$p" --format json --insn-mix --function divides |
	jq ".profiles[] | select(.path == \"$w/insn_mix\") | .insn_mix.total")
check "--range START-END over a function equals --function" test "$ranged" = "$byfn"

# bad input: each refused with a line naming it
"$EDGEPROF" report "$p" --insn-mix --function no_such_fn 2>"$w/e1"
check "--function of no function: exit 1, named" \
	bash -c "[ $? -eq 1 ] && grep -q 'no function named no_such_fn' '$w/e1'"
"$EDGEPROF" report "$p" --insn-mix --range 0x2000-0x1000 2>"$w/e2"
check "--range END before START: exit 1, named" \
	bash -c "[ $? -eq 1 ] && grep -q \"'0x2000-0x1000' is not START-END\" '$w/e2'"
"$EDGEPROF" report "$p" --range 0x1000-0x2000 2>"$w/e3"
check "--range without --insn-mix: exit 2" \
	bash -c "[ $? -eq 2 ] && grep -q 'go with --insn-mix' '$w/e3'"
"$EDGEPROF" export "$p" --format fdata --insn-mix 2>"$w/e4"
check "--insn-mix with fdata: exit 2" bash -c "[ $? -eq 2 ] && grep -q 'only the json' '$w/e4'"
# the profiled binary gone: said, in the output too, the rest still mixed
cp "$p" "$w/moved.prof"
mv "$w/insn_mix" "$w/insn_mix.moved"
"$EDGEPROF" report "$w/moved.prof" --insn-mix >"$w/moved.txt" 2>"$w/moved.err"
check "binary missing: exit 0, warned naming it" \
	bash -c "[ $? -eq 0 ] && grep -q '$w/insn_mix: binary not found' '$w/moved.err'"
check "binary missing: the report says so for it" grep -q 'none: .*binary not found' "$w/moved.txt"
"$EDGEPROF" report "$w/moved.prof" --insn-mix --binary "$w/insn_mix.moved" >"$w/found.txt" \
	2>/dev/null
check "binary missing: --binary finds it by build-id" grep -q 'function\|divides' "$w/found.txt"
# another build of the binary: refused, never decoded as if it were the same
cc -O0 -g -no-pie -o "$w/insn_mix" "$here/../workloads/insn_mix.c"
"$EDGEPROF" report "$w/moved.prof" --insn-mix >"$w/other.txt" 2>"$w/other.err"
check "another build: said, no mix for it" grep -q 'another build' "$w/other.err"
finish
