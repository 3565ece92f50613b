#!/usr/bin/env bash
# The real Intel recordings (tests/data/lbr) against the numbers
# published with them (AutoFDO's sample_reader_test) — data and results we
# did not produce.
source "$(dirname "$0")/lib.sh"

fx=$FIXTURES
json() { "$EDGEPROF" export "$1" --format json -o "$2"; }

# --- test.lbr: AutoFDO's rules: whole stacks (--chop 0), whole gaps as
# ranges, no trigger extension.
"$EDGEPROF" import "$fx/test.lbr" --binary "$fx/test.binary" --chop 0 --ranges gap \
	--no-trigger -o "$TEST_TMP/lbr.prof" 2>"$TEST_TMP/lbr.log"
check "test.lbr imports" test $? -eq 0
json "$TEST_TMP/lbr.prof" "$TEST_TMP/lbr.json"
s() { jq -r "$1" "$TEST_TMP/lbr.json"; }
check "test.lbr: 9,232 samples" test "$(s .stats.samples)" -eq 9232
range_4e80=$(s '[.profiles[].ranges[] | select(.start=="0x404e80" and .end=="0x404e8e") | .count] | add')
check "test.lbr: range 0x404e80-0x404e8e counted 1134 times (AutoFDO: 1134)" test "${range_4e80:-0}" -eq 1134
sum=$(s '[.profiles[].ranges[].count] | add')
# gaps into code outside test.binary (libc) AutoFDO skips too; backwards or
# overlong gaps it rejects as bogus; only the other cuts are ours alone
cut=$(s '.stats.gaps_inconsistent - .stats.gaps_backwards')
echo "# test.lbr: range counts sum to $sum, gaps only reconstruction cut: $cut, outside the binary: $(s .stats.gaps_unknown_code)"
check "test.lbr: range sum + what reconstruction cut = 134,622 (AutoFDO)" test $((sum + cut)) -eq 134622
check "test.lbr: reconstruction cuts under 1% of AutoFDO's ranges" test $((cut * 100)) -lt 134622
ip_fe0=$(s '[.profiles[].ips[] | select(.ip=="0x400fe0") | .count] | add')
ip_1005=$(s '[.profiles[].ips[] | select(.ip=="0x401005") | .count] | add')
check "test.lbr: sample IP 0xfe0 seen 55 times (AutoFDO: 55)" test "${ip_fe0:-0}" -eq 55
check "test.lbr: sample IP 0x1005 seen 18 times (AutoFDO: 18)" test "${ip_1005:-0}" -eq 18
weighted=$(s '[.profiles[].ranges[] | (.count * (((.end|ltrimstr("0x")|explode|map(if . >= 97 then . - 87 else . - 48 end)|reduce .[] as $d (0; . * 16 + $d)) - (.start|ltrimstr("0x")|explode|map(if . >= 97 then . - 87 else . - 48 end)|reduce .[] as $d (0; . * 16 + $d))) + 1))] | add')
echo "# test.lbr: sum of count x (end - start + 1) = $weighted (AutoFDO: 5,383,657)"
check "test.lbr: instruction-weighted range sum = 5,383,657 (AutoFDO)" test "$weighted" -eq 5383657

# the same numbers through the AutoFDO text export, in AutoFDO's own
# addresses (file offsets): what create_llvm_prof would read
"$EDGEPROF" export "$TEST_TMP/lbr.prof" --format afdo -o "$TEST_TMP/lbr.afdo"
check "test.lbr afdo: 357 distinct ranges (AutoFDO: 357)" test "$(head -1 "$TEST_TMP/lbr.afdo")" -eq 357
check "test.lbr afdo: 4e80-4e8e:1134" grep -qx '4e80-4e8e:1134' "$TEST_TMP/lbr.afdo"
check "test.lbr afdo: fe0:55 and 1005:18" \
	bash -c "grep -qx 'fe0:55' '$TEST_TMP/lbr.afdo' && grep -qx '1005:18' '$TEST_TMP/lbr.afdo'"

# the happy path leaks nothing and trips no sanitizer (ASan+UBSan build)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" import "$fx/test.lbr" \
	--binary "$fx/test.binary" -o "$TEST_TMP/asan.prof" 2>"$TEST_TMP/asan.log"
check "ASan+UBSan import of test.lbr: clean exit" test $? -eq 0
check "ASan+UBSan import of test.lbr: no sanitizer report" bash -c "! grep -q Sanitizer '$TEST_TMP/asan.log'"
"$EDGEPROF_ASAN" export "$TEST_TMP/asan.prof" --format json -o "$TEST_TMP/asan.json" &&
	"$EDGEPROF_ASAN" report "$TEST_TMP/asan.prof" >/dev/null 2>"$TEST_TMP/asan2.log"
check "ASan+UBSan export and report: clean" test $? -eq 0

# --- propeller_sample_1: entry counts
"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$fx/propeller_sample_1.bin" \
	-o "$TEST_TMP/prop.prof" 2>"$TEST_TMP/prop.log"
check "propeller_sample_1 imports" test $? -eq 0
json "$TEST_TMP/prop.prof" "$TEST_TMP/prop.json"
p() { jq -r "$1" "$TEST_TMP/prop.json"; }
check "propeller: 119,424 branch entries" test "$(p .stats.branch_entries)" -eq 119424
check "propeller: 119,419 in user code" test "$(p .stats.branch_entries_user)" -eq 119419
check "propeller: the binary is named by its build-id" test "$(p '.profiles[0].build_id')" = 572ac72487ae1966
check "propeller: chop defaults to the 32 hardware entries" test "$(p .config.chop)" -eq 32
consistent=$(p '.stats.gaps - .stats.gaps_inconsistent - .stats.gaps_unknown_code')
echo "# propeller: $(p .stats.gaps) gaps, $consistent consistent"
check "propeller: over 99% of gaps reconstruct" test $((consistent * 100)) -gt $(($(p .stats.gaps) * 99))
check "propeller: every counted edge is in the binary's code" \
	test "$(p '[.profiles[0].branches[] | select(.from == "0x0")] | length')" -eq 0

# --- --jobs: threads that each count a share of the samples write the
# one-thread profile, byte for byte (the unit tests compare more options)
for pair in test.lbr:test.binary propeller_sample_1.perfdata1:propeller_sample_1.bin; do
	rec=${pair%%:*}
	for j in 1 3; do
		"$EDGEPROF" import "$fx/$rec" --binary "$fx/${pair#*:}" --jobs $j \
			-o "$TEST_TMP/jobs$j.prof" 2>"$TEST_TMP/jobs$j.log"
	done
	check "$rec: --jobs 3 writes the --jobs 1 profile, byte for byte" \
		cmp "$TEST_TMP/jobs1.prof" "$TEST_TMP/jobs3.prof"
	check "$rec: --jobs 3 logs what --jobs 1 logs" \
		diff "$TEST_TMP/jobs1.log" "$TEST_TMP/jobs3.log"
done
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$EDGEPROF_ASAN" import "$fx/test.lbr" \
	--binary "$fx/test.binary" --jobs 3 -o "$TEST_TMP/asan_jobs.prof" 2>"$TEST_TMP/asan_jobs.log"
check "ASan+UBSan import of test.lbr, 3 threads: clean exit, no sanitizer report" \
	bash -c "test $? -eq 0 && ! grep -q Sanitizer '$TEST_TMP/asan_jobs.log'"
finish
