#!/usr/bin/env bash
# Debian's BOLT 16 (a consumer we did not write) accepts both exports of
# propeller_sample_1 and finds them matching the binary: no stale or
# mismatching profile, the hot functions carry counts.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
bin=$fx/propeller_sample_1.bin
# BOLT picks its mode from its own name: the perf2bolt-16 symlink runs as
# llvm-bolt, so call the tools by their real names
bolt=/usr/lib/llvm-16/bin/llvm-bolt
perf2bolt=/usr/lib/llvm-16/bin/perf2bolt

"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$bin" -o "$TEST_TMP/p.prof" 2>/dev/null
"$EDGEPROF" export "$TEST_TMP/p.prof" --format fdata -o "$TEST_TMP/p.fdata"
"$EDGEPROF" export "$TEST_TMP/p.prof" --format preagg -o "$TEST_TMP/p.preagg"
check "fdata and preagg written" test -s "$TEST_TMP/p.fdata" -a -s "$TEST_TMP/p.preagg"

# profile_functions LOG: N of "N out of M functions ... have non-empty execution profile"
profile_functions() { sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions.*non-empty execution profile.*/\1/p' "$1"; }

"$bolt" "$bin" -o "$TEST_TMP/fdata.bolt" -data "$TEST_TMP/p.fdata" >"$TEST_TMP/bolt1.log" 2>&1
check "llvm-bolt accepts the fdata" test $? -eq 0
n=$(profile_functions "$TEST_TMP/bolt1.log")
echo "# llvm-bolt with fdata: ${n:-0} functions profiled"
# main and compute_flag are the program's hot code (perf report agrees)
check "llvm-bolt: main and compute_flag have a profile" test "${n:-0}" -ge 2
check "llvm-bolt: no stale or mismatching profile" \
	bash -c "! grep -qiE 'stale|mismatch|invalid profile' '$TEST_TMP/bolt1.log'"

"$perf2bolt" -pa -p "$TEST_TMP/p.preagg" -o "$TEST_TMP/pa.fdata" "$bin" >"$TEST_TMP/p2b.log" 2>&1
check "perf2bolt -pa accepts the pre-aggregated profile" test $? -eq 0
entries=$(sed -n 's/^PERF2BOLT: read \([0-9]*\) aggregated LBR entries.*/\1/p' "$TEST_TMP/p2b.log")
mismatch=$(sed -n 's/^PERF2BOLT: traces mismatching disassembled function contents: \([0-9]*\).*/\1/p' "$TEST_TMP/p2b.log")
echo "# perf2bolt -pa: ${entries:-0} entries read, ${mismatch:-?} traces mismatching the code"
check "perf2bolt -pa: every B and F line read" test "${entries:-0}" -eq "$(wc -l <"$TEST_TMP/p.preagg")"
check "perf2bolt -pa: no trace mismatches the disassembled code" test "${mismatch:-1}" -eq 0
"$bolt" "$bin" -o "$TEST_TMP/pa.bolt" -data "$TEST_TMP/pa.fdata" >"$TEST_TMP/bolt2.log" 2>&1
n=$(profile_functions "$TEST_TMP/bolt2.log")
check "llvm-bolt with perf2bolt's conversion: main and compute_flag profiled" test "${n:-0}" -ge 2
finish
