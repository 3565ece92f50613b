#!/usr/bin/env bash
# Debian's BOLT 16 (a consumer we did not write) accepts both exports of
# propeller_sample_1 (a PIE) and finds them matching the binary: the hot
# functions carry a profile, none is flagged stale, every name is the
# binary's, and perf2bolt replays every pre-aggregated line onto the code.
# A deliberately stale copy shows the checks can fail.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
bin=$fx/propeller_sample_1.bin
# BOLT picks its mode from its own name: the perf2bolt-16 symlink runs as
# llvm-bolt, so call the tools by their real names
bolt=/usr/lib/llvm-16/bin/llvm-bolt
perf2bolt=/usr/lib/llvm-16/bin/perf2bolt
if [ ! -x "$bolt" ] || [ ! -x "$perf2bolt" ]; then
	not_ok "BOLT 16 is installed (Debian package bolt-16)"
	finish
fi

"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$bin" -o "$TEST_TMP/p.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/p.prof" --format fdata -o "$TEST_TMP/p.fdata"
"$EDGEPROF" export "$TEST_TMP/p.prof" --format preagg -o "$TEST_TMP/p.preagg"
check "fdata and preagg written" test -s "$TEST_TMP/p.fdata" -a -s "$TEST_TMP/p.preagg"

# profiled LOG: N of "BOLT-INFO: N out of M functions ... have non-empty execution profile"
profiled() { sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' "$1"; }
# what BOLT 16 prints when a profile does not fit the code or names no
# function of the binary
stale='invalid \(possibly stale\) profile|objects was ignored|mismatch'
absent() { ! grep -qE "$1" "$2"; }
run_bolt() { "$bolt" "$bin" -o "$TEST_TMP/out.bolt" -data "$1" >"$2" 2>&1; }

run_bolt "$TEST_TMP/p.fdata" "$TEST_TMP/bolt1.log"
check "llvm-bolt accepts the fdata" test $? -eq 0
n=$(profiled "$TEST_TMP/bolt1.log")
echo "# llvm-bolt with fdata: ${n:-0} functions profiled"
# main and compute_flag are the program's hot code (perf report agrees)
check "llvm-bolt: main and compute_flag have a profile" test "${n:-0}" -ge 2
check "llvm-bolt: no stale, ignored or mismatching profile" absent "$stale" "$TEST_TMP/bolt1.log"
nm --defined-only "$bin" | awk '{print $3}' | sort -u >"$TEST_TMP/syms"
# a local is NAME/N and a PLT entry SYM@PLT, as BOLT names them
awk '$1 == 1 {print $2} $4 == 1 {print $5}' "$TEST_TMP/p.fdata" | sed -E 's,/[0-9]+$,,; s,@PLT$,,' |
	sort -u >"$TEST_TMP/names"
check "fdata: every function name is a symbol of the binary" \
	test -z "$(comm -23 "$TEST_TMP/names" "$TEST_TMP/syms")"

# the control: one branch into the middle of a block makes main stale
(cat "$TEST_TMP/p.fdata" && echo "1 main 10 1 main 20 0 5") >"$TEST_TMP/stale.fdata"
run_bolt "$TEST_TMP/stale.fdata" "$TEST_TMP/stale.log"
check "control: BOLT flags a profile that does not fit the code" \
	grep -q 'invalid (possibly stale) profile' "$TEST_TMP/stale.log"

"$perf2bolt" -pa -p "$TEST_TMP/p.preagg" -o "$TEST_TMP/pa.fdata" "$bin" >"$TEST_TMP/p2b.log" 2>&1
check "perf2bolt -pa accepts the pre-aggregated profile" test $? -eq 0
entries=$(sed -n 's/^PERF2BOLT: read \([0-9]*\) aggregated LBR entries.*/\1/p' "$TEST_TMP/p2b.log")
mismatch=$(sed -n 's/^PERF2BOLT: traces mismatching disassembled function contents: \([0-9]*\).*/\1/p' "$TEST_TMP/p2b.log")
echo "# perf2bolt -pa: ${entries:-0} entries read, ${mismatch:-?} traces mismatching the code"
check "perf2bolt -pa: every B, F and f line read" test "${entries:-0}" -eq "$(wc -l <"$TEST_TMP/p.preagg")"
check "perf2bolt -pa: no trace mismatches the disassembled code" test "${mismatch:-1}" -eq 0
# perf2bolt turns our B lines into the very lines of our fdata, and our
# fdata already has the fall-throughs between blocks that perf2bolt derives
# from the F lines (the agent made them from its disassembly)
sort "$TEST_TMP/pa.fdata" >"$TEST_TMP/pa.sorted"
sort "$TEST_TMP/p.fdata" >"$TEST_TMP/p.sorted"
extra=$(comm -13 "$TEST_TMP/p.sorted" "$TEST_TMP/pa.sorted" | wc -l)
echo "# perf2bolt's conversion: our $(wc -l <"$TEST_TMP/p.fdata") fdata lines plus $extra lines"
check "perf2bolt's conversion contains every fdata line, same counts" \
	test -z "$(comm -23 "$TEST_TMP/p.sorted" "$TEST_TMP/pa.sorted")"
check "perf2bolt's conversion adds nothing: our fdata has its fall-throughs" test "$extra" -eq 0
run_bolt "$TEST_TMP/pa.fdata" "$TEST_TMP/bolt2.log"
n=$(profiled "$TEST_TMP/bolt2.log")
check "llvm-bolt with perf2bolt's conversion: main and compute_flag profiled" test "${n:-0}" -ge 2
check "llvm-bolt with perf2bolt's conversion: nothing stale" absent "$stale" "$TEST_TMP/bolt2.log"
finish
