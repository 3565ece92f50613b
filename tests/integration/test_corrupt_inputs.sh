#!/usr/bin/env bash
# Damaged recordings and profiles never crash edgeprof: 40 seeded random
# corruptions of a real perf.data (header, attrs, records) and 20 of a
# profile, each read by the ASan+UBSan build, must end in a clean exit
# (0, or 1 with an error line) with no sanitizer report.
source "$(dirname "$0")/lib.sh"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
fx=$FIXTURES
mutate=$(dirname "$0")/mutate.py
bad=0
for seed in $(seq 1 40); do
	# the first 20 damage anywhere, the rest only the records (past the
	# 232-byte header and attrs) where most of the parsing happens
	from=0
	[ "$seed" -gt 20 ] && from=232
	python3 "$mutate" "$fx/propeller_sample_1.perfdata1" "$TEST_TMP/m.data" "$seed" 64 "$from"
	"$EDGEPROF_ASAN" import "$TEST_TMP/m.data" --binary "$fx/propeller_sample_1.bin" \
		-o "$TEST_TMP/m.prof" >/dev/null 2>"$TEST_TMP/err"
	rc=$?
	if [ "$rc" -gt 1 ] || grep -q Sanitizer "$TEST_TMP/err"; then
		echo "# perf.data seed $seed: exit $rc"
		head -5 "$TEST_TMP/err"
		bad=$((bad + 1))
	fi
done
check "40 corrupted perf.data files: no crash, no sanitizer report" test "$bad" -eq 0

"$EDGEPROF" import "$fx/propeller_sample_1.perfdata1" --binary "$fx/propeller_sample_1.bin" \
	-o "$TEST_TMP/good.prof" 2>/dev/null
bad=0
for seed in $(seq 1 20); do
	python3 "$mutate" "$TEST_TMP/good.prof" "$TEST_TMP/m.prof" "$seed" 8 24
	"$EDGEPROF_ASAN" export "$TEST_TMP/m.prof" --format json >/dev/null 2>"$TEST_TMP/err"
	rc=$?
	if [ "$rc" -gt 1 ] || grep -q Sanitizer "$TEST_TMP/err"; then
		echo "# profile seed $seed: exit $rc"
		head -5 "$TEST_TMP/err"
		bad=$((bad + 1))
	fi
done
check "20 corrupted profiles: no crash, no sanitizer report" test "$bad" -eq 0
finish
