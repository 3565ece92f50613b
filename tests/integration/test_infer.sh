#!/usr/bin/env bash
# Profile inference in the fdata export (issue 34; the default, `--infer
# off` for the sampled counts), against the emulator's exact counts (its
# --exact-profile exported with --infer off) and BOLT 16, on bolt_mix
# (calls, loops, a jump table) and big_switch (a dispatch whose block
# counts span orders of magnitude), each sampled sparsely so that many
# executed blocks get no sample:
#  - fewer edges that ran get no count with --infer on than off (BOLT reads
#    the block they lead to as never run and splits it off as cold);
#  - how far the counts are from the exact ones is printed (tests/
#    integration/fdata_vs_exact.py: per function, the total variation
#    distance of the edge shares), not checked: it moves either way by a
#    few thousandths with the draw (the guest's environment shifts it);
#  - llvm-bolt takes the inferred fdata, nothing stale, and the BOLTed
#    program prints what the original printed; on bolt_mix its profile
#    bias score (BOLT 16's flow imbalance, --print-profile-stats) is lower
#    than the sampled fdata's;
#  - a function past --infer-max-blocks keeps its sampled counts, said with
#    the option's name; without the binary's file the sampled counts are
#    exported, with a warning.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/bolt.sh"

here=$(cd "$(dirname "$0")" && pwd)
if ! command -v "$bolt" >/dev/null; then
	not_ok "BOLT 16 is installed (Debian package bolt-16)"
	finish
fi
metric() { sed -n "s/^$1: //p" "$2"; }

run_case() { # NAME PERIOD ARGS...: records and exports W/{on,off,exact}.fdata
	local name=$1 period=$2 w=$TEST_TMP/$1
	shift 2
	mkdir -p "$w"
	"$EDGEPROF" record --emulate --period "$period" --exact-profile "$w/exact.prof" \
		-o "$w/p.prof" -- "$w/bin" "$@" >"$w/run.out" 2>"$w/record.err"
	check "$name: record --emulate exits 0" test $? -eq 0
	bid=$(readelf -n "$w/bin" | awk '/Build ID/ {print $3}')
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer on -o "$w/on.fdata" 2>"$w/on.err"
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer off -o "$w/off.fdata"
	"$EDGEPROF" export "$w/exact.prof" --build-id "$bid" --format fdata --infer off -o "$w/exact.fdata"
	check "$name: inference said what it did" grep -q "infer $bid: .* functions" "$w/on.err"
	for m in on off; do
		python3 "$here/fdata_vs_exact.py" "$w/exact.fdata" "$w/$m.fdata" >"$w/$m.vs"
	done
	echo "# $name: executed edges with no count: inferred $(metric executed_zero "$w/on.vs"), sampled $(metric executed_zero "$w/off.vs") of $(metric executed_edges "$w/on.vs"); distance $(metric distance "$w/on.vs") against $(metric distance "$w/off.vs"); blocks that never ran given a count $(metric unexecuted_blocks_counted "$w/on.vs") against $(metric unexecuted_blocks_counted "$w/off.vs")"
	check "$name: fewer executed edges without a count when inferred" \
		test "$(metric executed_zero "$w/on.vs")" -lt "$(metric executed_zero "$w/off.vs")"
	# BOLT's own measure of flow imbalance: how far, on average, a block's
	# count is from what flows in and out of it in BOLT's CFG
	for m in on off; do
		"$bolt" "$w/bin" -o "$w/$m.bias.bolt" -data "$w/$m.fdata" "${bolt_opts[@]}" \
			--print-profile-stats >"$w/$m.bias.log" 2>&1
		sed -n 's/^BOLT-INFO: Profile bias score: \([0-9.]*\)%.*/\1/p' "$w/$m.bias.log" >"$w/$m.bias"
	done
	echo "# $name: BOLT's profile bias score: inferred $(cat "$w/on.bias")%, sampled $(cat "$w/off.bias")%"
}

w=$TEST_TMP/bolt_mix
mkdir -p "$w"
cc -O2 -g -fno-pie -no-pie -Wl,--emit-relocs -fno-reorder-blocks-and-partition -o "$w/bin" \
	"$here/../workloads/bolt_mix.c" "$here/../workloads/bolt_mix_b.c"
run_case bolt_mix 9973 400
# bolt_mix's blocks are nearly all ones BOLT and the inference agree on
# (big_switch's jump-table cases no sample reached get their unit from
# outside the function, which BOLT counts as imbalance)
check "bolt_mix: BOLT's profile bias score is lower for the inferred counts" python3 -c \
	"import sys; sys.exit(not float('$(cat "$w/on.bias")') < float('$(cat "$w/off.bias")'))"
cp "$w/on.fdata" "$w/p.fdata"
check_bolt_takes_fdata bolt_mix "$w" "$w/bin"
"$w/out.bolt" 400 >"$w/bolted.out" 2>&1
check "bolt_mix: the BOLTed program prints what the original printed" cmp -s "$w/run.out" "$w/bolted.out"

"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer on --infer-max-blocks 1 -o "$w/capped.fdata" 2>"$w/capped.err"
check "past --infer-max-blocks: refused by name" grep -q "infer-max-blocks 1" "$w/capped.err"
fn=$(sed -n 's/.*the last, \([^:]*\): more blocks.*/\1/p' "$w/capped.err")
# (every count of an inferred binary is 16 times its sample: a unit of flow
# spread is 1/16 of a sample)
check "past --infer-max-blocks: $fn's sampled counts exported" \
	cmp -s <(grep "^1 $fn " "$w/capped.fdata") \
	<(grep "^1 $fn " "$w/off.fdata" | awk '{$7 *= 16; $8 *= 16; print}')
check "past --infer-max-blocks: $fn's counts differ from the inferred ones" \
	bash -c "! cmp -s <(grep '^1 $fn ' '$w/capped.fdata') <(grep '^1 $fn ' '$w/on.fdata')"
mv "$w/bin" "$w/bin.moved"
"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer on -o "$w/nobin.fdata" 2>"$w/nobin.err"
check "without the binary: a warning, and the sampled counts exported" \
	bash -c "grep -q 'counts not inferred' '$w/nobin.err' && cmp -s '$w/nobin.fdata' '$w/off.fdata'"

# a function of 200,002 blocks (100,000 conditional branches, each
# skipping one instruction), run 20 times: past the default bound it keeps
# its sampled counts, said by name, and the export stays small
w=$TEST_TMP/huge
mkdir -p "$w"
{
	printf '\t.text\n\t.globl huge\n\t.type huge,@function\nhuge:\n\txor %%eax,%%eax\n'
	printf '\t.rept 100000\n\ttest %%edi,%%edi\n\tjne 1f\n\tinc %%eax\n1:\n\t.endr\n\tret\n'
	printf '\t.size huge,.-huge\n\t.section .note.GNU-stack,"",@progbits\n'
} >"$w/huge.s"
printf 'int huge(int);\nint main(int c, char **v) { (void)v; int s = 0;\n for (int i = 0; i < 20; i++) s += huge(c - 1);\n return s; }\n' >"$w/main.c"
cc -O1 -o "$w/bin" "$w/main.c" "$w/huge.s"
"$EDGEPROF" record --emulate --period 997 -o "$w/p.prof" -- "$w/bin" >/dev/null 2>&1
bid=$(readelf -n "$w/bin" | awk '/Build ID/ {print $3}')
# the export's peak RSS in KiB, as getrusage() says of a waited child
python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stderr=open(sys.argv[-1] + ".err", "w"))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' \
	"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata -o "$w/on.fdata" >"$w/rss"
mv "$w/on.fdata.err" "$w/on.err"
"$EDGEPROF" export "$w/p.prof" --build-id "$bid" --format fdata --infer off -o "$w/off.fdata"
echo "# huge: $(grep -c . "$w/off.fdata") fdata lines, export peak RSS $(cat "$w/rss") KiB"
check "huge: refused past the default --infer-max-blocks, by name" \
	grep -q "the last, huge: more blocks or edges than --infer-max-blocks allows (--infer-max-blocks 65536)" "$w/on.err"
check "huge: its sampled counts exported (times 16)" \
	cmp -s <(grep "^1 huge " "$w/on.fdata") <(grep "^1 huge " "$w/off.fdata" | awk '{$7 *= 16; $8 *= 16; print}')
check "huge: the export's peak RSS stays under 100 MiB" test "$(cat "$w/rss")" -lt 102400

w=$TEST_TMP/big_switch
mkdir -p "$w"
cc -O2 -g -fno-pie -no-pie -Wl,--emit-relocs -fno-reorder-blocks-and-partition -o "$w/bin" \
	"$here/../workloads/big_switch.c"
run_case big_switch 99991
finish
